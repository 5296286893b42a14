package quota_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loopx/quota"
	"loopx/store"
)

var t0 = time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)

// base is an active goal with one agent and one runnable todo: eligible.
func base() quota.Input {
	return quota.Input{
		GoalFound:  true,
		Goal:       store.Goal{ID: "g", Status: store.GoalActive, WindowHours: 24, AllowedSlots: 5, StallTurns: 3, Lang: "en"},
		AgentFound: true,
		Agent:      store.Agent{GoalID: "g", ID: "a", WorkMode: "active"},
		Runnable:   []store.Todo{{ID: 7, Priority: 1, Text: "ship", Version: 2}, {ID: 8, Priority: 3, Text: "later"}},
	}
}

func TestDecideStates(t *testing.T) {
	t.Parallel()
	freeing := t0.Add(-23 * time.Hour)
	cases := []struct {
		name       string
		mut        func(*quota.Input)
		state      string
		reason     string
		action     string
		run        bool
		todo       int64
		hint       string
		interval   int
		blocking   []int64
		eligibleAt *time.Time
	}{
		{name: "eligible picks the highest-priority runnable todo", mut: func(*quota.Input) {},
			state: quota.StateEligible, reason: "runnable_todo", action: quota.ActionNormalRun, run: true, todo: 7, hint: "run_now", interval: 3},
		{name: "goal not found", mut: func(in *quota.Input) { in.GoalFound = false },
			state: quota.StateNotFound, reason: "goal_not_found", action: quota.ActionNotFound, hint: "stop_until_explicit_resume"},
		{name: "agent not found", mut: func(in *quota.Input) { in.AgentFound = false },
			state: quota.StateNotFound, reason: "agent_not_found", action: quota.ActionNotFound, hint: "stop_until_explicit_resume"},
		{name: "stopped goal is paused and nothing overrides it", mut: func(in *quota.Input) {
			in.Goal.Status = store.GoalStopped
			in.InboxPending = 3
			in.LiveTurn = &store.Turn{InstanceID: "t1", LeaseExpiresAt: t0.Add(time.Hour)}
			in.SpentSlots = 9
		}, state: quota.StatePaused, reason: "goal_stopped", action: quota.ActionQuotaSkip, hint: "stop_until_explicit_resume"},
		{name: "zero quota is paused", mut: func(in *quota.Input) { in.Goal.AllowedSlots = 0; in.InboxPending = 1 },
			state: quota.StatePaused, reason: "quota_zero", action: quota.ActionQuotaSkip, hint: "stop_until_explicit_resume"},
		{name: "a held agent starts nothing, even with inbox items, until resumed", mut: func(in *quota.Input) {
			at := t0.Add(-time.Hour)
			in.Agent.HeldAt, in.Agent.HeldReason, in.Agent.HeldFailures = &at, store.HeldFailures, 3
			in.InboxPending = 2
		}, state: quota.StateHeld, reason: "held_failures", action: quota.ActionHeld, hint: "stop_until_explicit_resume"},
		{name: "a stopped live turn answers stop before busy and held", mut: func(in *quota.Input) {
			at := t0.Add(-time.Minute)
			in.LiveTurn = &store.Turn{InstanceID: "t1", LeaseExpiresAt: t0.Add(time.Hour), StopRequestedAt: &at, StopRequestedBy: "ou_o"}
			in.Agent.HeldAt, in.Agent.HeldReason = &at, store.HeldOwner
		}, state: quota.StateStop, reason: "stop_requested", action: quota.ActionStop, hint: "backoff_until_state_change", interval: 30},
		{name: "live turn is busy, even with inbox items", mut: func(in *quota.Input) {
			in.LiveTurn = &store.Turn{InstanceID: "t1", LeaseExpiresAt: t0.Add(time.Hour)}
			in.InboxPending = 2
		}, state: quota.StateBusy, reason: "live_turn", action: quota.ActionBusySkip, hint: "backoff_until_state_change", interval: 30},
		{name: "exhausted window is throttled until the oldest spend leaves it", mut: func(in *quota.Input) {
			in.SpentSlots = 5
			in.FreeingSpendAt = &freeing
			in.InboxPending = 1
		}, state: quota.StateThrottled, reason: "window_exhausted", action: quota.ActionThrottledSkip,
			hint: "backoff_until_state_change", interval: 30, eligibleAt: ptr(t0.Add(time.Hour))},
		{name: "throttled hint never waits past next_eligible_at", mut: func(in *quota.Input) {
			in.SpentSlots = 5
			f := t0.Add(-24*time.Hour + 10*time.Minute)
			in.FreeingSpendAt = &f
		}, state: quota.StateThrottled, reason: "window_exhausted", action: quota.ActionThrottledSkip,
			hint: "backoff_until_state_change", interval: 10, eligibleAt: ptr(t0.Add(10 * time.Minute))},
		{name: "pending inbox runs a reply turn even while its todo waits on a gate", mut: func(in *quota.Input) {
			in.Runnable = nil
			in.OpenGates = []store.Gate{{ID: 4, TodoID: 7}}
			in.BlockedGates = []int64{4}
			in.InboxPending, in.InboxSteer = 2, 1
		}, state: quota.StateInbox, reason: "inbox_pending", action: quota.ActionInboxReply, run: true,
			hint: "run_now", interval: 3, blocking: []int64{4}},
		{name: "monitor-only agent skips normal work", mut: func(in *quota.Input) { in.Agent.WorkMode = "monitor_only" },
			state: quota.StateIdle, reason: "monitor_only", action: quota.ActionMonitorOnly, hint: "backoff_until_state_change", interval: 30},
		{name: "goal-wide gate waits for the owner", mut: func(in *quota.Input) {
			in.OpenGates = []store.Gate{{ID: 9}}
		}, state: quota.StateWaiting, reason: "owner_gate_open", action: quota.ActionGateWait,
			hint: "backoff_waiting_for_user", interval: 30, blocking: []int64{9}},
		{name: "every runnable todo blocked waits for the owner", mut: func(in *quota.Input) {
			in.Runnable = nil
			in.OpenGates = []store.Gate{{ID: 4, TodoID: 7}, {ID: 5, TodoID: 8}}
			in.BlockedGates = []int64{4, 5}
		}, state: quota.StateWaiting, reason: "owner_gate_open", action: quota.ActionGateWait,
			hint: "backoff_waiting_for_user", interval: 30, blocking: []int64{4, 5}},
		{name: "a gate on one todo leaves the others runnable", mut: func(in *quota.Input) {
			in.Runnable = in.Runnable[1:]
			in.OpenGates = []store.Gate{{ID: 4, TodoID: 7}}
			in.BlockedGates = []int64{4}
		}, state: quota.StateEligible, reason: "runnable_todo", action: quota.ActionNormalRun, run: true, todo: 8,
			hint: "run_now", interval: 3, blocking: []int64{4}},
		{name: "no runnable todo is idle", mut: func(in *quota.Input) { in.Runnable = nil },
			state: quota.StateIdle, reason: "no_runnable_todo", action: quota.ActionIdle, hint: "backoff_until_state_change", interval: 30},
		{name: "N turns without progress stall", mut: func(in *quota.Input) { in.RecentProgress = []bool{false, false, false} },
			state: quota.StateStalled, reason: "no_progress", action: quota.ActionStallGate, todo: 7,
			hint: "backoff_waiting_for_user", interval: 30},
		{name: "one turn with progress among the last N is not a stall", mut: func(in *quota.Input) { in.RecentProgress = []bool{false, true, false} },
			state: quota.StateEligible, reason: "runnable_todo", action: quota.ActionNormalRun, run: true, todo: 7, hint: "run_now", interval: 3},
		{name: "fewer than N ended turns is not a stall", mut: func(in *quota.Input) { in.RecentProgress = []bool{false, false} },
			state: quota.StateEligible, reason: "runnable_todo", action: quota.ActionNormalRun, run: true, todo: 7, hint: "run_now", interval: 3},
		{name: "stall guard off", mut: func(in *quota.Input) { in.Goal.StallTurns = 0; in.RecentProgress = []bool{false, false, false} },
			state: quota.StateEligible, reason: "runnable_todo", action: quota.ActionNormalRun, run: true, todo: 7, hint: "run_now", interval: 3},
		{name: "a done goal is done, whatever waits", mut: func(in *quota.Input) { in.Goal.Status = store.GoalDone; in.InboxPending = 2 },
			state: quota.StateDone, reason: "goal_done", action: quota.ActionGoalDone, hint: "stop_until_explicit_resume"},
		{name: "a continuation's todo comes first", mut: func(in *quota.Input) {
			in.Continuations = []store.Handoff{{ID: 1, TodoID: 8, From: "b", To: "a", Kind: store.HandoffReview}}
		}, state: quota.StateEligible, reason: "runnable_todo", action: quota.ActionNormalRun, run: true, todo: 8, hint: "run_now", interval: 3},
		{name: "work handed over with no todo runs", mut: func(in *quota.Input) {
			in.Runnable = nil
			in.Continuations = []store.Handoff{{ID: 1, From: "b", To: "a", Kind: store.HandoffReview}}
		}, state: quota.StateEligible, reason: "continuation_pending", action: quota.ActionContinuation, run: true, hint: "run_now", interval: 3},
		{name: "a handoff to its own next turn only rides along", mut: func(in *quota.Input) {
			in.Runnable = nil
			in.Continuations = []store.Handoff{{ID: 1, From: "a", To: "a", Kind: store.HandoffResume}}
		}, state: quota.StateIdle, reason: "no_runnable_todo", action: quota.ActionIdle, hint: "backoff_until_state_change", interval: 30},
		{name: "todos it may not take are said", mut: func(in *quota.Input) { in.Runnable = nil; in.CapabilityBlocked = 2 },
			state: quota.StateIdle, reason: "missing_capability", action: quota.ActionIdle, hint: "backoff_until_state_change", interval: 30},
		{name: "finished work is complete", mut: func(in *quota.Input) {
			in.Runnable, in.AnyTodos = nil, true
			in.Goal.Criteria, in.GoalCriteriaMet = []store.Criterion{{ID: "g1", Text: "shipped"}}, []string{"g1"}
		}, state: quota.StateIdle, reason: "work_complete", action: quota.ActionIdle, hint: "backoff_until_state_change", interval: 30},
		{name: "an unmet goal criterion is not complete", mut: func(in *quota.Input) {
			in.Runnable, in.AnyTodos = nil, true
			in.Goal.Criteria = []store.Criterion{{ID: "g1", Text: "shipped"}}
		}, state: quota.StateIdle, reason: "no_runnable_todo", action: quota.ActionIdle, hint: "backoff_until_state_change", interval: 30},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			in := base()
			c.mut(&in)
			d := quota.Decide(in, t0)
			require.Equal(t, c.state, d.State)
			require.Equal(t, c.reason, d.Reason)
			require.Equal(t, c.action, d.EffectiveAction)
			require.Equal(t, c.run, d.ShouldRun)
			require.Equal(t, map[bool]string{true: "run", false: "skip"}[c.run], d.Decision)
			require.Equal(t, c.state != quota.StateNotFound, d.OK)
			require.Equal(t, "should-run", d.Mode)
			require.NotEmpty(t, d.Message)
			if c.todo == 0 {
				require.Nil(t, d.SelectedTodo)
			} else {
				require.NotNil(t, d.SelectedTodo)
				require.Equal(t, c.todo, d.SelectedTodo.ID)
			}
			require.Equal(t, c.hint, d.SchedulerHint.Action)
			require.Equal(t, c.interval, d.SchedulerHint.IntervalMinutes)
			if c.interval > 0 {
				require.Equal(t, "FREQ=MINUTELY;INTERVAL="+itoa(c.interval), d.SchedulerHint.RRule)
			} else {
				require.Empty(t, d.SchedulerHint.RRule)
			}
			if c.blocking == nil {
				c.blocking = []int64{}
			}
			require.Equal(t, c.blocking, d.Gates.Blocking)
			require.Equal(t, c.eligibleAt, d.Quota.NextEligibleAt)
			require.Equal(t, in.InboxPending, d.Inbox.Pending)
			require.Equal(t, in.InboxSteer, d.Inbox.Steer)
		})
	}
}

// TestDecideHintSteps walks every hint row through its steps: the interval doubles while the
// decision's identity stays the same, stops at the row's maximum, and resets when the
// identity changes.
func TestDecideHintSteps(t *testing.T) {
	t.Parallel()
	rows := []struct {
		name   string
		mut    func(*quota.Input)
		action string
		class  string
		want   []int
	}{
		{"run_now", func(*quota.Input) {}, "run_now", "active_work", []int{3, 6, 10, 10}},
		{"waiting for the owner", func(in *quota.Input) { in.OpenGates = []store.Gate{{ID: 9}} },
			"backoff_waiting_for_user", "human_gate", []int{30, 60, 120, 120}},
		{"quiet until the state changes", func(in *quota.Input) { in.Runnable = nil },
			"backoff_until_state_change", "quiet_wait", []int{30, 60, 120, 120}},
		{"paused", func(in *quota.Input) { in.Goal.Status = store.GoalStopped },
			"stop_until_explicit_resume", "paused", []int{0, 0, 0, 0}},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			in := base()
			r.mut(&in)
			for i, want := range r.want {
				d := quota.Decide(in, t0)
				require.Equal(t, r.action, d.SchedulerHint.Action, "step %d", i)
				require.Equal(t, r.class, d.SchedulerHint.CadenceClass, "step %d", i)
				require.Equal(t, want, d.SchedulerHint.IntervalMinutes, "step %d", i)
				require.Equal(t, i, d.SchedulerHint.Step)
				in.HintIdentity, in.HintStep = d.Identity, d.SchedulerHint.Step
			}
		})
	}

	t.Run("identity change resets", func(t *testing.T) {
		t.Parallel()
		in := base()
		d := quota.Decide(in, t0)
		in.HintIdentity, in.HintStep = d.Identity, d.SchedulerHint.Step
		d = quota.Decide(in, t0)
		require.Equal(t, 6, d.SchedulerHint.IntervalMinutes)
		in.HintIdentity, in.HintStep = d.Identity, d.SchedulerHint.Step

		// Another todo selected: same state, new identity, back to the first step.
		in.Runnable = in.Runnable[1:]
		d = quota.Decide(in, t0)
		require.Equal(t, 3, d.SchedulerHint.IntervalMinutes)
		require.Equal(t, 0, d.SchedulerHint.Step)
		in.HintIdentity, in.HintStep = d.Identity, d.SchedulerHint.Step

		// A new blocking gate changes the identity of a waiting decision too.
		in.OpenGates = []store.Gate{{ID: 1}}
		d = quota.Decide(in, t0)
		require.Equal(t, 30, d.SchedulerHint.IntervalMinutes)
		in.HintIdentity, in.HintStep = d.Identity, d.SchedulerHint.Step
		d = quota.Decide(in, t0)
		require.Equal(t, 60, d.SchedulerHint.IntervalMinutes)
		in.HintIdentity, in.HintStep = d.Identity, d.SchedulerHint.Step
		in.OpenGates = []store.Gate{{ID: 1}, {ID: 2}}
		d = quota.Decide(in, t0)
		require.Equal(t, 30, d.SchedulerHint.IntervalMinutes)
	})
}

func ptr[T any](v T) *T { return &v }

func itoa(n int) string { return strconv.Itoa(n) }
