// Package larkstore gives the bot's sender its outbox and send limits on PostgreSQL. The
// dependency rule keeps package bot away from store; this adapter is the wiring between them,
// shared by `loopx serve` and the bot's end-to-end tests so both run the same code.
//
// Guarantees are the store's: claims are FOR UPDATE SKIP LOCKED and in commit order per chat,
// and the limits are kept in PostgreSQL, so they hold across every replica.
package larkstore

import (
	"context"
	"time"

	"loopx/bot"
	"loopx/store"
)

// Outbox adapts the store's outbox operations to bot.Outbox.
type Outbox struct{ Store *store.Store }

var (
	_ bot.Outbox  = Outbox{}
	_ bot.Limiter = Limiter{}
)

// Claim leases up to limit due rows to owner.
func (o Outbox) Claim(ctx context.Context, lane bot.Lane, owner string, limit int, lease time.Duration) ([]bot.OutboxMessage, error) {
	cs, err := o.Store.ClaimOutbox(ctx, outboxLane(lane), owner, limit, lease)
	if err != nil {
		return nil, err
	}
	out := make([]bot.OutboxMessage, len(cs))
	for i, c := range cs {
		out[i] = bot.OutboxMessage{ID: c.ID, UUID: c.UUID, Kind: c.Kind, ReceiveIDType: c.ReceiveIDType,
			ReceiveID: c.ReceiveID, ReplyTo: c.ReplyTo, ReplyInThread: c.ReplyInThread,
			TargetMessage: c.TargetMessage, Content: c.Content, Attempts: c.Attempts, CreatedAt: c.CreatedAt,
			Reclaimed: c.Reclaimed}
	}
	return out, nil
}

// MarkSent records the Lark message id of a sent row.
func (o Outbox) MarkSent(ctx context.Context, id int64, larkMessageID string) error {
	return o.Store.MarkOutboxSent(ctx, id, larkMessageID)
}

// MarkFailed ends a row as failed with Lark's code.
func (o Outbox) MarkFailed(ctx context.Context, id int64, owner string, code int, reason string) error {
	return o.Store.MarkOutboxFailed(ctx, id, owner, code, reason)
}

// Retry puts a row back for another attempt after a delay.
func (o Outbox) Retry(ctx context.Context, id int64, owner string, after time.Duration, code int, reason string, count bool) error {
	return o.Store.RescheduleOutbox(ctx, id, owner, after, code, reason, count)
}

// Release gives back every claim owner holds (on shutdown).
func (o Outbox) Release(ctx context.Context, owner string) error {
	_, err := o.Store.ReleaseOutboxClaims(ctx, owner)
	return err
}

// NextDue tells how long until the lane's next row is due.
func (o Outbox) NextDue(ctx context.Context, lane bot.Lane) (time.Duration, bool, error) {
	return o.Store.NextOutboxDue(ctx, outboxLane(lane))
}

func outboxLane(l bot.Lane) store.OutboxLane {
	if l == bot.LaneReactions {
		return store.OutboxReactions
	}
	return store.OutboxMessages
}

// Listen calls wake with the lane each outbox notification names (both for one that names
// none) until ctx ends.
func (o Outbox) Listen(ctx context.Context, wake func(bot.Lane)) error {
	return o.Store.Listen(ctx, store.OutboxNotifyChannel, func(payload string) {
		if payload != "reactions" {
			wake(bot.LaneMessages)
		}
		if payload != "messages" {
			wake(bot.LaneReactions)
		}
	})
}

// Limiter keeps the send budgets in PostgreSQL, shared by every replica.
type Limiter struct{ Store *store.Store }

// Take books a send under every budget at once (see bot.Limiter).
func (l Limiter) Take(ctx context.Context, budgets []bot.Budget, maxWait time.Duration) (time.Duration, bool, error) {
	scopes := make([]store.RateScope, len(budgets))
	for i, b := range budgets {
		scopes[i] = store.RateScope{Scope: b.Scope, Interval: b.Interval, Burst: b.Burst}
	}
	return l.Store.TakeSendSlot(ctx, scopes, maxWait)
}
