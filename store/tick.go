package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Tick outcomes.
const (
	TickRan = "ran" // an agent was woken (a turn started) or a digest was written
	// TickDue: the answer was run but LoopX starts nothing: the agent's host polls should-run
	// itself (a poll runner) and learns it at its next poll.
	TickDue     = "due"
	TickSkipped = "skipped"
	TickMissed  = "missed"
)

// Tick is one fire of a schedule: what was decided and what happened.
type Tick struct {
	ID         int64
	ScheduleID int64
	GoalID     string
	AgentID    string
	Kind       string
	FireAt     time.Time
	RunAt      time.Time
	Outcome    string // TickRan, TickDue, TickSkipped, TickMissed
	Reason     string
	CatchUp    bool
	Decision   json.RawMessage // the should-run answer's summary (quota.Summary); {} when none was asked
	TurnID     int64           // 0: no turn
	NextFireAt time.Time       // the fire planned after this one; zero when held or disabled
	Replica    string
	DecidedAt  time.Time
}

// InsertTicks writes tick rows inside the caller's transaction. A row whose (schedule, fire
// time) already exists is left alone; the number of new rows is returned.
func InsertTicks(ctx context.Context, db DB, ticks []Tick) (int64, error) {
	if len(ticks) == 0 {
		return 0, nil
	}
	n := len(ticks)
	sched, turn := make([]int64, n), make([]*int64, n)
	goal, agent, kind, outcome, reason, replica := make([]string, n), make([]string, n), make([]string, n),
		make([]string, n), make([]string, n), make([]string, n)
	fire, run, decided := make([]time.Time, n), make([]time.Time, n), make([]time.Time, n)
	next := make([]*time.Time, n)
	catchUp := make([]bool, n)
	decision := make([]string, n)
	for i, t := range ticks {
		sched[i], goal[i], agent[i], kind[i] = t.ScheduleID, t.GoalID, t.AgentID, t.Kind
		fire[i], run[i], decided[i], next[i] = t.FireAt, t.RunAt, t.DecidedAt, nullTime(t.NextFireAt)
		outcome[i], reason[i], replica[i], catchUp[i] = t.Outcome, t.Reason, t.Replica, t.CatchUp
		if t.TurnID != 0 {
			id := t.TurnID
			turn[i] = &id
		}
		decision[i] = "{}"
		if len(t.Decision) > 0 {
			decision[i] = string(t.Decision)
		}
	}
	tag, err := db.Exec(ctx, `INSERT INTO tick (schedule_id, goal_id, agent_id, kind, fire_at, run_at,
			outcome, reason, catch_up, decision, turn_id, next_fire_at, replica, decided_at)
		SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::timestamptz[],
			$6::timestamptz[], $7::text[], $8::text[], $9::boolean[], $10::jsonb[], $11::bigint[],
			$12::timestamptz[], $13::text[], $14::timestamptz[])
		ON CONFLICT (schedule_id, fire_at) DO NOTHING`,
		sched, goal, agent, kind, fire, run, outcome, reason, catchUp, decision, turn, next, replica, decided)
	if err != nil {
		return 0, fmt.Errorf("insert ticks: %w", mapErr(err))
	}
	return tag.RowsAffected(), nil
}

const tickCols = `id, schedule_id, goal_id, agent_id, kind, fire_at, run_at, outcome, reason, catch_up,
	decision, coalesce(turn_id, 0), next_fire_at, replica, decided_at`

// TicksParams filters TicksByGoal.
type TicksParams struct {
	GoalID  string
	Since   time.Time // fire_at >= Since; zero: all
	Until   time.Time // fire_at < Until; zero: no bound
	Outcome string    // "" any
	Limit   int       // 0: 100
}

// ListTicks lists a goal's ticks, newest fire first. /status shows missed fires with
// Outcome TickMissed.
func (s *Store) ListTicks(ctx context.Context, p TicksParams) ([]Tick, error) {
	if p.Limit <= 0 {
		p.Limit = 100
	}
	rows, err := s.DB().Query(ctx, `SELECT `+tickCols+` FROM tick
		WHERE schedule_id IN (SELECT id FROM schedule WHERE goal_id = $1) AND ($2::timestamptz IS NULL OR fire_at >= $2)
		  AND ($3::timestamptz IS NULL OR fire_at < $3) AND ($4 = '' OR outcome = $4)
		ORDER BY fire_at DESC, id DESC LIMIT $5`,
		p.GoalID, nullTime(p.Since), nullTime(p.Until), p.Outcome, p.Limit)
	if err != nil {
		return nil, fmt.Errorf("list ticks: %w", mapErr(err))
	}
	defer rows.Close()
	var out []Tick
	for rows.Next() {
		var t Tick
		var next *time.Time
		var dec []byte
		if err := rows.Scan(&t.ID, &t.ScheduleID, &t.GoalID, &t.AgentID, &t.Kind, &t.FireAt, &t.RunAt,
			&t.Outcome, &t.Reason, &t.CatchUp, &dec, &t.TurnID, &next, &t.Replica, &t.DecidedAt); err != nil {
			return nil, fmt.Errorf("scan tick: %w", mapErr(err))
		}
		t.Decision, t.NextFireAt = dec, deref(next)
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read ticks: %w", mapErr(err))
	}
	return out, nil
}

// TickCount is the number of a goal's ticks with one outcome and reason.
type TickCount struct {
	Kind    string
	Outcome string
	Reason  string
	Count   int
}

// CountTicks counts a goal's ticks fired in [since, until) by kind, outcome and reason
// (for /status and digests).
func CountTicks(ctx context.Context, db DB, goalID string, since, until time.Time) ([]TickCount, error) {
	rows, err := db.Query(ctx, `SELECT kind, outcome, reason, count(*) FROM tick
		WHERE schedule_id IN (SELECT id FROM schedule WHERE goal_id = $1) AND fire_at >= $2 AND fire_at < $3
		GROUP BY kind, outcome, reason ORDER BY kind, outcome, count(*) DESC, reason`, goalID, since, until)
	if err != nil {
		return nil, fmt.Errorf("count ticks: %w", mapErr(err))
	}
	defer rows.Close()
	var out []TickCount
	for rows.Next() {
		var c TickCount
		if err := rows.Scan(&c.Kind, &c.Outcome, &c.Reason, &c.Count); err != nil {
			return nil, fmt.Errorf("scan tick count: %w", mapErr(err))
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read tick counts: %w", mapErr(err))
	}
	return out, nil
}

// TickStatus is the scheduler's part of /status for one goal.
type TickStatus struct {
	Schedules []Schedule
	Missed24h int  // missed fires in the 24 hours before now
	LastMiss  Tick // the most recent missed fire (zero ID: none)
	Last      Tick // the most recent tick of any outcome (zero ID: none)
}

// ReadTickStatus reads what /status shows about a goal's schedules: next fires, holds, the
// last tick and the missed fires of the last 24 hours.
func (s *Store) ReadTickStatus(ctx context.Context, goalID string, now time.Time) (TickStatus, error) {
	var st TickStatus
	var err error
	if st.Schedules, err = s.ListSchedules(ctx, goalID); err != nil {
		return st, err
	}
	if err := s.DB().QueryRow(ctx, `SELECT count(*) FROM tick
		WHERE schedule_id IN (SELECT id FROM schedule WHERE goal_id = $1) AND outcome = 'missed' AND fire_at >= $2`, goalID, now.Add(-24*time.Hour)).Scan(&st.Missed24h); err != nil {
		return st, fmt.Errorf("count missed ticks: %w", mapErr(err))
	}
	last, err := s.ListTicks(ctx, TicksParams{GoalID: goalID, Limit: 1})
	if err != nil {
		return st, err
	}
	if len(last) > 0 {
		st.Last = last[0]
	}
	miss, err := s.ListTicks(ctx, TicksParams{GoalID: goalID, Outcome: TickMissed, Limit: 1})
	if err != nil {
		return st, err
	}
	if len(miss) > 0 {
		st.LastMiss = miss[0]
	}
	return st, nil
}

// PruneTicks deletes up to limit tick rows fired before `before` (found through the BRIN
// index on fire_at, in no particular order: all of them go) and returns
// how many it deleted. Digests read ticks of their window only, so a retention longer than
// the longest report window loses nothing they show.
func (s *Store) PruneTicks(ctx context.Context, before time.Time, limit int) (int64, error) {
	tag, err := s.DB().Exec(ctx, `DELETE FROM tick WHERE id IN (
		SELECT id FROM tick WHERE fire_at < $1 LIMIT $2)`, before, limit)
	if err != nil {
		return 0, fmt.Errorf("prune ticks: %w", mapErr(err))
	}
	return tag.RowsAffected(), nil
}
