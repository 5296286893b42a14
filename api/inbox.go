package api

import (
	"context"
	"net/http"
	"strconv"

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
	Key    string `json:"key,omitempty"`  // "" = derived from the text (and the file)
	Text   string `json:"text,omitempty"` // may be empty when a file is sent
	// File is sent back to the chat as an image or file message (base64); see FileBody.
	File *FileBody `json:"file,omitempty"`
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
	return inbox.Agent{GoalID: r.PathValue("goal"), AgentID: agent}, s.ib, nil
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
	items, err := ib.Drain(ctx, a, inbox.DrainParams{SessionID: b.SessionID, Limit: b.Limit, Key: r.key})
	if err != nil {
		return 0, nil, err
	}
	for i := range items {
		withURLs(items[i].Files)
	}
	return http.StatusOK, InboxItems{Items: nonNilItems(items)}, nil
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
	items, err := ib.Ack(ctx, a, b.ItemIDs, r.key)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, InboxItems{Items: nonNilItems(items)}, nil
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
	file, err := s.upload(ctx, b.File, "file")
	if err != nil {
		return 0, nil, err
	}
	res, err := ib.Reply(ctx, a, inbox.ReplyParams{ItemID: b.ItemID, Key: b.Key, Text: b.Text, File: file, CallKey: r.key})
	if err != nil {
		return 0, nil, err
	}
	if res.File != nil {
		res.File.URL = "/v1/files/" + strconv.FormatInt(res.File.ID, 10)
	}
	return http.StatusOK, res, nil
}

func nonNilItems(items []store.InboxItem) []store.InboxItem {
	if items == nil {
		return []store.InboxItem{}
	}
	return items
}
