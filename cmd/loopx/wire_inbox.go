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
	opts := inboxOptions(d.cfg, d.now)
	opts.Logger = d.logger.With("component", "inbox")
	ib, err := inbox.New(d.store, opts)
	if err != nil {
		return nil, err
	}
	return []component{{name: "inbox-requeue", run: func(ctx context.Context) error {
		return ib.Run(ctx, time.Minute)
	}}}, nil
}

// inboxOptions are the inbox settings every inbox of this process shares (the chat router's,
// the API's and the sweeper's), so bounds and the ack timeout agree on every surface.
func inboxOptions(cfg Config, now func() time.Time) inbox.Options {
	o := cfg.Inbox
	o.Now = now
	o.DefaultLang = cfg.Lang
	return o
}
