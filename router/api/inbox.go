package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/jackc/pgx/v5"

	"loopx/inbox"
	"loopx/store"
)

// The agents' inbox, scoped to the agent in the path: an agent token may use only its own
// inbox (403, audited, otherwise); the admin token any. Drain, ack and reply are replayable
// by Idempotency-Key like every mutating call: a retried drain whose answer was lost returns
// the same items instead of an empty list.

// DrainBody is the body of POST .../agents/{agent}/inbox/drain.
type DrainBody struct {
	SessionID string `json:"session_id,omitempty"` // "" = every session
	Limit     int    `json:"limit,omitempty"`      // 0 = 50, at most 200
}

// AckBody is the body of POST .../agents/{agent}/inbox/ack.
type AckBody struct {
	ItemIDs []int64 `json:"item_ids"`
}

// ReplyBody is the body of POST .../agents/{agent}/inbox/reply.
type ReplyBody struct {
	ItemID int64  `json:"item_id"`
	Key    string `json:"key,omitempty"` // "" = derived from the text
	Text   string `json:"text"`
}

// InboxItems is the answer of drain and ack.
type InboxItems struct {
	Items []store.InboxItem `json:"items"`
}

// inboxAgent checks that r may act on the inbox in its path and returns that inbox.
func (s *Server) inboxAgent(r *request, action string) (inbox.Agent, *inbox.Inbox, error) {
	agent, err := s.actingAgent(r, action, r.PathValue("agent"), true)
	if err != nil {
		return inbox.Agent{}, nil, err
	}
	ib, err := s.inbox()
	if err != nil {
		return inbox.Agent{}, nil, err
	}
	return inbox.Agent{GoalID: r.PathValue("goal"), AgentID: agent}, ib, nil
}

// replayed answers 200 with what fn returns, replayable under r's Idempotency-Key (see
// replayable); req is what the key's request hash covers.
func replayed[T any](ctx context.Context, s *Server, r *request, op string, req []any, fn func(ctx context.Context) (T, error)) (int, any, error) {
	var out T
	err := s.replayable(ctx, r, op, req, &out, func(ctx context.Context) error {
		var err error
		out, err = fn(ctx)
		return err
	})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, out, nil
}

func (s *Server) inboxCounts(ctx context.Context, r *request) (int, any, error) {
	a, ib, err := s.inboxAgent(r, "read inbox")
	if err != nil {
		return 0, nil, err
	}
	c, err := ib.Counts(ctx, a)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, map[string]any{"goal_id": a.GoalID, "agent_id": a.AgentID, "inbox": c}, nil
}

func (s *Server) inboxDrain(ctx context.Context, r *request) (int, any, error) {
	var b DrainBody
	if err := decode(r, &b); err != nil {
		return 0, nil, err
	}
	if b.Limit < 0 || b.Limit > 200 {
		return 0, nil, invalid("limit", "must be between 0 (default 50) and 200, got %d", b.Limit)
	}
	a, ib, err := s.inboxAgent(r, "drain inbox")
	if err != nil {
		return 0, nil, err
	}
	return replayed(ctx, s, r, "inbox.drain", []any{a, b}, func(ctx context.Context) (InboxItems, error) {
		items, err := ib.Drain(ctx, a, b.SessionID, b.Limit)
		return InboxItems{Items: nonNilItems(items)}, err
	})
}

func (s *Server) inboxAck(ctx context.Context, r *request) (int, any, error) {
	var b AckBody
	if err := decode(r, &b); err != nil {
		return 0, nil, err
	}
	if len(b.ItemIDs) == 0 {
		return 0, nil, invalid("item_ids", "give the ids of the items to acknowledge")
	}
	if len(b.ItemIDs) > 200 {
		return 0, nil, invalid("item_ids", "at most 200 ids per call, got %d", len(b.ItemIDs))
	}
	a, ib, err := s.inboxAgent(r, "ack inbox")
	if err != nil {
		return 0, nil, err
	}
	return replayed(ctx, s, r, "inbox.ack", []any{a, b}, func(ctx context.Context) (InboxItems, error) {
		items, err := ib.Ack(ctx, a, b.ItemIDs)
		return InboxItems{Items: nonNilItems(items)}, err
	})
}

func (s *Server) inboxReply(ctx context.Context, r *request) (int, any, error) {
	var b ReplyBody
	if err := decode(r, &b); err != nil {
		return 0, nil, err
	}
	a, ib, err := s.inboxAgent(r, "reply from inbox")
	if err != nil {
		return 0, nil, err
	}
	return replayed(ctx, s, r, "inbox.reply", []any{a, b}, func(ctx context.Context) (inbox.ReplyResult, error) {
		return ib.Reply(ctx, a, inbox.ReplyParams{ItemID: b.ItemID, Key: b.Key, Text: b.Text})
	})
}

// replayable runs fn and stores its answer (out) as the receipt of r's Idempotency-Key in the
// same transaction; a replay decodes the stored answer into out and runs nothing.
func (s *Server) replayable(ctx context.Context, r *request, op string, req any, out any, fn func(ctx context.Context) error) error {
	hash, err := store.RequestHash(op, req)
	if err != nil {
		return err
	}
	key := op + "|" + r.who.actor() + "|" + r.key
	return s.st.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		rc, found, err := store.LookupReceipt(ctx, tx, key, hash)
		if err != nil {
			return err
		}
		if found {
			if err := json.Unmarshal(rc.Body, out); err != nil {
				return fmt.Errorf("decode %s receipt: %w", op, err)
			}
			return nil
		}
		if err := fn(ctx); err != nil {
			return err
		}
		body, err := json.Marshal(out)
		if err != nil {
			return fmt.Errorf("encode %s receipt: %w", op, err)
		}
		return store.SaveReceipt(ctx, tx, store.Receipt{Key: key, RequestHash: hash, Status: http.StatusOK, Body: body, CreatedAt: s.now()})
	})
}

func (s *Server) inbox() (*inbox.Inbox, error) {
	if s.ib != nil {
		return s.ib, nil
	}
	return inbox.New(s.st, inbox.Options{Now: s.now, Templates: s.tpl})
}

func nonNilItems(items []store.InboxItem) []store.InboxItem {
	if items == nil {
		return []store.InboxItem{}
	}
	return items
}
