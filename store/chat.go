package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ChatLang returns the language set for a chat with /lang, or "" when none is set.
func ChatLang(ctx context.Context, db DB, chatID string) (string, error) {
	var lang string
	err := db.QueryRow(ctx, `SELECT lang FROM chat_setting WHERE chat_id = $1`, chatID).Scan(&lang)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read chat language: %w", mapErr(err))
	}
	return lang, nil
}

// SetChatLang sets the language of a chat's replies and cards.
func SetChatLang(ctx context.Context, db DB, chatID, lang, by string) error {
	if lang != "en" && lang != "zh" {
		return Errorf(ErrInvalid, "lang", "%q is not en or zh", lang)
	}
	_, err := db.Exec(ctx, `
		INSERT INTO chat_setting (chat_id, lang, updated_by) VALUES ($1, $2, $3)
		ON CONFLICT (chat_id) DO UPDATE SET lang = EXCLUDED.lang, updated_by = EXCLUDED.updated_by, updated_at = now()`,
		chatID, lang, by)
	if err != nil {
		return fmt.Errorf("set chat language: %w", mapErr(err))
	}
	return nil
}

// Unrouted is a message the router could not place on one goal/agent.
type Unrouted struct {
	ID         int64
	ChatID     string
	MessageID  string
	Sender     string
	Text       string
	Reason     string // no_match | ambiguous | unknown_goal | unknown_agent | ...
	Candidates []string
	CreatedAt  time.Time
}

// RecordUnrouted keeps a message that was routed nowhere, so an operator can see what people
// tried to say and why it did not land.
func RecordUnrouted(ctx context.Context, db DB, u Unrouted) (int64, error) {
	cands := u.Candidates
	if cands == nil {
		cands = []string{}
	}
	var id int64
	err := db.QueryRow(ctx, `
		INSERT INTO unrouted (chat_id, message_id, sender, text, reason, candidates)
		VALUES ($1, $2, $3, $4, $5, $6) RETURNING id`,
		u.ChatID, u.MessageID, u.Sender, u.Text, u.Reason, cands).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("record unrouted message: %w", mapErr(err))
	}
	return id, nil
}

// ListUnrouted lists a chat's unrouted messages, oldest first ("" = every chat).
func ListUnrouted(ctx context.Context, db DB, chatID string, limit int) ([]Unrouted, error) {
	if limit <= 0 || limit > 1000 {
		limit = 100
	}
	rows, err := db.Query(ctx, `
		SELECT id, chat_id, message_id, sender, text, reason, candidates, created_at
		FROM unrouted WHERE $1 = '' OR chat_id = $1 ORDER BY id LIMIT $2`, chatID, limit)
	if err != nil {
		return nil, fmt.Errorf("list unrouted messages: %w", mapErr(err))
	}
	defer rows.Close()
	var out []Unrouted
	for rows.Next() {
		var u Unrouted
		if err := rows.Scan(&u.ID, &u.ChatID, &u.MessageID, &u.Sender, &u.Text, &u.Reason, &u.Candidates, &u.CreatedAt); err != nil {
			return nil, fmt.Errorf("list unrouted messages: %w", mapErr(err))
		}
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list unrouted messages: %w", mapErr(err))
	}
	return out, nil
}

// ListChatAudit lists audit rows with id > afterID, oldest first (goalID "" = all goals).
func ListChatAudit(ctx context.Context, db DB, goalID string, afterID int64) ([]Audit, error) {
	return queryAudit(ctx, db, `
		SELECT id, at, actor, surface, action, goal_id, target, allowed, detail
		FROM audit WHERE id > $1 AND ($2 = '' OR goal_id = $2) ORDER BY id LIMIT 1000`, afterID, goalID)
}

// The Lookup* reads below run on a caller's DB (usually the chat transaction) so the router
// sees its own writes and never needs a second pool connection while its transaction is open.

// LookupGoal reads one goal; ErrNotFound when it does not exist.
func LookupGoal(ctx context.Context, db DB, id string) (Goal, error) {
	g, err := scanGoalRow(db.QueryRow(ctx, `SELECT `+lookupGoalColumns+` FROM goal WHERE id = $1`, id))
	if err != nil {
		return Goal{}, fmt.Errorf("read goal %s: %w", id, mapErr(err))
	}
	return g, nil
}

// LookupGoals lists every goal by id (at most 1000). The router filters by who may see them.
func LookupGoals(ctx context.Context, db DB) ([]Goal, error) {
	rows, err := db.Query(ctx, `SELECT `+lookupGoalColumns+` FROM goal ORDER BY id LIMIT 1000`)
	if err != nil {
		return nil, fmt.Errorf("list goals: %w", mapErr(err))
	}
	return collect(rows, "list goals", scanGoalRow)
}

const lookupGoalColumns = `id, title, objective, owners, members, status, window_hours, allowed_slots,
	heartbeat_spec, heartbeat_tz, report_spec, report_tz, lang, stall_turns, version, created_at, updated_at`

func scanGoalRow(row pgx.Row) (Goal, error) {
	var g Goal
	err := row.Scan(&g.ID, &g.Title, &g.Objective, &g.Owners, &g.Members, &g.Status, &g.WindowHours,
		&g.AllowedSlots, &g.HeartbeatSpec, &g.HeartbeatTZ, &g.ReportSpec, &g.ReportTZ, &g.Lang,
		&g.StallTurns, &g.Version, &g.CreatedAt, &g.UpdatedAt)
	return g, err
}

// LookupAgents lists a goal's agents by id.
func LookupAgents(ctx context.Context, db DB, goalID string) ([]Agent, error) {
	rows, err := db.Query(ctx, `
		SELECT goal_id, id, runner, runner_config, work_mode, is_default, created_at
		FROM agent WHERE goal_id = $1 ORDER BY id`, goalID)
	if err != nil {
		return nil, fmt.Errorf("list agents: %w", mapErr(err))
	}
	defer rows.Close()
	var out []Agent
	for rows.Next() {
		var a Agent
		if err := rows.Scan(&a.GoalID, &a.ID, &a.Runner, &a.RunnerConfig, &a.WorkMode, &a.IsDefault, &a.CreatedAt); err != nil {
			return nil, fmt.Errorf("list agents: %w", mapErr(err))
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list agents: %w", mapErr(err))
	}
	return out, nil
}

// LookupLiveTurn returns the agent's live turn whose lease has not passed at now, or
// ErrNotFound. Steering needs one.
func LookupLiveTurn(ctx context.Context, db DB, goalID, agentID string, now time.Time) (Turn, error) {
	var t Turn
	var todo *int64
	err := db.QueryRow(ctx, `
		SELECT id, goal_id, agent_id, instance_id, session_id, todo_id, action, state,
		       lease_expires_at, started_at
		FROM turn WHERE goal_id = $1 AND agent_id = $2 AND state = 'live' AND lease_expires_at > $3`,
		goalID, agentID, now).Scan(&t.ID, &t.GoalID, &t.AgentID, &t.InstanceID, &t.SessionID, &todo,
		&t.Action, &t.State, &t.LeaseExpiresAt, &t.StartedAt)
	if err != nil {
		return Turn{}, fmt.Errorf("find live turn: %w", mapErr(err))
	}
	if todo != nil {
		t.TodoID = *todo
	}
	return t, nil
}

// LookupGate reads one gate by id; ErrNotFound when it does not exist.
func LookupGate(ctx context.Context, db DB, id int64) (Gate, error) {
	g, err := scanGateRow(db.QueryRow(ctx, `SELECT `+lookupGateColumns+` FROM gate WHERE id = $1`, id))
	if err != nil {
		return Gate{}, fmt.Errorf("read gate %d: %w", id, mapErr(err))
	}
	return g, nil
}

// LookupOpenGates lists a goal's open gates, oldest first.
func LookupOpenGates(ctx context.Context, db DB, goalID string) ([]Gate, error) {
	rows, err := db.Query(ctx, `SELECT `+lookupGateColumns+` FROM gate
		WHERE goal_id = $1 AND status = 'open' ORDER BY id LIMIT 100`, goalID)
	if err != nil {
		return nil, fmt.Errorf("list open gates: %w", mapErr(err))
	}
	return collect(rows, "list open gates", scanGateRow)
}

const lookupGateColumns = `id, goal_id, agent_id, kind, question, options, coalesce(todo_id, 0), status,
	coalesce(answered_by, ''), coalesce(answer, ''), coalesce(comment, ''), answered_at, card_version,
	reminders, next_reminder_at, created_at`

func scanGateRow(row pgx.Row) (Gate, error) {
	var g Gate
	err := row.Scan(&g.ID, &g.GoalID, &g.AgentID, &g.Kind, &g.Question, &g.Options, &g.TodoID, &g.Status,
		&g.AnsweredBy, &g.Answer, &g.Comment, &g.AnsweredAt, &g.CardVersion, &g.Reminders,
		&g.NextReminderAt, &g.CreatedAt)
	return g, err
}

// LookupTodoText returns a todo's text ("" when it does not exist), for gate cards.
func LookupTodoText(ctx context.Context, db DB, id int64) (string, error) {
	var text string
	err := db.QueryRow(ctx, `SELECT text FROM todo WHERE id = $1`, id).Scan(&text)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read todo %d: %w", id, mapErr(err))
	}
	return text, nil
}
