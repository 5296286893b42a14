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
	if eventID == "" {
		return false, Errorf(ErrInvalid, "event_id", "is empty; every Lark event carries one")
	}
	if len(eventID) > 200 {
		return false, Errorf(ErrInvalid, "event_id", "is %d characters; at most 200", len(eventID))
	}
	tag, err := db.Exec(ctx,
		`INSERT INTO lark_event (event_id, event_type) VALUES ($1, $2) ON CONFLICT (event_id) DO NOTHING`,
		eventID, eventType)
	if err != nil {
		return false, fmt.Errorf("record lark event: %w", mapErr(err))
	}
	return tag.RowsAffected() == 1, nil
}
