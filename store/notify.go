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
	// OutboxNotifyChannel: an outbox row became sendable (migration 00020).
	OutboxNotifyChannel = "loopx_outbox"
	// ScheduleChannel: a schedule changed or work arrived for an agent (migration 00030).
	ScheduleChannel = "loopx_schedule"
)

// Listen LISTENs on channel and calls wake once after LISTEN took effect (a change committed
// just before would otherwise wait for the caller's fallback poll) and then for every
// notification, until ctx ends (nil) or the connection fails (an error; the caller
// reconnects). The connection is taken out of the pool and closed afterwards, so no LISTEN
// state leaks to other users of the pool.
func (s *Store) Listen(ctx context.Context, channel string, wake func()) error {
	if channel != OutboxNotifyChannel && channel != ScheduleChannel && channel != WorkspaceChannel {
		return Errorf(ErrInvalid, "channel", "%q is not a LoopX notification channel", channel)
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
	wake()
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			if ctx.Err() != nil || errors.Is(err, context.Canceled) {
				return nil
			}
			return fmt.Errorf("wait for %s notification: %w", channel, err)
		}
		wake()
	}
}
