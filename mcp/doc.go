// Package mcp is LoopX's Model Context Protocol server: the per-turn tools an agent host
// (Claude Code, Codex, Cursor, OpenCode, Gemini CLI, Qwen Code, Copilot CLI) calls, written
// once over the HTTP API client (api/client). `loopx mcp` serves it over stdio with a network client; `loopx serve`
// serves it over Streamable HTTP at /mcp with an in-process client (Handler). It never
// opens the database: every answer is the API's.
//
// One server instance serves one session of one agent (goal and agent fixed by the
// project's connection, or by the bearer token over HTTP) and remembers the session's turn:
//
//   - should_run opens a turn (begin_turn, the default) with a turn instance id minted before
//     the call, so a call whose answer was lost is retried under the same id and the server
//     replays the same answer. While the session's turn is live, should_run reads the
//     current state without recording (the answer is busy: it is your turn) and lists the
//     agent's recent gates, so an owner's answer shows up mid-turn.
//   - should_run with todo_id opens the turn on that todo (claiming it), or, mid-turn while
//     the turn has recorded nothing, moves the live turn to it; todo_add with claim does the
//     same for the todo it adds. The turn, its evidence and its spent slot name one todo.
//   - Every mutating tool sends an Idempotency-Key derived from the goal, agent, a turn the
//     server knows (the live turn; else the agent's latest turn), the tool and its
//     arguments: a host that retries a call, also after restarting `loopx mcp`, gets the
//     API's stored receipt, so it has one effect. The key of inbox_drain also covers this
//     process and the number of acks so far, so a drain after an ack takes new messages
//     while a retried drain replays (after a restart a drain takes what is pending then;
//     what a lost answer held comes back after the redelivery time); compare-and-set tools
//     cover the version.
//   - What the server tells a model in every session (instructions) describes the tools and
//     never gates an ordinary request: only a LoopX turn (the /loopx steps, a heartbeat)
//     starts with should_run. Unconnected, it says LoopX is not set up there.
//   - spend_slot settles the session's turn (refresh_state and spend_slot in a restarted
//     process adopt the agent's live turn); the next should_run opens a new one.
//   - progress records one line of what the turn is doing now (the chat's progress card
//     shows it); should_run answers stop when an owner sent /stop and held while the breaker
//     holds the agent, and the next steps say what to do.
//   - Every should_run answer carries the goal contract (objective, scope, capabilities,
//     criteria with which are met), the oldest handoff to this agent it has not acknowledged
//     (continuation) and an unacknowledged replan (objective_changed); next_step says what
//     to do with each (acknowledge after reading; name the todo's criteria in evidence; stay
//     in scope; stop when the goal is done). todo_handoff and refresh_state's handoff hand
//     work on; acknowledge settles what was read. loopx://goal carries the contract and
//     every setting with its source (default or override).
//   - file_get reads a file an inbox message or evidence carries; evidence_add and
//     inbox_reply attach one by file_name and content_base64, or by file_path only under
//     `loopx mcp`, where the server runs on the agent's machine (LocalFiles).
//
// Errors a model can fix or act on are tool errors (isError) whose text says what happened
// and what to do next, chosen by the API error's code, field and reason (store.Reason*),
// never by its message; only protocol failures are JSON-RPC errors. Nothing is printed to
// stdout (the stdio channel).
package mcp
