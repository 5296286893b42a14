package store

import (
	"context"
	"fmt"
	"time"
)

// The run index: a goal's turns and should-run decisions, newest first, filtered and paged
// by a cursor (the id of the last row of the previous page).

// RunTurn is one turn as the run index lists it: the turn without its log tail, with the
// text of the todo it worked on, how much evidence it recorded and whether it spent a slot.
type RunTurn struct {
	ID             int64      `json:"turn_id"`
	GoalID         string     `json:"goal_id"`
	AgentID        string     `json:"agent_id"`
	InstanceID     string     `json:"turn_instance_id"`
	SessionID      string     `json:"session_id,omitempty"`
	TodoID         int64      `json:"todo_id,omitempty"`
	TodoText       string     `json:"todo_text,omitempty"`
	Action         string     `json:"action"`
	State          string     `json:"state"` // live | ok | failed | abandoned
	Progress       bool       `json:"progress"`
	Outcome        string     `json:"outcome"`
	Evidence       int        `json:"evidence"`
	Spent          bool       `json:"spent"` // a slot was spent for it
	LeaseExpiresAt time.Time  `json:"lease_expires_at"`
	StartedAt      time.Time  `json:"started_at"`
	EndedAt        *time.Time `json:"ended_at,omitempty"`
}

// ListRunsParams filters ListTurns and ListDecisions. The zero value of each filter matches
// everything.
type ListRunsParams struct {
	GoalID  string
	AgentID string
	States  []string  // turns: live, ok, failed, abandoned; decisions: paused, busy, ...
	Verdict string    // decisions only: run | skip
	Since   time.Time // started (turns) or decided (decisions) at or after
	Until   time.Time // ... and before
	Before  int64     // the cursor: only rows with a smaller id
	Limit   int       // 0 = DefaultRunsLimit; at most MaxRunsLimit
}

// Page sizes of the run index.
const (
	DefaultRunsLimit = 50
	MaxRunsLimit     = 200
)

// Turn states and decision states a run filter accepts.
var (
	turnStates     = []string{TurnLive, TurnOK, TurnFailed, TurnAbandoned, TurnStopped}
	decisionStates = []string{"paused", "busy", "throttled", "inbox", "waiting", "idle", "stalled", "eligible", "held", "stop"}
)

func (p *ListRunsParams) check(states []string) error {
	if err := checkID("goal_id", p.GoalID); err != nil {
		return err
	}
	if p.AgentID != "" {
		if err := checkID("agent_id", p.AgentID); err != nil {
			return err
		}
	}
	for _, s := range p.States {
		if !contains(states, s) {
			return Errorf(ErrInvalid, "state", "%q is not one of %v", clip(s), states)
		}
	}
	if p.Verdict != "" && p.Verdict != "run" && p.Verdict != "skip" {
		return Errorf(ErrInvalid, "decision", "%q is not run or skip", clip(p.Verdict))
	}
	if !p.Since.IsZero() && !p.Until.IsZero() && !p.Since.Before(p.Until) {
		return Errorf(ErrInvalid, "until", "must be after since")
	}
	if p.Before < 0 {
		return Errorf(ErrInvalid, "cursor", "must be a cursor from an earlier answer")
	}
	switch {
	case p.Limit == 0:
		p.Limit = DefaultRunsLimit
	case p.Limit < 0 || p.Limit > MaxRunsLimit:
		return Errorf(ErrInvalid, "limit", "is %d; it must be between 1 and %d", p.Limit, MaxRunsLimit)
	}
	if p.States == nil {
		p.States = []string{}
	}
	return nil
}

// ListTurns lists a goal's turns, newest first, through db. An unknown goal lists nothing
// (the caller decides whether that is an error).
func ListTurns(ctx context.Context, db DB, p ListRunsParams) ([]RunTurn, error) {
	if err := p.check(turnStates); err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, `
		SELECT t.id, t.goal_id, t.agent_id, t.instance_id, t.session_id, coalesce(t.todo_id, 0),
		       coalesce(td.text, ''), t.action, t.state, t.progress, t.outcome,
		       (SELECT count(*)::int FROM evidence e WHERE e.turn_id = t.id),
		       EXISTS (SELECT 1 FROM quota_ledger q WHERE q.turn_id = t.id AND q.kind = 'slot_spent'),
		       t.lease_expires_at, t.started_at, t.ended_at
		FROM turn t LEFT JOIN todo td ON td.id = t.todo_id
		WHERE t.goal_id = $1 AND ($2 = '' OR t.agent_id = $2)
		  AND (cardinality($3::text[]) = 0 OR t.state = ANY ($3))
		  AND ($4::timestamptz IS NULL OR t.started_at >= $4) AND ($5::timestamptz IS NULL OR t.started_at < $5)
		  AND ($6::bigint = 0 OR t.id < $6)
		ORDER BY t.id DESC LIMIT $7`,
		p.GoalID, p.AgentID, p.States, nullTime(p.Since), nullTime(p.Until), p.Before, p.Limit)
	if err != nil {
		return nil, fmt.Errorf("list turns: %w", mapErr(err))
	}
	defer rows.Close()
	out := []RunTurn{}
	for rows.Next() {
		var t RunTurn
		if err := rows.Scan(&t.ID, &t.GoalID, &t.AgentID, &t.InstanceID, &t.SessionID, &t.TodoID, &t.TodoText,
			&t.Action, &t.State, &t.Progress, &t.Outcome, &t.Evidence, &t.Spent, &t.LeaseExpiresAt,
			&t.StartedAt, &t.EndedAt); err != nil {
			return nil, fmt.Errorf("scan turn: %w", mapErr(err))
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list turns: %w", mapErr(err))
	}
	return out, nil
}

// GetTurnByID reads one turn of a goal by its id, log tail included, through db;
// ErrNotFound naming turn_id when the goal has no such turn.
func GetTurnByID(ctx context.Context, db DB, goalID string, id int64) (Turn, error) {
	t, err := scanTurn(db.QueryRow(ctx, `SELECT `+turnCols+` FROM turn WHERE goal_id = $1 AND id = $2`, goalID, id))
	if err != nil {
		if mapErr(err) == ErrNotFound {
			return Turn{}, Errorf(ErrNotFound, "turn_id", "goal %q has no turn %d", goalID, id)
		}
		return Turn{}, fmt.Errorf("read turn: %w", mapErr(err))
	}
	return t, nil
}

// RecordedDecision is one should-run answer as it was recorded (a tick_decision ledger row).
type RecordedDecision struct {
	ID              int64     `json:"decision_id"`
	GoalID          string    `json:"goal_id"`
	AgentID         string    `json:"agent_id"`
	At              time.Time `json:"at"`
	Decision        string    `json:"decision"` // run | skip
	State           string    `json:"state"`
	Reason          string    `json:"reason"`
	EffectiveAction string    `json:"effective_action"`
	TurnInstanceID  string    `json:"turn_instance_id,omitempty"`
	TurnID          int64     `json:"turn_id,omitempty"`
	TodoID          int64     `json:"todo_id,omitempty"`
	Hint            string    `json:"hint,omitempty"`
	IntervalMinutes int       `json:"interval_minutes,omitempty"`
}

const decisionWhere = `q.goal_id = $1 AND q.kind = 'tick_decision' AND ($2 = '' OR q.agent_id = $2)
	AND (cardinality($3::text[]) = 0 OR q.detail->>'state' = ANY ($3))
	AND ($4 = '' OR q.detail->>'decision' = $4)
	AND ($5::timestamptz IS NULL OR q.created_at >= $5) AND ($6::timestamptz IS NULL OR q.created_at < $6)`

// ListDecisions lists a goal's recorded should-run decisions, newest first, through db.
func ListDecisions(ctx context.Context, db DB, p ListRunsParams) ([]RecordedDecision, error) {
	if err := p.check(decisionStates); err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, `
		SELECT q.id, q.goal_id, q.agent_id, q.created_at, coalesce(q.detail->>'decision', ''),
		       coalesce(q.detail->>'state', ''), coalesce(q.detail->>'reason', ''),
		       coalesce(q.detail->>'effective_action', ''), coalesce(q.detail->>'turn_instance_id', ''),
		       coalesce(q.turn_id, 0), coalesce(q.todo_id, 0), coalesce(q.detail->>'hint', ''),
		       coalesce((q.detail->>'interval_minutes')::int, 0)
		FROM quota_ledger q
		WHERE `+decisionWhere+` AND ($7::bigint = 0 OR q.id < $7)
		ORDER BY q.id DESC LIMIT $8`,
		p.GoalID, p.AgentID, p.States, p.Verdict, nullTime(p.Since), nullTime(p.Until), p.Before, p.Limit)
	if err != nil {
		return nil, fmt.Errorf("list decisions: %w", mapErr(err))
	}
	defer rows.Close()
	out := []RecordedDecision{}
	for rows.Next() {
		var d RecordedDecision
		if err := rows.Scan(&d.ID, &d.GoalID, &d.AgentID, &d.At, &d.Decision, &d.State, &d.Reason,
			&d.EffectiveAction, &d.TurnInstanceID, &d.TurnID, &d.TodoID, &d.Hint, &d.IntervalMinutes); err != nil {
			return nil, fmt.Errorf("scan decision: %w", mapErr(err))
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list decisions: %w", mapErr(err))
	}
	return out, nil
}

// DecisionCount is how many of a goal's recorded decisions had one verdict, state and reason.
type DecisionCount struct {
	Decision string `json:"decision"`
	State    string `json:"state"`
	Reason   string `json:"reason"`
	Count    int    `json:"count"`
}

// CountDecisions counts a goal's recorded decisions matching p (its cursor and limit are not
// used) by verdict, state and reason, the most frequent first, through db.
func CountDecisions(ctx context.Context, db DB, p ListRunsParams) ([]DecisionCount, error) {
	p.Before, p.Limit = 0, 0
	if err := p.check(decisionStates); err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, `
		SELECT coalesce(q.detail->>'decision', ''), coalesce(q.detail->>'state', ''),
		       coalesce(q.detail->>'reason', ''), count(*)::int
		FROM quota_ledger q WHERE `+decisionWhere+`
		GROUP BY 1, 2, 3 ORDER BY 4 DESC, 2, 3`,
		p.GoalID, p.AgentID, p.States, p.Verdict, nullTime(p.Since), nullTime(p.Until))
	if err != nil {
		return nil, fmt.Errorf("count decisions: %w", mapErr(err))
	}
	defer rows.Close()
	out := []DecisionCount{}
	for rows.Next() {
		var c DecisionCount
		if err := rows.Scan(&c.Decision, &c.State, &c.Reason, &c.Count); err != nil {
			return nil, fmt.Errorf("scan decision count: %w", mapErr(err))
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count decisions: %w", mapErr(err))
	}
	return out, nil
}
