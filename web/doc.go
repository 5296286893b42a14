// Package web is LoopX's web workspace, a way in like the HTTP API: server-rendered pages
// (html/template, words in package templates, assets embedded) that show a person what needs
// them and let them answer gates and make protected changes through the change kernel's
// preview → confirm → receipt flow.
//
// Guarantees:
//   - Sign-in: a one-time link the bot sends (/web in a direct chat, or a gate card's button),
//     bound to the Lark open_id, usable once within 10 minutes; opening it shows a page whose
//     button spends it (a link preview fetching the URL cannot). Admins may sign in with the
//     admin token. A session is a random id in an HttpOnly, SameSite=Strict cookie (Secure
//     when the request came over TLS or Options.SecureCookies) and a row holding only its
//     hash; signing out deletes the row.
//   - Every form carries the session's CSRF token (compared in constant time) and a fresh
//     idempotency key; a POST without the token, or from another origin, changes nothing.
//   - A person sees exactly the goals chat shows them, with the same roles: every read goes
//     through store.GetGoalAs, store.ReadHome (loopx_role in SQL) and change.Get; a goal the
//     person may not see answers like one that does not exist. Controls that need an owner are
//     not rendered for members, and the handlers check again.
//   - Owners stop an agent's live turn, fire its heartbeat now, pause and resume it from the
//     goal page (the same store operations as chat, audited); members download the files of
//     their goals (/web/files/{id}), which anyone else is told do not exist.
//   - Gate answers take the same path as chat (store.AnswerGate with the gate card renderer),
//     so the Lark card is updated the same way. Protected changes are proposals of the change
//     kernel: the page shows the diff and effects before Confirm.
//   - Live: Run LISTENs on loopx_workspace; every change NOTIFYs it, and each open page's
//     server-sent event stream tells its script to fetch the page again and swap the regions
//     that changed. Pages work without script.
//   - Language: the person's choice (kept in the session), else the goal's, else the
//     server's default.
package web
