package store

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Sign-in links and sessions of the web workspace (migration 00061). Only hashes of the link
// tokens and session ids are stored; the clear values exist in the link and the cookie only.

// SignInTTL is how long a sign-in link the bot sends stays usable (once).
const SignInTTL = 10 * time.Minute

// CreateSignIn issues a one-time sign-in link token for a Lark person, usable once within
// SignInTTL of now.
func CreateSignIn(ctx context.Context, db DB, openID string, now time.Time) (string, error) {
	if err := checkOpenIDs("open_id", []string{openID}); err != nil {
		return "", err
	}
	token := kernelHex(32)
	_, err := db.Exec(ctx, `INSERT INTO web_signin (token_hash, open_id, expires_at, created_at) VALUES ($1, $2, $3, $4)`,
		hashSecret(token), openID, now.Add(SignInTTL), now)
	if err != nil {
		return "", fmt.Errorf("issue sign-in link: %w", mapErr(err))
	}
	return token, nil
}

// UseSignIn spends a sign-in token and returns the person it signs in. A token that is
// unknown, used or expired is ErrNotFound naming token: all three read the same, so a
// guess learns nothing.
func UseSignIn(ctx context.Context, db DB, token string, now time.Time) (string, error) {
	var openID string
	err := db.QueryRow(ctx, `UPDATE web_signin SET used_at = $2
		WHERE token_hash = $1 AND used_at IS NULL AND expires_at > $2 RETURNING open_id`, hashSecret(token), now).Scan(&openID)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", Errorf(ErrNotFound, "token", "this sign-in link is unknown, used or expired; send /web to the bot for a new one")
	}
	if err != nil {
		return "", fmt.Errorf("use sign-in link: %w", mapErr(err))
	}
	return openID, nil
}

// WebSession is a signed-in browser: a Lark person, or an admin who signed in with the admin
// token (OpenID "").
type WebSession struct {
	OpenID    string
	Admin     bool
	CSRF      string // every form of the session carries it
	Lang      string // the person's language choice; "" = none
	ExpiresAt time.Time
}

// CreateSession starts a session ending at expires and returns its id (the cookie's value).
func CreateSession(ctx context.Context, db DB, s WebSession, now, expires time.Time) (string, WebSession, error) {
	if s.OpenID == "" && !s.Admin {
		return "", WebSession{}, Errorf(ErrInvalid, "open_id", "a session is a person or the admin")
	}
	id := kernelHex(32)
	s.CSRF, s.ExpiresAt = kernelHex(24), expires
	_, err := db.Exec(ctx, `INSERT INTO web_session (id_hash, open_id, admin, csrf, lang, expires_at, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, hashSecret(id), s.OpenID, s.Admin, s.CSRF, s.Lang, expires, now)
	if err != nil {
		return "", WebSession{}, fmt.Errorf("create session: %w", mapErr(err))
	}
	return id, s, nil
}

// GetSession reads the live session of id; ErrNotFound when there is none (signed out or
// expired).
func GetSession(ctx context.Context, db DB, id string, now time.Time) (WebSession, error) {
	var s WebSession
	err := db.QueryRow(ctx, `SELECT open_id, admin, csrf, lang, expires_at FROM web_session
		WHERE id_hash = $1 AND expires_at > $2`, hashSecret(id), now).Scan(&s.OpenID, &s.Admin, &s.CSRF, &s.Lang, &s.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return WebSession{}, Errorf(ErrNotFound, "session", "not signed in")
	}
	if err != nil {
		return WebSession{}, fmt.Errorf("read session: %w", mapErr(err))
	}
	return s, nil
}

// SetSessionLang records the session's language choice (en, zh, or "" for none).
func SetSessionLang(ctx context.Context, db DB, id, lang string) error {
	if err := checkOneOf("lang", lang, "", "en", "zh"); err != nil {
		return err
	}
	if _, err := db.Exec(ctx, `UPDATE web_session SET lang = $2 WHERE id_hash = $1`, hashSecret(id), lang); err != nil {
		return fmt.Errorf("set session language: %w", mapErr(err))
	}
	return nil
}

// DeleteSession ends a session (sign-out).
func DeleteSession(ctx context.Context, db DB, id string) error {
	if _, err := db.Exec(ctx, `DELETE FROM web_session WHERE id_hash = $1`, hashSecret(id)); err != nil {
		return fmt.Errorf("delete session: %w", mapErr(err))
	}
	return nil
}

// PruneWeb deletes expired sessions and sign-in links older than a day.
func PruneWeb(ctx context.Context, db DB, now time.Time) (int64, error) {
	a, err := db.Exec(ctx, `DELETE FROM web_session WHERE expires_at < $1`, now)
	if err != nil {
		return 0, fmt.Errorf("prune sessions: %w", mapErr(err))
	}
	b, err := db.Exec(ctx, `DELETE FROM web_signin WHERE created_at < $1`, now.Add(-24*time.Hour))
	if err != nil {
		return 0, fmt.Errorf("prune sign-in links: %w", mapErr(err))
	}
	return a.RowsAffected() + b.RowsAffected(), nil
}

// EqualSecret compares two secrets in constant time.
func EqualSecret(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

func hashSecret(s string) []byte {
	h := sha256.Sum256([]byte(s))
	return h[:]
}

// Home is what the workspace's first page shows a person: what needs them, then what is
// running, watched, scheduled and stopped, on the goals they may see (loopx_role). Lists are
// capped at the limit given to ReadHome; the counts are exact.
type Home struct {
	Goals     int // goals the person may see
	Gates     []HomeGate
	GatesN    int
	Stalled   []HomeGate // open stall gates
	Failed    []HomeFailure
	FailedN   int
	Proposals []Proposal // ready proposals the person may confirm
	Running   []HomeTurn
	Watched   []HomeAgent
	Scheduled []HomeSchedule
	Stopped   []HomeGoal
	StoppedN  int
}

// HomeGate is an open gate the person can answer.
type HomeGate struct {
	Gate
	GoalTitle string
}

// HomeFailure is an outbox row that could not be sent.
type HomeFailure struct {
	ID        int64
	GoalID    string
	Kind      string
	Code      int
	Error     string
	CreatedAt time.Time
}

// HomeTurn is a live turn.
type HomeTurn struct {
	GoalID    string
	AgentID   string
	TurnID    int64
	TodoID    int64
	TodoText  string
	StartedAt time.Time
}

// HomeAgent is a monitor-only agent.
type HomeAgent struct {
	GoalID  string
	AgentID string
}

// HomeSchedule is a schedule's next fire.
type HomeSchedule struct {
	GoalID  string
	AgentID string
	Kind    string // heartbeat | report
	Spec    string
	TZ      string
	NextAt  time.Time
}

// HomeGoal is a goal in a list.
type HomeGoal struct {
	ID        string
	Title     string
	UpdatedAt time.Time
}

// visibleGoals is the CTE of the goals a person may see, with their role: the SQL rule
// loopx_role, never re-implemented.
const visibleGoals = `WITH v AS (
	SELECT id, title, status, loopx_role(owners, members, $1, $2) AS role FROM goal
	WHERE loopx_role(owners, members, $1, $2) <> 'stranger')`

// ReadHome reads the workspace home of who at now, each list at most limit rows.
func ReadHome(ctx context.Context, db DB, who Person, now time.Time, limit int) (Home, error) {
	if limit <= 0 || limit > 500 {
		limit = 50
	}
	var h Home
	err := db.QueryRow(ctx, visibleGoals+`
		SELECT (SELECT count(*) FROM v),
		       (SELECT count(*) FROM gate g JOIN v ON v.id = g.goal_id
		         WHERE g.status = 'open' AND v.role IN ('owner', 'admin')),
		       (SELECT count(*) FROM outbox o JOIN v ON v.id = o.goal_id WHERE o.state = 'failed'),
		       (SELECT count(*) FROM v WHERE status = 'stopped')`,
		who.OpenID, who.Admin).Scan(&h.Goals, &h.GatesN, &h.FailedN, &h.StoppedN)
	if err != nil {
		return Home{}, fmt.Errorf("read home counts: %w", mapErr(err))
	}
	rows, err := db.Query(ctx, visibleGoals+`
		SELECT `+gateCols+`, goal_title FROM (
			SELECT g.*, v.title AS goal_title FROM gate g JOIN v ON v.id = g.goal_id
			WHERE g.status = 'open' AND v.role IN ('owner', 'admin')) x
		ORDER BY created_at, id LIMIT $3`, who.OpenID, who.Admin, limit)
	if err != nil {
		return Home{}, fmt.Errorf("read home gates: %w", mapErr(err))
	}
	gates, err := collect(rows, "read home gates", func(r pgx.Row) (HomeGate, error) {
		var g HomeGate
		err := r.Scan(&g.ID, &g.GoalID, &g.AgentID, &g.Kind, &g.Question, &g.Options, &g.TodoID, &g.Status,
			&g.AnsweredBy, &g.Answer, &g.Comment, &g.AnsweredAt, &g.CardVersion, &g.Reminders, &g.NextReminderAt,
			&g.CreatedAt, &g.GoalTitle)
		return g, err
	})
	if err != nil {
		return Home{}, err
	}
	for _, g := range gates {
		if g.Kind == GateKindStall {
			h.Stalled = append(h.Stalled, g)
		} else {
			h.Gates = append(h.Gates, g)
		}
	}
	rows, err = db.Query(ctx, visibleGoals+`
		SELECT o.id, o.goal_id, o.kind, o.last_code, o.last_error, o.created_at FROM outbox o JOIN v ON v.id = o.goal_id
		WHERE o.state = 'failed' ORDER BY o.id DESC LIMIT $3`, who.OpenID, who.Admin, limit)
	if err != nil {
		return Home{}, fmt.Errorf("read home failures: %w", mapErr(err))
	}
	if h.Failed, err = collect(rows, "read home failures", func(r pgx.Row) (HomeFailure, error) {
		var f HomeFailure
		err := r.Scan(&f.ID, &f.GoalID, &f.Kind, &f.Code, &f.Error, &f.CreatedAt)
		return f, err
	}); err != nil {
		return Home{}, err
	}
	rows, err = db.Query(ctx, visibleGoals+`
		SELECT `+proposalCols+` FROM proposal WHERE id IN (
			SELECT p.id FROM proposal p JOIN v ON v.id = p.goal_id
			WHERE p.state = 'preview_ready' AND p.expires_at > $3
			  AND (v.role = 'admin' OR (v.role = 'owner' AND p.need = 'owner')))
		ORDER BY id LIMIT $4`, who.OpenID, who.Admin, now, limit)
	if err != nil {
		return Home{}, fmt.Errorf("read home proposals: %w", mapErr(err))
	}
	if h.Proposals, err = collect(rows, "read home proposals", scanProposal); err != nil {
		return Home{}, err
	}
	rows, err = db.Query(ctx, visibleGoals+`
		SELECT t.goal_id, t.agent_id, t.id, coalesce(t.todo_id, 0), coalesce(td.text, ''), t.started_at
		FROM turn t JOIN v ON v.id = t.goal_id LEFT JOIN todo td ON td.id = t.todo_id
		WHERE t.state = 'live' AND t.lease_expires_at > $3 ORDER BY t.started_at LIMIT $4`, who.OpenID, who.Admin, now, limit)
	if err != nil {
		return Home{}, fmt.Errorf("read home turns: %w", mapErr(err))
	}
	if h.Running, err = collect(rows, "read home turns", func(r pgx.Row) (HomeTurn, error) {
		var t HomeTurn
		err := r.Scan(&t.GoalID, &t.AgentID, &t.TurnID, &t.TodoID, &t.TodoText, &t.StartedAt)
		return t, err
	}); err != nil {
		return Home{}, err
	}
	rows, err = db.Query(ctx, visibleGoals+`
		SELECT a.goal_id, a.id FROM agent a JOIN v ON v.id = a.goal_id
		WHERE a.work_mode = 'monitor_only' ORDER BY a.goal_id, a.id LIMIT $3`, who.OpenID, who.Admin, limit)
	if err != nil {
		return Home{}, fmt.Errorf("read home watched: %w", mapErr(err))
	}
	if h.Watched, err = collect(rows, "read home watched", func(r pgx.Row) (HomeAgent, error) {
		var a HomeAgent
		err := r.Scan(&a.GoalID, &a.AgentID)
		return a, err
	}); err != nil {
		return Home{}, err
	}
	rows, err = db.Query(ctx, visibleGoals+`
		SELECT s.goal_id, s.agent_id, s.kind, s.spec, s.tz, s.next_fire_at FROM schedule s JOIN v ON v.id = s.goal_id
		WHERE s.enabled AND NOT s.held AND s.next_fire_at IS NOT NULL AND v.status = 'active'
		ORDER BY s.next_fire_at LIMIT $3`, who.OpenID, who.Admin, limit)
	if err != nil {
		return Home{}, fmt.Errorf("read home schedules: %w", mapErr(err))
	}
	if h.Scheduled, err = collect(rows, "read home schedules", func(r pgx.Row) (HomeSchedule, error) {
		var s HomeSchedule
		err := r.Scan(&s.GoalID, &s.AgentID, &s.Kind, &s.Spec, &s.TZ, &s.NextAt)
		return s, err
	}); err != nil {
		return Home{}, err
	}
	rows, err = db.Query(ctx, visibleGoals+`
		SELECT g.id, g.title, g.updated_at FROM goal g JOIN v ON v.id = g.id
		WHERE v.status = 'stopped' ORDER BY g.updated_at DESC LIMIT $3`, who.OpenID, who.Admin, limit)
	if err != nil {
		return Home{}, fmt.Errorf("read home stopped: %w", mapErr(err))
	}
	if h.Stopped, err = collect(rows, "read home stopped", func(r pgx.Row) (HomeGoal, error) {
		var g HomeGoal
		err := r.Scan(&g.ID, &g.Title, &g.UpdatedAt)
		return g, err
	}); err != nil {
		return Home{}, err
	}
	return h, nil
}

// GoalPage is everything the workspace's goal page shows besides the goal itself.
type GoalPage struct {
	Agents    []Agent
	Todos     []Todo
	Gates     []Gate
	Inbox     []InboxItem // pending and delivered items, all agents
	Evidence  []Evidence
	Turns     []Turn
	Skips     []Tick
	Digests   []DigestRecord
	Audit     []Audit
	Proposals []Proposal
	Spent     int
}

// DigestRecord is a past report digest with its facts.
type DigestRecord struct {
	ID        int64
	Trigger   string
	Facts     DigestFacts
	CreatedAt time.Time
}

// ReadGoalPage reads what the goal page shows of goalID at now, each list capped.
func ReadGoalPage(ctx context.Context, db DB, g Goal, now time.Time) (GoalPage, error) {
	var p GoalPage
	var err error
	if p.Agents, err = ListAgents(ctx, db, g.ID); err != nil {
		return GoalPage{}, err
	}
	q := func(what, sql string, args ...any) (pgx.Rows, error) {
		rows, err := db.Query(ctx, sql, args...)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, mapErr(err))
		}
		return rows, nil
	}
	rows, err := q("read todos", `SELECT `+todoCols+` FROM todo WHERE goal_id = $1
		ORDER BY CASE status WHEN 'open' THEN 0 WHEN 'blocked' THEN 1 WHEN 'done' THEN 2 ELSE 3 END, priority, id DESC LIMIT 300`, g.ID)
	if err != nil {
		return GoalPage{}, err
	}
	if p.Todos, err = collect(rows, "read todos", scanTodo); err != nil {
		return GoalPage{}, err
	}
	if rows, err = q("read gates", `SELECT `+gateCols+` FROM gate WHERE goal_id = $1 ORDER BY (status = 'open') DESC, id DESC LIMIT 50`, g.ID); err != nil {
		return GoalPage{}, err
	}
	if p.Gates, err = collect(rows, "read gates", scanGate); err != nil {
		return GoalPage{}, err
	}
	if rows, err = q("read inbox", `SELECT `+inboxColumns+` FROM inbox_item
		WHERE goal_id = $1 AND state IN ('pending', 'delivered') ORDER BY agent_id, id LIMIT 200`, g.ID); err != nil {
		return GoalPage{}, err
	}
	if p.Inbox, err = collectInbox(rows, "read inbox"); err != nil {
		return GoalPage{}, err
	}
	if rows, err = q("read evidence", `SELECT `+evidenceCols+` FROM evidence WHERE goal_id = $1 ORDER BY id DESC LIMIT 50`, g.ID); err != nil {
		return GoalPage{}, err
	}
	if p.Evidence, err = collect(rows, "read evidence", scanEvidence); err != nil {
		return GoalPage{}, err
	}
	if rows, err = q("read turns", `SELECT `+turnCols+` FROM turn WHERE goal_id = $1 ORDER BY id DESC LIMIT 30`, g.ID); err != nil {
		return GoalPage{}, err
	}
	if p.Turns, err = collect(rows, "read turns", scanTurn); err != nil {
		return GoalPage{}, err
	}
	if rows, err = q("read skips", `SELECT `+tickCols+` FROM tick WHERE goal_id = $1 AND outcome <> 'ran' ORDER BY fire_at DESC LIMIT 30`, g.ID); err != nil {
		return GoalPage{}, err
	}
	if p.Skips, err = collect(rows, "read skips", func(r pgx.Row) (Tick, error) {
		var t Tick
		var next *time.Time
		err := r.Scan(&t.ID, &t.ScheduleID, &t.GoalID, &t.AgentID, &t.Kind, &t.FireAt, &t.RunAt,
			&t.Outcome, &t.Reason, &t.CatchUp, &t.Decision, &t.TurnID, &next, &t.Replica, &t.DecidedAt)
		t.NextFireAt = deref(next)
		return t, err
	}); err != nil {
		return GoalPage{}, err
	}
	if rows, err = q("read digests", `SELECT id, trigger, facts, created_at FROM digest WHERE goal_id = $1 ORDER BY window_end DESC LIMIT 10`, g.ID); err != nil {
		return GoalPage{}, err
	}
	if p.Digests, err = collect(rows, "read digests", func(r pgx.Row) (DigestRecord, error) {
		var d DigestRecord
		var facts []byte
		if err := r.Scan(&d.ID, &d.Trigger, &facts, &d.CreatedAt); err != nil {
			return d, err
		}
		return d, json.Unmarshal(facts, &d.Facts)
	}); err != nil {
		return GoalPage{}, err
	}
	if rows, err = q("read audit", `SELECT id, at, actor, surface, action, goal_id, target, allowed, detail FROM audit
		WHERE goal_id = $1 ORDER BY id DESC LIMIT 50`, g.ID); err != nil {
		return GoalPage{}, err
	}
	if p.Audit, err = collect(rows, "read audit", scanAudit); err != nil {
		return GoalPage{}, err
	}
	if p.Proposals, err = ListProposals(ctx, db, g.ID, "", 20); err != nil {
		return GoalPage{}, err
	}
	if p.Spent, err = SpentSlots(ctx, db, g.ID, time.Duration(g.WindowHours)*time.Hour, now); err != nil {
		return GoalPage{}, err
	}
	return p, nil
}
