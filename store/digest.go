package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// DigestItem is one line of a digest list.
type DigestItem struct {
	ID     int64  `json:"id"`
	Text   string `json:"text"`
	Agent  string `json:"agent,omitempty"`
	Ref    string `json:"ref,omitempty"`
	Status string `json:"status,omitempty"`
	Detail string `json:"detail,omitempty"` // an answered gate's option, a todo's priority
}

// DigestDay is one day of the chart: turns started and slots spent that day (in the
// report's zone).
type DigestDay struct {
	Day   string `json:"day"` // YYYY-MM-DD
	Turns int    `json:"turns"`
	Slots int    `json:"slots"`
}

// DigestFacts is what happened on a goal in [WindowStart, WindowEnd). Lists are capped;
// the counts are exact.
type DigestFacts struct {
	GoalID         string    `json:"goal_id"`
	GoalTitle      string    `json:"goal_title"`
	Lang           string    `json:"lang"`
	WindowStart    time.Time `json:"window_start"`
	WindowEnd      time.Time `json:"window_end"`
	TodosDone      int       `json:"todos_done"`
	TodosOpened    int       `json:"todos_opened"`
	GatesAsked     int       `json:"gates_asked"`
	GatesAnswerd   int       `json:"gates_answered"`  // approved, rejected or answered with an option
	GatesCancelled int       `json:"gates_cancelled"` // withdrawn by the agent that asked
	GatesOpen      int       `json:"gates_open"`
	Evidence       int       `json:"evidence"`
	TurnsRun       int       `json:"turns_run"`
	TurnsOK        int       `json:"turns_ok"`
	TurnsFailed    int       `json:"turns_failed"`
	Missed         int       `json:"missed"`
	SlotsSpent     int       `json:"slots_spent"`   // in the window
	WindowSpent    int       `json:"window_spent"`  // in the quota's rolling window ending at WindowEnd
	AllowedSlots   int       `json:"allowed_slots"` // per quota window
	WindowHours    int       `json:"window_hours"`

	Done        []DigestItem `json:"done"`
	Opened      []DigestItem `json:"opened"`
	Asked       []DigestItem `json:"asked"`
	Answered    []DigestItem `json:"answered"`
	Cancelled   []DigestItem `json:"cancelled"`
	StillOpen   []DigestItem `json:"still_open"`
	EvidenceTop []DigestItem `json:"evidence_top"`
	NextTodos   []DigestItem `json:"next_todos"` // the open todos the next turns will pick, by priority
	Skipped     []TickCount  `json:"skipped"`    // heartbeat ticks skipped, by reason
	Days        []DigestDay  `json:"days"`
	// QuietSince is the start of the quiet windows just before this one (no digest was sent
	// for them: nothing happened); zero when the window before was not quiet.
	QuietSince time.Time `json:"quiet_since,omitzero"`
}

const digestListCap = 8

// ReadDigestFacts reads what happened on goal in [from, to), inside db (the digest's
// transaction). Days are cut in the zone loc.
func ReadDigestFacts(ctx context.Context, db DB, goalID string, from, to time.Time, loc *time.Location) (DigestFacts, error) {
	f := DigestFacts{GoalID: goalID, WindowStart: from, WindowEnd: to}
	err := db.QueryRow(ctx, `SELECT g.title, g.lang, g.allowed_slots, g.window_hours,
		(SELECT count(*) FROM todo WHERE goal_id = g.id AND done_at >= $2 AND done_at < $3 AND status = 'done'),
		(SELECT count(*) FROM todo WHERE goal_id = g.id AND created_at >= $2 AND created_at < $3),
		(SELECT count(*) FROM gate WHERE goal_id = g.id AND created_at >= $2 AND created_at < $3),
		(SELECT count(*) FROM gate WHERE goal_id = g.id AND answered_at >= $2 AND answered_at < $3 AND status <> 'cancelled'),
		(SELECT count(*) FROM gate WHERE goal_id = g.id AND answered_at >= $2 AND answered_at < $3 AND status = 'cancelled'),
		(SELECT count(*) FROM gate WHERE goal_id = g.id AND created_at < $3
		    AND (status = 'open' OR answered_at >= $3)),
		(SELECT count(*) FROM evidence WHERE goal_id = g.id AND created_at >= $2 AND created_at < $3),
		(SELECT count(*) FROM turn WHERE goal_id = g.id AND started_at >= $2 AND started_at < $3),
		(SELECT count(*) FROM turn WHERE goal_id = g.id AND started_at >= $2 AND started_at < $3 AND state = 'ok'),
		(SELECT count(*) FROM turn WHERE goal_id = g.id AND started_at >= $2 AND started_at < $3 AND state IN ('failed', 'abandoned')),
		(SELECT count(*) FROM tick WHERE schedule_id IN (SELECT id FROM schedule WHERE goal_id = g.id) AND fire_at >= $2 AND fire_at < $3 AND outcome = 'missed'),
		(SELECT coalesce(sum(CASE kind WHEN 'slot_spent' THEN slots ELSE -slots END), 0) FROM quota_ledger
		  WHERE goal_id = g.id AND kind IN ('slot_spent', 'slot_voided') AND created_at >= $2 AND created_at < $3),
		(SELECT coalesce(sum(CASE kind WHEN 'slot_spent' THEN slots ELSE -slots END), 0) FROM quota_ledger
		  WHERE goal_id = g.id AND kind IN ('slot_spent', 'slot_voided')
		    AND created_at >= $3 - g.window_hours * interval '1 hour' AND created_at < $3)
		FROM goal g WHERE g.id = $1`, goalID, from, to).Scan(&f.GoalTitle, &f.Lang, &f.AllowedSlots, &f.WindowHours,
		&f.TodosDone, &f.TodosOpened, &f.GatesAsked, &f.GatesAnswerd, &f.GatesCancelled, &f.GatesOpen, &f.Evidence,
		&f.TurnsRun, &f.TurnsOK, &f.TurnsFailed, &f.Missed, &f.SlotsSpent, &f.WindowSpent)
	if err != nil {
		return f, fmt.Errorf("read digest counts: %w", mapErr(err))
	}
	window := []any{goalID, from, to, digestListCap}
	lists := []struct {
		dst  *[]DigestItem
		sql  string
		args []any
	}{
		{&f.Done, `SELECT id, text, coalesce(claimed_by, ''), '', status, 'P' || priority FROM todo
			WHERE goal_id = $1 AND done_at >= $2 AND done_at < $3 AND status = 'done' ORDER BY done_at, id LIMIT $4`, window},
		{&f.Opened, `SELECT id, text, created_by, '', status, 'P' || priority FROM todo
			WHERE goal_id = $1 AND created_at >= $2 AND created_at < $3 ORDER BY id LIMIT $4`, window},
		{&f.Asked, `SELECT id, question, agent_id, '', status, '' FROM gate
			WHERE goal_id = $1 AND created_at >= $2 AND created_at < $3 ORDER BY id LIMIT $4`, window},
		{&f.Answered, `SELECT id, question, agent_id, '', status, CASE status WHEN 'answered' THEN coalesce(answer, '') ELSE '' END
			FROM gate WHERE goal_id = $1 AND answered_at >= $2 AND answered_at < $3 AND status <> 'cancelled'
			ORDER BY answered_at, id LIMIT $4`, window},
		{&f.Cancelled, `SELECT id, question, agent_id, '', status, '' FROM gate
			WHERE goal_id = $1 AND answered_at >= $2 AND answered_at < $3 AND status = 'cancelled'
			ORDER BY answered_at, id LIMIT $4`, window},
		{&f.StillOpen, `SELECT id, question, agent_id, '', 'open', '' FROM gate
			WHERE goal_id = $1 AND created_at < $2 AND (status = 'open' OR answered_at >= $2)
			ORDER BY id LIMIT $3`, []any{goalID, to, digestListCap}},
		{&f.EvidenceTop, `SELECT id, summary, agent_id, ref, kind, '' FROM evidence
			WHERE goal_id = $1 AND created_at >= $2 AND created_at < $3 ORDER BY id LIMIT $4`, window},
		{&f.NextTodos, `SELECT id, text, coalesce(claimed_by, ''), '', status, 'P' || priority FROM todo
			WHERE goal_id = $1 AND status = 'open' AND role = 'agent' ORDER BY priority, id LIMIT 3`, []any{goalID}},
	}
	for _, l := range lists {
		rows, err := db.Query(ctx, l.sql, l.args...)
		if err != nil {
			return f, fmt.Errorf("read digest list: %w", mapErr(err))
		}
		for rows.Next() {
			var it DigestItem
			if err := rows.Scan(&it.ID, &it.Text, &it.Agent, &it.Ref, &it.Status, &it.Detail); err != nil {
				rows.Close()
				return f, fmt.Errorf("scan digest item: %w", mapErr(err))
			}
			*l.dst = append(*l.dst, it)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return f, fmt.Errorf("read digest list: %w", mapErr(err))
		}
	}
	counts, err := CountTicks(ctx, db, goalID, from, to)
	if err != nil {
		return f, err
	}
	for _, c := range counts {
		if c.Kind == ScheduleHeartbeat && c.Outcome == TickSkipped {
			f.Skipped = append(f.Skipped, c)
		}
	}
	days, err := db.Query(ctx, `WITH d AS (
			SELECT to_char(started_at AT TIME ZONE $4, 'YYYY-MM-DD') AS day, 1 AS turns, 0 AS slots
			  FROM turn WHERE goal_id = $1 AND started_at >= $2 AND started_at < $3
			UNION ALL
			SELECT to_char(created_at AT TIME ZONE $4, 'YYYY-MM-DD'), 0,
			       CASE kind WHEN 'slot_spent' THEN slots ELSE -slots END
			  FROM quota_ledger WHERE goal_id = $1 AND kind IN ('slot_spent', 'slot_voided')
			   AND created_at >= $2 AND created_at < $3)
		SELECT day, sum(turns)::int, sum(slots)::int FROM d GROUP BY day ORDER BY day`, goalID, from, to, loc.String())
	if err != nil {
		return f, fmt.Errorf("read digest days: %w", mapErr(err))
	}
	defer days.Close()
	for days.Next() {
		var d DigestDay
		if err := days.Scan(&d.Day, &d.Turns, &d.Slots); err != nil {
			return f, fmt.Errorf("scan digest day: %w", mapErr(err))
		}
		f.Days = append(f.Days, d)
	}
	if err := days.Err(); err != nil {
		return f, fmt.Errorf("read digest days: %w", mapErr(err))
	}
	return f, nil
}

// LastDigestEnd returns the end of the goal's latest digest window, or the zero time.
func LastDigestEnd(ctx context.Context, db DB, goalID string) (time.Time, error) {
	var at *time.Time
	if err := db.QueryRow(ctx, `SELECT max(window_end) FROM digest WHERE goal_id = $1`, goalID).Scan(&at); err != nil {
		return time.Time{}, fmt.Errorf("read last digest: %w", mapErr(err))
	}
	return deref(at), nil
}

// GoalCreatedAt returns when a goal was created (the start of its first digest window).
func GoalCreatedAt(ctx context.Context, db DB, goalID string) (time.Time, error) {
	var at time.Time
	if err := db.QueryRow(ctx, `SELECT created_at FROM goal WHERE id = $1`, goalID).Scan(&at); err != nil {
		return time.Time{}, fmt.Errorf("read goal: %w", mapErr(err))
	}
	return at, nil
}

// DigestInsert records one digest window.
type DigestInsert struct {
	GoalID      string
	WindowStart time.Time
	WindowEnd   time.Time
	Trigger     string // schedule | manual
	RequestedBy string
	Lang        string
	Facts       DigestFacts
	// Quiet records a window in which nothing happened: no digest was sent for it, but the
	// next one starts where it ended and says how long it was quiet.
	Quiet bool
}

// Nothing tells a window in which nothing new happened on the goal: no turn ran, no todo,
// gate, evidence or spend, no missed fire.
func (f DigestFacts) Nothing() bool {
	return f.TurnsRun == 0 && f.TodosDone == 0 && f.TodosOpened == 0 && f.GatesAsked == 0 && f.GatesAnswerd == 0 &&
		f.GatesCancelled == 0 && f.Evidence == 0 && f.SlotsSpent == 0 && f.Missed == 0
}

// QuietSince is the start of the run of quiet windows that ends at end (the windows no
// digest was sent for, just before the one being sent); zero when the window before end
// was not quiet.
func QuietSince(ctx context.Context, db DB, goalID string, end time.Time) (time.Time, error) {
	var at *time.Time
	err := db.QueryRow(ctx, `
		WITH RECURSIVE run AS (
			SELECT window_start FROM digest WHERE goal_id = $1 AND window_end = $2 AND quiet
			UNION ALL
			SELECT d.window_start FROM digest d JOIN run r ON d.goal_id = $1 AND d.window_end = r.window_start AND d.quiet
		)
		SELECT min(window_start) FROM run`, goalID, end).Scan(&at)
	if err != nil {
		return time.Time{}, fmt.Errorf("read quiet windows: %w", mapErr(err))
	}
	return deref(at), nil
}

// InsertDigest records a digest window in the caller's transaction. created is false when a
// digest for the same (goal, window end) exists already: the caller then sends nothing.
func InsertDigest(ctx context.Context, db DB, d DigestInsert) (id int64, created bool, err error) {
	facts, err := json.Marshal(d.Facts)
	if err != nil {
		return 0, false, fmt.Errorf("encode digest facts: %w", err)
	}
	err = db.QueryRow(ctx, `INSERT INTO digest (goal_id, window_start, window_end, trigger, requested_by, lang, facts, quiet)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (goal_id, window_end) DO NOTHING RETURNING id`,
		d.GoalID, d.WindowStart, d.WindowEnd, d.Trigger, d.RequestedBy, d.Lang, facts, d.Quiet).Scan(&id)
	if err == nil {
		return id, true, nil
	}
	if mapErr(err) == ErrNotFound {
		return 0, false, nil
	}
	return 0, false, fmt.Errorf("insert digest: %w", mapErr(err))
}

// DigestCount counts a goal's digests (tests and /status).
func DigestCount(ctx context.Context, db DB, goalID string) (int, error) {
	var n int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM digest WHERE goal_id = $1`, goalID).Scan(&n); err != nil {
		return 0, fmt.Errorf("count digests: %w", mapErr(err))
	}
	return n, nil
}

// DigestTarget is where a goal's digests go and what they say about the schedule.
type DigestTarget struct {
	TZ            string    // the report schedule's zone (days in the chart are cut there)
	Chats         []string  // bound chats; empty: the owners by direct message
	Owners        []string  // the goal's owners
	HeartbeatNext time.Time // the earliest next heartbeat fire; zero when none is scheduled
}

// ReportSchedule reads a goal's digest target inside db.
func ReportSchedule(ctx context.Context, db DB, goalID string) (DigestTarget, error) {
	var t DigestTarget
	var next *time.Time
	err := db.QueryRow(ctx, `SELECT g.report_tz, g.owners,
			coalesce((SELECT array_agg(DISTINCT b.chat_id) FROM binding b WHERE b.goal_id = g.id), '{}'),
			(SELECT min(s.next_fire_at) FROM schedule s
			  WHERE s.goal_id = g.id AND s.kind = 'heartbeat' AND s.enabled AND NOT s.held)
		FROM goal g WHERE g.id = $1`, goalID).Scan(&t.TZ, &t.Owners, &t.Chats, &next)
	if err != nil {
		return t, fmt.Errorf("read digest target: %w", mapErr(err))
	}
	t.HeartbeatNext = deref(next)
	return t, nil
}
