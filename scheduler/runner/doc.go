// Package runner wakes agents for the turns the scheduler opens.
//
//   - Exec starts a local process per turn, without a shell unless the server allows one:
//     the turn packet (JSON) on stdin, the prompt rendered from the turn_prompt template as
//     an argv placeholder and in LOOPX_PROMPT_FILE, and LOOPX_URL, LOOPX_TOKEN (a per-turn
//     token acting as the agent, valid only while the turn is live), LOOPX_GOAL_ID,
//     LOOPX_AGENT_ID, LOOPX_TURN_ID (and LOOPX_HANDOFF_ID, LOOPX_DECISION_ID: what the
//     turn acknowledges) in an environment that carries nothing else of the server's but
//     PATH, HOME and locale. The packet carries the should-run answer and, at its top, the
//     goal contract, the continuation and the objective change; the prompt says them too. The process leads its own process group; a
//     timeout or shutdown kills the whole group; the tail of stdout+stderr is kept on the
//     turn; exit 0 ends the turn ok, anything else failed.
//   - Webhook POSTs the same packet, HMAC-SHA256 signed, retried with exponential backoff on
//     network errors, 408, 429 and 5xx; the response ends the turn.
//   - Poll needs no runner: the host asks should-run itself.
//
// The scheduler ends the turn with the Result a runner returns.
package runner
