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
// no longer parses).
type SchedulePlan struct {
	ID   int64
	Fire time.Time
	Run  time.Time
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

// SchedulesToArm locks, in the caller's transaction, up to limit schedules marked rearm (new,
// or their spec, zone or goal state changed), FOR UPDATE SKIP LOCKED so replicas share the
// work. A schedule claimed for firing (ClaimDueSchedules) is left to its claimant until the
// claim is settled or lapses at now.
func SchedulesToArm(ctx context.Context, tx *Tx, now time.Time, limit int) ([]Schedule, error) {
	// Lock the schedule rows alone (in index order, stopping at limit), then join.
	rows, err := tx.Query(ctx, `WITH picked AS (
			SELECT id FROM schedule WHERE rearm AND enabled AND (claimed_by = '' OR next_run_at <= $2)
			ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED)
		SELECT `+scheduleCols+` FROM picked JOIN `+scheduleFrom+` ON true
		WHERE s.id = picked.id ORDER BY s.id`, limit, now)
	if err != nil {
		return nil, fmt.Errorf("select schedules to arm: %w", mapErr(err))
	}
	return scanSchedules(rows)
}

// ArmSchedules writes the next fire of each planned schedule (locked by SchedulesToArm in the
// same transaction) and clears its rearm mark and any lapsed claim.
func ArmSchedules(ctx context.Context, tx *Tx, plans []SchedulePlan) error {
	if len(plans) == 0 {
		return nil
	}
	ids := make([]int64, len(plans))
	fires := make([]*time.Time, len(plans))
	runs := make([]*time.Time, len(plans))
	for i, p := range plans {
		ids[i], fires[i], runs[i] = p.ID, nullTime(p.Fire), nullTime(p.Run)
	}
	if _, err := tx.Exec(ctx, `UPDATE schedule s SET rearm = false, claimed_by = '',
			next_fire_at = p.fire, next_run_at = p.run,
			enabled = s.enabled AND p.fire IS NOT NULL, updated_at = now()
		FROM unnest($1::bigint[], $2::timestamptz[], $3::timestamptz[]) AS p(id, fire, run)
		WHERE s.id = p.id`, ids, fires, runs); err != nil {
		return fmt.Errorf("arm schedules: %w", mapErr(err))
	}
	return nil
}

// ClaimDueSchedules claims up to limit schedules whose run time is at or before now, oldest
// first, for owner, in one statement: each is pushed out of the due index until now + lease
// (its claim) and marked with owner. The claimant decides outside any transaction, then
// settles the claim with SettleSchedules. A claimant that dies leaves its schedules due again
// when the lease lapses; they are then fired at the same fire times, which should-run and
// the tick table's unique key make a replay rather than a second fire.
func (s *Store) ClaimDueSchedules(ctx context.Context, now time.Time, limit int, lease time.Duration, owner string) ([]Schedule, error) {
	if owner == "" || lease <= 0 {
		return nil, Errorf(ErrInvalid, "owner", "a claim needs an owner and a positive lease")
	}
	// Walk schedule_due in next_run_at order, stopping at limit (a sort of every due row
	// would make a backlog slower to drain); lock those rows alone, then join.
	rows, err := s.DB().Query(ctx, `WITH picked AS (
			SELECT id FROM schedule WHERE enabled AND NOT held AND NOT rearm AND next_run_at <= $1
			ORDER BY next_run_at LIMIT $2 FOR UPDATE SKIP LOCKED
		), claimed AS (
			UPDATE schedule c SET next_run_at = $1 + $3 * interval '1 microsecond', claimed_by = $4
			FROM picked WHERE c.id = picked.id
			RETURNING c.*
		)
		SELECT `+scheduleCols+` FROM claimed s JOIN goal g ON g.id = s.goal_id
			LEFT JOIN agent a ON a.goal_id = s.goal_id AND a.id = s.agent_id AND s.kind = 'heartbeat'
		ORDER BY s.next_fire_at, s.id`, now, limit, lease.Microseconds(), owner)
	if err != nil {
		return nil, fmt.Errorf("claim due schedules: %w", mapErr(err))
	}
	return scanSchedules(rows)
}

// ScheduleAdvance moves one schedule past the fire it just handled.
type ScheduleAdvance struct {
	ID         int64
	LastFireAt time.Time
	NextFireAt time.Time // zero with Hold: stopped until resume
	NextRunAt  time.Time
	Hold       bool
}

// SettleSchedules moves each schedule owner still holds a claim on past the fire it handled,
// in the caller's transaction, and returns the ids it moved. A schedule whose claim lapsed
// and was taken by another replica is not moved: its new claimant fires it, so the caller
// must drop its ticks and leave its turn to that claimant.
func SettleSchedules(ctx context.Context, tx *Tx, owner string, adv []ScheduleAdvance) (map[int64]bool, error) {
	owned := map[int64]bool{}
	if len(adv) == 0 {
		return owned, nil
	}
	ids := make([]int64, len(adv))
	last := make([]time.Time, len(adv))
	fires := make([]*time.Time, len(adv))
	runs := make([]*time.Time, len(adv))
	holds := make([]bool, len(adv))
	for i, a := range adv {
		ids[i], last[i], fires[i], runs[i], holds[i] = a.ID, a.LastFireAt, nullTime(a.NextFireAt), nullTime(a.NextRunAt), a.Hold
	}
	rows, err := tx.Query(ctx, `UPDATE schedule s SET last_fire_at = a.last, claimed_by = '',
			next_fire_at = a.fire, next_run_at = a.run, held = a.hold,
			enabled = s.enabled AND (a.fire IS NOT NULL OR a.hold), updated_at = now()
		FROM unnest($1::bigint[], $2::timestamptz[], $3::timestamptz[], $4::timestamptz[], $5::boolean[])
			AS a(id, last, fire, run, hold)
		WHERE s.id = a.id AND s.claimed_by = $6
		RETURNING s.id`, ids, last, fires, runs, holds, owner)
	if err != nil {
		return nil, fmt.Errorf("settle schedules: %w", mapErr(err))
	}
	moved, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("settle schedules: %w", mapErr(err))
	}
	for _, id := range moved {
		owned[id] = true
	}
	return owned, nil
}

// NextWake returns the earliest time any enabled schedule is due (a claim's lapse counts),
// and whether any schedule waits to be armed at now (then the loop should act now). ok is
// false when nothing is scheduled.
func (s *Store) NextWake(ctx context.Context, now time.Time) (at time.Time, rearm bool, ok bool, err error) {
	var next *time.Time
	err = s.DB().QueryRow(ctx, `SELECT
			(SELECT min(next_run_at) FROM schedule WHERE enabled AND NOT held AND NOT rearm),
			EXISTS (SELECT 1 FROM schedule WHERE rearm AND enabled AND (claimed_by = '' OR next_run_at <= $1))`,
		now).Scan(&next, &rearm)
	if err != nil {
		return time.Time{}, false, false, fmt.Errorf("read next wake: %w", mapErr(err))
	}
	if next == nil {
		return time.Time{}, rearm, false, nil
	}
	return *next, rearm, true, nil
}

// ListSchedules lists the schedules of one goal (for /status and tests).
func (s *Store) ListSchedules(ctx context.Context, goalID string) ([]Schedule, error) {
	rows, err := s.DB().Query(ctx, `SELECT `+scheduleCols+` FROM `+scheduleFrom+`
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
