package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Proposal states. A proposal is preview_ready until it is applied, cancelled, goes stale
// (the goal moved on; a fresh proposal succeeds it), expires, or is refused when applied.
const (
	ProposalReady     = "preview_ready"
	ProposalApplied   = "applied"
	ProposalStale     = "stale"
	ProposalCancelled = "cancelled"
	ProposalExpired   = "expired"
	ProposalRefused   = "refused"
)

// Proposal kinds.
const (
	ProposalGoalSet    = "goal.set"
	ProposalGoalPause  = "goal.pause"
	ProposalGoalResume = "goal.resume"
	ProposalAgentSet   = "agent.set"
	ProposalGoalDone   = "goal.done"   // finish the goal
	ProposalGoalReopen = "goal.reopen" // a done goal becomes active again
	ProposalGoalReplan = "goal.replan" // a new objective, with the todos it affects
	// ProposalDefaultsSet changes the machine defaults; it belongs to no goal (GoalID "") and
	// its GoalVersion is the defaults' version.
	ProposalDefaultsSet = "defaults.set"
)

// ProposalTTL is how long a proposal waits for its confirmation.
const ProposalTTL = 10 * time.Minute

// WorkspaceChannel: something the workspace shows changed; the payload is the goal id
// (migration 00060).
const WorkspaceChannel = "loopx_workspace"

// FieldChange is one field of a proposal's diff, before and after, as people read them.
type FieldChange struct {
	Field  string `json:"field"`
	Before string `json:"before"`
	After  string `json:"after"`
}

// Effect is one computed consequence of a change, typed so each surface words it in its
// language: Code names the sentence, Args fill it in.
type Effect struct {
	Code string            `json:"code"`
	Args map[string]string `json:"args,omitempty"`
}

// Proposal is a stored, typed change awaiting confirmation (see package change, which
// computes it).
type Proposal struct {
	ID             int64           `json:"proposal_id"`
	GoalID         string          `json:"goal_id"`
	AgentID        string          `json:"agent_id,omitempty"`
	Kind           string          `json:"kind"`
	Params         json.RawMessage `json:"params"`
	Diff           []FieldChange   `json:"diff"`
	Effects        []Effect        `json:"effects"`
	GoalVersion    int64           `json:"goal_version"`
	Need           Role            `json:"need"` // owner | admin: who may propose and confirm
	State          string          `json:"state"`
	ProposedBy     string          `json:"proposed_by"`
	Surface        string          `json:"surface"`
	DecidedBy      string          `json:"decided_by,omitempty"`
	DecidedAt      *time.Time      `json:"decided_at,omitempty"`
	Reason         string          `json:"reason,omitempty"`
	SuccessorID    int64           `json:"successor_id,omitempty"`
	AppliedVersion int64           `json:"applied_version,omitempty"`
	ExpiresAt      time.Time       `json:"expires_at"`
	CreatedAt      time.Time       `json:"created_at"`
}

// StateAt is the proposal's state as of now: a ready proposal past its expiry reads expired
// even before anything marked it so.
func (p Proposal) StateAt(now time.Time) string {
	if p.State == ProposalReady && !now.Before(p.ExpiresAt) {
		return ProposalExpired
	}
	return p.State
}

// ProposalInsert is a computed proposal to store.
type ProposalInsert struct {
	GoalID      string
	AgentID     string
	Kind        string
	Params      json.RawMessage
	Diff        []FieldChange
	Effects     []Effect
	GoalVersion int64
	Need        Role
	ProposedBy  string
	Surface     string
	Now         time.Time
}

const proposalCols = `id, coalesce(goal_id, ''), agent_id, kind, params, diff, effects, goal_version, need, state,
	proposed_by, surface, decided_by, decided_at, reason, coalesce(successor_id, 0),
	coalesce(applied_version, 0), expires_at, created_at`

func scanProposal(row pgx.Row) (Proposal, error) {
	var p Proposal
	var diff, effects []byte
	err := row.Scan(&p.ID, &p.GoalID, &p.AgentID, &p.Kind, &p.Params, &diff, &effects, &p.GoalVersion,
		&p.Need, &p.State, &p.ProposedBy, &p.Surface, &p.DecidedBy, &p.DecidedAt, &p.Reason,
		&p.SuccessorID, &p.AppliedVersion, &p.ExpiresAt, &p.CreatedAt)
	if err != nil {
		return p, err
	}
	if err := json.Unmarshal(diff, &p.Diff); err != nil {
		return p, fmt.Errorf("decode proposal diff: %w", err)
	}
	if err := json.Unmarshal(effects, &p.Effects); err != nil {
		return p, fmt.Errorf("decode proposal effects: %w", err)
	}
	return p, nil
}

// InsertProposal stores a computed proposal, ready for confirmation until ProposalTTL after
// in.Now.
func InsertProposal(ctx context.Context, db DB, in ProposalInsert) (Proposal, error) {
	if in.Need != RoleOwner && in.Need != RoleAdmin {
		return Proposal{}, Errorf(ErrInvalid, "need", "%q is not owner or admin", in.Need)
	}
	if !surfaces[in.Surface] {
		return Proposal{}, Errorf(ErrInvalid, "surface", "%q is not a surface", in.Surface)
	}
	diff, err := json.Marshal(orEmpty(in.Diff))
	if err != nil {
		return Proposal{}, fmt.Errorf("encode diff: %w", err)
	}
	effects, err := json.Marshal(orEmpty(in.Effects))
	if err != nil {
		return Proposal{}, fmt.Errorf("encode effects: %w", err)
	}
	p, err := scanProposal(db.QueryRow(ctx, `
		INSERT INTO proposal (goal_id, agent_id, kind, params, diff, effects, goal_version, need,
		                      proposed_by, surface, expires_at, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
		RETURNING `+proposalCols,
		nullIfEmpty(in.GoalID), in.AgentID, in.Kind, in.Params, diff, effects, in.GoalVersion, string(in.Need),
		in.ProposedBy, in.Surface, in.Now.Add(ProposalTTL), in.Now))
	if err != nil {
		if in.Kind == ProposalGoalDone && errors.Is(mapErr(err), ErrConflict) {
			return Proposal{}, Errorf(ErrConflict, "kind", "a proposal to finish goal %s already awaits confirmation", in.GoalID)
		}
		return Proposal{}, fmt.Errorf("insert proposal: %w", mapErr(err))
	}
	return p, nil
}

func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// ListDefaultsProposals lists the proposals to change the machine defaults, newest first.
func ListDefaultsProposals(ctx context.Context, db DB, state string, limit int) ([]Proposal, error) {
	if limit <= 0 || limit > 1000 {
		limit = 50
	}
	rows, err := db.Query(ctx, `SELECT `+proposalCols+` FROM proposal
		WHERE goal_id IS NULL AND kind = 'defaults.set' AND ($1 = '' OR state = $1) ORDER BY id DESC LIMIT $2`, state, limit)
	if err != nil {
		return nil, fmt.Errorf("list defaults proposals: %w", mapErr(err))
	}
	return collect(rows, "list defaults proposals", scanProposal)
}

// SetProposalSuccessor records that a stale proposal was replaced by successor.
func SetProposalSuccessor(ctx context.Context, db DB, id, successor int64) (Proposal, error) {
	p, err := scanProposal(db.QueryRow(ctx, `UPDATE proposal SET successor_id = $2 WHERE id = $1 AND state = 'stale'
		RETURNING `+proposalCols, id, successor))
	if err != nil {
		return Proposal{}, fmt.Errorf("record successor: %w", mapErr(err))
	}
	return p, nil
}

// ReadyDoneProposal returns the goal's proposal to finish it that awaits confirmation, if
// any (found false otherwise).
func ReadyDoneProposal(ctx context.Context, db DB, goalID string) (Proposal, bool, error) {
	p, err := scanProposal(db.QueryRow(ctx, `SELECT `+proposalCols+` FROM proposal
		WHERE goal_id = $1 AND kind = 'goal.done' AND state = 'preview_ready'`, goalID))
	if errors.Is(err, pgx.ErrNoRows) {
		return Proposal{}, false, nil
	}
	if err != nil {
		return Proposal{}, false, fmt.Errorf("read done proposal: %w", mapErr(err))
	}
	return p, true, nil
}

// GetProposal reads one proposal; ErrNotFound naming proposal_id when there is none.
func GetProposal(ctx context.Context, db DB, id int64) (Proposal, error) {
	return getProposal(ctx, db, id, false)
}

// LockProposal reads one proposal and locks it until the caller's transaction ends, so two
// confirmations of it cannot both apply.
func LockProposal(ctx context.Context, tx *Tx, id int64) (Proposal, error) {
	return getProposal(ctx, tx, id, true)
}

func getProposal(ctx context.Context, db DB, id int64, forUpdate bool) (Proposal, error) {
	q := `SELECT ` + proposalCols + ` FROM proposal WHERE id = $1`
	if forUpdate {
		q += ` FOR UPDATE`
	}
	p, err := scanProposal(db.QueryRow(ctx, q, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Proposal{}, Errorf(ErrNotFound, "proposal_id", "no proposal p%d", id)
	}
	if err != nil {
		return Proposal{}, fmt.Errorf("read proposal: %w", mapErr(err))
	}
	return p, nil
}

// ListProposals lists a goal's proposals, newest first, at most limit (0 = 50); state ""
// lists every state.
func ListProposals(ctx context.Context, db DB, goalID, state string, limit int) ([]Proposal, error) {
	if limit <= 0 || limit > 1000 {
		limit = 50
	}
	rows, err := db.Query(ctx, `SELECT `+proposalCols+` FROM proposal
		WHERE goal_id = $1 AND ($2 = '' OR state = $2) ORDER BY id DESC LIMIT $3`, goalID, state, limit)
	if err != nil {
		return nil, fmt.Errorf("list proposals: %w", mapErr(err))
	}
	return collect(rows, "list proposals", scanProposal)
}

// SettleProposalParams ends a ready proposal.
type SettleProposalParams struct {
	ID             int64
	State          string // applied | stale | cancelled | expired | refused
	DecidedBy      string
	Reason         string
	SuccessorID    int64
	AppliedVersion int64
	Now            time.Time
}

// SettleProposal moves a ready proposal to its final state. A proposal that is no longer
// ready is ErrConflict: every proposal ends once.
func SettleProposal(ctx context.Context, db DB, p SettleProposalParams) (Proposal, error) {
	if err := checkOneOf("state", p.State, ProposalApplied, ProposalStale, ProposalCancelled, ProposalExpired, ProposalRefused); err != nil {
		return Proposal{}, err
	}
	out, err := scanProposal(db.QueryRow(ctx, `
		UPDATE proposal SET state = $2, decided_by = $3, decided_at = $4, reason = $5,
		       successor_id = nullif($6, 0), applied_version = nullif($7, 0)
		WHERE id = $1 AND state = 'preview_ready'
		RETURNING `+proposalCols,
		p.ID, p.State, p.DecidedBy, p.Now, p.Reason, p.SuccessorID, p.AppliedVersion))
	if errors.Is(err, pgx.ErrNoRows) {
		return Proposal{}, Errorf(ErrConflict, "proposal_id", "proposal p%d is no longer awaiting confirmation", p.ID)
	}
	if err != nil {
		return Proposal{}, fmt.Errorf("settle proposal: %w", mapErr(err))
	}
	return out, nil
}

// LockGoal reads a goal and locks it until the caller's transaction ends (a proposal is
// applied against the version it read).
func LockGoal(ctx context.Context, tx *Tx, id string) (Goal, error) {
	return getGoal(ctx, tx, id, true)
}

// CheckGoal validates every field of a goal as it would be stored, naming the field at fault.
func CheckGoal(g Goal) error { return checkGoal(g) }

// WriteGoal stores every field of g (read with LockGoal in tx), bumping its version. A
// capability the goal no longer grants is taken from its agents too.
func WriteGoal(ctx context.Context, tx *Tx, g Goal, now time.Time) (Goal, error) {
	if err := checkGoal(g); err != nil {
		return Goal{}, err
	}
	if g.Status == GoalDone {
		return Goal{}, Errorf(ErrRefused, "status", "goal %q is done; it cannot change", g.ID)
	}
	if _, err := tx.Exec(ctx, `UPDATE agent SET capabilities = ARRAY(
			SELECT c FROM unnest(capabilities) WITH ORDINALITY AS u(c, n) WHERE c = ANY ($2) ORDER BY n)
		WHERE goal_id = $1 AND NOT capabilities <@ $2`, g.ID, nonNil(g.Capabilities)); err != nil {
		return Goal{}, fmt.Errorf("withdraw capabilities: %w", mapErr(err))
	}
	return writeGoal(ctx, tx, g, now)
}

// SetGoalStatus stops or resumes a goal in tx (see StopGoal, ResumeGoal).
func SetGoalStatus(ctx context.Context, tx *Tx, goalID, status string, now time.Time) (Goal, error) {
	if err := checkOneOf("status", status, GoalActive, GoalStopped); err != nil {
		return Goal{}, err
	}
	return setGoalStatusTx(ctx, tx, goalID, status, now)
}

// AgentSettings are the protected settings of an agent: its runner, work mode and default
// flag.
type AgentSettings struct {
	Runner       string          `json:"runner"`
	RunnerConfig json.RawMessage `json:"runner_config"`
	WorkMode     string          `json:"work_mode"`
	IsDefault    bool            `json:"is_default"`
	// Capabilities granted to the agent; each must be one the goal grants.
	Capabilities []string `json:"capabilities"`
}

// CheckAgentSettings validates agent settings, naming the field at fault.
func CheckAgentSettings(a AgentSettings) error {
	if err := checkOneOf("runner", a.Runner, RunnerExec, RunnerWebhook, RunnerPoll); err != nil {
		return err
	}
	if err := checkOneOf("work_mode", a.WorkMode, "active", "monitor_only"); err != nil {
		return err
	}
	if err := checkJSONObject("runner_config", a.RunnerConfig); err != nil {
		return err
	}
	if err := CheckCapabilities("capabilities", a.Capabilities); err != nil {
		return err
	}
	return checkNoSecretValues(a.Runner, a.RunnerConfig)
}

// checkNoSecretValues refuses runner settings that carry a secret's value (an exec agent's
// env, a webhook's secret). Settings checked here are stored as they are, in a proposal that
// chat and the workspace show and in the agent row, while runner secrets are write-only:
// sealed apart and set only by UpdateAgent.
func checkNoSecretValues(runner string, raw json.RawMessage) error {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil // not an object: checkJSONObject answered it
	}
	key := map[string]string{RunnerExec: "env", RunnerWebhook: "secret"}[runner]
	if v, ok := m[key]; ok {
		switch strings.TrimSpace(string(v)) {
		case "null", "{}", `""`:
		default:
			return Errorf(ErrInvalid, "runner_config."+key, "runner secrets are write-only: set them with `loopx agent update` "+
				"(PATCH /v1/goals/{goal}/agents/{agent}, admin token), not in a change that is stored and shown")
		}
	}
	return nil
}

// LockAgent reads an agent and locks it until the caller's transaction ends.
func LockAgent(ctx context.Context, tx *Tx, goalID, agentID string) (Agent, error) {
	a, err := scanAgent(tx.QueryRow(ctx, `SELECT `+agentCols+` FROM agent WHERE goal_id = $1 AND id = $2 FOR NO KEY UPDATE`, goalID, agentID))
	if errors.Is(err, pgx.ErrNoRows) {
		return Agent{}, Errorf(ErrNotFound, "agent_id", "no agent %q on goal %q", agentID, goalID)
	}
	if err != nil {
		return Agent{}, fmt.Errorf("read agent: %w", mapErr(err))
	}
	return a, nil
}

// SetAgentSettings writes an agent's settings in tx. Making it the default takes the flag from
// the goal's previous default agent.
func SetAgentSettings(ctx context.Context, tx *Tx, goalID, agentID string, a AgentSettings) (Agent, error) {
	if err := CheckAgentSettings(a); err != nil {
		return Agent{}, err
	}
	cfg := a.RunnerConfig
	if len(cfg) == 0 {
		cfg = json.RawMessage(`{}`)
	}
	if a.IsDefault {
		if _, err := tx.Exec(ctx, `UPDATE agent SET is_default = false WHERE goal_id = $1 AND is_default AND id <> $2`, goalID, agentID); err != nil {
			return Agent{}, fmt.Errorf("clear default agent: %w", mapErr(err))
		}
	}
	out, err := scanAgent(tx.QueryRow(ctx, `
		UPDATE agent SET runner = $3, runner_config = $4, work_mode = $5, is_default = $6, capabilities = $7
		WHERE goal_id = $1 AND id = $2 RETURNING `+agentCols, goalID, agentID, a.Runner, cfg, a.WorkMode, a.IsDefault, nonNil(a.Capabilities)))
	if errors.Is(err, pgx.ErrNoRows) {
		return Agent{}, Errorf(ErrNotFound, "agent_id", "no agent %q on goal %q", agentID, goalID)
	}
	if err != nil {
		return Agent{}, fmt.Errorf("update agent: %w", mapErr(err))
	}
	return out, nil
}

// Refuse is the error an operation run by Do returns to refuse: the operation is rolled
// back, its audit row (allowed=false, with detail) is kept, and the caller gets an *Error of
// kind (ErrForbidden or ErrRefused) naming field.
func Refuse(kind error, field, msg, goalID, target string, detail map[string]any) error {
	return refuse(kind, field, msg, goalID, target, detail)
}

// CountOpenGates counts a goal's open gates and its live turns (what a pause leaves waiting).
func CountOpenGates(ctx context.Context, db DB, goalID string, now time.Time) (gates, liveTurns int, err error) {
	err = db.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM gate WHERE goal_id = $1 AND status = 'open'),
		(SELECT count(*) FROM turn WHERE goal_id = $1 AND state = 'live' AND lease_expires_at > $2)`,
		goalID, now).Scan(&gates, &liveTurns)
	if err != nil {
		return 0, 0, fmt.Errorf("count open gates: %w", mapErr(err))
	}
	return gates, liveTurns, nil
}

func orEmpty[T any](v []T) []T {
	if v == nil {
		return []T{}
	}
	return v
}

// AddProposalCard records that outbox row outboxID is a card of the proposal, so the card is
// updated in place when the proposal settles.
func AddProposalCard(ctx context.Context, db DB, proposalID, outboxID int64) error {
	_, err := db.Exec(ctx, `INSERT INTO proposal_card (proposal_id, outbox_id) VALUES ($1, $2)
		ON CONFLICT DO NOTHING`, proposalID, outboxID)
	if err != nil {
		return fmt.Errorf("record proposal card: %w", mapErr(err))
	}
	return nil
}

// ListProposalCards lists the preview cards posted for a proposal, oldest first.
func ListProposalCards(ctx context.Context, db DB, proposalID int64) ([]OutboxRecord, error) {
	return queryOutbox(ctx, db, "list proposal cards", `SELECT `+outboxColumns+` FROM outbox
		WHERE id IN (SELECT outbox_id FROM proposal_card WHERE proposal_id = $1) ORDER BY id`, proposalID)
}
