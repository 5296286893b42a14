package main

import (
	"context"
	"time"

	"loopx/inbox"
)

// wireInbox runs the inbox sweeper on this replica: once a minute, items drained but not
// acknowledged by their redelivery time return to pending (and expired ones are closed), so
// an agent that crashed mid-turn is offered them again and should-run counts them. The
// sweep is one UPDATE and idempotent, so every replica may run it.
func wireInbox(_ context.Context, d *deps) ([]component, error) {
	ib, err := inbox.New(d.store, inbox.Options{Now: d.now, Logger: d.logger.With("component", "inbox")})
	if err != nil {
		return nil, err
	}
	return []component{{name: "inbox-requeue", run: func(ctx context.Context) error {
		return ib.Run(ctx, time.Minute)
	}}}, nil
}
