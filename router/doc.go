// Package router turns every way in from chat into one authorized operation on the state: a
// Lark message (HandleMessage) or a card click (HandleCardAction), converted by the bot into
// the transport-neutral Message and CardAction types. (The HTTP API is package api, the workspace package web, the MCP server package mcp.)
//
// Guarantees:
//   - One transaction per event: the event's record, the operation, its audit rows and every
//     outbox row (replies, the receipt reaction, card posts and card updates) commit together.
//     A message is recorded by its message id (Lark's key for deduplicating messages, which a
//     redelivery under a new event id keeps): its inbox item when it made one, else its key in
//     lark_event; a card click by its event id in lark_event. A repeat has no effect (a card
//     click answers "already handled") and is reported to Options.OnDuplicate once, after its
//     transaction. An error return means nothing was committed, so the bot makes Lark
//     redeliver. Kernel operations run with the idempotency key "lark:<event id>" as a second
//     guard. A message that addresses no one (a group message without a mention) is not
//     recorded: its redelivery is ignored again, at no cost.
//   - Group commit for the plain case: a plain message to a chat's one whole-chat binding,
//     from someone who may message its goal, answered with the receipt reaction, is written by
//     one statement shared with the other such messages arriving meanwhile (fastpath.go,
//     store.EnqueueFast). Each message's rows are the same as the transactional path's, and
//     are written whole or not at all; whatever that statement does not take goes through the
//     transactional path. An event is acknowledged only after the statement that wrote it
//     committed.
//   - Addressing: in a group only messages that mention the bot by open_id, or reply to (or
//     sit in the thread of) a message the bot sent, are handled; in a direct chat all are.
//     Messages from bots, this one included, are ignored.
//   - Routing is never guessed from prose: an address token at the start (#goal,
//     #goal/agent, #goal/agent/session) beats the thread (a bot message about a goal at the
//     thread root or as the parent, or a /bind made in the thread), which beats the chat's
//     /bind. Nothing or several candidates: the sender is asked which, candidates listed,
//     nothing is delivered and the message is recorded in unrouted. A goal the sender may not
//     see (neither owner, member nor admin, and not bound to this chat) is answered exactly like
//     an unknown goal, with suggestions drawn only from goals the sender may see.
//   - Delivery modes: inbox (default), /queue, /steer. /queue reaches the agent's next turn,
//     never the one live when it is sent (the inbox holds it back). /steer goes only to the
//     agent's live turn and is refused, with how to queue instead, when there is none; never
//     downgraded.
//   - Answers say what is true: /status shows each agent's state as should-run sees it (a live
//     turn as working), with the same word /pause uses for a paused goal; /report sends the
//     report or says that none was needed, never both or an empty promise; /runs reads the
//     run index.
//   - Running the work: /stop #goal[/agent] asks to end the live turn now (the runner kills
//     or cancels it, a host's next should-run ends it); /run fires the heartbeat now through
//     a scheduler, which answers in the thread with what should-run decided; /pause and
//     /resume with #goal/agent hold and resume one agent (resuming also ends a breaker's
//     hold and updates its card); /breaker, /progress and /quiet propose the goal settings
//     with a machine default. Clicks on turn cards ([Retry now], [Pause agent]) and breaker
//     cards ([Resume agent]) are owners' only, audited, and update the card in place.
//   - The goal contract: /contract shows it to members (objective, scope, capabilities per
//     agent, criteria and which are met); /scope, /capability, /criteria, /done, /reopen and
//     /replan propose through the change kernel (a preview card, applied on Confirm, like
//     /budget); /waive records an owner's waiver and /handoff hands a todo to another agent
//     (the receiver must hold what the todo requires). Where the kernel refuses, the reply says
//     why in the chat's language, with the way out, never an internal name. /status marks the
//     settings that follow a machine default, says when a done goal was finished, and shows
//     handoffs and replans an agent has not acknowledged; /runs shows a turn's handoff. The card
//     LoopX posts itself to finish a goal whose work is complete names LoopX as the proposer
//     and is confirmed like any other (owners only).
//   - In a direct chat with no binding, /status and /gates without a goal answer with an
//     overview of every goal the person owns or belongs to, what needs them first; other
//     commands that need a goal keep asking for one.
//   - A message's images and files (Message.Files) go with its inbox item, which waits until
//     the bot downloaded them; files with no words make a message named by the files.
//   - Authorization: owners may do everything on their goal; members may message its agents,
//     add todos and use /status, /contract, /gates, /report, /runs; admins (Options.Admins) everything; anyone else gets a
//     reply naming the goal's owners. Every refusal is audited. Card clicks are checked the
//     same way, plus: the gate must still be open and the card version current.
//   - The command table in grammar.go is the only list of commands: Parse accepts exactly
//     those, the router dispatches on them and /help is generated from it. Full-width ／ and
//     ＃ work like / and #.
//   - Replies use the chat's language (/lang), else the goal's, else Options.DefaultLang, and
//     every reply is worded in it from templates: a text that means nothing by its problem's
//     code (parse.<code>) with the command's form (usage.<form>, which /help lists too), a
//     refusal of the kernel by its reason, else its field, else its kind, with the ids and
//     values the router knows (kernel_refused). The kernel's message, English for the API,
//     never reaches a chat.
//
// What it is given: Options.Cards (package cards) renders gate and proposal cards, the same
// set the API and the workspace use; Options.Changes is the one change kernel;
// Options.Report answers /report (nil: the bot says reports are not configured).
package router
