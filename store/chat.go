package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// GetChatLang returns the language set for a chat with /lang, or "" when none is set.
func GetChatLang(ctx context.Context, db DB, chatID string) (string, error) {
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
	if err := checkLang("lang", lang, false); err != nil {
		return err
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
