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

// RecordLarkMessage records a message event under both its keys, Lark's event id and the
// message key (MessageEventID), in the caller's transaction, and reports whether both are new.
// Lark may redeliver a message under a new event id; its docs name the message id as the
// key to deduplicate im.message.receive_v1 by, so either key seen before makes it a repeat.
func RecordLarkMessage(ctx context.Context, db DB, eventID, messageID, eventType string) (bool, error) {
	if err := CheckEventID(eventID); err != nil {
		return false, err
	}
	keys := []string{eventID}
	if k := MessageEventID(messageID); k != eventID {
		if err := CheckEventID(k); err != nil {
			return false, Errorf(ErrInvalid, "message_id", "is empty, too long or not UTF-8 text")
		}
		keys = append(keys, k)
	}
	var n int
	err := db.QueryRow(ctx, `
		WITH ins AS (
		    INSERT INTO lark_event (event_id, event_type) SELECT k, $2 FROM unnest($1::text[]) k
		    ON CONFLICT (event_id) DO NOTHING RETURNING 1
		) SELECT count(*) FROM ins`, keys, eventType).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("record lark message: %w", mapErr(err))
	}
	return n == len(keys), nil
}
