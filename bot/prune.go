package bot

import (
	"context"
	"log/slog"
	"time"
)

// EventRetention is how long processed event ids are kept: Lark redelivers for about 7 hours,
// so a week leaves a wide margin.
const EventRetention = 7 * 24 * time.Hour

// EventPruner deletes old processed-event ids (implemented over the store by cmd/loopx).
type EventPruner interface {
	PruneLarkEvents(ctx context.Context, olderThan time.Duration) (int64, error)
}

// RunPruner prunes event ids older than EventRetention now and then every interval (default
// 1 h) until ctx ends. Several replicas may run it; the deletes are idempotent.
func RunPruner(ctx context.Context, p EventPruner, every time.Duration, log *slog.Logger) {
	if every <= 0 {
		every = time.Hour
	}
	if log == nil {
		log = slog.Default()
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		n, err := p.PruneLarkEvents(ctx, EventRetention)
		switch {
		case err != nil && ctx.Err() == nil:
			log.WarnContext(ctx, "prune lark events", "err", err)
		case n > 0:
			log.InfoContext(ctx, "pruned lark events", "deleted", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
