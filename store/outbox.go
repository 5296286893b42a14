package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// OutboxRecord is one outbox row as the chat side reads it back (thread routing, card
// updates, tests). The sender's claim/mark operations live with the bot's store code.
type OutboxRecord struct {
	ID            int64
	UUID          string
	DedupeKey     string
	Kind          string
	ReceiveIDType string
	ReceiveID     string
	ReplyTo       string
	ReplyInThread bool
	UpdateOf      int64
	TargetMessage string
	Content       string
	GoalID        string
	AgentID       string
	SessionID     string
	GateID        int64
	State         string
	LarkMessageID string
	CreatedAt     time.Time
}

var outboxKinds = map[string]bool{"text": true, "card": true, "card_update": true, "reaction": true}

// InsertOutbox writes one outbox row in the caller's transaction. With a DedupeKey a second
// insert under the same key writes nothing and returns the first row's id with created=false.
func InsertOutbox(ctx context.Context, db DB, in OutboxInsert) (id int64, created bool, err error) {
	if err := checkOutbox(in); err != nil {
		return 0, false, err
	}
	idType := in.ReceiveIDType
	if idType == "" {
		idType = "chat_id"
	}
	var dedupe, updateOf, gate any
	if in.DedupeKey != "" {
		dedupe = in.DedupeKey
	}
	if in.UpdateOf != 0 {
		updateOf = in.UpdateOf
	}
	if in.GateID != 0 {
		gate = in.GateID
	}
	err = db.QueryRow(ctx, `
		INSERT INTO outbox (uuid, dedupe_key, kind, receive_id_type, receive_id, reply_to,
		                    reply_in_thread, update_of, target_message, content, goal_id,
		                    agent_id, session_id, gate_id)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
		ON CONFLICT (dedupe_key) DO NOTHING
		RETURNING id`,
		newUUID(), dedupe, in.Kind, idType, in.ReceiveID, in.ReplyTo, in.ReplyInThread, updateOf,
		in.TargetMessage, in.Content, in.GoalID, in.AgentID, in.SessionID, gate).Scan(&id)
	if err == nil {
		return id, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return 0, false, fmt.Errorf("insert outbox: %w", mapErr(err))
	}
	if err := db.QueryRow(ctx, `SELECT id FROM outbox WHERE dedupe_key = $1`, in.DedupeKey).Scan(&id); err != nil {
		return 0, false, fmt.Errorf("read deduplicated outbox row: %w", mapErr(err))
	}
	return id, false, nil
}

// InsertOutboxAll writes every row in order and returns their ids.
func InsertOutboxAll(ctx context.Context, db DB, ins []OutboxInsert) ([]int64, error) {
	ids := make([]int64, 0, len(ins))
	for _, in := range ins {
		id, _, err := InsertOutbox(ctx, db, in)
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, nil
}

func checkOutbox(in OutboxInsert) error {
	switch {
	case !outboxKinds[in.Kind]:
		return Errorf(ErrInvalid, "kind", "%q is not one of text, card, card_update, reaction", in.Kind)
	case in.ReceiveIDType != "" && in.ReceiveIDType != "chat_id" && in.ReceiveIDType != "open_id":
		return Errorf(ErrInvalid, "receive_id_type", "%q is not chat_id or open_id", in.ReceiveIDType)
	case in.ReceiveID == "":
		return Errorf(ErrInvalid, "receive_id", "is empty; name the chat (or person) to send to")
	case in.Content == "":
		return Errorf(ErrInvalid, "content", "is empty")
	case in.Kind == "card_update" && in.UpdateOf == 0 && in.TargetMessage == "":
		return Errorf(ErrInvalid, "update_of", "a card update needs the card's outbox id or its Lark message id")
	case in.Kind == "reaction" && in.TargetMessage == "":
		return Errorf(ErrInvalid, "target_message", "a reaction needs the Lark message id it reacts to")
	case len(in.DedupeKey) > 200:
		return Errorf(ErrInvalid, "dedupe_key", "is %d characters; at most 200", len(in.DedupeKey))
	}
	return nil
}

// newUUID returns Lark's send-dedupe key for a new row: at most 50 characters, stable for the
// row's life because it is stored with it.
func newUUID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return "lx-" + hex.EncodeToString(b)
}

const outboxColumns = `id, uuid, coalesce(dedupe_key, ''), kind, receive_id_type, receive_id, reply_to,
	reply_in_thread, coalesce(update_of, 0), target_message, content, goal_id, agent_id, session_id,
	coalesce(gate_id, 0), state, lark_message_id, created_at`

func scanOutbox(row pgx.Row) (OutboxRecord, error) {
	var r OutboxRecord
	err := row.Scan(&r.ID, &r.UUID, &r.DedupeKey, &r.Kind, &r.ReceiveIDType, &r.ReceiveID, &r.ReplyTo,
		&r.ReplyInThread, &r.UpdateOf, &r.TargetMessage, &r.Content, &r.GoalID, &r.AgentID, &r.SessionID,
		&r.GateID, &r.State, &r.LarkMessageID, &r.CreatedAt)
	return r, err
}

func queryOutbox(ctx context.Context, db DB, what, sql string, args ...any) ([]OutboxRecord, error) {
	rows, err := db.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, mapErr(err))
	}
	return collect(rows, what, scanOutbox)
}

// OutboxByLarkMessage finds the row the bot sent as Lark message id (thread routing, "is this
// a reply to the bot"). ErrNotFound when the bot did not send it.
func OutboxByLarkMessage(ctx context.Context, db DB, larkMessageID string) (OutboxRecord, error) {
	if larkMessageID == "" {
		return OutboxRecord{}, ErrNotFound
	}
	r, err := scanOutbox(db.QueryRow(ctx, `SELECT `+outboxColumns+` FROM outbox
		WHERE lark_message_id = $1 ORDER BY id LIMIT 1`, larkMessageID))
	if err != nil {
		return OutboxRecord{}, fmt.Errorf("find outbox row by lark message: %w", mapErr(err))
	}
	return r, nil
}

// GetOutbox reads one row by id.
func GetOutbox(ctx context.Context, db DB, id int64) (OutboxRecord, error) {
	r, err := scanOutbox(db.QueryRow(ctx, `SELECT `+outboxColumns+` FROM outbox WHERE id = $1`, id))
	if err != nil {
		return OutboxRecord{}, fmt.Errorf("read outbox row %d: %w", id, mapErr(err))
	}
	return r, nil
}

// OutboxGateCards lists the cards posted for a gate (one per bound chat or owner), oldest first.
func OutboxGateCards(ctx context.Context, db DB, gateID int64) ([]OutboxRecord, error) {
	return queryOutbox(ctx, db, "list gate cards", `SELECT `+outboxColumns+` FROM outbox
		WHERE gate_id = $1 AND kind = 'card' ORDER BY id`, gateID)
}

// OutboxAfter lists rows with id > afterID in id order (at most limit; 0 means 1000).
// Operators and tests use it to see what a command is about to send.
func OutboxAfter(ctx context.Context, db DB, afterID int64, limit int) ([]OutboxRecord, error) {
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	return queryOutbox(ctx, db, "list outbox", `SELECT `+outboxColumns+` FROM outbox
		WHERE id > $1 ORDER BY id LIMIT $2`, afterID, limit)
}
