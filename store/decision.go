package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Kinds of a goal's decisions (its trail).
const (
	DecisionReplan = "replan" // the objective changed
	DecisionDone   = "done"   // the goal was finished
	DecisionReopen = "reopen" // a done goal was reopened
)

// GoalDecision is one entry of a goal's trail: who decided what, why, and the goal version
// it made. Written in the transaction that applied the change; never changed.
type GoalDecision struct {
	ID          int64           `json:"decision_id"`
	GoalID      string          `json:"goal_id"`
	Kind        string          `json:"kind"`
	ProposalID  int64           `json:"proposal_id,omitempty"`
	GoalVersion int64           `json:"goal_version"`
	Before      string          `json:"before"`
	After       string          `json:"after"`
	Reason      string          `json:"reason"`
	Detail      json.RawMessage `json:"detail"`
	ProposedBy  string          `json:"proposed_by"`
	DecidedBy   string          `json:"decided_by"`
	CreatedAt   time.Time       `json:"created_at"`
}

const decisionCols = `id, goal_id, kind, coalesce(proposal_id, 0), goal_version, before, after, reason, detail,
	proposed_by, decided_by, created_at`

func scanDecision(row pgx.Row) (GoalDecision, error) {
	var d GoalDecision
	err := row.Scan(&d.ID, &d.GoalID, &d.Kind, &d.ProposalID, &d.GoalVersion, &d.Before, &d.After, &d.Reason,
		&d.Detail, &d.ProposedBy, &d.DecidedBy, &d.CreatedAt)
	return d, err
}

// InsertDecision records d in the caller's transaction (its ID and CreatedAt are set).
func InsertDecision(ctx context.Context, tx DB, d GoalDecision, now time.Time) (GoalDecision, error) {
	if len(d.Detail) == 0 {
		d.Detail = json.RawMessage(`{}`)
	}
	var proposal any
	if d.ProposalID != 0 {
		proposal = d.ProposalID
	}
	out, err := scanDecision(tx.QueryRow(ctx, `
		INSERT INTO goal_decision (goal_id, kind, proposal_id, goal_version, before, after, reason, detail,
		                           proposed_by, decided_by, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING `+decisionCols,
		d.GoalID, d.Kind, proposal, d.GoalVersion, d.Before, d.After, d.Reason, d.Detail, d.ProposedBy, d.DecidedBy, now))
	if err != nil {
		return GoalDecision{}, fmt.Errorf("record decision: %w", mapErr(err))
	}
	return out, nil
}

func getDecision(ctx context.Context, db DB, goalID string, id int64) (GoalDecision, error) {
	d, err := scanDecision(db.QueryRow(ctx, `SELECT `+decisionCols+` FROM goal_decision WHERE id = $1 AND goal_id = $2`, id, goalID))
	if errors.Is(err, pgx.ErrNoRows) {
		return GoalDecision{}, Errorf(ErrNotFound, "decision_id", "no decision %d on goal %s", id, goalID)
	}
	if err != nil {
		return GoalDecision{}, fmt.Errorf("read decision: %w", mapErr(err))
	}
	return d, nil
}

// ListTrail lists a goal's decisions, newest first, at most limit (0: 100).
func ListTrail(ctx context.Context, db DB, goalID string, limit int) ([]GoalDecision, error) {
	n, err := listLimit(limit)
	if err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, `SELECT `+decisionCols+` FROM goal_decision WHERE goal_id = $1 ORDER BY id DESC LIMIT $2`, goalID, n)
	if err != nil {
		return nil, fmt.Errorf("list decisions: %w", mapErr(err))
	}
	return collect(rows, "list decisions", scanDecision)
}

// ListTrail lists a goal's decisions, newest first.
func (s *Store) ListTrail(ctx context.Context, goalID string, limit int) ([]GoalDecision, error) {
	if err := checkID("goal_id", goalID); err != nil {
		return nil, err
	}
	return ListTrail(ctx, s.DB(), goalID, limit)
}

// FinishGoal marks goal done in tx (locked by LockGoal): its heartbeats and reports stop (the
// schedule trigger), should-run answers done, and its open gates are cancelled (notice
// renders each gate's card update) since no turn will act on their answers. Todos stay as
// they are. Returns the goal and the gates it cancelled.
func FinishGoal(ctx context.Context, tx DB, g Goal, notice NoticeFunc, now time.Time) (Goal, []Gate, error) {
	if g.Status == GoalDone {
		return Goal{}, nil, because(ReasonGoalDone, Errorf(ErrRefused, "status", "goal %s is already done", g.ID))
	}
	open, err := ListOpenGates(ctx, tx, g.ID)
	if err != nil {
		return Goal{}, nil, err
	}
	var cancelled []Gate
	for _, gt := range open {
		out, err := closeGate(ctx, tx, gt, GateCancelled, "", "", "", now)
		if err != nil {
			return Goal{}, nil, err
		}
		if err := gateNotice(ctx, tx, notice, out); err != nil {
			return Goal{}, nil, err
		}
		cancelled = append(cancelled, out)
	}
	g.Status = GoalDone
	out, err := writeGoal(ctx, tx, g, now)
	return out, cancelled, err
}

// ReopenGoal makes a done goal active again in tx: its schedules are armed again.
func ReopenGoal(ctx context.Context, tx DB, g Goal, now time.Time) (Goal, error) {
	if g.Status != GoalDone {
		return Goal{}, Errorf(ErrRefused, "status", "goal %s is not done; there is nothing to reopen", g.ID)
	}
	g.Status = GoalActive
	return writeGoal(ctx, tx, g, now)
}

// CompletionFacts is what a proposal to finish a goal lists: its unmet criteria and what is
// still open.
type CompletionFacts struct {
	Criteria  []CriterionStatus
	OpenTodos []Todo // open or blocked, by priority
	OpenGates []Gate
	LiveTurns int
}

// ReadCompletion reads the completion facts of goal g through db.
func ReadCompletion(ctx context.Context, db DB, g Goal, now time.Time) (CompletionFacts, error) {
	var f CompletionFacts
	var err error
	if f.Criteria, err = CriteriaStatus(ctx, db, g.ID, 0, g.Criteria); err != nil {
		return f, err
	}
	rows, err := db.Query(ctx, `SELECT `+todoCols+` FROM todo WHERE goal_id = $1 AND status IN ('open', 'blocked')
		ORDER BY priority, id LIMIT 50`, g.ID)
	if err != nil {
		return f, fmt.Errorf("read open todos: %w", mapErr(err))
	}
	if f.OpenTodos, err = collect(rows, "read open todos", scanTodo); err != nil {
		return f, err
	}
	if f.OpenGates, err = ListOpenGates(ctx, db, g.ID); err != nil {
		return f, err
	}
	if _, f.LiveTurns, err = CountOpenGates(ctx, db, g.ID, now); err != nil {
		return f, err
	}
	return f, nil
}

// CompletionDue tells whether goal g's work looks complete, so LoopX proposes to finish it:
// it has todos and none is open or blocked, no gate is open, every goal criterion is met, and
// no proposal to finish it was made since the last change to its todos, evidence or gates
// (an owner who cancelled one is not asked again until something changes).
func CompletionDue(ctx context.Context, db DB, g Goal) (bool, error) {
	if g.Status != GoalActive {
		return false, nil
	}
	var due bool
	err := db.QueryRow(ctx, `
		WITH last AS (SELECT greatest(
			(SELECT max(updated_at) FROM todo WHERE goal_id = $1),
			(SELECT max(created_at) FROM evidence WHERE goal_id = $1),
			(SELECT max(coalesce(answered_at, created_at)) FROM gate WHERE goal_id = $1)) AS at)
		SELECT EXISTS (SELECT 1 FROM todo WHERE goal_id = $1)
		   AND NOT EXISTS (SELECT 1 FROM todo WHERE goal_id = $1 AND status IN ('open', 'blocked'))
		   AND NOT EXISTS (SELECT 1 FROM gate WHERE goal_id = $1 AND status = 'open')
		   AND NOT EXISTS (SELECT 1 FROM proposal, last WHERE goal_id = $1 AND kind = 'goal.done'
		                   AND (state = 'preview_ready' OR created_at >= last.at))`, g.ID).Scan(&due)
	if err != nil || !due {
		if err != nil {
			err = fmt.Errorf("read completion: %w", mapErr(err))
		}
		return false, err
	}
	st, err := CriteriaStatus(ctx, db, g.ID, 0, g.Criteria)
	if err != nil {
		return false, err
	}
	return len(Unmet(st)) == 0, nil
}

// CheckReason checks the reason a person gives for a decision.
func CheckReason(reason string) error { return checkText("reason", reason, 2000, false) }
