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
