package main

import (
	"context"
	"time"
)

// Retention and sweep cadences of the maintenance loop.
const (
	turnSweepEvery    = 30 * time.Second
	receiptSweepEvery = time.Hour
	// receiptRetention keeps idempotency receipts as long as Lark may redeliver an event
	// (about 7 hours) with a wide margin, so a late replay still finds its receipt.
	receiptRetention = 7 * 24 * time.Hour
)

// wireMaintenance runs the sweeps every replica may run: live turns whose lease passed are
// ended as abandoned (so a crashed runner never leaves a goal busy for ever, and the audit
// says why), and old idempotency receipts are pruned. Both are single idempotent statements,
// so replicas running them at once do no harm.
func wireMaintenance(_ context.Context, d *deps) ([]component, error) {
	logger := d.logger.With("component", "maintenance")
	return []component{{name: "maintenance", run: func(ctx context.Context) error {
		turns := time.NewTicker(turnSweepEvery)
		defer turns.Stop()
		receipts := time.NewTicker(receiptSweepEvery)
		defer receipts.Stop()
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
			case <-receipts.C:
				n, err := d.store.PruneReceipts(ctx, d.now().Add(-receiptRetention))
				if err != nil && ctx.Err() == nil {
					logger.Warn("prune receipts", "err", err)
				} else if n > 0 {
					logger.Info("pruned idempotency receipts", "rows", n)
				}
			}
		}
	}}}, nil
}
