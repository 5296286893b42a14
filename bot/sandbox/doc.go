// Package sandbox emulates the Lark (Feishu) open platform on a loopback listener, faithful
// to what the official Go SDK (github.com/larksuite/oapi-sdk-go/v3 v3.12.0) sends and
// expects. It serves the bot's tests and `loopx serve --sandbox`, where a person tries the
// product with `loopx chat` and no Lark app. It imports no other LoopX package.
//
// # Use
//
//	sb, err := sandbox.New(sandbox.Options{VerificationToken: "vt", EncryptKey: "ek"})
//	sb.Start(ctx)
//	defer sb.Close()
//	cli := lark.NewClient(sb.AppID(), sb.AppSecret(), lark.WithOpenBaseUrl(sb.URL()))
//	ws := larkws.NewClient(sb.AppID(), sb.AppSecret(), larkws.WithDomain(sb.URL()), larkws.WithEventHandler(d))
//	d, _ := sb.UserSays("oc_1", sandbox.ChatGroup, "ou_alice", "deploy", sandbox.MentionBot())
//	res, _ := d.Wait(ctx)                 // acked by the bot?
//	msgs := sb.Chat("oc_1").Messages()    // assert on the model, not on HTTP
//
// The SDK caches tokens per app id in a process-global cache that ignores the base URL, so
// two sandboxes in one process must use different app ids. The default AppID is random per
// Sandbox; pass your own only if it is unique per test.
//
// # Guarantees
//
//   - Every answer is JSON with Content-Type application/json, errors included, with Lark's
//     {"code","msg"} shape. A call to a route the sandbox does not emulate answers 404 and is
//     recorded (Unmatched) so a test notices it.
//   - Tokens: POST /open-apis/auth/v3/{tenant,app}_access_token/internal check the app id and
//     secret and issue tokens unique to this Sandbox (counted by TokenIssues), valid for
//     Options.TokenTTL. Every other /open-apis route needs "Authorization: Bearer <token>":
//     99991661 when missing, 99991663 when unknown, expired or revoked (Revoke).
//   - Messages: create (receive_id_type chat_id or open_id; 230002 when the bot is not in the
//     chat), reply (reply_in_thread opens a thread; 230011 when the target is recalled or
//     missing), PATCH (only the bot's interactive messages, config.update_multi true before
//     and after, else 230001), PUT (text and post only), GET, list, DELETE (recall),
//     reactions create, list (one emoji
//     type, paged) and delete. Content must be a JSON object string; text ≤ 150 KB,
//     cards and posts ≤ 30 KB (230025). A uuid repeats within one hour return the original
//     message and store nothing.
//   - Files: a user's image or file (UserSendsFile; an image with a caption or a mention is a
//     post holding it) is a resource of its message, downloaded with GET
//     /open-apis/im/v1/messages/{message_id}/resources/{file_key}?type=image|file (234003
//     when the key is not that message's); the bot uploads images (POST /open-apis/im/v1/images,
//     multipart, ≤ 10 MB) and files (POST /open-apis/im/v1/files, ≤ 30 MB) and may send
//     image and file messages only with keys it uploaded. With StateDir resources are kept
//     under StateDir/resources.
//   - Rate limits: more than Options.ChatRateLimit (5) sends (create + reply) to one chat, or
//     Options.AppRateLimit (50) over the app, within one clock second answer HTTP 429, code
//     99991400, with x-ogw-ratelimit-limit and x-ogw-ratelimit-reset. ChatView.Stats and
//     MaxPerSecond report the sandbox's own per-second counts of accepted and offered sends;
//     ChatStats.MaxWithUpdatesPerSecond counts sends and card updates of a chat together.
//     One message accepts at most PatchPerMessage (5) PATCHes per second, then 429 too.
//   - Cards: POST /open-apis/interactive/v1/card/update accepts a click's token for 30 minutes
//     and two uses; an update sent before the click was answered is reverted, as in Lark.
//     GET /open-apis/bot/v3/info describes the bot.
//   - Faults: FailNext(route, n, Fail) answers the next n calls of a route with any status,
//     code, headers and delay (429 with reset, 5xx, 504, 230001, 230002, 230011, slow
//     answers). Revoke invalidates tokens. DropConnections and RejectNextHandshake break the
//     long connection.
//   - Events: the active transport is HTTP when an event URL is set (Options.EventURL or
//     SetCallbackURLs), else the WebSocket long connection; card callbacks go to the card
//     URL, else the event URL, else over WS. Over HTTP each push is signed
//     (X-Lark-Request-Timestamp, X-Lark-Request-Nonce, X-Lark-Signature) and, with an encrypt
//     key, encrypted as {"encrypt": …}; over WS it is a pbbp2 data frame to one random
//     connected client (cluster mode). A push fails on a non-200 answer, a non-200 ack code,
//     or no answer within Options.AckBudget; failed pushes are redelivered on the
//     Options.RetryIntervals ladder with the same event id. Each new event gets a new id.
//   - Card clicks (ClickButton) are pushed once, like Lark's callbacks; a returned card
//     replaces the message's card; an empty or null answer is an error.
//   - The WS endpoint (POST /callback/ws/endpoint) checks the app id and secret and hands out
//     a one-time ticket; an upgrade without a valid ticket is refused with 403. At most 50
//     connections. Pings are answered with pongs carrying the ClientConfig (never zeros).
//   - State: with Options.StateDir the chat model (chats, messages, cards, threads, reactions,
//     recalls, the uuid dedupe window, the control API's cursor) survives the Sandbox: each
//     change is appended to StateDir/state.jsonl before the call that made it answers, the file
//     is rewritten compactly at start and when superseded lines pile up, and New on the same
//     directory starts where the last Sandbox stopped, so the bot's stored message ids stay
//     valid (no 230011 after a restart). A process killed mid-way loses nothing it answered;
//     a machine crash may lose the last lines (no fsync per change), and a last line cut short
//     is dropped. The directory is locked (flock) while a Sandbox has it. Access tokens,
//     click tokens, faults, rate counters and the request log are not kept.
//   - Close stops every goroutine the sandbox started. There is no package-level state.
//
// # Scenario helpers
//
// UserSays (text from a user, with MentionBot, MentionUser, ReplyTo and ReplyInThread),
// ClickButton / ClickButtonN (card.action.trigger, answer applied to the card) and
// AddBotToChat (im.chat.member.bot.added_v1) change the model and push the event; Deliver
// pushes any other event type; Redeliver repeats one; VerifyCallbackURL sends Lark's
// url_verification challenge. Chat(id).Messages, Message, Chats and
// the Stats/AppStats counters read the model.
//
// # Control API (for `loopx chat`)
//
// Served on the same listener under /sandbox/v1; when Options.ControlToken is set every call
// needs "Authorization: Bearer <token>". Errors answer {"error", "field"}.
//
//	GET  /sandbox/v1/info                          → Info (bot, demo user, default chat)
//	GET  /sandbox/v1/chats                         → {"chats": [ChatInfo]}
//	GET  /sandbox/v1/messages?chat_id=&after=&limit=&wait=
//	     → MessagesPage: messages changed after cursor "after" (created, patched, recalled,
//	       reacted), oldest first; "limit" keeps the newest N; "wait" (≤ 60s) long-polls.
//	POST /sandbox/v1/messages  PostRequest {chat_id, chat_type, open_id, text, mention_bot,
//	     reply_to, in_thread} → PostAnswer {message_id, event_id, delivered}
//	POST /sandbox/v1/files     FileRequest {chat_id, chat_type, open_id, name, data (base64),
//	     caption, mention_bot, reply_to, in_thread} → PostAnswer
//	GET  /sandbox/v1/stats?chat_id=  → Stats {chat, app, patches_refused}
//	POST /sandbox/v1/click     ClickRequest {message_id, button (1-based), open_id}
//	     → ClickAnswer {toast, card_updated, error}
package sandbox
