package inbox

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"
	"unicode/utf8"

	"loopx/store"
	"loopx/templates"
)

// Defaults for Options.
const (
	DefaultMaxChars   = 12000
	DefaultMaxPending = 200
	DefaultAckTimeout = 15 * time.Minute
)

// Options configures an Inbox. Zero values take the defaults.
type Options struct {
	MaxChars   int           // characters per message
	MaxPending int           // unacknowledged items per agent
	AckTimeout time.Duration // a drained, unacked item returns to pending after this
	Now        func() time.Time
	Logger     *slog.Logger
	// Templates renders the notice to a sender whose steer expired; nil parses the embedded set.
	Templates *templates.Set
	// DefaultLang of that notice when neither the chat nor the goal sets one; "" = en.
	DefaultLang string
}

func (o Options) withDefaults() Options {
	if o.MaxChars <= 0 {
		o.MaxChars = DefaultMaxChars
	}
	if o.MaxPending <= 0 {
		o.MaxPending = DefaultMaxPending
	}
	if o.AckTimeout <= 0 {
		o.AckTimeout = DefaultAckTimeout
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.DefaultLang == "" {
		o.DefaultLang = templates.DefaultLang
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Inbox is safe for concurrent use.
type Inbox struct {
	st   *store.Store
	opts Options
}

// New returns an Inbox over st. It fails only when the embedded templates do not parse.
func New(st *store.Store, opts Options) (*Inbox, error) {
	opts = opts.withDefaults()
	if opts.Templates == nil {
		tpl, err := templates.New()
		if err != nil {
			return nil, fmt.Errorf("new inbox: %w", err)
		}
		opts.Templates = tpl
	}
	return &Inbox{st: st, opts: opts}, nil
}

// Options returns the effective options (defaults filled in).
func (ib *Inbox) Options() Options { return ib.opts }

// CheckText applies the per-message bound; the error names the field and the limit.
func (ib *Inbox) CheckText(text string) error {
	if text == "" {
		return store.Errorf(store.ErrInvalid, "text", "is empty; there is nothing to deliver")
	}
	if n := utf8.RuneCountInString(text); n > ib.opts.MaxChars {
		return store.Errorf(store.ErrInvalid, "text", "is %d characters; the limit is %d, split it into shorter messages", n, ib.opts.MaxChars)
	}
	return nil
}

// Enqueue adds an item in the caller's transaction (db). It returns the existing item with
// created=false when the source message was already enqueued for this agent.
func (ib *Inbox) Enqueue(ctx context.Context, db store.DB, in store.InboxInsert) (store.InboxItem, bool, error) {
	if err := ib.CheckText(in.Text); err != nil {
		return store.InboxItem{}, false, err
	}
	it, created, err := store.InsertInboxItem(ctx, db, in, ib.opts.MaxPending)
	if err != nil {
		return store.InboxItem{}, false, fmt.Errorf("enqueue: %w", err)
	}
	return it, created, nil
}

// Agent names the inbox an operation works on: the authenticated agent.
type Agent struct {
	GoalID  string
	AgentID string
}

// Meta is who acts on the agent's inbox: the agent itself, from the API, under the caller's
// idempotency key (a retried drain whose answer was lost returns the same items).
func (a Agent) meta(key string) store.Meta {
	return store.Meta{Actor: store.AgentActor(a.GoalID, a.AgentID), Surface: "api", IdempotencyKey: key}
}

func (a Agent) target() string { return store.AgentTarget(a.GoalID, a.AgentID) }

// DrainParams asks for up to Limit pending items of one agent.
type DrainParams struct {
	SessionID string // "" takes every session's items
	Limit     int    // 0 = 50
	// Key makes the drain replayable: the same key returns the same items.
	Key string `json:"-"`
}

// Drain hands out up to p.Limit pending items (steer first, then oldest) and marks them
// delivered.
func (ib *Inbox) Drain(ctx context.Context, a Agent, p DrainParams) ([]store.InboxItem, error) {
	items, err := store.Do(ctx, ib.st, "inbox.drain", a.meta(p.Key), []any{a, p},
		func(tx *store.Tx, now time.Time) ([]store.InboxItem, store.Audit, error) {
			if err := ib.expireSteer(ctx, tx, a.GoalID, a.AgentID); err != nil {
				return nil, store.Audit{}, err
			}
			items, err := store.DrainInbox(ctx, tx, store.DrainParams{
				GoalID: a.GoalID, AgentID: a.AgentID, SessionID: p.SessionID, Limit: p.Limit,
				Now: ib.opts.Now(), AckTimeout: ib.opts.AckTimeout,
			})
			if err != nil {
				return nil, store.Audit{}, err
			}
			// The files people sent travel with their items (and with the replayed answer).
			if items, err = store.WithItemFiles(ctx, tx, items); err != nil {
				return nil, store.Audit{}, err
			}
			if len(items) == 0 {
				return items, store.NoAudit(), nil // an empty poll is not worth an audit row
			}
			return items, ib.audit(a, "", map[string]any{"items": ids(items)}), nil
		})
	if err != nil {
		return nil, fmt.Errorf("drain inbox: %w", err)
	}
	return items, nil
}

// Ack marks items acknowledged after the agent wrote their effect. key makes the call
// replayable.
func (ib *Inbox) Ack(ctx context.Context, a Agent, itemIDs []int64, key string) ([]store.InboxItem, error) {
	items, err := store.Do(ctx, ib.st, "inbox.ack", a.meta(key), []any{a, itemIDs},
		func(tx *store.Tx, now time.Time) ([]store.InboxItem, store.Audit, error) {
			items, err := store.AckInbox(ctx, tx, a.GoalID, a.AgentID, itemIDs, ib.opts.Now())
			if err != nil {
				return nil, store.Audit{}, err
			}
			return items, ib.audit(a, "", map[string]any{"items": itemIDs}), nil
		})
	if err != nil {
		return nil, fmt.Errorf("ack inbox: %w", err)
	}
	return items, nil
}

// ReplyParams is an agent's answer to one inbox item.
type ReplyParams struct {
	ItemID int64
	// Key makes the reply idempotent per item; "" derives it from Text, so the same text
	// twice is one reply.
	Key  string
	Text string // may be empty when File is set
	// File, when set, is sent back to the chat after the text, as an image or a file
	// message (staged with store.StageBlob first).
	File *store.FileUpload `json:"file,omitempty"`
	// CallKey makes the call replayable (the API's Idempotency-Key).
	CallKey string `json:"-"`
}

// ReplyResult names the outbox row that carries the reply.
type ReplyResult struct {
	OutboxID int64  `json:"outbox_id"`
	ItemID   int64  `json:"item_id"`
	Key      string `json:"reply_key"`
	Created  bool   `json:"created"` // false: the same reply was already queued
	// File is the file sent back (FileOutboxID its message), when the reply carried one.
	File         *store.Attachment `json:"file,omitempty"`
	FileOutboxID int64             `json:"file_outbox_id,omitempty"`
}

// Reply queues an answer in the conversation the item came from: the same chat, in the
// thread of the source message.
func (ib *Inbox) Reply(ctx context.Context, a Agent, p ReplyParams) (ReplyResult, error) {
	if p.ItemID <= 0 {
		return ReplyResult{}, store.Errorf(store.ErrInvalid, "item", "give the inbox item id to reply to (--item N)")
	}
	if p.File == nil || p.Text != "" {
		if err := ib.CheckText(p.Text); err != nil {
			return ReplyResult{}, err
		}
	}
	if len(p.Key) > 100 {
		return ReplyResult{}, store.Errorf(store.ErrInvalid, "key", "is %d characters; at most 100", len(p.Key))
	}
	key := p.Key
	if key == "" {
		h := sha256.New()
		h.Write([]byte(p.Text))
		if p.File != nil {
			h.Write(p.File.Blob.SHA256)
			h.Write([]byte(p.File.Name))
		}
		key = "t-" + hex.EncodeToString(h.Sum(nil)[:12])
	}
	res, err := store.Do(ctx, ib.st, "inbox.reply", a.meta(p.CallKey), []any{a, p},
		func(tx *store.Tx, now time.Time) (ReplyResult, store.Audit, error) {
			res := ReplyResult{ItemID: p.ItemID, Key: key}
			it, err := store.GetInboxItem(ctx, tx, p.ItemID)
			if errors.Is(err, store.ErrNotFound) || (err == nil && (it.GoalID != a.GoalID || it.AgentID != a.AgentID)) {
				return res, store.Audit{}, store.Errorf(store.ErrNotFound, "item", "%d is not in the inbox of %s/%s", p.ItemID, a.GoalID, a.AgentID)
			}
			if err != nil {
				return res, store.Audit{}, err
			}
			if it.SourceChat == "" {
				return res, store.Audit{}, store.Errorf(store.ErrRefused, "item", "%d did not come from a chat; there is no conversation to answer in", p.ItemID)
			}
			if p.Text == "" {
				return ib.replyFile(ctx, tx, a, it, p, res, key, now)
			}
			// The agent's words go to the chat as typed, but never as a mention or a link
			// in the bot's name.
			content := templates.SafeText(p.Text)
			id, created, err := store.InsertOutbox(ctx, tx, store.OutboxInsert{
				DedupeKey:     store.InboxReplyKey(it.ID, key),
				Kind:          "text",
				ReceiveID:     it.SourceChat,
				ReplyTo:       it.SourceMessage,
				ReplyInThread: it.SourceMessage != "",
				Content:       content,
				GoalID:        it.GoalID,
				AgentID:       it.AgentID,
				SessionID:     it.SessionID,
			})
			if err != nil {
				return res, store.Audit{}, err
			}
			if !created {
				prev, err := store.GetOutbox(ctx, tx, id)
				if err != nil {
					return res, store.Audit{}, err
				}
				if prev.Content != content {
					return res, store.Audit{}, store.Errorf(store.ErrConflict, "key", "reply key %q was already used for item %d with another text; use a new key", key, it.ID)
				}
			}
			res.OutboxID, res.Created = id, created
			if !created {
				return res, store.NoAudit(), nil
			}
			// Answering a person is progress for the turn that does it.
			if err := store.MarkTurnProgress(ctx, tx, a.GoalID, a.AgentID, now); err != nil {
				return res, store.Audit{}, err
			}
			if p.File != nil {
				return ib.replyFile(ctx, tx, a, it, p, res, key, now)
			}
			return res, ib.audit(a, fmt.Sprint(it.ID), map[string]any{"outbox_id": id, "key": key}), nil
		})
	if err != nil {
		return ReplyResult{}, fmt.Errorf("reply to inbox item: %w", err)
	}
	return res, nil
}

// replyFile queues the file of a reply: recorded as the replied item's, and sent to the
// item's conversation as an image or file message (an outbox row of kind file). The same
// file under the same key is one message.
func (ib *Inbox) replyFile(ctx context.Context, tx *store.Tx, a Agent, it store.InboxItem, p ReplyParams, res ReplyResult, key string, now time.Time) (ReplyResult, store.Audit, error) {
	prev, err := store.GetOutboxByKey(ctx, tx, store.FileReplyKey(it.ID, key))
	if err != nil {
		return res, store.Audit{}, err
	}
	if prev.ID != 0 {
		res.FileOutboxID = prev.ID
		return res, store.NoAudit(), nil
	}
	f, err := ib.st.In(tx).AttachReply(ctx, it, *p.File, now)
	if err != nil {
		return res, store.Audit{}, err
	}
	content, _ := json.Marshal(map[string]int64{"file_id": f.ID})
	id, _, err := store.InsertOutbox(ctx, tx, store.OutboxInsert{
		DedupeKey: store.FileReplyKey(it.ID, key), Kind: "file", ReceiveID: it.SourceChat, ReplyTo: it.SourceMessage,
		ReplyInThread: it.SourceMessage != "", Content: string(content), GoalID: it.GoalID, AgentID: it.AgentID,
		SessionID: it.SessionID,
	})
	if err != nil {
		return res, store.Audit{}, err
	}
	res.File, res.FileOutboxID, res.Created = &f, id, true
	if err := store.MarkTurnProgress(ctx, tx, a.GoalID, a.AgentID, now); err != nil {
		return res, store.Audit{}, err
	}
	return res, ib.audit(a, fmt.Sprint(it.ID), map[string]any{"outbox_id": res.OutboxID, "file_outbox_id": id,
		"key": key, "file": map[string]any{"file_id": f.ID, "name": f.Name, "size": f.Size, "sha256": f.SHA256}}), nil
}

// Counts returns the agent's waiting items (what should-run reports as inbox.pending/steer).
func (ib *Inbox) Counts(ctx context.Context, a Agent) (store.InboxCounts, error) {
	c, err := store.CountInbox(ctx, ib.st.DB(), a.GoalID, a.AgentID, ib.opts.Now())
	if err != nil {
		return store.InboxCounts{}, fmt.Errorf("count inbox: %w", err)
	}
	return c, nil
}

// Requeue returns timed-out deliveries of every agent to pending, expires old items, and
// expires steer items whose turn ended before they were read (telling their senders).
func (ib *Inbox) Requeue(ctx context.Context) error {
	err := ib.st.WithTx(ctx, func(tx *store.Tx) error {
		if err := ib.expireSteer(ctx, tx, "", ""); err != nil {
			return err
		}
		return store.RequeueInbox(ctx, tx, ib.opts.Now())
	})
	if err != nil {
		return fmt.Errorf("requeue inbox: %w", err)
	}
	return nil
}

// expireSteer expires steer items whose turn ended unread and queues a reply to each sender
// in the message's thread: a steer is never handed to a later turn, and never dropped
// silently either.
func (ib *Inbox) expireSteer(ctx context.Context, tx store.DB, goalID, agentID string) error {
	expired, err := store.ExpireStaleSteer(ctx, tx, goalID, agentID)
	if err != nil {
		return err
	}
	for _, it := range expired {
		if it.SourceChat == "" {
			continue
		}
		lang, err := store.GetChatLang(ctx, tx, it.SourceChat)
		if err != nil {
			return err
		}
		if lang == "" {
			lang = ib.opts.DefaultLang
			if g, err := store.GetGoal(ctx, tx, it.GoalID); err == nil && g.Lang != "" {
				lang = g.Lang
			}
		}
		text, err := ib.opts.Templates.Text(lang, "steer_expired", map[string]any{"GoalID": it.GoalID, "AgentID": it.AgentID})
		if err != nil {
			return err
		}
		if _, _, err := store.InsertOutbox(ctx, tx, store.OutboxInsert{
			DedupeKey: store.SteerExpiredKey(it.ID), Kind: "text", ReceiveID: it.SourceChat,
			ReplyTo: it.SourceMessage, ReplyInThread: it.SourceThread != "", Content: text,
			GoalID: it.GoalID, AgentID: it.AgentID, SessionID: it.SessionID,
		}); err != nil {
			return err
		}
	}
	return nil
}

// Run calls Requeue every interval until ctx is done; the caller owns the goroutine it runs
// in. Failures are logged and retried at the next interval.
func (ib *Inbox) Run(ctx context.Context, interval time.Duration) error {
	if interval <= 0 {
		interval = time.Minute
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := ib.Requeue(ctx); err != nil && ctx.Err() == nil {
				ib.opts.Logger.Warn("inbox requeue failed", "err", err)
			}
		}
	}
}

// audit is the audit row of an inbox operation; store.Do fills in who, when and what.
func (ib *Inbox) audit(a Agent, target string, detail map[string]any) store.Audit {
	b, _ := json.Marshal(detail) // maps of ids and strings always encode
	return store.Audit{GoalID: a.GoalID, Target: cmp.Or(target, a.target()), Detail: b}
}

func ids(items []store.InboxItem) []int64 {
	out := make([]int64, len(items))
	for i, it := range items {
		out[i] = it.ID
	}
	return out
}
