// Package web is LoopX's web workspace, a way in like the HTTP API: server-rendered pages
// (html/template, words in package templates, assets embedded) that show a person what needs
// them, every goal they may see, each goal and each turn, and let them act: add todos,
// message agents, move the todo board, answer gates, and make protected changes through the
// change kernel's preview → confirm → receipt flow.
//
// Guarantees:
//   - Sign-in: with Lark (OAuth through the LarkSignIn the server wires from package bot: a
//     state bound to the browser by an HttpOnly cookie, the code exchanged for the open_id);
//     or a one-time link the bot sends (/web in a direct chat, or a gate card's button, which
//     lands on that gate), bound to the Lark open_id, usable once within 10 minutes; opening
//     it shows a page whose button spends it (a link preview fetching the URL cannot), and a
//     used or expired link says so before any click. Admins may sign in with the admin token,
//     or with a link the admin token asks for (loopx dashboard). A session is a random id in
//     an HttpOnly, SameSite=Strict cookie (Secure when the request came over TLS or
//     Options.SecureCookies) and a row holding only its hash; signing out deletes the row.
//   - Every form carries the session's CSRF token (compared in constant time) and a fresh
//     idempotency key; a POST without the token, or from another origin, changes nothing.
//   - A person sees exactly the goals chat shows them, with the same roles: every read goes
//     through store.GetGoalAs, store.ReadHome, store.ListGoalRows (loopx_role in SQL) and
//     change.Get; a goal the person may not see answers like one that does not exist.
//   - Acting needs what chat needs (Needs, checked against router.Needs): members add todos
//     and message agents, owners move todos and answer gates; controls a person may not use
//     are not rendered, the handlers check again, and refusals are audited. Messages take the
//     inbox's bounds and modes (steer only into a live turn, never downgraded); board moves
//     carry the todo's version, so a todo changed meanwhile is not overwritten.
//   - Owners stop an agent's live turn, fire its heartbeat now, pause and resume it from the
//     goal page (the same store operations as chat, audited); members download the files of
//     their goals (/web/files/{id}), which anyone else is told do not exist.
//   - Gate answers take the same path as chat (store.AnswerGate with the gate card renderer),
//     so the Lark card is updated the same way. Protected changes are proposals of the change
//     kernel: the page shows the diff and effects before Confirm.
//   - The goal contract: the goal page shows the objective, scope, the capabilities the goal
//     grants and each agent's, and the acceptance criteria with what met each (evidence, or an
//     owner's waiver with its reason); every setting with its value and whether it follows the
//     machine default or is set for the goal. Owners change the contract, finish, reopen and
//     replan the goal only through change-kernel proposals (preview → confirm → receipt); the
//     settings form proposes only the settings whose value changed, so one that follows the
//     default keeps following it. Owners waive criteria (a reason required) and hand todos to
//     another agent with a note (store.WaiveCriterion, store.HandOff: audited there); finishing
//     a todo whose criteria are unmet is refused and the page names them. A done goal says so
//     at the top of its page, offers reopen and no other change.
//   - The machine defaults (/web/defaults) are the admins'; anyone else is answered 404 and a
//     post is refused and audited.
//   - A turn's log tail is shown to the goal's owners and admins only.
//   - Live: Run LISTENs on loopx_workspace; every change NOTIFYs it, and each open page's
//     server-sent event stream tells its script to fetch the page again and swap the regions
//     that changed. Pages work without script.
//   - Installable: a web app manifest and a service worker that caches the shell only, never
//     the data.
//   - Language: the person's choice (kept in the session, which starts from the link's chat
//     language or the person's last /lang in chat), else the goal's, else the server's
//     default. No internal identifier reaches a page: states, actions and reasons are worded.
package web
