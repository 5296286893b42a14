package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// The workspace's goals list and turn page.

// GoalListParams filters and orders the goals list. The zero value lists every goal the
// person may see, what needs them first.
type GoalListParams struct {
	Status string // "" every status, else active | stopped | done
	Needs  bool   // only goals with an open gate or a change awaiting confirmation
	Query  string // a part of the goal's id or title, any case
	Sort   string // GoalSortNeeds (default) | GoalSortName | GoalSortRecent
	Offset int
	Limit  int // 0 = GoalListPage; at most 500
}

// Orders of the goals list.
const (
	GoalSortNeeds  = "needs"  // open gates and changes awaiting confirmation first, then by id
	GoalSortName   = "name"   // by id
	GoalSortRecent = "recent" // last changed first
)

// GoalListPage is how many goals one page of the list shows.
const GoalListPage = 100

// GoalRow is one goal of the list: its state, what needs people on it, quota used, the live
// turn and the next heartbeat and report.
type GoalRow struct {
	ID           string     `json:"id"`
	Title        string     `json:"title"`
	Status       string     `json:"status"`
	Role         Role       `json:"role"`
	Gates        int        `json:"open_gates"`
	Proposals    int        `json:"proposals_ready"`
	Spent        int        `json:"spent"`
	AllowedSlots int        `json:"allowed_slots"`
	WindowHours  int        `json:"window_hours"`
	LiveAgent    string     `json:"live_agent,omitempty"`
	LiveTurnID   int64      `json:"live_turn_id,omitempty"`
	LiveSince    *time.Time `json:"live_since,omitempty"`
	NextBeat     *time.Time `json:"next_heartbeat,omitempty"`
	BeatTZ       string     `json:"heartbeat_tz"`
	NextReport   *time.Time `json:"next_report,omitempty"`
	ReportTZ     string     `json:"report_tz"`
	UpdatedAt    time.Time  `json:"updated_at"`
}

// GoalList is one page of the goals list: its rows and how many goals match in all.
type GoalList struct {
	Rows  []GoalRow
	Total int
}

// goalListSQL reads one page in one statement. The goals the person may see (loopx_role,
// never re-implemented) and the two counts that order them (open gates, ready proposals:
// small sets read through their partial indexes) are computed for every goal; the costly
// columns (quota spent, the live turn, the next fires) only for the page's rows, through
// LATERAL reads on their indexes. That keeps the list fast at 10,000 goals.
const goalListSQL = `WITH v AS MATERIALIZED (
	SELECT g.id, g.title, g.status, g.allowed_slots, g.window_hours, g.heartbeat_tz, g.report_tz, g.updated_at,
	       loopx_role(g.owners, g.members, $1, $2) AS role
	FROM goal g
	WHERE loopx_role(g.owners, g.members, $1, $2) <> 'stranger'
	  AND ($3 = '' OR g.status = $3)
	  AND ($4 = '' OR strpos(lower(g.id || ' ' || g.title), lower($4)) > 0)),
gates AS (SELECT goal_id, count(*) AS n FROM gate WHERE status = 'open' GROUP BY goal_id),
props AS (SELECT goal_id, count(*) AS n FROM proposal WHERE state = 'preview_ready' AND expires_at > $5 GROUP BY goal_id),
m AS MATERIALIZED (
	SELECT v.*, coalesce(gates.n, 0)::int AS gates, coalesce(props.n, 0)::int AS props
	FROM v LEFT JOIN gates ON gates.goal_id = v.id LEFT JOIN props ON props.goal_id = v.id
	WHERE NOT $6 OR gates.n > 0 OR props.n > 0),
page AS (
	SELECT * FROM m
	ORDER BY CASE WHEN $7 = 'needs' THEN -(gates + props) ELSE 0 END,
	         CASE WHEN $7 = 'recent' THEN updated_at END DESC, id
	OFFSET $8 LIMIT $9)
SELECT (SELECT count(*) FROM m), p.id, p.title, p.status, p.role, p.gates, p.props, p.allowed_slots, p.window_hours,
       p.heartbeat_tz, p.report_tz, p.updated_at,
       coalesce((SELECT sum(q.slots) FROM quota_ledger q WHERE q.goal_id = p.id AND q.kind = 'slot_spent'
                 AND q.created_at > $5 - make_interval(hours => p.window_hours) AND q.created_at <= $5), 0)::int,
       lt.agent_id, lt.id, lt.started_at,
       (SELECT min(s.next_fire_at) FROM schedule s WHERE s.goal_id = p.id AND s.kind = 'heartbeat' AND s.enabled AND NOT s.held),
       (SELECT min(s.next_fire_at) FROM schedule s WHERE s.goal_id = p.id AND s.kind = 'report' AND s.enabled AND NOT s.held)
FROM page p
LEFT JOIN LATERAL (SELECT t.agent_id, t.id, t.started_at FROM turn t
                   WHERE t.goal_id = p.id AND t.state = 'live' AND t.lease_expires_at > $5
                   ORDER BY t.started_at LIMIT 1) lt ON true
ORDER BY CASE WHEN $7 = 'needs' THEN -(p.gates + p.props) ELSE 0 END,
         CASE WHEN $7 = 'recent' THEN p.updated_at END DESC, p.id`

// ListGoalRows reads one page of the goals who may see at now.
func ListGoalRows(ctx context.Context, db DB, who Person, p GoalListParams, now time.Time) (GoalList, error) {
	switch p.Status {
	case "", "active", "stopped", "done":
	default:
		return GoalList{}, Errorf(ErrInvalid, "status", "%q is not active, stopped or done", p.Status)
	}
	switch p.Sort {
	case "":
		p.Sort = GoalSortNeeds
	case GoalSortNeeds, GoalSortName, GoalSortRecent:
	default:
		return GoalList{}, Errorf(ErrInvalid, "sort", "%q is not needs, name or recent", p.Sort)
	}
	if p.Limit <= 0 || p.Limit > 500 {
		p.Limit = GoalListPage
	}
	p.Offset = max(p.Offset, 0)
	if p.Query = strings.TrimSpace(p.Query); len([]rune(p.Query)) > 200 {
		return GoalList{}, Errorf(ErrInvalid, "q", "is longer than 200 characters")
	}
	rows, err := db.Query(ctx, goalListSQL, who.OpenID, who.Admin, p.Status, p.Query, now, p.Needs, p.Sort, p.Offset, p.Limit)
	if err != nil {
		return GoalList{}, fmt.Errorf("list goals: %w", mapErr(err))
	}
	defer rows.Close()
	var out GoalList
	for rows.Next() {
		var r GoalRow
		var agent *string
		var turnID *int64
		if err := rows.Scan(&out.Total, &r.ID, &r.Title, &r.Status, &r.Role, &r.Gates, &r.Proposals, &r.AllowedSlots,
			&r.WindowHours, &r.BeatTZ, &r.ReportTZ, &r.UpdatedAt, &r.Spent, &agent, &turnID, &r.LiveSince,
			&r.NextBeat, &r.NextReport); err != nil {
			return GoalList{}, fmt.Errorf("scan goal row: %w", mapErr(err))
		}
		if agent != nil {
			r.LiveAgent = *agent
		}
		if turnID != nil {
			r.LiveTurnID = *turnID
		}
		out.Rows = append(out.Rows, r)
	}
	if err := rows.Err(); err != nil {
		return GoalList{}, fmt.Errorf("list goals: %w", mapErr(err))
	}
	if len(out.Rows) == 0 && p.Offset > 0 {
		// Past the last page: the total still tells how many there are.
		if err := db.QueryRow(ctx, `SELECT count(*) FROM goal g WHERE loopx_role(g.owners, g.members, $1, $2) <> 'stranger'
			AND ($3 = '' OR g.status = $3)`, who.OpenID, who.Admin, p.Status).Scan(&out.Total); err != nil {
			return GoalList{}, fmt.Errorf("count goals: %w", mapErr(err))
		}
	}
	return out, nil
}

// TurnPage is everything the workspace's page of one turn shows: the turn with its log tail,
// the should-run decision that opened it, its todo, the evidence it recorded and its spend.
type TurnPage struct {
	Turn     Turn
	Decision *RecordedDecision // nil when the turn was opened without a recorded decision
	Todo     *Todo
	Evidence []Evidence
	Handoff  string     // the next action the turn left for the next one (refresh-state), "" if none
	Spent    int        // slots spent for it (0 or 1, voided spends excluded)
	SpentAt  *time.Time // when
	Prev     int64      // the agent's turn before this one, 0 if none
	Next     int64      // and after
}

// ReadTurnPage reads turn id of goalID; ErrNotFound when the goal has no such turn.
func ReadTurnPage(ctx context.Context, db DB, goalID string, id int64) (TurnPage, error) {
	var p TurnPage
	var err error
	if p.Turn, err = GetTurnByID(ctx, db, goalID, id); err != nil {
		return TurnPage{}, err
	}
	t := p.Turn
	ds, err := db.Query(ctx, `
		SELECT q.id, q.goal_id, q.agent_id, q.created_at, coalesce(q.detail->>'decision', ''),
		       coalesce(q.detail->>'state', ''), coalesce(q.detail->>'reason', ''),
		       coalesce(q.detail->>'effective_action', ''), coalesce(q.detail->>'turn_instance_id', ''),
		       coalesce(q.turn_id, 0), coalesce(q.todo_id, 0), coalesce(q.detail->>'hint', ''),
		       coalesce((q.detail->>'interval_minutes')::int, 0)
		FROM quota_ledger q
		WHERE q.turn_id = $1 AND q.kind = 'tick_decision' ORDER BY q.id LIMIT 1`, t.ID)
	if err != nil {
		return TurnPage{}, fmt.Errorf("read turn decision: %w", mapErr(err))
	}
	for ds.Next() {
		var d RecordedDecision
		if err := ds.Scan(&d.ID, &d.GoalID, &d.AgentID, &d.At, &d.Decision, &d.State, &d.Reason,
			&d.EffectiveAction, &d.TurnInstanceID, &d.TurnID, &d.TodoID, &d.Hint, &d.IntervalMinutes); err != nil {
			ds.Close()
			return TurnPage{}, fmt.Errorf("scan turn decision: %w", mapErr(err))
		}
		p.Decision = &d
	}
	ds.Close()
	if err := ds.Err(); err != nil {
		return TurnPage{}, fmt.Errorf("read turn decision: %w", mapErr(err))
	}
	if t.TodoID != 0 {
		td, err := getTodo(ctx, db, goalID, t.TodoID, false)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return TurnPage{}, err
		}
		if err == nil {
			p.Todo = &td
		}
	}
	rows, err := db.Query(ctx, `SELECT `+evidenceCols+` FROM evidence WHERE turn_id = $1 ORDER BY id LIMIT 200`, t.ID)
	if err != nil {
		return TurnPage{}, fmt.Errorf("read turn evidence: %w", mapErr(err))
	}
	if p.Evidence, err = collect(rows, "read turn evidence", scanEvidence); err != nil {
		return TurnPage{}, err
	}
	var at *time.Time
	err = db.QueryRow(ctx, `SELECT slots, created_at FROM quota_ledger WHERE turn_id = $1 AND kind = 'slot_spent'`, t.ID).Scan(&p.Spent, &at)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return TurnPage{}, fmt.Errorf("read turn spend: %w", mapErr(err))
	}
	p.SpentAt = at
	err = db.QueryRow(ctx, `SELECT coalesce(detail->>'next_action', '') FROM quota_ledger
		WHERE turn_id = $1 AND kind = 'state_refreshed' ORDER BY id DESC LIMIT 1`, t.ID).Scan(&p.Handoff)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return TurnPage{}, fmt.Errorf("read turn handoff: %w", mapErr(err))
	}
	if err := db.QueryRow(ctx, `SELECT
		coalesce((SELECT max(id) FROM turn WHERE goal_id = $1 AND agent_id = $2 AND id < $3), 0),
		coalesce((SELECT min(id) FROM turn WHERE goal_id = $1 AND agent_id = $2 AND id > $3), 0)`,
		goalID, t.AgentID, t.ID).Scan(&p.Prev, &p.Next); err != nil {
		return TurnPage{}, fmt.Errorf("read neighbour turns: %w", mapErr(err))
	}
	return p, nil
}
