package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// RestoreReport is what AfterRestore found queued in a restored database.
type RestoreReport struct {
	// Queued counts the outbox rows not yet sent, by kind (text, card, card_update, reaction):
	// the servers send them once they start.
	Queued map[string]int `json:"queued"`
	// OldestQueued is when the oldest of them was written; zero when none is queued.
	OldestQueued time.Time `json:"oldest_queued,omitzero"`
	// ReactionsToCheck are the queued receipts (reactions) now looked up in Lark before they
	// are added.
	ReactionsToCheck int `json:"reactions_to_check"`
	// ClaimsReleased are the rows a server of the original database had claimed; they are
	// free to send at once.
	ClaimsReleased int `json:"claims_released"`
}

// AfterRestore prepares a database just restored from a backup for the servers that will
// start on it. The backup was taken while the original servers were sending, and they went
// on sending after it: any row queued in the backup may have reached Lark already. A message
// or card is sent again under the same Lark uuid, which Lark deduplicates for an hour; a
// reaction carries no uuid, so every queued reaction is marked as tried once, and the sender
// then looks for it on the message before adding it. Claims held by the original servers are
// released. Run it once, before any server starts on the restored database.
func AfterRestore(ctx context.Context, db DB) (RestoreReport, error) {
	r := RestoreReport{Queued: map[string]int{}}
	// Two statements: one statement may not change a row twice. Each is idempotent.
	tag, err := db.Exec(ctx, `UPDATE outbox SET claimed_until = now() - interval '1 microsecond'
		WHERE state = 'sending' AND claimed_until >= now()`)
	if err != nil {
		return r, fmt.Errorf("release the restored outbox's claims: %w", mapErr(err))
	}
	r.ClaimsReleased = int(tag.RowsAffected())
	tag, err = db.Exec(ctx, `UPDATE outbox SET attempts = 1
		WHERE kind = 'reaction' AND state IN ('pending', 'sending') AND attempts = 0`)
	if err != nil {
		return r, fmt.Errorf("mark the restored outbox's receipts: %w", mapErr(err))
	}
	r.ReactionsToCheck = int(tag.RowsAffected())
	rows, err := db.Query(ctx, `SELECT kind, count(*), min(created_at) FROM outbox
		WHERE state IN ('pending', 'sending') GROUP BY kind`)
	if err != nil {
		return r, fmt.Errorf("count the queued outbox rows: %w", mapErr(err))
	}
	type group struct {
		kind   string
		n      int
		oldest time.Time
	}
	groups, err := collect(rows, "count the queued outbox rows", func(row pgx.Row) (g group, err error) {
		return g, row.Scan(&g.kind, &g.n, &g.oldest)
	})
	if err != nil {
		return r, err
	}
	for _, g := range groups {
		r.Queued[g.kind] = g.n
		if r.OldestQueued.IsZero() || g.oldest.Before(r.OldestQueued) {
			r.OldestQueued = g.oldest
		}
	}
	return r, nil
}
