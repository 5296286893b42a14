package mcp

import (
	"errors"
	"fmt"
	"strings"

	"loopx/api"
	"loopx/api/client"
	"loopx/store"
)

// explain turns an API error into the text a model reads: what LoopX said, then what to do
// next. The model cannot run `loopx connect` or start a server, so those steps are for the
// user; arguments it sent are for it to fix.
func explain(tool string, s *server, err error) error {
	if errors.Is(err, client.ErrUnreachable) {
		return fmt.Errorf("%s failed: the LoopX server at %s did not answer (%v). Next: tell the user that "+
			"`loopx serve` is not reachable (start it, or fix LOOPX_URL / the project's connection), and stop this turn "+
			"without spending. Retrying this same call later is safe: it has one effect", tool, s.api.BaseURL(), err)
	}
	var ae *api.Error
	if !errors.As(err, &ae) {
		return fmt.Errorf("%s failed: %w", tool, err)
	}
	what := ae.Message
	if ae.Field != "" {
		what = ae.Field + ": " + ae.Message
	}
	head := fmt.Sprintf("%s failed (%s): %s.", tool, ae.Code, strings.TrimSuffix(what, "."))
	return fmt.Errorf("%s Next: %s", head, nextStep(s, ae))
}

// nextStep is the advice for an API error: by its code and, where a code covers cases that
// need different advice, by its reason (store.Reason*), never by its message.
func nextStep(s *server, e *api.Error) string {
	connect := fmt.Sprintf("ask the user to run `loopx connect` in the project's root folder (it stores a token of agent %q on goal %q for this machine) or to set LOOPX_TOKEN to that agent's token, then reload the host. Do not retry with the same token", s.agent, s.goal)
	switch e.Code {
	case api.CodeUnauthenticated:
		return "LoopX does not know the token this server uses: " + connect + "."
	case api.CodeForbidden:
		switch e.Reason {
		case store.ReasonTokenScope:
			return fmt.Sprintf("this project is connected to goal %q as agent %q, but the token in use belongs to another goal or agent. Stop working on LoopX state and %s.", s.goal, s.agent, connect)
		case store.ReasonMissingCapability:
			return "this agent lacks a capability the todo requires (named above; should_run's contract.capabilities lists what it holds). Do not retry and do not work on that todo: " +
				"pick another (should_run selects one this agent may take), or tell the user that an owner can grant the capability or give the todo to another agent."
		}
		return "the agent may not do this; it needs an owner or the admin. Stop and tell the user what you tried."
	case api.CodeNotFound:
		switch e.Field {
		case "goal_id", "agent_id":
			return fmt.Sprintf("the server does not know goal %q / agent %q from the project's connection: %s.", s.goal, s.agent, connect)
		case "todo_id":
			return "call todo_list to see the todos that exist, then call again with one of their ids."
		case "gate_id":
			return "call gate_list to see the gates that exist."
		case "item_id", "item_ids":
			return "call inbox_drain to get the items you may answer or acknowledge."
		}
		return "check the ids you passed (todo_list, gate_list, inbox_drain list them)."
	case api.CodeConflict:
		switch {
		case e.Field == "version":
			return "the todo changed since you read it: call todo_list, check that your change still makes sense, and call again without version (the current one is read for you)."
		case e.Reason == store.ReasonClaimed:
			return "another agent holds this todo: pick another one (should_run selects one for you), or pass transfer=true only if the user asked you to take it over."
		case e.Field == "idempotency_key":
			return "this exact call was already made with other arguments in this turn; change the arguments or start a new turn with should_run."
		}
		return "the state changed under you: read it again (goal_status or todo_list) and decide again."
	case api.CodeRefused:
		switch e.Reason {
		case store.ReasonNotOwed:
			return "do not spend for this turn: only a turn that should_run opened (decision run) and that completed is spent, once. End the turn without spending; the next turn starts with should_run."
		case store.ReasonGateClosed:
			return "the gate is no longer open: call gate_list to see its answer."
		case store.ReasonCriteriaUnmet:
			return "the todo's criteria named above have no evidence yet. For each one your work really meets, call evidence_add with its id in criteria (and what shows it), then todo_finish again; " +
				"if one cannot be met, leave the todo open and tell the user (an owner may waive a criterion)."
		case store.ReasonHandoffNote:
			return "the todo has evidence, so it changes hands only with a handoff note: call again with note (what was done) and next, or hand it over with todo_handoff."
		case store.ReasonGoalDone:
			return "the goal is done: it takes this only after an owner reopens it. Do no more work on it; stop without spending, and stop the loop."
		}
		return "the current state does not allow this: call goal_status to see why, and do not retry the same call."
	case api.CodeFull:
		return "a LoopX bound was reached; do not retry now. Tell the user which bound (see the message)."
	case api.CodeInvalid, api.CodeBadRequest, api.CodeTooLarge:
		return "fix the argument named above and call again."
	}
	return "the LoopX server failed; tell the user to check its log. Retrying this same call later is safe: it has one effect."
}

// toolInputError is an argument the model must fix before calling the tool again.
func toolInputError(field, msg string) error {
	return fmt.Errorf("the %s argument cannot be used: %s. Next: fix it and call the tool again", field, msg)
}
