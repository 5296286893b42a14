package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
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

var outboxKinds = map[string]bool{"text": true, "card": true, "card_update": true, "reaction": true, "file": true}

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
		return Errorf(ErrInvalid, "kind", "%q is not one of text, card, card_update, reaction, file", in.Kind)
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

// GetOutboxByLarkMessage finds the row the bot sent as Lark message id (thread routing, "is this
// a reply to the bot"). ErrNotFound when the bot did not send it.
func GetOutboxByLarkMessage(ctx context.Context, db DB, larkMessageID string) (OutboxRecord, error) {
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

// GetOutboxByKey reads the row written under a dedupe key; a zero row when there is none.
func GetOutboxByKey(ctx context.Context, db DB, key string) (OutboxRecord, error) {
	r, err := scanOutbox(db.QueryRow(ctx, `SELECT `+outboxColumns+` FROM outbox WHERE dedupe_key = $1`, key))
	if errors.Is(err, pgx.ErrNoRows) {
		return OutboxRecord{}, nil
	}
	if err != nil {
		return OutboxRecord{}, fmt.Errorf("read outbox row by key: %w", mapErr(err))
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

// ListGateCards lists the cards posted for a gate (one per bound chat or owner), oldest first.
func ListGateCards(ctx context.Context, db DB, gateID int64) ([]OutboxRecord, error) {
	return queryOutbox(ctx, db, "list gate cards", `SELECT `+outboxColumns+` FROM outbox
		WHERE gate_id = $1 AND kind = 'card' ORDER BY id`, gateID)
}

// ListOutboxAfter lists rows with id > afterID in id order (at most limit; 0 means 1000).
// Operators and tests use it to see what a command is about to send.
func ListOutboxAfter(ctx context.Context, db DB, afterID int64, limit int) ([]OutboxRecord, error) {
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	return queryOutbox(ctx, db, "list outbox", `SELECT `+outboxColumns+` FROM outbox
		WHERE id > $1 ORDER BY id LIMIT $2`, afterID, limit)
}

// OutboxInsert is one message for the bot sender to deliver, written in the transaction of the
// state change it reports. See the outbox table in migrations/00010_chat.sql.
type OutboxInsert struct {
	// DedupeKey makes the insert idempotent: a second insert with the same key is a no-op that
	// returns the first row. Empty means no dedupe beyond the row itself.
	DedupeKey     string
	Kind          string // "text", "card", "card_update", "reaction"
	ReceiveIDType string // "chat_id" (default) or "open_id" for a direct message to a person
	ReceiveID     string
	ReplyTo       string // Lark message id to reply to; "" sends a new message
	ReplyInThread bool
	UpdateOf      int64  // card_update: the outbox id of the card whose Lark message is patched
	TargetMessage string // reaction / patch target Lark message id, when already known
	Content       string // text, card JSON (2.0), or an emoji type for a reaction
	GoalID        string // what the message is about; replies in its thread route there
	AgentID       string
	SessionID     string
	GateID        int64
}

// OutboxClaim is one outbox row a sender holds a claim on.
type OutboxClaim struct {
	ID            int64
	UUID          string
	Kind          string
	ReceiveIDType string
	ReceiveID     string
	ReplyTo       string
	ReplyInThread bool
	UpdateOf      int64
	// TargetMessage is the row's own target, or for a card_update the Lark message id of the
	// card it patches ("" when that card has not been sent).
	TargetMessage string
	Content       string
	Attempts      int
	CreatedAt     time.Time
	// Reclaimed: the row was claimed before and its lease ran out (a sender died or lost the
	// database after calling Lark), so it may already have reached Lark.
	Reclaimed bool
}

// The outbox has two send lanes. The message lane (every kind but "reaction") keeps each
// chat in commit order; the reaction lane (receipts) is claimed by due time alone: a reaction
// targets a message that already exists, and Lark limits reactions apart from messages, so a
// burst of receipts never holds a reply back.
type OutboxLane int

const (
	OutboxMessages  OutboxLane = iota // text, card and card_update rows, per chat in order
	OutboxReactions                   // reaction rows, by due time
)

// outboxHeads is a WITH clause naming each chat's oldest unsent message-lane row (id) in
// heads: only a head may be sent, which keeps every chat in commit order. It skips from chat
// to chat along the outbox_chat_head index, one probe per chat, instead of reading every
// unsent row: the sender runs it at every wake-up.
const outboxHeads = `
WITH RECURSIVE heads AS (
    (SELECT receive_id, id FROM outbox
     WHERE state IN ('pending', 'sending') AND kind <> 'reaction' ORDER BY receive_id, id LIMIT 1)
    UNION ALL
    SELECT nxt.receive_id, nxt.id FROM heads h CROSS JOIN LATERAL (
        SELECT receive_id, id FROM outbox
        WHERE state IN ('pending', 'sending') AND kind <> 'reaction' AND receive_id > h.receive_id
        ORDER BY receive_id, id LIMIT 1) nxt
)`

// pickMessages (the message lane) picks due chat heads. The heads CTE sees the statement
// snapshot; a head another sender claimed and committed meanwhile is re-checked by FOR UPDATE
// and dropped, and the rows behind it never qualify because they are not heads in this
// snapshot.
const pickMessages = outboxHeads + `, picked AS (
    SELECT o.id, o.state = 'sending' AS reclaimed
    FROM outbox o JOIN heads h ON h.id = o.id
    WHERE (o.state = 'pending' AND o.next_attempt_at <= now())
       OR (o.state = 'sending' AND o.claimed_until < now())
    ORDER BY o.next_attempt_at, o.id
    LIMIT $1
    FOR UPDATE OF o SKIP LOCKED
)`

// pickReactions (the reaction lane) picks lapsed claims first, then due rows in due order,
// each along its own partial index.
const pickReactions = `
WITH lapsed AS (
    SELECT id, true AS reclaimed FROM outbox
    WHERE state = 'sending' AND claimed_until < now() AND kind = 'reaction'
    LIMIT $1
    FOR UPDATE SKIP LOCKED
), due AS (
    SELECT id, false AS reclaimed FROM outbox
    WHERE state = 'pending' AND kind = 'reaction' AND next_attempt_at <= now()
    ORDER BY next_attempt_at, id
    LIMIT $1
    FOR UPDATE SKIP LOCKED
), picked AS (
    SELECT * FROM lapsed UNION ALL SELECT * FROM due LIMIT $1
)`

// ClaimOutbox claims up to limit due rows of one lane for owner until now()+lease, in one
// statement. In the message lane only the oldest unfinished row of each chat
// (receive_id) is eligible, and only while no other row of that chat is claimed, so a chat's
// messages are sent one at a time in commit (id) order whatever the number of senders. Rows
// whose claim expired are claimable again.
func (s *Store) ClaimOutbox(ctx context.Context, lane OutboxLane, owner string, limit int, lease time.Duration) ([]OutboxClaim, error) {
	if owner == "" {
		return nil, Errorf(ErrInvalid, "owner", "is empty; name the sender that claims")
	}
	if limit <= 0 {
		return nil, Errorf(ErrInvalid, "limit", "must be positive, got %d", limit)
	}
	pick := pickMessages
	switch lane {
	case OutboxMessages:
	case OutboxReactions:
		pick = pickReactions
	default:
		return nil, Errorf(ErrInvalid, "lane", "unknown outbox lane %d", lane)
	}
	// One statement, one round trip: the sender claims at every wake-up. A card update's
	// target is the card it patches, an earlier row of the same chat, which was sent (or
	// failed) before this row could be a head, so the statement's snapshot holds its id.
	rows, err := s.DB().Query(ctx, pick+`
UPDATE outbox o
SET state = 'sending', claimed_by = $2, claimed_until = now() + $3 * interval '1 microsecond'
FROM picked
WHERE o.id = picked.id
RETURNING o.id, o.uuid, o.kind, o.receive_id_type, o.receive_id, o.reply_to, o.reply_in_thread,
    coalesce(o.update_of, 0),
    CASE WHEN o.kind = 'card_update' AND o.target_message = '' AND o.update_of IS NOT NULL
         THEN coalesce((SELECT u.lark_message_id FROM outbox u WHERE u.id = o.update_of), '')
         ELSE o.target_message END,
    o.content, o.attempts, o.created_at, picked.reclaimed`,
		limit, owner, lease.Microseconds())
	if err != nil {
		return nil, fmt.Errorf("claim outbox: %w", mapErr(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (OutboxClaim, error) {
		var c OutboxClaim
		err := r.Scan(&c.ID, &c.UUID, &c.Kind, &c.ReceiveIDType, &c.ReceiveID, &c.ReplyTo,
			&c.ReplyInThread, &c.UpdateOf, &c.TargetMessage, &c.Content, &c.Attempts, &c.CreatedAt, &c.Reclaimed)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("claim outbox: %w", mapErr(err))
	}
	return out, nil
}

// MarkOutboxSent records a successful send and the Lark message id. It applies to a row in any
// unfinished state: if the claim expired and another sender took the row, Lark's uuid dedupe
// makes both sends one message, and the first to record it wins.
func (s *Store) MarkOutboxSent(ctx context.Context, id int64, larkMessageID string) error {
	tag, err := s.DB().Exec(ctx, `
UPDATE outbox SET state = 'sent', lark_message_id = $2, sent_at = now(), claimed_until = NULL,
    claimed_by = '', attempts = attempts + 1, last_code = 0, last_error = ''
WHERE id = $1 AND state IN ('pending', 'sending')`, id, larkMessageID)
	if err != nil {
		return fmt.Errorf("mark outbox %d sent: %w", id, mapErr(err))
	}
	if tag.RowsAffected() == 0 {
		// Recording a send twice (a sender recording again what a blip kept it from
		// recording, after another try already did) is not an error.
		var sent bool
		if err := s.DB().QueryRow(ctx, `SELECT state = 'sent' FROM outbox WHERE id = $1`, id).Scan(&sent); err == nil && sent {
			return nil
		}
		return fmt.Errorf("mark outbox %d sent: %w", id, ErrNotFound)
	}
	return nil
}

// MarkOutboxFailed gives up on a row for good, keeping the Lark code and a message a person can
// act on. Only the claim holder may do it.
func (s *Store) MarkOutboxFailed(ctx context.Context, id int64, owner string, code int, msg string) error {
	tag, err := s.DB().Exec(ctx, `
UPDATE outbox SET state = 'failed', last_code = $3, last_error = $4, claimed_until = NULL,
    claimed_by = '', attempts = attempts + 1
WHERE id = $1 AND state = 'sending' AND claimed_by = $2`, id, owner, code, truncate(msg, 2000))
	if err != nil {
		return fmt.Errorf("mark outbox %d failed: %w", id, mapErr(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("mark outbox %d failed: %w", id, ErrConflict)
	}
	return nil
}

// RescheduleOutbox releases owner's claim and makes the row due again after the given delay
// (measured on the database clock). countAttempt is false for waits that are not the row's
// fault, such as a rate limit. The chat's later rows stay behind it.
func (s *Store) RescheduleOutbox(ctx context.Context, id int64, owner string, after time.Duration, code int, msg string, countAttempt bool) error {
	inc := 0
	if countAttempt {
		inc = 1
	}
	tag, err := s.DB().Exec(ctx, `
UPDATE outbox SET state = 'pending', claimed_until = NULL, claimed_by = '',
    next_attempt_at = now() + $3 * interval '1 microsecond',
    last_code = $4, last_error = $5, attempts = attempts + $6
WHERE id = $1 AND state = 'sending' AND claimed_by = $2`,
		id, owner, max(after, 0).Microseconds(), code, truncate(msg, 2000), inc)
	if err != nil {
		return fmt.Errorf("reschedule outbox %d: %w", id, mapErr(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("reschedule outbox %d: %w", id, ErrConflict)
	}
	return nil
}

// ReleaseOutboxClaims hands every row owner still holds back to the other senders at once
// (graceful shutdown) and wakes them.
func (s *Store) ReleaseOutboxClaims(ctx context.Context, owner string) (int64, error) {
	var n int64
	err := s.WithTx(ctx, func(tx *Tx) error {
		tag, err := tx.Exec(ctx, `
UPDATE outbox SET state = 'pending', claimed_until = NULL, claimed_by = ''
WHERE state = 'sending' AND claimed_by = $1`, owner)
		if err != nil {
			return fmt.Errorf("release outbox claims: %w", mapErr(err))
		}
		n = tag.RowsAffected()
		if n > 0 {
			if _, err := tx.Exec(ctx, `SELECT pg_notify($1, '')`, OutboxNotifyChannel); err != nil {
				return fmt.Errorf("notify released claims: %w", mapErr(err))
			}
		}
		return nil
	})
	return n, err
}

// NextOutboxDue returns how long until a row of the lane becomes claimable (0 when one is
// now), or ok=false when the lane has nothing unsent. Senders sleep that long instead of
// polling blindly.
func (s *Store) NextOutboxDue(ctx context.Context, lane OutboxLane) (wait time.Duration, ok bool, err error) {
	var q string
	switch lane {
	case OutboxMessages:
		// Only chat heads can be claimed; a due row queued behind its chat's head is not due yet.
		q = outboxHeads + `
SELECT min(CASE WHEN o.state = 'pending' THEN o.next_attempt_at ELSE o.claimed_until END)
FROM heads h JOIN outbox o ON o.id = h.id`
	case OutboxReactions:
		q = `SELECT least(
    (SELECT min(next_attempt_at) FROM outbox WHERE state = 'pending' AND kind = 'reaction'),
    (SELECT min(claimed_until) FROM outbox WHERE state = 'sending' AND kind = 'reaction'))`
	default:
		return 0, false, Errorf(ErrInvalid, "lane", "unknown outbox lane %d", lane)
	}
	var us *int64
	err = s.DB().QueryRow(ctx, `SELECT (extract(epoch FROM due - now()) * 1e6)::bigint FROM (`+q+`) d(due)`).Scan(&us)
	if err != nil {
		return 0, false, fmt.Errorf("read next outbox due time: %w", mapErr(err))
	}
	if us == nil {
		return 0, false, nil
	}
	return max(time.Duration(*us)*time.Microsecond, 0), true, nil
}

// OutboxFailure is a message the sender gave up on.
type OutboxFailure struct {
	ID        int64
	Kind      string
	ReceiveID string
	GoalID    string
	Code      int
	Error     string
	Attempts  int
	CreatedAt time.Time
}

// ListOutboxFailures lists the newest failed outbox rows, for one chat or (chatID "") all chats.
// The chat /status command and `loopx doctor` show them.
func (s *Store) ListOutboxFailures(ctx context.Context, chatID string, limit int) ([]OutboxFailure, error) {
	if limit <= 0 {
		return nil, Errorf(ErrInvalid, "limit", "must be positive, got %d", limit)
	}
	rows, err := s.DB().Query(ctx, `
SELECT id, kind, receive_id, goal_id, last_code, last_error, attempts, created_at
FROM outbox WHERE state = 'failed' AND ($1 = '' OR receive_id = $1)
ORDER BY id DESC LIMIT $2`, chatID, limit)
	if err != nil {
		return nil, fmt.Errorf("list outbox failures: %w", mapErr(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (OutboxFailure, error) {
		var f OutboxFailure
		err := r.Scan(&f.ID, &f.Kind, &f.ReceiveID, &f.GoalID, &f.Code, &f.Error, &f.Attempts, &f.CreatedAt)
		return f, err
	})
	if err != nil {
		return nil, fmt.Errorf("read outbox failures: %w", mapErr(err))
	}
	return out, nil
}

// OutboxStats summarises the outbox for health checks and metrics.
type OutboxStats struct {
	Pending, Sending, Failed int64
	// OldestPending is the age of the oldest unsent row (0 when none): the sender's lag.
	OldestPending time.Duration
}

// ReadOutboxStats counts rows by state and measures the age of the oldest unsent one.
func (s *Store) ReadOutboxStats(ctx context.Context) (OutboxStats, error) {
	var st OutboxStats
	var us int64
	err := s.DB().QueryRow(ctx, `
SELECT count(*) FILTER (WHERE state = 'pending'),
       count(*) FILTER (WHERE state = 'sending'),
       (SELECT count(*) FROM outbox WHERE state = 'failed'),
       coalesce((extract(epoch FROM now() - min(created_at)) * 1e6)::bigint, 0)
FROM outbox WHERE state IN ('pending', 'sending')`).Scan(&st.Pending, &st.Sending, &st.Failed, &us)
	if err != nil {
		return OutboxStats{}, fmt.Errorf("read outbox stats: %w", mapErr(err))
	}
	st.OldestPending = time.Duration(us) * time.Microsecond
	return st, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	// Cutting may split a UTF-8 sequence; PostgreSQL rejects invalid text, so drop the tail.
	return strings.ToValidUTF8(s[:n], "")
}

// CountOutboxFailures counts failed outbox rows by Lark code (0: refused before sending, e.g.
// too large), for the metrics gauge and `loopx doctor`.
func (s *Store) CountOutboxFailures(ctx context.Context) (map[int]int64, error) {
	rows, err := s.DB().Query(ctx, `SELECT last_code, count(*) FROM outbox WHERE state = 'failed' GROUP BY last_code`)
	if err != nil {
		return nil, fmt.Errorf("count outbox failures: %w", mapErr(err))
	}
	defer rows.Close()
	out := map[int]int64{}
	for rows.Next() {
		var code int
		var n int64
		if err := rows.Scan(&code, &n); err != nil {
			return nil, fmt.Errorf("read outbox failure count: %w", mapErr(err))
		}
		out[code] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read outbox failure counts: %w", mapErr(err))
	}
	return out, nil
}
