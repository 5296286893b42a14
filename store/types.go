package store

import (
	"encoding/json"
	"time"
)

// Meta says who performs an operation, from which surface, and under which idempotency key.
// Every mutating operation takes one; it becomes the audit row (and the receipt key).
type Meta struct {
	// Actor is an open_id, "agent:<goal>/<agent>", "admin" or "system".
	Actor string
	// Surface is one of "api", "chat", "card", "scheduler", "system".
	Surface string
	// IdempotencyKey, when set, makes the operation replayable: the same key with the same
	// request returns the stored result and writes nothing; with another request it is
	// ErrConflict. Keys are scoped by Actor.
	IdempotencyKey string
}

// Goal statuses.
const (
	GoalActive  = "active"
	GoalStopped = "stopped"
	GoalDone    = "done"
)

// Goal is one long-horizon objective with its owners, quota policy and schedules.
type Goal struct {
	ID            string    `json:"id"`
	Title         string    `json:"title"`
	Objective     string    `json:"objective"`
	Owners        []string  `json:"owners"`  // Lark open_ids who may steer and answer gates
	Members       []string  `json:"members"` // Lark open_ids who may message agents and read
	Status        string    `json:"status"`  // active | stopped | done
	WindowHours   int       `json:"window_hours"`
	AllowedSlots  int       `json:"allowed_slots"`
	HeartbeatSpec string    `json:"heartbeat_spec"` // robfig/cron standard spec; "" = none
	HeartbeatTZ   string    `json:"heartbeat_tz"`   // IANA zone
	ReportSpec    string    `json:"report_spec"`
	ReportTZ      string    `json:"report_tz"`
	Lang          string    `json:"lang"`        // en | zh
	StallTurns    int       `json:"stall_turns"` // turns in a row without progress before a stall gate; 0 = off
	Version       int64     `json:"version"`
	CreatedAt     time.Time `json:"created_at"`
	UpdatedAt     time.Time `json:"updated_at"`
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// Agent runner kinds.
const (
	RunnerExec    = "exec"
	RunnerWebhook = "webhook"
	RunnerPoll    = "poll"
)

// Agent is a registered peer of a goal. Its token is never stored, only its sha256.
type Agent struct {
	GoalID       string          `json:"goal_id"`
	ID           string          `json:"agent_id"`
	Runner       string          `json:"runner"` // exec | webhook | poll
	RunnerConfig json.RawMessage `json:"runner_config"`
	WorkMode     string          `json:"work_mode"` // active | monitor_only
	IsDefault    bool            `json:"is_default"`
	CreatedAt    time.Time       `json:"created_at"`
}

// RegisteredAgent is an agent with its bearer token, returned once by RegisterAgent and
// RotateAgentToken. A replay of either under its idempotency key returns Token "" (the token
// is never stored in clear); rotate again to get a new one.
type RegisteredAgent struct {
	Agent
	Token string `json:"token,omitempty"`
}

// Todo statuses.
const (
	TodoOpen      = "open"
	TodoBlocked   = "blocked"
	TodoDone      = "done"
	TodoCancelled = "cancelled"
)

// Todo is one slice of work. ClaimedBy is never overwritten by another agent's claim.
type Todo struct {
	ID             int64      `json:"todo_id"`
	GoalID         string     `json:"goal_id"`
	Role           string     `json:"role"` // agent | user
	Text           string     `json:"text"`
	Priority       int        `json:"priority"` // 0 (P0, most urgent) .. 4
	Status         string     `json:"status"`
	ClaimedBy      string     `json:"claimed_by"` // agent id; "" = unclaimed
	ClaimedAt      *time.Time `json:"claimed_at,omitempty"`
	LeaseExpiresAt *time.Time `json:"lease_expires_at,omitempty"`
	BlockedByGate  int64      `json:"blocked_by_gate,omitempty"`
	CreatedBy      string     `json:"created_by"`
	Version        int64      `json:"version"`
	CreatedAt      time.Time  `json:"created_at"`
	UpdatedAt      time.Time  `json:"updated_at"`
	DoneAt         *time.Time `json:"done_at,omitempty"`
}

// Gate statuses and kinds.
const (
	GateOpen      = "open"
	GateApproved  = "approved"
	GateRejected  = "rejected"
	GateCancelled = "cancelled"

	GateKindQuestion = "question"
	GateKindStall    = "stall"
)

// Gate is an owner decision an agent (or the stall guard) waits for. TodoID 0 blocks the
// whole goal.
type Gate struct {
	ID             int64      `json:"gate_id"`
	GoalID         string     `json:"goal_id"`
	AgentID        string     `json:"agent_id"` // who asked; "" for system gates
	Kind           string     `json:"kind"`     // question | stall
	Question       string     `json:"question"`
	Options        []string   `json:"options"`
	TodoID         int64      `json:"todo_id,omitempty"`
	Status         string     `json:"status"`
	AnsweredBy     string     `json:"answered_by,omitempty"`
	Answer         string     `json:"answer,omitempty"`
	Comment        string     `json:"comment,omitempty"`
	AnsweredAt     *time.Time `json:"answered_at,omitempty"`
	CardVersion    int        `json:"card_version"`
	Reminders      int        `json:"reminders"`
	NextReminderAt *time.Time `json:"next_reminder_at,omitempty"`
	CreatedAt      time.Time  `json:"created_at"`
}

// Evidence is something an agent produced, bound to a todo and/or turn.
type Evidence struct {
	ID        int64     `json:"evidence_id"`
	GoalID    string    `json:"goal_id"`
	AgentID   string    `json:"agent_id"`
	TodoID    int64     `json:"todo_id,omitempty"`
	TurnID    int64     `json:"turn_id,omitempty"`
	Kind      string    `json:"kind"` // link | command | note | artifact
	Summary   string    `json:"summary"`
	Ref       string    `json:"ref"`
	CreatedAt time.Time `json:"created_at"`
}

// Turn states.
const (
	TurnLive      = "live"
	TurnOK        = "ok"
	TurnFailed    = "failed"
	TurnAbandoned = "abandoned"
)

// Turn is one bounded slice of work by one agent, held by a lease. At most one turn per
// goal x agent is live.
type Turn struct {
	ID             int64      `json:"turn_id"`
	GoalID         string     `json:"goal_id"`
	AgentID        string     `json:"agent_id"`
	InstanceID     string     `json:"turn_instance_id"`
	SessionID      string     `json:"session_id"`
	TodoID         int64      `json:"todo_id,omitempty"`
	Action         string     `json:"action"`
	State          string     `json:"state"`
	Progress       bool       `json:"progress"`
	LeaseExpiresAt time.Time  `json:"lease_expires_at"`
	StartedAt      time.Time  `json:"started_at"`
	EndedAt        *time.Time `json:"ended_at,omitempty"`
	Outcome        string     `json:"outcome"`
	LogTail        string     `json:"log_tail"`
}

// Quota ledger kinds.
const (
	LedgerSlotSpent      = "slot_spent"
	LedgerSlotVoided     = "slot_voided"
	LedgerStateRefreshed = "state_refreshed"
	LedgerTickDecision   = "tick_decision"
)

// LedgerEntry is one append-only quota ledger row.
type LedgerEntry struct {
	ID        int64           `json:"event_id"`
	GoalID    string          `json:"goal_id"`
	AgentID   string          `json:"agent_id"`
	Kind      string          `json:"kind"`
	TurnID    int64           `json:"turn_id,omitempty"`
	TodoID    int64           `json:"todo_id,omitempty"`
	Slots     int             `json:"slots"`
	Detail    json.RawMessage `json:"detail"`
	CreatedAt time.Time       `json:"created_at"`
}

// Audit is one row of who did what; refusals are recorded with Allowed false.
type Audit struct {
	ID      int64           `json:"id"`
	At      time.Time       `json:"at"`
	Actor   string          `json:"actor"`
	Surface string          `json:"surface"`
	Action  string          `json:"action"`
	GoalID  string          `json:"goal_id"`
	Target  string          `json:"target"`
	Allowed bool            `json:"allowed"`
	Detail  json.RawMessage `json:"detail"`

	skip bool // NoAudit: an operation with nothing to record
}

// Receipt is the stored result of an idempotent operation.
type Receipt struct {
	Key         string          `json:"key"`
	RequestHash []byte          `json:"-"`
	Status      int             `json:"status"`
	Body        json.RawMessage `json:"body"`
	CreatedAt   time.Time       `json:"created_at"`
}

// --- operation parameters ---

// CreateGoalParams creates a goal. Zero values take the defaults: window 24 h, 24 slots,
// zones UTC, language en, stall guard after 3 turns.
type CreateGoalParams struct {
	ID            string
	Title         string
	Objective     string
	Owners        []string
	Members       []string
	WindowHours   *int
	AllowedSlots  *int
	HeartbeatSpec string
	HeartbeatTZ   string
	ReportSpec    string
	ReportTZ      string
	Lang          string
	StallTurns    *int
	Meta          Meta `json:"-"`
}

// ListGoalsParams filters ListGoals. Empty fields do not filter.
type ListGoalsParams struct {
	Status string // active | stopped | done
	// Person limits the list to goals where this open_id is an owner or member.
	Person string
	Limit  int // 0 = 100; at most 1000
	After  string
}

// UpdateGoalParams changes the fields that are non-nil. Version is the version the caller
// read; a different current version is ErrConflict. Version 0 skips the check (chat commands
// that change one field without a read).
type UpdateGoalParams struct {
	GoalID        string
	Version       int64
	Title         *string
	Objective     *string
	Owners        *[]string
	Members       *[]string
	WindowHours   *int
	AllowedSlots  *int
	HeartbeatSpec *string
	HeartbeatTZ   *string
	ReportSpec    *string
	ReportTZ      *string
	Lang          *string
	StallTurns    *int
	Meta          Meta `json:"-"`
}

// GoalRef names a goal for stop/resume.
type GoalRef struct {
	GoalID string
	Meta   Meta `json:"-"`
}

// RegisterAgentParams registers an agent on a goal and issues its token.
type RegisterAgentParams struct {
	GoalID       string
	AgentID      string
	Runner       string          // exec | webhook | poll; "" = poll
	RunnerConfig json.RawMessage // JSON object; nil = {}
	WorkMode     string          // active | monitor_only; "" = active
	IsDefault    bool            // becomes the goal's default agent (the previous one stops being it)
	Meta         Meta            `json:"-"`
}

// AgentRef names an agent for token rotation.
type AgentRef struct {
	GoalID  string
	AgentID string
	Meta    Meta `json:"-"`
}

// AddTodoParams adds a todo.
type AddTodoParams struct {
	GoalID   string
	Role     string // agent | user; "" = agent
	Text     string
	Priority *int // 0..4; nil = 2
	// ClaimFor claims the new todo for this registered agent at once ("" = unclaimed).
	ClaimFor string
	Meta     Meta `json:"-"`
}

// ListTodosParams filters ListTodos. Empty fields do not filter.
type ListTodosParams struct {
	GoalID    string
	Statuses  []string
	ClaimedBy string
	Limit     int // 0 = 100; at most 1000
	AfterID   int64
}

// ClaimTodoParams claims a todo for AgentID. A todo claimed by another agent whose lease has
// not expired is ErrConflict unless Transfer is set.
type ClaimTodoParams struct {
	GoalID   string
	TodoID   int64
	AgentID  string
	Transfer bool
	Lease    time.Duration // 0 = no lease expiry
	Meta     Meta          `json:"-"`
}

// UpdateTodoParams changes the fields that are non-nil. Version must equal the version the
// caller read, else ErrConflict. AgentID, when set, must hold the claim (or the todo must be
// unclaimed); "" means a person or the admin, whose permission the caller checked.
type UpdateTodoParams struct {
	GoalID     string
	TodoID     int64
	AgentID    string
	Version    int64
	Text       *string
	Priority   *int
	Status     *string // open | blocked | done | cancelled
	ClearClaim bool
	Meta       Meta `json:"-"`
}

// AskGateParams opens an owner gate. TodoID 0 blocks the whole goal; otherwise that todo
// becomes blocked until the gate is answered.
type AskGateParams struct {
	GoalID   string
	AgentID  string // "" for system gates
	Kind     string // question | stall; "" = question
	Question string
	Options  []string // nil = approve, reject
	TodoID   int64
	// Notice, when set, runs inside the transaction with the new gate and returns the outbox
	// rows that announce it (the gate card).
	Notice NoticeFunc `json:"-"`
	Meta   Meta       `json:"-"`
}

// AnswerGateParams answers an open gate. AnsweredBy must be an owner of the goal; anyone else
// is refused and the refusal is audited.
type AnswerGateParams struct {
	GoalID     string
	GateID     int64
	Answer     string // approve | reject
	AnsweredBy string // open_id
	Comment    string
	// CardVersion, when non-zero, must equal the gate's card_version (a click on an older
	// card is ErrConflict).
	CardVersion int
	// ByAdmin: the caller verified that AnsweredBy is a LoopX admin (LOOPX_ADMINS), who may
	// answer any goal's gates without being an owner.
	ByAdmin bool
	// Notice, when set, runs inside the transaction with the answered gate (card update).
	Notice NoticeFunc `json:"-"`
	Meta   Meta       `json:"-"`
}

// CancelGateParams withdraws an open gate; only the agent that asked may.
type CancelGateParams struct {
	GoalID  string
	GateID  int64
	AgentID string
	Notice  NoticeFunc `json:"-"`
	Meta    Meta       `json:"-"`
}

// ListGatesParams filters ListGates.
type ListGatesParams struct {
	GoalID string
	Status string // "" = all
	Limit  int
}

// AddEvidenceParams records evidence. TurnID 0 binds it to the agent's live turn, if any,
// which then counts as having made progress.
type AddEvidenceParams struct {
	GoalID  string
	AgentID string
	TodoID  int64
	TurnID  int64
	Kind    string // link | command | note | artifact; "" = note
	Summary string
	Ref     string
	Meta    Meta `json:"-"`
}

// ListEvidenceParams filters ListEvidence.
type ListEvidenceParams struct {
	GoalID  string
	TodoID  int64
	AgentID string
	Limit   int
	AfterID int64
}

// OpenTurnParams opens a turn with a lease.
type OpenTurnParams struct {
	GoalID     string
	AgentID    string
	InstanceID string // "" = generated
	SessionID  string
	TodoID     int64
	Action     string
	Lease      time.Duration // 0 = 30 minutes
	Meta       Meta          `json:"-"`
}

// EndTurnParams ends a live turn.
type EndTurnParams struct {
	GoalID     string
	AgentID    string
	InstanceID string
	State      string // ok | failed
	Outcome    string
	LogTail    string // the last 12,000 characters are kept
	Meta       Meta   `json:"-"`
}

// SpendSlotParams debits one slot for a turn that ran. TurnInstanceID names the turn.
type SpendSlotParams struct {
	GoalID         string
	AgentID        string
	TurnInstanceID string
	TodoID         int64
	Meta           Meta `json:"-"`
}

// SpendReceipt is the result of SpendSlot; a retry returns the same one with Replayed true.
type SpendReceipt struct {
	Entry      LedgerEntry `json:"quota_event"`
	Turn       Turn        `json:"turn"`
	SpentSlots int         `json:"spent_slots"`
	Replayed   bool        `json:"-"`
}

// RefreshStateParams records the next action the following turn should see, quota-neutral.
type RefreshStateParams struct {
	GoalID         string
	AgentID        string
	TurnInstanceID string
	NextAction     string
	Meta           Meta `json:"-"`
}

// ListAuditParams filters ListAudit.
type ListAuditParams struct {
	GoalID  string
	Limit   int
	AfterID int64
}

// RenewTurnParams extends the lease of a live turn.
type RenewTurnParams struct {
	GoalID     string
	AgentID    string
	InstanceID string
	Lease      time.Duration // from now; 0 = DefaultTurnLease
	Meta       Meta          `json:"-"`
}
