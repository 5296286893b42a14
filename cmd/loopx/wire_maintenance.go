package main

import (
	"context"
	"time"

	"loopx/store"
)

// Retention: how long each kind of record is kept. This component owns every such constant;
// nothing else prunes.
const (
	// receiptRetention keeps idempotency receipts as long as Lark may redeliver an event
	// (about 7 hours) and clients retry, with a wide margin, so a late replay still finds its
	// receipt.
	receiptRetention = 7 * 24 * time.Hour
	// larkEventRetention keeps processed Lark event ids: Lark redelivers for about 7 hours.
	larkEventRetention = 7 * 24 * time.Hour
	// tickRetention keeps schedule fires longer than any report window (a month), so digests
	// lose nothing they show.
	tickRetention = 35 * 24 * time.Hour
)

// Sweep cadences.
const (
	turnSweepEvery  = 30 * time.Second
	pruneEvery      = time.Hour
	tickPruneBatch  = 10000 // rows per statement: a large backlog is pruned in steps
	tickPruneRounds = 100   // statements per sweep at most
)

// wireMaintenance runs the sweeps every replica may run: live turns whose lease passed are
// ended as abandoned (so a crashed runner never leaves a goal busy for ever, and the audit
// says why), and old receipts, Lark event ids and schedule fires are pruned. Each sweep is
// idempotent, so replicas running them at once do no harm.
func wireMaintenance(_ context.Context, d *deps) ([]component, error) {
	logger := d.logger.With("component", "maintenance")
	prune := func(ctx context.Context) {
		now := d.now()
		if n, err := d.store.PruneReceipts(ctx, now.Add(-receiptRetention)); err != nil && ctx.Err() == nil {
			logger.Warn("prune receipts", "err", err)
		} else if n > 0 {
			logger.Info("pruned idempotency receipts", "rows", n)
		}
		if n, err := d.store.PruneLarkEvents(ctx, larkEventRetention); err != nil && ctx.Err() == nil {
			logger.Warn("prune lark events", "err", err)
		} else if n > 0 {
			logger.Info("pruned lark events", "rows", n)
		}
		if _, err := d.store.PruneSendRates(ctx); err != nil && ctx.Err() == nil {
			logger.Warn("prune send rates", "err", err)
		}
		// Workspace sessions end at their expiry; sign-in links are kept a day for the audit.
		if _, err := store.PruneWeb(ctx, d.store.DB(), now); err != nil && ctx.Err() == nil {
			logger.Warn("prune workspace sessions", "err", err)
		}
		// Fires are recorded in the scheduler's time.
		cutoff := d.schedulerNow().Add(-tickRetention)
		for range tickPruneRounds {
			n, err := d.store.PruneTicks(ctx, cutoff, tickPruneBatch)
			if err != nil && ctx.Err() == nil {
				logger.Warn("prune schedule fires", "err", err)
			}
			if err != nil || n < tickPruneBatch {
				break
			}
		}
	}
	return []component{{name: "maintenance", run: func(ctx context.Context) error {
		turns := time.NewTicker(turnSweepEvery)
		defer turns.Stop()
		pruning := time.NewTicker(pruneEvery)
		defer pruning.Stop()
		prune(ctx)
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-turns.C:
				ended, err := d.store.ExpireTurns(ctx)
				if err != nil && ctx.Err() == nil {
					logger.Warn("expire turns", "err", err)
				}
				for _, t := range ended {
					logger.Info("turn lease expired; turn abandoned", "goal_id", t.GoalID, "agent_id", t.AgentID, "turn_id", t.ID)
				}
			case <-pruning.C:
				prune(ctx)
			}
		}
	}}}, nil
}
