package quota

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"loopx/store"
)

// Effective actions (LoopX's names where LoopX has one).
const (
	ActionQuotaSkip     = "quota_skip"
	ActionBusySkip      = "turn_in_progress"
	ActionThrottledSkip = "throttled_skip"
	ActionInboxReply    = "inbox_reply_due"
	ActionMonitorOnly   = "agent_monitor_only"
	ActionGateWait      = "operator_gate_notify"
	ActionIdle          = "no_runnable_todo"
	ActionStallGate     = "stall_gate"
	ActionNormalRun     = "normal_run"
	ActionNotFound      = "goal_not_found"
	ActionHeld          = "agent_held"
	ActionStop          = "stop_turn"
	ActionGoalDone      = "goal_done"
	ActionContinuation  = "continuation_due"
)

// hintRow is one row of LoopX's scheduler_hint table.
type hintRow struct {
	action, class string
	initial, max  int
}

var (
	hintRunNow  = hintRow{"run_now", "active_work", 3, 10}
	hintGate    = hintRow{"backoff_waiting_for_user", "human_gate", 30, 120}
	hintQuiet   = hintRow{"backoff_until_state_change", "quiet_wait", 30, 120}
	hintStopped = hintRow{"stop_until_explicit_resume", "paused", 0, 0}
)

// maxStep bounds the stored progression; the interval reaches its maximum long before.
const maxStep = 16

// Decide is the should-run decision: a pure function of the snapshot and the clock. The order
// is LoopX's: paused, (stop: the live turn was stopped; held: the agent is held), busy,
// throttled, inbox, (monitor-only), waiting for an owner gate, idle, stalled, eligible. The
// first that applies wins. The todo a continuation hands the agent comes before the
// highest-priority one.
func Decide(in Input, now time.Time) Decision { return decide(in, now, false) }

// decide is Decide; pinned: in.Runnable[0] is the todo the caller named (should-run's
// todo_id), which no continuation displaces.
func decide(in Input, now time.Time, pinned bool) Decision {
	d := Decision{
		OK: true, Mode: "should-run", GoalID: in.Goal.ID, AgentID: in.Agent.ID,
		Decision: "skip", NextAction: in.NextAction,
		Inbox: InboxCounts{Pending: in.InboxPending, Steer: in.InboxSteer},
		Quota: QuotaStatus{WindowHours: in.Goal.WindowHours, AllowedSlots: in.Goal.AllowedSlots, SpentSlots: in.SpentSlots},
		Gates: GateSummary{Open: []int64{}, Blocking: []int64{}},
	}
	if !in.GoalFound || !in.AgentFound {
		d.OK, d.State, d.EffectiveAction = false, StateNotFound, ActionNotFound
		d.Reason, d.Message = "goal_not_found", "no such goal"
		if in.GoalFound {
			d.Reason, d.Message = "agent_not_found", "no such agent on this goal"
		}
		return withHint(d, in, hintStopped, now)
	}

	d.Contract = contractOf(in)
	if len(in.Continuations) > 0 {
		// Work someone else handed over is shown before a note to the agent's own next turn.
		c := in.Continuations[0]
		if h := handedOver(in); h != nil {
			c = *h
		}
		d.Continuation, d.ContinuationsPending = &c, len(in.Continuations)
	}
	if r := in.Replan; r != nil {
		d.ObjectiveChanged = &ObjectiveChange{DecisionID: r.ID, GoalVersion: r.GoalVersion, Before: r.Before, After: r.After,
			Reason: r.Reason, DecidedBy: r.DecidedBy, At: r.CreatedAt}
	}

	goalWide := []int64{}
	for _, g := range in.OpenGates {
		d.Gates.Open = append(d.Gates.Open, g.ID)
		if g.TodoID == 0 {
			goalWide = append(goalWide, g.ID)
		}
	}
	d.Gates.Blocking = append(append(d.Gates.Blocking, goalWide...), in.BlockedGates...)
	var top *store.Todo
	if len(in.Runnable) > 0 {
		top = &in.Runnable[0]
		// The todo a continuation hands this agent comes first, unless the caller named one.
		for _, c := range in.Continuations {
			if pinned {
				break
			}
			if i := slices.IndexFunc(in.Runnable, func(t store.Todo) bool { return t.ID == c.TodoID }); c.TodoID != 0 && i >= 0 {
				top = &in.Runnable[i]
				break
			}
		}
	}

	switch {
	case in.Goal.Status == store.GoalDone:
		d.State, d.EffectiveAction = StateDone, ActionGoalDone
		d.Reason, d.Message = "goal_done", "the goal is done; an owner may reopen it"
		return withHint(d, in, hintStopped, now)
	case in.Goal.Status != store.GoalActive:
		d.State, d.EffectiveAction = StatePaused, ActionQuotaSkip
		d.Reason, d.Message = "goal_"+in.Goal.Status, fmt.Sprintf("the goal is %s; an owner must resume it", in.Goal.Status)
		return withHint(d, in, hintStopped, now)
	case in.Goal.AllowedSlots == 0:
		d.State, d.EffectiveAction = StatePaused, ActionQuotaSkip
		d.Reason, d.Message = "quota_zero", "the goal's quota allows 0 slots; raise allowed_slots to resume"
		return withHint(d, in, hintStopped, now)
	case in.LiveTurn != nil && in.LiveTurn.StopRequestedAt != nil:
		d.State, d.EffectiveAction = StateStop, ActionStop
		d.Reason = "stop_requested"
		d.Message = fmt.Sprintf("turn %s was stopped by an owner: end it now without further changes", in.LiveTurn.InstanceID)
		return withHint(d, in, hintQuiet, now)
	case in.Agent.HeldAt != nil:
		d.State, d.EffectiveAction = StateHeld, ActionHeld
		d.Held = &HeldStatus{Reason: in.Agent.HeldReason, Failures: in.Agent.HeldFailures, By: in.Agent.HeldBy, Since: *in.Agent.HeldAt}
		d.Reason = "held_" + in.Agent.HeldReason
		if in.Agent.HeldReason == store.HeldFailures {
			d.Message = fmt.Sprintf("the agent is held after %d failed or empty turns in a row; an owner must resume it", in.Agent.HeldFailures)
		} else {
			d.Message = "an owner paused the agent; an owner must resume it"
		}
		return withHint(d, in, hintStopped, now)
	case in.LiveTurn != nil:
		d.State, d.EffectiveAction = StateBusy, ActionBusySkip
		d.Reason = "live_turn"
		d.Message = fmt.Sprintf("turn %s is live until %s", in.LiveTurn.InstanceID, in.LiveTurn.LeaseExpiresAt.UTC().Format(time.RFC3339))
		return withHint(d, in, hintQuiet, now)
	case in.SpentSlots >= in.Goal.AllowedSlots:
		d.State, d.EffectiveAction = StateThrottled, ActionThrottledSkip
		d.Reason = "window_exhausted"
		d.Message = fmt.Sprintf("%d of %d slots spent in the last %d h", in.SpentSlots, in.Goal.AllowedSlots, in.Goal.WindowHours)
		if in.FreeingSpendAt != nil {
			at := in.FreeingSpendAt.Add(time.Duration(in.Goal.WindowHours) * time.Hour).UTC()
			d.Quota.NextEligibleAt = &at
		}
		return withHint(d, in, hintQuiet, now)
	case in.InboxPending > 0:
		d.State, d.EffectiveAction = StateInbox, ActionInboxReply
		d.Reason = "inbox_pending"
		d.Message = fmt.Sprintf("%d message(s) wait for a reply", in.InboxPending)
		d.SelectedTodo = selected(top)
		return run(d, in, now)
	case in.Agent.WorkMode == "monitor_only":
		d.State, d.EffectiveAction = StateIdle, ActionMonitorOnly
		d.Reason, d.Message = "monitor_only", "the agent is in monitor-only mode; only inbox replies run"
		return withHint(d, in, hintQuiet, now)
	case top == nil && handedOver(in) != nil:
		// Work handed over by someone else with no todo to work on (a review, a check, a
		// gate's answer) is work too. A handoff to the agent's own next turn only rides along.
		c := *handedOver(in)
		d.State, d.EffectiveAction = StateEligible, ActionContinuation
		d.Reason = "continuation_pending"
		d.Message = fmt.Sprintf("handoff %d (%s) waits for this agent", c.ID, c.Kind)
		return run(d, in, now)
	case len(goalWide) > 0 || (top == nil && len(in.BlockedGates) > 0):
		d.State, d.EffectiveAction = StateWaiting, ActionGateWait
		d.Reason = "owner_gate_open"
		d.Message = fmt.Sprintf("waiting for an owner to answer gate %s", joinIDs(d.Gates.Blocking))
		return withHint(d, in, hintGate, now)
	case top == nil && in.CapabilityBlocked > 0:
		d.State, d.EffectiveAction = StateIdle, ActionIdle
		d.Reason = "missing_capability"
		d.Message = fmt.Sprintf("%d open todo(s) need a capability this agent lacks; an owner grants it, or another agent takes them", in.CapabilityBlocked)
		return withHint(d, in, hintQuiet, now)
	case top == nil && workComplete(in):
		d.State, d.EffectiveAction = StateIdle, ActionIdle
		d.Reason = "work_complete"
		d.Message = "every todo is finished and every criterion met: the owners are asked to mark the goal done"
		return withHint(d, in, hintQuiet, now)
	case top == nil:
		d.State, d.EffectiveAction = StateIdle, ActionIdle
		d.Reason, d.Message = "no_runnable_todo", "no open todo this agent may work on"
		return withHint(d, in, hintQuiet, now)
	case stalled(in):
		d.State, d.EffectiveAction = StateStalled, ActionStallGate
		d.Reason = "no_progress"
		d.Message = fmt.Sprintf("no progress in %d turns: the owners are asked whether to continue or pause", in.Goal.StallTurns)
		d.SelectedTodo = selected(top)
		return withHint(d, in, hintGate, now)
	default:
		d.State, d.EffectiveAction = StateEligible, ActionNormalRun
		d.Reason = "runnable_todo"
		d.Message = fmt.Sprintf("work on todo %d (P%d)", top.ID, top.Priority)
		d.SelectedTodo = selected(top)
		return run(d, in, now)
	}
}

func run(d Decision, in Input, now time.Time) Decision {
	d.Decision, d.ShouldRun = "run", true
	return withHint(d, in, hintRunNow, now)
}

func selected(t *store.Todo) *SelectedTodo {
	if t == nil {
		return nil
	}
	return &SelectedTodo{ID: t.ID, Text: t.Text, Priority: t.Priority, ClaimedBy: t.ClaimedBy, Version: t.Version,
		Criteria: criteriaStatus(t.Criteria, t.CriteriaMet), Requires: t.Requires}
}

// criteriaStatus marks which of cs are met.
func criteriaStatus(cs []store.Criterion, met []string) []store.CriterionStatus {
	if len(cs) == 0 {
		return nil
	}
	out := make([]store.CriterionStatus, len(cs))
	for i, c := range cs {
		out[i] = store.CriterionStatus{Criterion: c, Met: slices.Contains(met, c.ID)}
	}
	return out
}

// contractOf is the goal contract as in's agent sees it.
func contractOf(in Input) *store.Contract {
	g := in.Goal
	cs := criteriaStatus(g.Criteria, in.GoalCriteriaMet)
	if cs == nil {
		cs = []store.CriterionStatus{}
	}
	caps := in.Agent.Capabilities
	if caps == nil {
		caps = []string{}
	}
	goalCaps := g.Capabilities
	if goalCaps == nil {
		goalCaps = []string{}
	}
	return &store.Contract{Objective: g.Objective, GoalVersion: g.Version, Scope: g.Scope(),
		Capabilities: store.ContractGrants{Goal: goalCaps, Agent: caps}, Criteria: cs}
}

// handedOver is the oldest pending continuation another agent or a person handed this
// agent, nil when none.
func handedOver(in Input) *store.Handoff {
	for i, c := range in.Continuations {
		if c.From != in.Agent.ID {
			return &in.Continuations[i]
		}
	}
	return nil
}

// workComplete: the goal has todos, none is open or blocked, no gate is open and every goal
// criterion is met.
func workComplete(in Input) bool {
	if !in.AnyTodos || in.OpenTodos > 0 || len(in.OpenGates) > 0 {
		return false
	}
	for _, c := range in.Goal.Criteria {
		if !slices.Contains(in.GoalCriteriaMet, c.ID) {
			return false
		}
	}
	return true
}

// stalled: the last StallTurns ended turns (since the last answered stall gate) all made no
// progress.
func stalled(in Input) bool {
	n := in.Goal.StallTurns
	if n <= 0 || len(in.RecentProgress) < n {
		return false
	}
	for _, p := range in.RecentProgress[:n] {
		if p {
			return false
		}
	}
	return true
}

func joinIDs(ids []int64) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(parts, ", ")
}

// identity is what must stay the same for the hint to keep backing off: state, reason,
// selected todo and blocking gates.
func identity(d Decision) string {
	todo := int64(0)
	if d.SelectedTodo != nil {
		todo = d.SelectedTodo.ID
	}
	return fmt.Sprintf("%s|%s|%d|%s", d.State, d.Reason, todo, joinIDs(d.Gates.Blocking))
}

// withHint sets the scheduler hint: the interval doubles (initial, 2x, 4x, ... capped at the
// row's maximum) while the identity stays the same as the stored one, and resets when it
// changes. A throttled hint never waits past next_eligible_at.
func withHint(d Decision, in Input, row hintRow, now time.Time) Decision {
	d.Identity = identity(d)
	step := 0
	if in.HintIdentity == d.Identity {
		step = min(in.HintStep+1, maxStep)
	}
	h := SchedulerHint{Action: row.action, CadenceClass: row.class, Step: step}
	if row.initial > 0 {
		iv := row.initial
		for i := 0; i < step && iv < row.max; i++ {
			iv *= 2
		}
		iv = min(iv, row.max)
		if d.Quota.NextEligibleAt != nil {
			until := int(d.Quota.NextEligibleAt.Sub(now).Minutes() + 0.999)
			iv = max(1, min(iv, until))
		}
		h.IntervalMinutes = iv
		h.RRule = "FREQ=MINUTELY;INTERVAL=" + strconv.Itoa(iv)
	}
	d.SchedulerHint = h
	return d
}
