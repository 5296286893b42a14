package quota

import (
	"time"

	"loopx/store"
)

// States of a decision, in the order Decide tests them.
const (
	StatePaused    = "paused"
	StateBusy      = "busy"
	StateThrottled = "throttled"
	StateInbox     = "inbox"
	StateWaiting   = "waiting"
	StateIdle      = "idle"
	StateStalled   = "stalled"
	StateEligible  = "eligible"
	StateNotFound  = "not_found"
	// StateHeld: the agent is held (the breaker after failed or empty turns in a row, or an
	// owner); no turn starts until an owner resumes it.
	StateHeld = "held"
	// StateStop: an owner stopped the agent's live turn; the host must end it now (the turn
	// is closed as stopped).
	StateStop = "stop"
	// StateDone: the goal is done; nothing runs until an owner reopens it.
	StateDone = "done"
)

// Input is everything Decide looks at, read in one round trip by store.ReadShouldRunSnapshot.
type Input = store.ShouldRunSnapshot

// Decision is the should-run answer. Its JSON is the `quota should-run --format json` output.
type Decision struct {
	OK               bool              `json:"ok"`
	Mode             string            `json:"mode"` // always "should-run"
	GoalID           string            `json:"goal_id"`
	AgentID          string            `json:"agent_id"`
	Decision         string            `json:"decision"` // run | skip
	ShouldRun        bool              `json:"should_run"`
	State            string            `json:"state"`
	Reason           string            `json:"reason"`  // a stable code, e.g. window_exhausted
	Message          string            `json:"message"` // the reason in words, for people
	EffectiveAction  string            `json:"effective_action"`
	SelectedTodo     *SelectedTodo     `json:"selected_todo"`
	NextAction       string            `json:"next_action,omitempty"` // from the last refresh-state
	Inbox            InboxCounts       `json:"inbox"`
	Quota            QuotaStatus       `json:"quota"`
	Gates            GateSummary       `json:"gates"`
	SchedulerHint    SchedulerHint     `json:"scheduler_hint"`
	Turn             *store.Turn       `json:"turn,omitempty"` // the turn opened by BeginTurn
	HeartbeatReceipt *HeartbeatReceipt `json:"heartbeat_receipt,omitempty"`
	// Held says why the agent is held (state held).
	Held *HeldStatus `json:"held,omitempty"`
	// Stopped is the live turn an owner stopped (state stop), as it ended.
	Stopped *store.Turn `json:"stopped_turn,omitempty"`
	// Contract is the goal contract the agent works under: objective, scope, capabilities,
	// the goal's criteria and which are met.
	Contract *store.Contract `json:"contract,omitempty"`
	// Continuation is the oldest handoff to this agent it has not acknowledged (what was
	// done, what is next, for it), until it acknowledges it; ContinuationsPending counts them
	// all.
	Continuation         *store.Handoff `json:"continuation,omitempty"`
	ContinuationsPending int            `json:"continuations_pending,omitempty"`
	// ObjectiveChanged announces a replan the agent has not acknowledged.
	ObjectiveChanged *ObjectiveChange `json:"objective_changed,omitempty"`

	// Replayed is true when the answer is the stored receipt of an earlier call with the
	// same turn instance id (the JSON is byte-identical to the first answer).
	Replayed bool `json:"-"`
	// Identity is what the hint progression compares between calls.
	Identity string `json:"-"`
}

// ObjectiveChange is a replan as should-run announces it.
type ObjectiveChange struct {
	DecisionID  int64     `json:"decision_id"`
	GoalVersion int64     `json:"goal_version"`
	Before      string    `json:"before"`
	After       string    `json:"after"`
	Reason      string    `json:"reason"`
	DecidedBy   string    `json:"decided_by"`
	At          time.Time `json:"at"`
}

// HeldStatus says why an agent is held and since when.
type HeldStatus struct {
	Reason   string    `json:"reason"`             // failures | owner
	Failures int       `json:"failures,omitempty"` // failed or empty turns in a row (the breaker)
	By       string    `json:"by,omitempty"`       // who held it (an owner)
	Since    time.Time `json:"since"`
}

// SelectedTodo is the todo a run should work on.
type SelectedTodo struct {
	ID        int64  `json:"todo_id"`
	Text      string `json:"text"`
	Priority  int    `json:"priority"`
	ClaimedBy string `json:"claimed_by"`
	Version   int64  `json:"version"`
	// Criteria must each be named by evidence before the todo can be done (met: already
	// named, or waived); Requires are the capabilities it needs.
	Criteria []store.CriterionStatus `json:"criteria,omitempty"`
	Requires []string                `json:"requires,omitempty"`
}

// InboxCounts counts inbox items addressed to the agent that wait for it.
type InboxCounts struct {
	Pending int `json:"pending"`
	Steer   int `json:"steer"`
}

// QuotaStatus is the goal's policy and the spend over the rolling window.
type QuotaStatus struct {
	WindowHours    int        `json:"window_hours"`
	AllowedSlots   int        `json:"allowed_slots"`
	SpentSlots     int        `json:"spent_slots"`
	NextEligibleAt *time.Time `json:"next_eligible_at"`
}

// GateSummary lists the open gates and those blocking this agent's work.
type GateSummary struct {
	Open     []int64 `json:"open"`
	Blocking []int64 `json:"blocking"`
}

// SchedulerHint tells a scheduler when to ask again (LoopX's scheduler_hint_v0 table).
type SchedulerHint struct {
	Action          string `json:"action"`
	CadenceClass    string `json:"cadence_class"`
	IntervalMinutes int    `json:"interval_minutes"`
	RRule           string `json:"rrule"`
	Step            int    `json:"step"`
}

// HeartbeatReceipt is returned when a turn instance id is given; the same id replays it.
type HeartbeatReceipt struct {
	Status string `json:"status"` // committed
	// LedgerID is the id of the tick_decision ledger row that recorded the answer (LoopX's
	// name for it on the wire is event_id).
	LedgerID       int64  `json:"event_id"`
	TurnInstanceID string `json:"turn_instance_id"`
}

// ShouldRunParams asks whether an agent should act now.
type ShouldRunParams struct {
	GoalID         string
	AgentID        string
	TurnInstanceID string // optional; the same id replays the same answer
	// BeginTurn opens a turn (with TurnInstanceID, or a generated id) when the decision is run.
	BeginTurn     bool
	LeaseDuration time.Duration // lease of the opened turn; 0 = 30 minutes
	// Via is how the turn is run: exec or webhook (a runner), mcp or cli (a host); it decides
	// whether a progress card is shown by default.
	Via string
	// TodoID, when set, is the todo the turn is for: it is selected (and claimed when the turn
	// opens) instead of the highest-priority one, if the agent may work on it.
	TodoID int64
	Meta   store.Meta
}

// Summary is what a tick row keeps of a should-run answer: enough for a person to see why a
// heartbeat ran or skipped (the run index, the workspace), a tenth of the whole answer's size.
// The whole answer is the heartbeat receipt's, kept its own (shorter) while.
//
// The tick row's own columns say the rest: its outcome (ran, due: the answer was run;
// skipped) and its reason (the effective action of a run, the state of a skip).
type Summary struct {
	State           string     `json:"state"`
	Reason          string     `json:"reason"`
	TodoID          int64      `json:"todo_id,omitempty"`
	IntervalMinutes int        `json:"interval_minutes,omitempty"`
	NextEligibleAt  *time.Time `json:"next_eligible_at,omitempty"`
}

// Summary summarises d for a tick row.
func (d Decision) Summary() Summary {
	s := Summary{State: d.State, Reason: d.Reason, IntervalMinutes: d.SchedulerHint.IntervalMinutes,
		NextEligibleAt: d.Quota.NextEligibleAt}
	if d.SelectedTodo != nil {
		s.TodoID = d.SelectedTodo.ID
	}
	return s
}
