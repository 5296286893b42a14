package store

import (
	"context"
	"fmt"
	"time"
)

// Binding ties a chat (or one thread in it) to a goal and, optionally, a default agent.
// Messages there that carry no address token route to it.
type Binding struct {
	ChatID     string
	ThreadRoot string // "" binds the whole chat; else the thread's root message id
	GoalID     string
	AgentID    string // "" = the goal's default (or only) agent
	CreatedBy  string
	CreatedAt  time.Time
}

// Bind creates or updates a binding in the caller's transaction. Binding the same goal again
// at the same place replaces its agent; other goals bound there stay (a chat may carry several
// goals; messages there then need an address token).
func Bind(ctx context.Context, db DB, b Binding) error {
	if b.ChatID == "" {
		return Errorf(ErrInvalid, "chat_id", "is empty")
	}
	if b.GoalID == "" {
		return Errorf(ErrInvalid, "goal_id", "is empty; name the goal to bind")
	}
	_, err := db.Exec(ctx, `
		INSERT INTO binding (chat_id, thread_root, goal_id, agent_id, created_by)
		VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (chat_id, thread_root, goal_id)
		DO UPDATE SET agent_id = EXCLUDED.agent_id, created_by = EXCLUDED.created_by, created_at = now()`,
		b.ChatID, b.ThreadRoot, b.GoalID, b.AgentID, b.CreatedBy)
	if err != nil {
		return fmt.Errorf("bind chat: %w", mapErr(err))
	}
	return nil
}

// Unbind removes the bindings of goalID at (chatID, threadRoot); goalID "" removes every goal
// bound there. It returns the bindings removed.
func Unbind(ctx context.Context, db DB, chatID, threadRoot, goalID string) ([]Binding, error) {
	rows, err := db.Query(ctx, `
		DELETE FROM binding WHERE chat_id = $1 AND thread_root = $2 AND ($3 = '' OR goal_id = $3)
		RETURNING chat_id, thread_root, goal_id, agent_id, created_by, created_at`,
		chatID, threadRoot, goalID)
	if err != nil {
		return nil, fmt.Errorf("unbind chat: %w", mapErr(err))
	}
	return collectBindings(rows, "unbind chat")
}

// ListChatBindings lists every binding in a chat: the whole-chat ones and those of its threads.
func ListChatBindings(ctx context.Context, db DB, chatID string) ([]Binding, error) {
	rows, err := db.Query(ctx, `
		SELECT chat_id, thread_root, goal_id, agent_id, created_by, created_at
		FROM binding WHERE chat_id = $1 ORDER BY thread_root, goal_id`, chatID)
	if err != nil {
		return nil, fmt.Errorf("list chat bindings: %w", mapErr(err))
	}
	return collectBindings(rows, "list chat bindings")
}

// ListGoalBindings lists the chats a goal is bound to (whole-chat bindings first).
func ListGoalBindings(ctx context.Context, db DB, goalID string) ([]Binding, error) {
	rows, err := db.Query(ctx, `
		SELECT chat_id, thread_root, goal_id, agent_id, created_by, created_at
		FROM binding WHERE goal_id = $1 ORDER BY thread_root, chat_id`, goalID)
	if err != nil {
		return nil, fmt.Errorf("list goal bindings: %w", mapErr(err))
	}
	return collectBindings(rows, "list goal bindings")
}

type rowsScanner interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

func collectBindings(rows rowsScanner, what string) ([]Binding, error) {
	defer rows.Close()
	var out []Binding
	for rows.Next() {
		var b Binding
		if err := rows.Scan(&b.ChatID, &b.ThreadRoot, &b.GoalID, &b.AgentID, &b.CreatedBy, &b.CreatedAt); err != nil {
			return nil, fmt.Errorf("%s: %w", what, mapErr(err))
		}
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, mapErr(err))
	}
	return out, nil
}
