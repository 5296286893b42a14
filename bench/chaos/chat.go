package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"loopx/bot/sandbox"
	"loopx/store"
)

// ChatResult is the duplicate-delivery scenario: every chat message is one inbox item and
// one receipt, however often and wherever Lark delivers it.
type ChatResult struct {
	Events            int            `json:"events"`
	ByTransport       map[string]int `json:"events_by_transport"`
	Duplicates        map[string]int `json:"duplicates"` // same event again, same event to another replica, new event id for the same message
	DuplicateShare    float64        `json:"duplicate_share"`
	Acked             int            `json:"acked"`
	NotAcked          int            `json:"not_acked"`
	Lost              int            `json:"lost"`
	DoubledEffects    int            `json:"doubled_effects"`
	DoubledReceipts   int            `json:"doubled_receipts"`
	MissingReceipts   int            `json:"missing_receipts"`
	IngestSeconds     float64        `json:"ingest_seconds"`
	EventsPerSecond   float64        `json:"events_per_second"`
	ReceiptDrainSecs  float64        `json:"receipt_drain_seconds"`
	MaxAppSendsPerSec int            `json:"max_app_sends_per_second"`
}

// chats are the group chats the chat scenarios talk in, each bound to the goal.
const chatCount = 40

func chatID(i int) string { return fmt.Sprintf("oc_chaos_%02d", i) }

// seed creates the goal and its agent and binds every chat to it through the chat itself.
func (s *suite) seed(ctx context.Context) error {
	if _, err := s.mustAPI(ctx, "POST", "/v1/goals", adminToken, map[string]any{"goal_id": goalID, "title": "Chaos",
		"owners": []string{ownerID}, "allowed_slots": 1000}, 201); err != nil {
		return err
	}
	if _, err := s.mustAPI(ctx, "POST", "/v1/goals/"+goalID+"/agents", adminToken, map[string]any{"agent_id": agentID, "is_default": true}, 201); err != nil {
		return err
	}
	var ds []*sandbox.Delivery
	for i := range chatCount {
		_ = s.sb.AddChat(chatID(i), sandbox.ChatGroup, "chaos "+chatID(i)) // kept from an earlier seed

		d, err := s.sb.UserSays(chatID(i), sandbox.ChatGroup, ownerID, "/bind #"+goalID, sandbox.MentionBot())
		if err != nil {
			return err
		}
		ds = append(ds, d)
	}
	if _, failed := waitDelivered(ctx, ds); failed > 0 {
		return fmt.Errorf("%d /bind messages not acknowledged", failed)
	}
	n, err := s.count(ctx, `SELECT count(*) FROM binding WHERE goal_id = $1`, goalID)
	if err != nil || n != chatCount {
		return fmt.Errorf("bindings: %d of %d (%v)", n, chatCount, err)
	}
	return nil
}

// sent is one chat message the suite sent and how.
type sent struct {
	chat, messageID string
	d               *sandbox.Delivery
	extra           []*sandbox.Delivery
}

// say sends n messages over the active transport at most inflight at a time, 30% of them
// delivered twice (a third the same event again, a third the same event straight to another
// replica, a third under a new event id), and returns them when every push is decided.
func (s *suite) say(ctx context.Context, n int, prefix, transport string, dups map[string]int) ([]sent, error) {
	const inflight = 64
	sem := make(chan struct{}, inflight)
	var mu sync.Mutex
	var wg sync.WaitGroup
	out := make([]sent, 0, n)
	rng := rand.New(rand.NewPCG(uint64(len(prefix)), uint64(n)))
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		chat := chatID(i % chatCount)
		d, err := s.sb.UserSays(chat, sandbox.ChatGroup, ownerID, fmt.Sprintf("%s message %d", prefix, i), sandbox.MentionBot())
		if err != nil {
			return nil, err
		}
		m := sent{chat: chat, messageID: d.MessageID, d: d}
		dup, pick := rng.IntN(10), rng.IntN(len(s.replicas))
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			_, _ = d.Wait(ctx)
			switch dup {
			case 0: // the same event again, to whichever replica the transport picks
				m.extra = append(m.extra, s.sb.Redeliver(d))
				mu.Lock()
				dups["same_event"]++
				mu.Unlock()
			case 1: // the same event straight to another replica at the same time
				if transport == "http" {
					r := s.replicas[pick]
					_, _, _ = s.sb.PushHTTP(ctx, r.url+"/lark/events", d.Payload)
				} else {
					_, _ = s.sb.PushWS(ctx, "", d.Payload)
				}
				mu.Lock()
				dups["same_event_other_replica"]++
				mu.Unlock()
			case 2: // the same message under a new event id
				p := withEventID(d.Payload, fmt.Sprintf("ev_re_%s_%d", prefix, i))
				if transport == "http" {
					_, _, _ = s.sb.PushHTTP(ctx, s.lb.url+"/lark/events", p)
				} else {
					_, _ = s.sb.PushWS(ctx, "", p)
				}
				mu.Lock()
				dups["new_event_same_message"]++
				mu.Unlock()
			}
			mu.Lock()
			out = append(out, m)
			mu.Unlock()
		})
	}
	wg.Wait()
	return out, nil
}

func (s *suite) chatScenario(ctx context.Context, res *Results) error {
	if err := s.ensureTransport(ctx, "ws"); err != nil {
		return err
	}
	r := &ChatResult{ByTransport: map[string]int{}, Duplicates: map[string]int{}}
	res.Chat = r
	start := time.Now()
	var all []sent
	for _, tr := range []string{"ws", "http"} {
		if err := s.ensureTransport(ctx, tr); err != nil {
			return err
		}
		half := s.o.events / 2
		got, err := s.say(ctx, half, "chat-"+tr, tr, r.Duplicates)
		if err != nil {
			return err
		}
		r.ByTransport[tr] = len(got)
		all = append(all, got...)
	}
	r.IngestSeconds = time.Since(start).Seconds()
	r.Events = len(all)
	r.EventsPerSecond = float64(r.Events) / r.IngestSeconds
	var ds []*sandbox.Delivery
	for _, m := range all {
		ds = append(ds, m.d)
		ds = append(ds, m.extra...)
	}
	r.Acked, r.NotAcked = waitDelivered(ctx, ds)
	dupTotal := 0
	for _, n := range r.Duplicates {
		dupTotal += n
	}
	r.DuplicateShare = float64(dupTotal) / float64(max(r.Events, 1))
	drained, err := s.waitOutboxDrained(ctx, 8*time.Minute)
	r.ReceiptDrainSecs = time.Since(start).Seconds() - r.IngestSeconds + 0*drained.Seconds()
	if err != nil {
		res.check(false, "chat: %v", err)
	}
	if err := s.checkMessages(ctx, all, &r.Lost, &r.DoubledEffects, &r.DoubledReceipts, &r.MissingReceipts); err != nil {
		return err
	}
	r.MaxAppSendsPerSec = s.sb.AppStats().MaxPerSecond
	res.check(r.NotAcked == 0, "chat: %d pushes never acknowledged", r.NotAcked)
	res.check(r.Lost == 0, "chat: %d messages lost", r.Lost)
	res.check(r.DoubledEffects == 0, "chat: %d messages with a doubled effect", r.DoubledEffects)
	res.check(r.DoubledReceipts == 0, "chat: %d messages with a doubled receipt", r.DoubledReceipts)
	res.check(r.MissingReceipts == 0, "chat: %d messages without a receipt", r.MissingReceipts)
	res.check(r.DuplicateShare >= 0.25, "chat: duplicate share %.2f below 30%%", r.DuplicateShare)
	return nil
}

// checkMessages counts, for each message, its inbox items and its reactions in the sandbox.
func (s *suite) checkMessages(ctx context.Context, msgs []sent, lost, doubled, doubledReceipts, missingReceipts *int) error {
	return s.checkMessagesOf(ctx, s.st, goalID, msgs, lost, doubled, doubledReceipts, missingReceipts)
}

// checkMessagesOf is checkMessages for the goal of another database.
func (s *suite) checkMessagesOf(ctx context.Context, st *store.Store, goal string, msgs []sent, lost, doubled, doubledReceipts, missingReceipts *int) error {
	items := map[string]int{}
	rows, err := st.DB().Query(ctx, `SELECT source_message, count(*) FROM inbox_item WHERE goal_id = $1 GROUP BY 1`, goal)
	if err != nil {
		return err
	}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			rows.Close()
			return err
		}
		items[id] = n
	}
	rows.Close()
	for _, m := range msgs {
		switch n := items[m.messageID]; {
		case n == 0:
			*lost++
		case n > 1:
			*doubled++
		}
		msg, ok := s.sb.Message(m.messageID)
		if !ok {
			*missingReceipts++
			continue
		}
		switch reactions := len(msg.Reactions); {
		case reactions == 0:
			*missingReceipts++
		case reactions > 1:
			*doubledReceipts++
			var at []string
			for _, r := range msg.Reactions {
				at = append(at, r.At.Format("15:04:05.000"))
			}
			s.log.Warn("doubled receipt", "message_id", m.messageID, "reactions_at", at)
		}
	}
	return nil
}
