package server

import (
	"context"
	"time"

	"loopx/store"
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
// says why), and records older than their retention (Config.Retention, LOOPX_RETAIN_*) are
// pruned. It owns every retention: nothing else deletes old rows. Each sweep is idempotent,
// so replicas running them at once do no harm.
func wireMaintenance(_ context.Context, d *deps) ([]component, error) {
	logger := d.logger.With("component", "maintenance")
	keep := d.cfg.Retention
	prune := func(ctx context.Context) {
		p, err := d.store.Prune(ctx, keep, d.now())
		if err != nil && ctx.Err() == nil {
			logger.Warn("prune old records", "err", err)
		}
		if p != (store.Pruned{}) {
			logger.Info("pruned old records", "decisions", p.Decisions, "lark_events", p.LarkEvents,
				"receipts", p.Receipts, "proposals", p.Proposals, "outbox", p.Outbox, "inbox", p.Inbox, "unrouted", p.Unrouted,
				"audit", p.Audit, "runs", p.Runs, "spends", p.Spends, "run_requests", p.RunRequests, "files", p.Files)
		}
		if n, err := d.store.PruneFiles(ctx, 1000); err != nil && ctx.Err() == nil {
			logger.Warn("prune unused file contents", "err", err)
		} else if n > 0 {
			logger.Info("pruned unused file contents", "files", n)
		}
		if _, err := d.store.PruneSendRates(ctx); err != nil && ctx.Err() == nil {
			logger.Warn("prune send rates", "err", err)
		}
		// Workspace sessions end at their expiry; sign-in links are kept a day for the audit.
		if _, err := store.PruneWeb(ctx, d.store.DB(), d.now()); err != nil && ctx.Err() == nil {
			logger.Warn("prune workspace sessions", "err", err)
		}
		if keep.Decisions <= 0 {
			return
		}
		// Schedule fires are recorded in the scheduler's time.
		cutoff := d.schedulerNow().Add(-keep.Decisions)
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
				// A permission request whose hook is gone is denied a minute after its limit.
				gates, err := d.store.ExpireOverduePermissions(ctx, time.Minute, d.cards.Gates.Update)
				if err != nil && ctx.Err() == nil {
					logger.Warn("expire permission requests", "err", err)
				}
				for _, g := range gates {
					logger.Info("permission request unanswered; denied", "goal_id", g.GoalID, "gate_id", g.ID)
				}
			case <-pruning.C:
				prune(ctx)
			}
		}
	}}}, nil
}
