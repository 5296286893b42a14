package server

import (
	"context"
	"time"
)

// wireInbox runs the inbox sweeper on this replica: once a minute, items drained but not
// acknowledged by their redelivery time return to pending (and expired ones are closed), so
// an agent that crashed mid-turn is offered them again and should-run counts them. The
// sweep is one UPDATE and idempotent, so every replica may run it.
func wireInbox(_ context.Context, d *deps) ([]component, error) {
	return []component{{name: "inbox-requeue", run: func(ctx context.Context) error {
		return d.inbox.Run(ctx, time.Minute)
	}}}, nil
}
