package store

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Sign-in links and sessions of the web workspace (migration 00061). Only hashes of the link
// tokens and session ids are stored; the clear values exist in the link and the cookie only.

// SignInTTL is how long a sign-in link the bot sends stays usable (once).
const SignInTTL = 10 * time.Minute

// SignInParams is a one-time sign-in link to issue: the Lark person it signs in, the
// language of the chat that sent it ("" = none) and the workspace page to land on ("" = home;
// a path under /web/, with an optional #fragment).
type SignInParams struct {
	OpenID string
	Admin  bool // the link signs the admin in (OpenID "")
	Lang   string
	Next   string
}

// SignIn is what a spent link signs in.
type SignIn struct {
	OpenID string
	Admin  bool
	Lang   string
	Next   string
}

// SafeNext reports whether next is a page of the workspace to land on after signing in: a
// path under /web/ (never another host, scheme or a backslash trick), at most 300 bytes.
func SafeNext(next string) bool {
	return next == "" || (len(next) <= 300 && strings.HasPrefix(next, "/web/") && !strings.HasPrefix(next, "//") &&
		!strings.ContainsAny(next, "\\\r\n\t "))
}

// CreateSignIn issues a one-time sign-in link token for a Lark person, usable once within
// SignInTTL of now.
func CreateSignIn(ctx context.Context, db DB, p SignInParams, now time.Time) (string, error) {
	if p.Admin && p.OpenID != "" {
		return "", Errorf(ErrInvalid, "open_id", "an admin link signs in no person")
	}
	if !p.Admin {
		if err := checkOpenIDs("open_id", []string{p.OpenID}); err != nil {
			return "", err
		}
	}
	if err := checkLang("lang", p.Lang, true); err != nil {
		return "", err
	}
	if !SafeNext(p.Next) {
		return "", Errorf(ErrInvalid, "next", "is not a page of the workspace")
	}
	token := kernelHex(32)
	_, err := db.Exec(ctx, `INSERT INTO web_signin (token_hash, open_id, admin, lang, next, expires_at, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		hashSecret(token), p.OpenID, p.Admin, p.Lang, p.Next, now.Add(SignInTTL), now)
	if err != nil {
		return "", fmt.Errorf("issue sign-in link: %w", mapErr(err))
	}
	return token, nil
}

// UseSignIn spends a sign-in token and returns what it signs in. A token that is unknown,
// used or expired is ErrNotFound naming token: all three read the same, so a guess learns
// nothing.
func UseSignIn(ctx context.Context, db DB, token string, now time.Time) (SignIn, error) {
	var si SignIn
	err := db.QueryRow(ctx, `UPDATE web_signin SET used_at = $2
		WHERE token_hash = $1 AND used_at IS NULL AND expires_at > $2 RETURNING open_id, admin, lang, next`, hashSecret(token), now).Scan(&si.OpenID, &si.Admin, &si.Lang, &si.Next)
	if errors.Is(err, pgx.ErrNoRows) {
		return SignIn{}, Errorf(ErrNotFound, "token", "this sign-in link is unknown, used or expired; send /web to the bot for a new one")
	}
	if err != nil {
		return SignIn{}, fmt.Errorf("use sign-in link: %w", mapErr(err))
	}
	return si, nil
}

// States of a sign-in link before it is spent (PeekSignIn).
const (
	SignInUsable  = "usable"
	SignInUsed    = "used"
	SignInExpired = "expired"
	SignInUnknown = "unknown"
)

// PeekSignIn says, without spending it, whether a link can still sign in, so its page can say
// a used or expired link is one before any click. The token is 256 random bits: whoever holds
// it learns only what its holder may know.
func PeekSignIn(ctx context.Context, db DB, token string, now time.Time) (state, lang string, err error) {
	var used *time.Time
	var expires time.Time
	err = db.QueryRow(ctx, `SELECT used_at, expires_at, lang FROM web_signin WHERE token_hash = $1`, hashSecret(token)).Scan(&used, &expires, &lang)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return SignInUnknown, "", nil
	case err != nil:
		return "", "", fmt.Errorf("read sign-in link: %w", mapErr(err))
	case used != nil:
		return SignInUsed, lang, nil
	case !expires.After(now):
		return SignInExpired, lang, nil
	}
	return SignInUsable, lang, nil
}

// PersonLang is the language a person last chose in chat (/lang), "" when they never did.
func PersonLang(ctx context.Context, db DB, openID string) (string, error) {
	var lang string
	err := db.QueryRow(ctx, `SELECT lang FROM chat_setting WHERE updated_by = $1 ORDER BY updated_at DESC LIMIT 1`, openID).Scan(&lang)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read the person's language: %w", mapErr(err))
	}
	return lang, nil
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
	if err := checkLang("lang", lang, true); err != nil {
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
	ID        int64     `json:"id"`
	GoalID    string    `json:"goal_id"`
	Kind      string    `json:"kind"`
	Code      int       `json:"last_code"`
	Error     string    `json:"last_error"`
	CreatedAt time.Time `json:"created_at"`
}

// HomeTurn is a live turn.
type HomeTurn struct {
	GoalID    string    `json:"goal_id"`
	AgentID   string    `json:"agent_id"`
	TurnID    int64     `json:"turn_id"`
	TodoID    int64     `json:"todo_id"`
	TodoText  string    `json:"todo_text"`
	StartedAt time.Time `json:"started_at"`
}

// HomeAgent is a monitor-only agent.
type HomeAgent struct {
	GoalID  string `json:"goal_id"`
	AgentID string `json:"agent_id"`
}

// HomeSchedule is a schedule's next fire.
type HomeSchedule struct {
	GoalID  string    `json:"goal_id"`
	AgentID string    `json:"agent_id"`
	Kind    string    `json:"kind"` // heartbeat | report
	Spec    string    `json:"spec"`
	TZ      string    `json:"tz"`
	NextAt  time.Time `json:"next_fire_at"`
}

// HomeGoal is a goal in a list.
type HomeGoal struct {
	ID        string    `json:"id"`
	Title     string    `json:"title"`
	UpdatedAt time.Time `json:"updated_at"`
}

// homeSQL reads the whole home in one statement (filters on v's columns sit outside the
// joins, behind OFFSET 0, because the planner has no statistics for a CTE's columns and would
// otherwise plan a nested loop over thousands of goals): the goals the person may see, with their
// role (the SQL rule loopx_role, never re-implemented), are computed once (a materialized
// CTE), and each list is aggregated as JSON. One statement and one scan of goal keep the
// first page fast at 10,000 goals.
const homeSQL = `WITH v AS MATERIALIZED (
	SELECT id, title, status, updated_at, loopx_role(owners, members, $1, $2) AS role FROM goal
	WHERE loopx_role(owners, members, $1, $2) <> 'stranger'),
answerable AS MATERIALIZED (
	SELECT g.id, g.goal_id, g.agent_id, g.kind, g.question, g.reminders, g.created_at, v.title AS goal_title
	FROM gate g JOIN v ON v.id = g.goal_id WHERE g.status = 'open' AND v.role IN ('owner', 'admin')),
failed AS MATERIALIZED (
	SELECT f.id, f.goal_id, f.kind, f.last_code, f.last_error, f.created_at
	FROM outbox f JOIN v ON v.id = f.goal_id WHERE f.state = 'failed')
SELECT
	(SELECT count(*) FROM v),
	(SELECT count(*) FROM answerable WHERE kind <> 'stall'), -- stall gates have their own list
	(SELECT count(*) FROM failed),
	(SELECT count(*) FROM v WHERE status = 'stopped'),
	(SELECT coalesce(json_agg(x), '[]') FROM (SELECT * FROM answerable ORDER BY created_at, id LIMIT $4) x),
	(SELECT coalesce(json_agg(x), '[]') FROM (SELECT * FROM failed ORDER BY id DESC LIMIT $4) x),
	(SELECT coalesce(json_agg(x.id ORDER BY x.id), '[]') FROM (SELECT id FROM (
		SELECT p.id, p.need, v.role FROM proposal p JOIN v ON v.id = p.goal_id
		WHERE p.state = 'preview_ready' AND p.expires_at > $3 OFFSET 0) y
		WHERE role = 'admin' OR (role = 'owner' AND need = 'owner') ORDER BY id LIMIT $4) x),
	(SELECT coalesce(json_agg(x), '[]') FROM (
		SELECT y.goal_id, y.agent_id, y.turn_id, y.todo_id, coalesce((SELECT text FROM todo WHERE id = y.todo_id), '') AS todo_text,
		       y.started_at FROM (
			SELECT t.goal_id, t.agent_id, t.id AS turn_id, coalesce(t.todo_id, 0) AS todo_id, t.started_at
			FROM turn t JOIN v ON v.id = t.goal_id
			WHERE t.state = 'live' AND t.lease_expires_at > $3 OFFSET 0) y ORDER BY y.started_at LIMIT $4) x),
	(SELECT coalesce(json_agg(x), '[]') FROM (SELECT * FROM (
		SELECT a.goal_id, a.id AS agent_id FROM agent a JOIN v ON v.id = a.goal_id
		WHERE a.work_mode = 'monitor_only' OFFSET 0) y ORDER BY goal_id, agent_id LIMIT $4) x),
	(SELECT coalesce(json_agg(x), '[]') FROM (SELECT goal_id, agent_id, kind, spec, tz, next_fire_at FROM (
		SELECT s.goal_id, s.agent_id, s.kind, s.spec, s.tz, s.next_fire_at, v.status FROM schedule s JOIN v ON v.id = s.goal_id
		WHERE s.enabled AND NOT s.held AND s.next_fire_at IS NOT NULL OFFSET 0) y
		WHERE status = 'active' ORDER BY next_fire_at LIMIT $4) x),
	(SELECT coalesce(json_agg(x), '[]') FROM (
		SELECT id, title, updated_at FROM v WHERE status = 'stopped' ORDER BY updated_at DESC LIMIT $4) x)`

// ReadHome reads the workspace home of who at now, each list at most limit rows.
func ReadHome(ctx context.Context, db DB, who Person, now time.Time, limit int) (Home, error) {
	if limit <= 0 || limit > 500 {
		limit = 50
	}
	var h Home
	var gates, failed, proposals, running, watched, scheduled, stopped []byte
	err := db.QueryRow(ctx, homeSQL, who.OpenID, who.Admin, now, limit).Scan(&h.Goals, &h.GatesN, &h.FailedN, &h.StoppedN,
		&gates, &failed, &proposals, &running, &watched, &scheduled, &stopped)
	if err != nil {
		return Home{}, fmt.Errorf("read home: %w", mapErr(err))
	}
	var gs []struct {
		ID        int64     `json:"id"`
		GoalID    string    `json:"goal_id"`
		AgentID   string    `json:"agent_id"`
		Kind      string    `json:"kind"`
		Question  string    `json:"question"`
		Reminders int       `json:"reminders"`
		CreatedAt time.Time `json:"created_at"`
		GoalTitle string    `json:"goal_title"`
	}
	var ids []int64
	for _, d := range []struct {
		raw []byte
		dst any
	}{{gates, &gs}, {failed, &h.Failed}, {proposals, &ids}, {running, &h.Running}, {watched, &h.Watched},
		{scheduled, &h.Scheduled}, {stopped, &h.Stopped}} {
		if err := json.Unmarshal(d.raw, d.dst); err != nil {
			return Home{}, fmt.Errorf("decode home: %w", err)
		}
	}
	for _, g := range gs {
		hg := HomeGate{Gate: Gate{ID: g.ID, GoalID: g.GoalID, AgentID: g.AgentID, Kind: g.Kind, Question: g.Question,
			Status: GateOpen, Reminders: g.Reminders, CreatedAt: g.CreatedAt}, GoalTitle: g.GoalTitle}
		if g.Kind == GateKindStall {
			h.Stalled = append(h.Stalled, hg)
		} else {
			h.Gates = append(h.Gates, hg)
		}
	}
	if len(ids) > 0 {
		rows, err := db.Query(ctx, `SELECT `+proposalCols+` FROM proposal WHERE id = ANY($1) ORDER BY id`, ids)
		if err != nil {
			return Home{}, fmt.Errorf("read home proposals: %w", mapErr(err))
		}
		if h.Proposals, err = collect(rows, "read home proposals", scanProposal); err != nil {
			return Home{}, err
		}
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
	Schedules []HomeSchedule // the armed schedules' next fires (heartbeats per agent, the report)
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
	if p.Inbox, err = WithItemFiles(ctx, db, p.Inbox); err != nil {
		return GoalPage{}, err
	}
	if rows, err = q("read evidence", `SELECT `+evidenceCols+` FROM evidence WHERE goal_id = $1 ORDER BY id DESC LIMIT 50`, g.ID); err != nil {
		return GoalPage{}, err
	}
	if p.Evidence, err = collect(rows, "read evidence", scanEvidence); err != nil {
		return GoalPage{}, err
	}
	if p.Evidence, err = WithEvidenceFiles(ctx, db, p.Evidence); err != nil {
		return GoalPage{}, err
	}
	if rows, err = q("read turns", `SELECT `+turnCols+` FROM turn WHERE goal_id = $1 ORDER BY id DESC LIMIT 30`, g.ID); err != nil {
		return GoalPage{}, err
	}
	if p.Turns, err = collect(rows, "read turns", scanTurn); err != nil {
		return GoalPage{}, err
	}
	if rows, err = q("read skips", `SELECT `+tickCols+` FROM tick WHERE schedule_id IN (SELECT id FROM schedule WHERE goal_id = $1) AND outcome <> 'ran' ORDER BY fire_at DESC LIMIT 30`, g.ID); err != nil {
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
	if rows, err = q("read audit", `SELECT `+auditCols+` FROM audit
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
	if rows, err = q("read schedules", `SELECT goal_id, agent_id, kind, spec, tz, next_fire_at FROM schedule
		WHERE goal_id = $1 AND enabled AND NOT held AND next_fire_at IS NOT NULL ORDER BY kind, agent_id`, g.ID); err != nil {
		return GoalPage{}, err
	}
	if p.Schedules, err = collect(rows, "read schedules", func(r pgx.Row) (HomeSchedule, error) {
		var h HomeSchedule
		err := r.Scan(&h.GoalID, &h.AgentID, &h.Kind, &h.Spec, &h.TZ, &h.NextAt)
		return h, err
	}); err != nil {
		return GoalPage{}, err
	}
	return p, nil
}
