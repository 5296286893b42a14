package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Schedule kinds.
const (
	ScheduleHeartbeat = "heartbeat"
	ScheduleReport    = "report"
)

// ScheduleChannel is the LISTEN/NOTIFY channel the schedule triggers signal on.
const ScheduleChannel = "loopx_schedule"

// Schedule is one cron schedule of a goal (the report) or of a goal×agent (the heartbeat),
// with what the scheduler needs to act on it.
type Schedule struct {
	ID         int64
	GoalID     string
	AgentID    string // "" for the report schedule
	Kind       string // ScheduleHeartbeat or ScheduleReport
	Spec       string
	TZ         string
	Enabled    bool
	Held       bool      // stopped until an explicit resume
	NextFireAt time.Time // zero: not armed yet
	NextRunAt  time.Time
	LastFireAt time.Time // zero: never fired

	GoalStatus   string
	GoalLang     string
	Runner       string          // the agent's runner (heartbeat only)
	RunnerConfig json.RawMessage // the agent's runner settings (heartbeat only)
}

// SchedulePlan is where a schedule fires next. A zero Fire disables the schedule (its spec
// no longer parses); Err says why, for the log.
type SchedulePlan struct {
	ID   int64
	Fire time.Time
	Run  time.Time
	Err  error
}

const scheduleCols = `s.id, s.goal_id, s.agent_id, s.kind, s.spec, s.tz, s.enabled, s.held,
	s.next_fire_at, s.next_run_at, s.last_fire_at,
	g.status, g.lang, coalesce(a.runner, ''), coalesce(a.runner_config, '{}'::jsonb)`

const scheduleFrom = `schedule s JOIN goal g ON g.id = s.goal_id
	LEFT JOIN agent a ON a.goal_id = s.goal_id AND a.id = s.agent_id AND s.kind = 'heartbeat'`

func scanSchedules(rows pgx.Rows) ([]Schedule, error) {
	defer rows.Close()
	var out []Schedule
	for rows.Next() {
		var s Schedule
		var next, run, last *time.Time
		var cfg []byte
		if err := rows.Scan(&s.ID, &s.GoalID, &s.AgentID, &s.Kind, &s.Spec, &s.TZ, &s.Enabled, &s.Held,
			&next, &run, &last, &s.GoalStatus, &s.GoalLang, &s.Runner, &cfg); err != nil {
			return nil, fmt.Errorf("scan schedule: %w", mapErr(err))
		}
		s.NextFireAt, s.NextRunAt, s.LastFireAt = deref(next), deref(run), deref(last)
		s.RunnerConfig = cfg
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read schedules: %w", mapErr(err))
	}
	return out, nil
}

func deref(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// ArmSchedules computes the next fire of up to limit schedules marked rearm (new, or their
// spec, zone or goal state changed). plan runs inside the transaction with the rows locked
// (FOR UPDATE SKIP LOCKED, so replicas share the work). It returns how many rows it armed.
func (s *Store) ArmSchedules(ctx context.Context, limit int, plan func([]Schedule) []SchedulePlan) (int, error) {
	n := 0
	err := s.WithTx(ctx, func(tx pgx.Tx) error {
		// Lock the schedule rows alone (in index order, stopping at limit), then join.
		rows, err := tx.Query(ctx, `WITH picked AS (
				SELECT id FROM schedule WHERE rearm AND enabled ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED)
			SELECT `+scheduleCols+` FROM picked JOIN `+scheduleFrom+` ON true
			WHERE s.id = picked.id ORDER BY s.id`, limit)
		if err != nil {
			return fmt.Errorf("select schedules to arm: %w", mapErr(err))
		}
		list, err := scanSchedules(rows)
		if err != nil {
			return err
		}
		if len(list) == 0 {
			return nil
		}
		plans := plan(list)
		ids := make([]int64, len(plans))
		fires := make([]*time.Time, len(plans))
		runs := make([]*time.Time, len(plans))
		for i, p := range plans {
			ids[i], fires[i], runs[i] = p.ID, nullTime(p.Fire), nullTime(p.Run)
		}
		if _, err := tx.Exec(ctx, `UPDATE schedule s SET rearm = false,
				next_fire_at = p.fire, next_run_at = p.run,
				enabled = s.enabled AND p.fire IS NOT NULL, updated_at = now()
			FROM unnest($1::bigint[], $2::timestamptz[], $3::timestamptz[]) AS p(id, fire, run)
			WHERE s.id = p.id`, ids, fires, runs); err != nil {
			return fmt.Errorf("arm schedules: %w", mapErr(err))
		}
		n = len(plans)
		return nil
	})
	return n, err
}

// ProcessDueSchedules locks up to limit schedules whose next run time is at or before now
// (FOR UPDATE SKIP LOCKED: each due schedule is handled by one replica) and calls fn with
// them inside the transaction. fn records the ticks (InsertTicks) and moves each schedule on
// (AdvanceSchedules) through tx; everything commits together, so a replica that dies in fn
// leaves the schedules due for another one. It returns how many schedules were handled.
func (s *Store) ProcessDueSchedules(ctx context.Context, now time.Time, limit int,
	fn func(tx pgx.Tx, due []Schedule) error) (int, error) {
	n := 0
	err := s.WithTx(ctx, func(tx pgx.Tx) error {
		// Lock the due rows alone, walking schedule_due in next_run_at order and stopping at
		// limit (a sort of every due row would make a backlog slower to drain), then join.
		rows, err := tx.Query(ctx, `WITH picked AS (
				SELECT id FROM schedule WHERE enabled AND NOT held AND NOT rearm AND next_run_at <= $1
				ORDER BY next_run_at LIMIT $2 FOR UPDATE SKIP LOCKED)
			SELECT `+scheduleCols+` FROM picked JOIN `+scheduleFrom+` ON true
			WHERE s.id = picked.id ORDER BY s.next_run_at, s.id`, now, limit)
		if err != nil {
			return fmt.Errorf("claim due schedules: %w", mapErr(err))
		}
		list, err := scanSchedules(rows)
		if err != nil {
			return err
		}
		if len(list) == 0 {
			return nil
		}
		n = len(list)
		return fn(tx, list)
	})
	return n, err
}

// ScheduleAdvance moves one schedule past the fire it just handled.
type ScheduleAdvance struct {
	ID         int64
	LastFireAt time.Time
	NextFireAt time.Time // zero with Hold: stopped until resume
	NextRunAt  time.Time
	Hold       bool
}

// AdvanceSchedules writes the new next fire of each schedule, inside the caller's transaction.
func AdvanceSchedules(ctx context.Context, db DB, adv []ScheduleAdvance) error {
	if len(adv) == 0 {
		return nil
	}
	ids := make([]int64, len(adv))
	last := make([]time.Time, len(adv))
	fires := make([]*time.Time, len(adv))
	runs := make([]*time.Time, len(adv))
	holds := make([]bool, len(adv))
	for i, a := range adv {
		ids[i], last[i], fires[i], runs[i], holds[i] = a.ID, a.LastFireAt, nullTime(a.NextFireAt), nullTime(a.NextRunAt), a.Hold
	}
	if _, err := db.Exec(ctx, `UPDATE schedule s SET last_fire_at = a.last,
			next_fire_at = a.fire, next_run_at = a.run, held = a.hold,
			enabled = s.enabled AND (a.fire IS NOT NULL OR a.hold), updated_at = now()
		FROM unnest($1::bigint[], $2::timestamptz[], $3::timestamptz[], $4::timestamptz[], $5::boolean[])
			AS a(id, last, fire, run, hold)
		WHERE s.id = a.id`, ids, last, fires, runs, holds); err != nil {
		return fmt.Errorf("advance schedules: %w", mapErr(err))
	}
	return nil
}

// NextWake returns the earliest time any enabled schedule is due, and whether any schedule
// waits to be armed (then the loop should act now). ok is false when nothing is scheduled.
func (s *Store) NextWake(ctx context.Context) (at time.Time, rearm bool, ok bool, err error) {
	var next *time.Time
	err = s.pool.QueryRow(ctx, `SELECT
			(SELECT min(next_run_at) FROM schedule WHERE enabled AND NOT held AND NOT rearm),
			EXISTS (SELECT 1 FROM schedule WHERE rearm AND enabled)`).Scan(&next, &rearm)
	if err != nil {
		return time.Time{}, false, false, fmt.Errorf("read next wake: %w", mapErr(err))
	}
	if next == nil {
		return time.Time{}, rearm, false, nil
	}
	return *next, rearm, true, nil
}

// ScheduleByGoal lists the schedules of one goal (for /status and tests).
func (s *Store) ScheduleByGoal(ctx context.Context, goalID string) ([]Schedule, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+scheduleCols+` FROM `+scheduleFrom+`
		WHERE s.goal_id = $1 ORDER BY s.kind, s.agent_id`, goalID)
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", mapErr(err))
	}
	return scanSchedules(rows)
}

// ResumeSchedules clears the hold on a goal's heartbeats (stop_until_explicit_resume) and
// has them re-armed. The goal's own resume already does this through the trigger; this is
// for a resume that does not change the goal row.
func ResumeSchedules(ctx context.Context, db DB, goalID string) error {
	if _, err := db.Exec(ctx, `UPDATE schedule SET held = false, rearm = true, updated_at = now()
		WHERE goal_id = $1 AND held`, goalID); err != nil {
		return fmt.Errorf("resume schedules: %w", mapErr(err))
	}
	if _, err := db.Exec(ctx, `SELECT pg_notify($1, $2)`, ScheduleChannel, goalID); err != nil {
		return fmt.Errorf("notify schedule change: %w", mapErr(err))
	}
	return nil
}

// RelaxCommit lets the caller's transaction commit without waiting for the WAL flush
// (synchronous_commit off for this transaction only). Use it only where losing the commit in
// a database crash is harmless because the work would be redone identically.
func RelaxCommit(ctx context.Context, db DB) error {
	if _, err := db.Exec(ctx, `SET LOCAL synchronous_commit TO off`); err != nil {
		return fmt.Errorf("relax commit: %w", mapErr(err))
	}
	return nil
}
