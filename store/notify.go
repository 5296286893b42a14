package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Notification channels the database signals on. Triggers and the statements of this package
// NOTIFY them; Listen waits on them.
const (
	// OutboxNotifyChannel: an outbox row became sendable (migration 00020). The payload names
	// the lane ("messages" or "reactions", migration 00084); "" wakes both.
	OutboxNotifyChannel = "loopx_outbox"
	// ScheduleChannel: a schedule changed or work arrived for an agent (migration 00030).
	ScheduleChannel = "loopx_schedule"
)

// Listen LISTENs on channel and calls wake once after LISTEN took effect (a change committed
// just before would otherwise wait for the caller's fallback poll) and then for every
// notification, with its payload, until ctx ends (nil) or the connection fails (an error;
// the caller reconnects). The first call and the polls below carry the payload "", which
// means "anything may have changed". The connection is taken out of the pool and closed
// afterwards, so no LISTEN state leaks to other users of the pool. Behind a pooler in
// transaction mode (Options.TransactionPooling) it polls: wake is called every 200 ms
// (outbox) or 1 s (schedules).
func (s *Store) Listen(ctx context.Context, channel string, wake func(payload string)) error {
	switch channel {
	case OutboxNotifyChannel, ScheduleChannel, WorkspaceChannel, TurnStopChannel, FetchChannel:
	default:
		return Errorf(ErrInvalid, "channel", "%q is not a LoopX notification channel", channel)
	}
	if s.txPooling {
		return pollWake(ctx, channel, wake)
	}
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquire listen connection: %w", mapErr(err))
	}
	conn := pc.Hijack()
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(closeCtx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+channel); err != nil {
		return fmt.Errorf("listen on %s: %w", channel, mapErr(err))
	}
	wake("")
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, context.Canceled) {
				return nil
			}
			return fmt.Errorf("wait for %s notification: %w", channel, err)
		}
		wake(n.Payload)
	}
}

// Polling intervals that stand in for notifications behind a pooler in transaction mode,
// where LISTEN holds nothing: the pooler gives the next transaction another backend.
const (
	outboxPoll   = 200 * time.Millisecond
	schedulePoll = time.Second
)

// pollWake calls wake at once and then on every tick until ctx ends: the callers look for
// work on each wake-up, as they would on a notification.
func pollWake(ctx context.Context, channel string, wake func(string)) error {
	every := schedulePoll
	if channel == OutboxNotifyChannel {
		every = outboxPoll
	}
	t := time.NewTicker(every)
	defer t.Stop()
	wake("")
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			wake("")
		}
	}
}
