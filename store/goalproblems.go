package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// GoalProblems is what went wrong for a goal that the chat /status command shows: messages
// about the goal the sender gave up on, and heartbeat fires recorded missed.
type GoalProblems struct {
	Failures     []OutboxFailure // newest first, at most the limit asked for
	FailureTotal int             // every failed outbox row of the goal
	Missed       []Tick          // missed fires since the bound asked for, newest first, at most the limit
	MissedTotal  int             // missed fires since that bound
}

// ReadGoalProblems reads a goal's failed outbox rows (goal_id = goalID) and its ticks recorded
// missed since `since`, the newest `limit` of each with their totals, in one statement on db
// (the caller's transaction, so /status reads one snapshot).
func ReadGoalProblems(ctx context.Context, db DB, goalID string, since time.Time, limit int) (GoalProblems, error) {
	if limit <= 0 {
		return GoalProblems{}, Errorf(ErrInvalid, "limit", "must be positive, got %d", limit)
	}
	var p GoalProblems
	var failed, missed []byte
	err := db.QueryRow(ctx, `
SELECT
  (SELECT count(*) FROM outbox WHERE state = 'failed' AND goal_id = $1),
  (SELECT coalesce(json_agg(f ORDER BY f.id DESC), '[]') FROM (
     SELECT id, kind, receive_id, last_code AS code, last_error AS error, attempts, created_at
     FROM outbox WHERE state = 'failed' AND goal_id = $1 ORDER BY id DESC LIMIT $3) f),
  (SELECT count(*) FROM tick WHERE schedule_id IN (SELECT id FROM schedule WHERE goal_id = $1) AND outcome = 'missed' AND fire_at >= $2),
  (SELECT coalesce(json_agg(m ORDER BY m.fire_at DESC, m.id DESC), '[]') FROM (
     SELECT id, schedule_id, agent_id, kind, fire_at, run_at, reason, replica, decided_at
     FROM tick WHERE schedule_id IN (SELECT id FROM schedule WHERE goal_id = $1) AND outcome = 'missed' AND fire_at >= $2
     ORDER BY fire_at DESC, id DESC LIMIT $3) m)`,
		goalID, since, limit).Scan(&p.FailureTotal, &failed, &p.MissedTotal, &missed)
	if err != nil {
		return GoalProblems{}, fmt.Errorf("read goal problems: %w", mapErr(err))
	}
	var fs []struct {
		ID        int64     `json:"id"`
		Kind      string    `json:"kind"`
		ReceiveID string    `json:"receive_id"`
		Code      int       `json:"code"`
		Error     string    `json:"error"`
		Attempts  int       `json:"attempts"`
		CreatedAt time.Time `json:"created_at"`
	}
	if err := json.Unmarshal(failed, &fs); err != nil {
		return GoalProblems{}, fmt.Errorf("decode failed outbox rows: %w", err)
	}
	for _, f := range fs {
		p.Failures = append(p.Failures, OutboxFailure{ID: f.ID, Kind: f.Kind, ReceiveID: f.ReceiveID, GoalID: goalID,
			Code: f.Code, Error: f.Error, Attempts: f.Attempts, CreatedAt: f.CreatedAt})
	}
	var ms []struct {
		ID         int64     `json:"id"`
		ScheduleID int64     `json:"schedule_id"`
		AgentID    string    `json:"agent_id"`
		Kind       string    `json:"kind"`
		FireAt     time.Time `json:"fire_at"`
		RunAt      time.Time `json:"run_at"`
		Reason     string    `json:"reason"`
		Replica    string    `json:"replica"`
		DecidedAt  time.Time `json:"decided_at"`
	}
	if err := json.Unmarshal(missed, &ms); err != nil {
		return GoalProblems{}, fmt.Errorf("decode missed ticks: %w", err)
	}
	for _, m := range ms {
		p.Missed = append(p.Missed, Tick{ID: m.ID, ScheduleID: m.ScheduleID, GoalID: goalID, AgentID: m.AgentID,
			Kind: m.Kind, FireAt: m.FireAt, RunAt: m.RunAt, Outcome: TickMissed, Reason: m.Reason,
			Replica: m.Replica, DecidedAt: m.DecidedAt})
	}
	return p, nil
}
