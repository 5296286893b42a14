package store

import (
	"context"
	"fmt"
	"time"
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

// PruneLarkEvents deletes lark_event rows received more than olderThan ago (Lark stops
// redelivering after about 7 hours; keep a week).
func (s *Store) PruneLarkEvents(ctx context.Context, olderThan time.Duration) (int64, error) {
	if olderThan < time.Hour {
		return 0, Errorf(ErrInvalid, "olderThan", "must be at least an hour (Lark redelivers for about 7 h), got %s", olderThan)
	}
	tag, err := s.DB().Exec(ctx, `DELETE FROM lark_event WHERE received_at < now() - $1 * interval '1 microsecond'`, olderThan.Microseconds())
	if err != nil {
		return 0, fmt.Errorf("prune lark events: %w", mapErr(err))
	}
	return tag.RowsAffected(), nil
}
