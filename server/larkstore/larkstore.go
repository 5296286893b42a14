// Package larkstore gives the bot's sender its outbox and send limits on PostgreSQL. The
// dependency rule keeps package bot away from store; this adapter is the wiring between them,
// shared by `loopx serve` and the bot's end-to-end tests so both run the same code.
//
// Guarantees are the store's: claims are FOR UPDATE SKIP LOCKED and in commit order per chat,
// and the limits are kept in PostgreSQL, so they hold across every replica.
package larkstore

import (
	"cmp"
	"context"
	"strings"
	"time"

	"loopx/bot"
	"loopx/store"
	"loopx/templates"
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

// OpenFile reads a stored file an outbox row of kind file sends.
func (o Outbox) OpenFile(ctx context.Context, fileID int64) (bot.OutboxFile, error) {
	a, data, err := o.Store.ReadAttachment(ctx, fileID)
	if err != nil {
		return bot.OutboxFile{}, err
	}
	return bot.OutboxFile{Name: a.Name, Image: a.Kind == "image", Data: data}, nil
}

// Fetches adapts the store's file downloads to bot.Fetches. A file that can never be
// downloaded is answered in its chat (templates' file_refused, in the chat's language,
// else the goal's, else DefaultLang).
type Fetches struct {
	Store       *store.Store
	Templates   *templates.Set
	DefaultLang string
}

var _ bot.Fetches = Fetches{}

// Claim leases up to limit due downloads to owner.
func (f Fetches) Claim(ctx context.Context, owner string, lease time.Duration, limit int) ([]bot.Fetch, error) {
	list, err := f.Store.ClaimFetches(ctx, owner, lease, limit)
	if err != nil {
		return nil, err
	}
	out := make([]bot.Fetch, len(list))
	for i, x := range list {
		out[i] = bot.Fetch{ID: x.AttachmentID, MessageID: x.MessageID, Key: x.Key, Kind: x.Kind, Name: x.Name, Attempts: x.Attempts}
	}
	return out, nil
}

// Save stores a downloaded file.
func (f Fetches) Save(ctx context.Context, id int64, owner, name string, data []byte) error {
	return f.Store.SaveFetched(ctx, id, owner, name, data, f.refused)
}

// Fail records a failed download.
func (f Fetches) Fail(ctx context.Context, id int64, owner, reason string, permanent bool, retry time.Duration) error {
	return f.Store.FailFetch(ctx, id, owner, reason, permanent, retry, f.refused)
}

// NextDue tells how long until the next download is due.
func (f Fetches) NextDue(ctx context.Context) (time.Duration, bool, error) {
	at, ok, err := f.Store.NextFetchDue(ctx)
	if err != nil || !ok {
		return 0, ok, err
	}
	return time.Until(at), true, nil
}

// Listen calls wake when a message brought files.
func (f Fetches) Listen(ctx context.Context, wake func()) error {
	return f.Store.Listen(ctx, store.FetchChannel, func(string) { wake() })
}

// refused renders the answer to a message whose file could not be taken.
func (f Fetches) refused(ctx context.Context, db store.DB, a store.Attachment, item store.InboxItem) ([]store.OutboxInsert, error) {
	if item.SourceChat == "" || f.Templates == nil {
		return nil, nil
	}
	lang, err := store.GetChatLang(ctx, db, item.SourceChat)
	if err != nil {
		return nil, err
	}
	if lang == "" {
		g, err := store.GetGoal(ctx, db, item.GoalID)
		if err != nil {
			return nil, err
		}
		lang = cmp.Or(g.Lang, f.DefaultLang)
	}
	r, err := f.Templates.Render(lang, "file_refused", map[string]any{
		"Name": a.Name, "GoalID": item.GoalID, "AgentID": item.AgentID,
		"TooLarge": strings.HasPrefix(a.Error, store.ReasonTooLarge+":"), "Max": store.HumanBytes(f.Store.MaxFileBytes()),
		"Error": a.Error,
	})
	if err != nil {
		return nil, err
	}
	return []store.OutboxInsert{{DedupeKey: store.FileRefusedKey(a.ID), Kind: r.Kind, ReceiveID: item.SourceChat,
		ReplyTo: item.SourceMessage, ReplyInThread: item.SourceThread != "", Content: r.Content,
		GoalID: item.GoalID, AgentID: item.AgentID}}, nil
}
