// Package bot is LoopX's Lark (Feishu) front door, on the official SDK
// github.com/larksuite/oapi-sdk-go/v3 (pinned at v3.12.0, the first line whose WebSocket Start
// returns on cancel). Lark SDK types never leave this package.
//
// Intake: events (im.message.receive_v1) and card callbacks (card.action.trigger) arrive over
// the WebSocket long connection (RunWS) or as HTTP callbacks (EventsHandler, CardsHandler) and
// take one code path into an EventHandler (the router). Guarantees:
//   - HTTP callbacks are authenticated before anything else: with an encrypt key, the
//     X-Lark-Signature over the raw body and the decryption; in every case the verification
//     token inside the event, compared in our code because the SDK does not. A refusal is
//     answered 401, counted, logged, and reaches nothing.
//   - An event is acknowledged only after the handler returned nil (the router committed the
//     effect together with the event id, so a redelivery has no second effect). A handler error
//     answers 500 over HTTP or an error ack over WS, so Lark redelivers. The handler runs under
//     a deadline inside Lark's 3 s budget.
//   - A card callback is always answered with a body (a toast, and the new card when there is
//     one), never a nil response. A click the router could not answer (unreadable, or not
//     recorded) gets a toast in every language (Lark's i18n content: zh_cn, en_us), its words
//     from templates through router.ClickFailureToasts, since the bot cannot tell the
//     clicker's language then.
//   - Unknown event types are acknowledged and ignored (debug log), so Lark does not retry them;
//     so are events the router marks router.ErrUnusable (no chat id, ids too long): counted as
//     rejected with reason "unusable" and logged, never answered 5xx.
//   - HTTP callbacks outside the timestamp window (X-Lark-Request-Timestamp, IntakeOptions.
//     MaxCallbackAge, default 1 h) are refused as replays (401, reason "stale"); bodies over
//     1 MiB are 413.
//
// Sender: delivers outbox rows (Outbox, implemented over the store by cmd/loopx). Guarantees:
//   - every send carries Lark's uuid = the row's uuid, so a retry after an ambiguous failure is
//     one message; messages (text, cards, card updates) of one chat go one at a time in commit
//     order; receipt reactions are a lane of their own (Lane), claimed by due time with their
//     own workers, so a burst of receipts never holds a reply back;
//   - every send first books a slot from the shared Limiter (RateLimits.Budgets: per chat, and
//     per app per second and per minute, across all replicas; reactions only per app, on
//     Lark's separate reaction limits) in one call and waits for it, or hands the row back
//     when the slot is further than a quarter of the lease away; Lark rate limits wait
//     x-ogw-ratelimit-reset, 5xx and timeouts back off, a rejected token is refetched once,
//     permanent errors mark the row failed with Lark's code;
//   - a claim is never held inside a database transaction during a Lark call, and on shutdown
//     the sender finishes in-flight sends under a short deadline and releases what it holds;
//   - a reaction (Lark gives it no uuid) that may already have reached Lark (a retry, a lapsed
//     or an earlier counted attempt) is looked up before it is added again; a send Lark
//     accepted but the database did not record is recorded again before anything is handed
//     back, so a database blip never makes a second send;
//   - a 5xx answer is never taken for a send, whatever code its body carries.
//
// Files: the Fetcher downloads the images and files of the messages people send (the message
// resource API, through the Fetches interface server/larkstore implements): claimed before
// each download, retried on rate limits and 5xx, failed for good (and the chat told) on a
// refusal or a file over the size cap, never inside a database transaction. An outbox row of
// kind file is uploaded (im/v1/images, im/v1/files) and sent as an image or file message with
// the row's uuid.
//
// Each Client keeps its own tenant token (the SDK's token cache is process-global, so two
// clients in one process would otherwise share and fail to clear each other's tokens).
package bot
