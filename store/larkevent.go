package store

import (
	"context"
	"fmt"
)

// RecordLarkEvent records a Lark event id inside the caller's transaction and reports whether
// it is new. A repeated id (a redelivery, or the same event on another replica) returns false:
// the caller then does nothing. Because the insert joins the effect's transaction, a rollback
// forgets the id too, so Lark's redelivery gets a second chance.
func RecordLarkEvent(ctx context.Context, db DB, eventID, eventType string) (bool, error) {
	if err := CheckEventID(eventID); err != nil {
		return false, err
	}
	tag, err := db.Exec(ctx,
		`INSERT INTO lark_event (event_id, event_type) VALUES ($1, $2) ON CONFLICT (event_id) DO NOTHING`,
		eventID, eventType)
	if err != nil {
		return false, fmt.Errorf("record lark event: %w", mapErr(err))
	}
	return tag.RowsAffected() == 1, nil
}

// LockLarkMessage starts handling a message event in the caller's transaction: it takes the
// message's lock and reports whether the message is new. Lark may redeliver a message under a
// new event id and names the message id as the key to deduplicate im.message.receive_v1 by,
// so the message decides, not the event id. A message is not new when its key
// (MessageEventID) was recorded or an inbox item names it. The lock, taken in a statement of
// its own, makes a concurrent delivery of the same message on either path (EnqueueFast takes
// it too) wait for this transaction and then see what it wrote.
func LockLarkMessage(ctx context.Context, db DB, messageID string) (bool, error) {
	key := MessageEventID(messageID)
	if messageID == "" || CheckEventID(key) != nil {
		return false, Errorf(ErrInvalid, "message_id", "is empty, too long or not UTF-8 text")
	}
	if _, err := db.Exec(ctx, messageLockSQL, key); err != nil {
		return false, fmt.Errorf("lock lark message: %w", mapErr(err))
	}
	var fresh bool
	err := db.QueryRow(ctx, `SELECT
		    (SELECT e.event_id FROM lark_event e WHERE e.event_id = $1) IS NULL
		AND (SELECT i.id FROM inbox_item i WHERE i.source_message = $2 AND i.source_message <> '' LIMIT 1) IS NULL`,
		key, messageID).Scan(&fresh)
	if err != nil {
		return false, fmt.Errorf("look up lark message: %w", mapErr(err))
	}
	return fresh, nil
}

// RecordLarkMessage records a handled message's key, in the transaction that took its lock
// (LockLarkMessage), unless an inbox item names the message: the item, under its unique
// index, is the record then, as on the fast path, so both paths write the same rows.
func RecordLarkMessage(ctx context.Context, db DB, messageID, eventType string) error {
	_, err := db.Exec(ctx, `
		INSERT INTO lark_event (event_id, event_type)
		SELECT $1, $2
		WHERE (SELECT i.id FROM inbox_item i WHERE i.source_message = $3 AND i.source_message <> '' LIMIT 1) IS NULL
		ON CONFLICT (event_id) DO NOTHING`, MessageEventID(messageID), eventType, messageID)
	if err != nil {
		return fmt.Errorf("record lark message: %w", mapErr(err))
	}
	return nil
}

// Locks that serialize the two paths recording one message (advisory, transaction-scoped,
// keyed by the message key's hash; a collision only makes two messages wait for each other).
// A batch takes its messages' locks in one order, so two batches never wait for each other
// in a cycle.
const (
	messageLockSQL  = `SELECT pg_advisory_xact_lock(727274103, hashtext($1))`
	messageLocksSQL = `SELECT count(pg_advisory_xact_lock(727274103, h))
		FROM (SELECT DISTINCT hashtext(k) AS h FROM unnest($1::text[]) k ORDER BY 1) l`
)
