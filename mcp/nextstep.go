package mcp

import (
	"fmt"
	"strings"
	"time"

	"loopx/quota"
	"loopx/store"
)

// endTurn is how every open turn ends, in the words of the loop contract's steps.
const endTurn = "refresh_state (next_action, and a handoff when work remains) and spend_slot"

// nextStepFor says in words what the model should do after a should_run answer: by its
// state and reason, then, for an open turn, what the contract asks of it (an objective
// change and a continuation to acknowledge, the todo's criteria to name, the scope).
func nextStepFor(out ShouldRunOut) string {
	var b strings.Builder
	answered := func() {
		for _, g := range out.RecentGates {
			if g.Status != store.GateOpen && g.AnsweredAt != nil {
				fmt.Fprintf(&b, " Gate %d (%q) was %s by %s", g.ID, g.Question, g.Status, g.AnsweredBy)
				if g.Status == store.GateAnswered {
					// One of the gate's own options: what it means is for this agent to read.
					fmt.Fprintf(&b, " with the option %q", g.Answer)
				}
				if g.Comment != "" {
					fmt.Fprintf(&b, " with the comment %q", g.Comment)
				}
				b.WriteString(".")
			}
		}
	}
	wait := fmt.Sprintf(" Check again in %d minutes (scheduler_hint).", out.SchedulerHint.IntervalMinutes)
	open := false // a turn is open for this agent: the contract's advice follows
	switch {
	case out.YourTurn != nil && out.State == quota.StateBusy:
		open = true
		fmt.Fprintf(&b, "Your turn %s is live until %s", out.YourTurn.TurnInstanceID, out.YourTurn.LeaseExpiresAt.UTC().Format(time.RFC3339))
		if out.YourTurn.TodoID != 0 {
			fmt.Fprintf(&b, " on todo %d", out.YourTurn.TodoID)
		}
		b.WriteString(": carry on with it.")
		answered()
		if len(out.Gates.Open) > 0 {
			fmt.Fprintf(&b, " Still open: gate(s) %v; do not do what they ask about until an owner answers.", out.Gates.Open)
		}
		b.WriteString(" End the turn with evidence_add, " + endTurn + ".")
	case out.ShouldRun && out.State == quota.StateInbox:
		open = true
		b.WriteString("People wrote to you: inbox_drain, answer each message with inbox_reply, then inbox_ack them.")
		if out.SelectedTodo != nil {
			fmt.Fprintf(&b, " Then work on todo %d if time allows.", out.SelectedTodo.ID)
		}
		b.WriteString(" End with " + endTurn + ".")
	case out.ShouldRun && out.EffectiveAction == quota.ActionContinuation && out.Continuation != nil:
		open = true
		fmt.Fprintf(&b, "Your turn is open for a handoff to you, with no todo to work on: %s Do what it asks, "+
			"call acknowledge with handoff_id %d, evidence_add what you produced, then %s.", continuation(out), out.Continuation.ID, endTurn)
		answered()
	case out.ShouldRun && out.SelectedTodo != nil:
		open = true
		fmt.Fprintf(&b, "Your turn is open on todo %d (%q): do one bounded slice of it, evidence_add what you produced with todo_id %d, then %s.", out.SelectedTodo.ID, out.SelectedTodo.Text, out.SelectedTodo.ID, endTurn)
		answered()
	case out.ShouldRun:
		open = true
		b.WriteString("Work now, then evidence_add, " + endTurn + ".")
	case out.State == quota.StateDone:
		b.WriteString("The goal is done: do no more work on it unless an owner reopens it. Stop without spending, and stop the loop.")
	case out.State == quota.StateBusy:
		fmt.Fprintf(&b, "Another turn of this agent is live (%s): stop now without spending. If that turn is yours (this host restarted), call should_run with its turn_instance_id to continue it.", out.Message)
	case out.State == quota.StatePaused:
		fmt.Fprintf(&b, "The goal is paused (%s): stop without spending and stop the loop until an owner resumes it.", out.Message)
	case out.State == quota.StateStop:
		b.WriteString("An owner stopped your turn: it has ended (stopped). Stop now: change nothing more and do not spend_slot.")
	case out.State == quota.StateHeld:
		fmt.Fprintf(&b, "This agent is held (%s): stop without spending and stop the loop until an owner resumes it.", out.Message)
	case out.State == quota.StateWaiting:
		fmt.Fprintf(&b, "Waiting for an owner to answer gate(s) %v: stop without spending.", out.Gates.Blocking)
		b.WriteString(wait)
	case out.State == quota.StateIdle && out.Reason == "missing_capability":
		fmt.Fprintf(&b, "The open todos need a capability this agent lacks (%s): stop without spending. Do not try to claim them; "+
			"tell the user that an owner grants the capability, or that another agent takes them.", capabilities(out.Contract))
		b.WriteString(wait)
	case out.State == quota.StateIdle && out.Reason == "work_complete":
		b.WriteString("Every todo is finished and every criterion of the goal is met: the owners are asked to mark the goal done. " +
			"Stop without spending. If the user gave you a new task, add it with todo_add (claim: true) and call should_run with its todo_id.")
		b.WriteString(wait)
	case out.State == quota.StateIdle:
		b.WriteString("Nothing to do for this agent: stop without spending. If the user gave you a task, add it with todo_add (claim: true) and call should_run with its todo_id.")
		b.WriteString(wait)
	default:
		fmt.Fprintf(&b, "Skip (%s): %s. Stop without spending.", out.State, out.Message)
		b.WriteString(wait)
	}
	if open {
		b.WriteString(contractAdvice(out))
	}
	return b.String()
}

// contractAdvice is what the goal contract asks of an open turn: read and acknowledge an
// objective change and a continuation, name the todo's criteria in evidence, stay in scope.
func contractAdvice(out ShouldRunOut) string {
	var b strings.Builder
	if oc := out.ObjectiveChanged; oc != nil {
		fmt.Fprintf(&b, " The objective changed (goal version %d, decided by %s", oc.GoalVersion, oc.DecidedBy)
		if oc.Reason != "" {
			fmt.Fprintf(&b, " because %q", oc.Reason)
		}
		fmt.Fprintf(&b, "): it is now %q. Work to the new objective, and call acknowledge with decision_id %d.", oc.After, oc.DecisionID)
	}
	if c := out.Continuation; c != nil && out.EffectiveAction != quota.ActionContinuation {
		fmt.Fprintf(&b, " A handoff waits for you: %s Read it before you start, then call acknowledge with handoff_id %d.", continuation(out), c.ID)
	}
	if out.ContinuationsPending > 1 {
		fmt.Fprintf(&b, " %d more handoffs wait after it (the next should_run shows the next one).", out.ContinuationsPending-1)
	}
	if t := out.SelectedTodo; t != nil {
		if unmet := store.Unmet(t.Criteria); len(unmet) > 0 {
			parts := make([]string, len(unmet))
			for i, c := range unmet {
				parts[i] = fmt.Sprintf("%s (%q)", c.ID, c.Text)
			}
			fmt.Fprintf(&b, " Todo %d is finished only once evidence names each of its criteria: %s. Pass the ids the evidence shows met in evidence_add's criteria, then todo_finish.",
				t.ID, strings.Join(parts, ", "))
		}
	}
	if c := out.Contract; c != nil {
		if len(c.Scope.Editable) > 0 {
			fmt.Fprintf(&b, " Scope: change only paths matching %s.", strings.Join(c.Scope.Editable, ", "))
		}
		if len(c.Scope.Protected) > 0 {
			fmt.Fprintf(&b, " Never touch paths matching %s (protected).", strings.Join(c.Scope.Protected, ", "))
		}
		if c.Scope.Notes != "" {
			b.WriteString(" Keep to the boundaries in contract.scope.notes.")
		}
	}
	return b.String()
}

// continuation says in one sentence what the answer's continuation hands over.
func continuation(out ShouldRunOut) string {
	c := out.Continuation
	from := "a person"
	if c.From != "" {
		from = "agent " + c.From
	}
	if c.From == out.AgentID {
		from = "your previous turn"
	}
	s := fmt.Sprintf("handoff %d (%s) from %s", c.ID, c.Kind, from)
	if c.TodoID != 0 {
		s += fmt.Sprintf(" on todo %d", c.TodoID)
	}
	var parts []string
	if c.Done != "" {
		parts = append(parts, fmt.Sprintf("done: %q", c.Done))
	}
	if c.Next != "" {
		parts = append(parts, fmt.Sprintf("next: %q", c.Next))
	}
	if c.Questions != "" {
		parts = append(parts, fmt.Sprintf("open questions: %q", c.Questions))
	}
	if len(parts) > 0 {
		s += "; " + strings.Join(parts, "; ")
	}
	return s + "; " + kindAdvice[c.Kind] + "."
}

// kindAdvice says what a continuation of each kind asks of its receiver.
var kindAdvice = map[string]string{
	store.HandoffResume:     "carry on where it stopped",
	store.HandoffReview:     "review what was done and record what you found",
	store.HandoffVerify:     "check the work against its criteria and record evidence naming those met",
	store.HandoffAnswerGate: "act on the gate's answer (gate_list shows it)",
}

// capabilities says which capabilities the agent holds and the goal grants.
func capabilities(c *store.Contract) string {
	if c == nil {
		return "see contract.capabilities"
	}
	none := func(v []string) string {
		if len(v) == 0 {
			return "none"
		}
		return strings.Join(v, ", ")
	}
	return fmt.Sprintf("it holds %s; the goal grants %s", none(c.Capabilities.Agent), none(c.Capabilities.Goal))
}
