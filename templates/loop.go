package templates

// The loop contract: what a model reads about LoopX, written once. The steps of a turn
// (LoopSteps) go into every host's /loopx command or skill and into the MCP server's turn
// prompt; the always-on text (LoopTools) goes into the MCP server's instructions and the
// files a host reads in every session (Cursor's rule, AGENTS.md). Only a turn the user starts
// with the command (or a heartbeat) is a LoopX turn: the always-on text never gates ordinary
// requests. The steps follow the answers the server really gives; the MCP package's tests
// walk them against a real server for each case (empty goal, backlog, gate, busy,
// throttled). Model-facing text is English, like the tools' names and schemas.

// LoopCall is how one host starts a LoopX turn.
type LoopCall struct {
	// Command is what the user types: "/loopx" or "$loopx".
	Command string
	// Task is how this host's text names the user's task, e.g. `"$ARGUMENTS"` (the host puts
	// in what the user wrote) or "what the user wrote after `$loopx`".
	Task string
}

// LoopSteps are the steps of one LoopX turn, for the host c.
func LoopSteps(c LoopCall) string {
	return `# One LoopX turn

Run exactly one LoopX turn with the tools of the ` + "`loopx`" + ` MCP server. The user's task: ` + c.Task + `
(none: LoopX picks the goal's next todo).

1. Open the turn.
   - With a task: call ` + "`todo_add`" + ` with ` + "`{\"text\": \"<the task>\", \"claim\": true}`" + `, then ` + "`should_run`" + `
     with ` + "`{\"todo_id\": <that todo's todo_id>}`" + `. If ` + "`todo_list`" + ` already shows an open todo
     that is this task, pass its ` + "`todo_id`" + ` instead of adding one.
   - Without a task: call ` + "`should_run`" + ` with ` + "`{}`" + `.
2. If the answer has ` + "`should_run: false`" + `, no turn was opened: tell the user its ` + "`next_step`" + ` in one
   line and stop here. Do not do the task and do not call ` + "`spend_slot`" + `. Its ` + "`state`" + ` says why:
   ` + "`waiting`" + ` (an owner must answer a gate first), ` + "`throttled`" + ` (the goal's quota is spent until
   ` + "`quota.next_eligible_at`" + `), ` + "`busy`" + ` (another turn of this agent is live), ` + "`paused`" + `, or ` + "`idle`" + `
   (nothing to do).
3. The turn is open on ` + "`your_turn.todo_id`" + ` (the task's todo when you gave one). If ` + "`inbox.pending`" + ` is
   more than 0, first ` + "`inbox_drain`" + `, answer each message with ` + "`inbox_reply`" + `, then ` + "`inbox_ack`" + ` them.
4. Do one bounded slice of that todo, nothing else.
5. Need an owner's decision (deploy, spend money, delete data, change the scope)? Call ` + "`gate_ask`" + `
   and do not do it until an owner answers; ` + "`should_run`" + ` lists the answer in ` + "`recent_gates`" + `.
6. Call ` + "`evidence_add`" + ` with ` + "`{\"todo_id\": <the turn's todo_id>, \"summary\": \"...\", \"ref\": \"...\"}`" + ` (a link,
   the command that checks it, or a note); call ` + "`todo_finish`" + ` when the todo is done.
7. Call ` + "`refresh_state`" + ` with ` + "`next_action`" + `: what the next turn should do first.
8. Call ` + "`spend_slot`" + ` with ` + "`{}`" + ` once, after the work is validated.

Every tool error says what to do next; follow it. Retrying a call whose answer was lost is
safe, also after the host restarted: it has one effect.
`
}

// LoopTools is the always-on text about LoopX: what its tools are for and when a LoopX turn
// happens, for a host whose command is command ("/loopx", "$loopx"; "" when the host is not
// known). It names no step to take in an ordinary request.
func LoopTools(command string) string {
	typed := "`" + command + " <task>`"
	if command == "" {
		typed = "`/loopx <task>` (`$loopx <task>` in Codex)"
	}
	return "LoopX keeps this project's goal, todos, owner gates, evidence and quota (the `loopx` MCP server's tools). " +
		"A LoopX turn happens only when the user types " + typed + " or a scheduled heartbeat starts one; " +
		"that turn follows the steps of the `loopx` command (or skill). " +
		"Any other request is ordinary work: do it as usual; the LoopX tools are there when the user asks about LoopX."
}
