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
	q := func(s string) string { return "`" + s + "`" }
	return `# One LoopX turn

Run exactly one LoopX turn with the tools of the ` + q("loopx") + ` MCP server. The user's task: ` + c.Task + `
(none: LoopX picks the goal's next todo).

1. Open the turn.
   - With a task: call ` + q("todo_add") + ` with ` + q(`{"text": "<the task>", "claim": true}`) + `, then ` + q("should_run") + `
     with ` + q(`{"todo_id": <that todo's todo_id>}`) + `. If ` + q("todo_list") + ` already shows an open todo
     that is this task, pass its ` + q("todo_id") + ` instead of adding one.
   - Without a task: call ` + q("should_run") + ` with ` + q("{}") + `.
2. If the answer has ` + q("should_run: false") + `, no turn was opened: tell the user its ` + q("next_step") + ` in one
   line and stop here. Do not do the task and do not call ` + q("spend_slot") + `. Its ` + q("state") + ` says why:
   ` + q("waiting") + ` (an owner must answer a gate first), ` + q("throttled") + ` (the goal's quota is spent until
   ` + q("quota.next_eligible_at") + `), ` + q("busy") + ` (another turn of this agent is live), ` + q("paused") + `, ` + q("done") + ` (the goal
   is finished until an owner reopens it), or ` + q("idle") + ` (nothing to do; ` + q("reason") + ` ` + q("missing_capability") + `: the
   todos need a capability this agent lacks).
3. The turn is open on ` + q("your_turn.todo_id") + ` (the task's todo when you gave one). Read the answer first:
   - ` + q("contract") + `: change only paths matching ` + q("scope.editable") + ` (any path when it lists none), never
     touch ` + q("scope.protected") + `, keep to ` + q("scope.notes") + `, and do only what ` + q("capabilities.agent") + ` allow.
   - ` + q("continuation") + ` (a handoff to you: ` + q("done") + `, ` + q("next") + `, ` + q("questions") + `, ` + q("kind") + `): start from it, then call
     ` + q("acknowledge") + ` with ` + q(`{"handoff_id": <its handoff_id>}`) + `. With no todo (` + q("continuation_due") + `), the turn is for it.
   - ` + q("objective_changed") + `: work to the new objective, then call ` + q("acknowledge") + ` with
     ` + q(`{"decision_id": <its decision_id>}`) + `.
4. If ` + q("inbox.pending") + ` is more than 0, first ` + q("inbox_drain") + `, answer each message with ` + q("inbox_reply") + `,
   then ` + q("inbox_ack") + ` them.
5. Do one bounded slice of that todo, nothing else.
6. Need an owner's decision (deploy, spend money, delete data, change the scope)? Call ` + q("gate_ask") + `
   and do not do it until an owner answers; ` + q("should_run") + ` lists the answer in ` + q("recent_gates") + `.
7. Call ` + q("evidence_add") + ` with ` + q(`{"todo_id": <the turn's todo_id>, "summary": "...", "ref": "..."}`) + ` (a link,
   the command that checks it, or a note), adding ` + q(`"criteria": [<ids>]`) + ` for the criteria of
   ` + q("selected_todo.criteria") + ` or ` + q("contract.criteria") + ` it shows met. Call ` + q("todo_finish") + ` when the todo is done:
   it is refused until evidence names each of the todo's criteria.
8. Call ` + q("refresh_state") + ` with ` + q("next_action") + `: what the next turn should do first. When work remains, add
   ` + q(`"handoff": {"done": "...", "next": "...", "questions": "..."}`) + ` (with ` + q("to_agent") + ` to hand it to another agent).
9. Call ` + q("spend_slot") + ` with ` + q("{}") + ` once, after the work is validated.

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
		"Any other request is ordinary work: do it as usual; the LoopX tools are there when the user asks about LoopX. " +
		"The goal's contract (the `loopx://goal` resource) names the paths agents may change and those it protects, " +
		"the capabilities it grants and the acceptance criteria evidence must name; a LoopX turn reads it at its start, " +
		"with any handoff left for this agent and any change of the objective, and acknowledges those."
}
