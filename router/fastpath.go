package router

import (
	"context"
	"fmt"
	"sync"
	"time"

	"loopx/store"
)

// enqueueFast takes the fast path (store.EnqueueFast, group-committed) for the most common
// message: plain text, not in a thread, addressed to the bot, in a chat with one whole-chat
// binding, answered with the receipt reaction. It returns false, having written nothing, for
// anything else (commands, address tokens, steers, threads, text over the bound, strangers,
// duplicates), which the transactional path then decides. Both paths commit the same rows for
// a message the fast one takes (TestFastPathMatchesGeneralPath).
func (c *Chat) enqueueFast(ctx context.Context, m Message) bool {
	if c.fast == nil || m.RootID != "" || m.ParentID != "" || c.opts.Receipt != ReceiptReaction || len(m.Files) > 0 {
		return false
	}
	h := &handling{c: c, m: m}
	if m.ChatType != ChatP2P && !h.mentionsBot() {
		return false
	}
	p, err := Parse(h.text())
	if err != nil || p.Command != "" || p.Addr != nil || p.Mode == store.ModeSteer || c.ib.CheckText(p.Text) != nil {
		return false
	}
	return c.fast.enqueue(ctx, store.FastMessage{
		EventID: m.EventID, ChatID: m.ChatID, MessageID: m.MessageID, Sender: m.SenderID,
		Admin: c.admins[m.SenderID], Mode: p.Mode, Text: p.Text,
	})
}

// Group commit for the fast path: a commit costs about as much as the rows it writes, so
// messages arriving together share one statement (bench/results has the figures). Batching
// needs no timer: while up to maxFastInFlight statements run, arriving messages wait, and the
// next statement takes all of them, so batches grow with the load and a lone message goes at
// once.
const (
	maxFastInFlight = 1
	maxFastBatch    = 64
	fastTimeout     = 3 * time.Second // Lark's answer window
)

// fastBatcher runs the fast path's statements. It owns no goroutine: a caller that finds a
// statement slot free leads, running batches until its own message is decided, then hands
// the slot to the oldest waiting caller. Every waiter is woken by the batch that decides it.
type fastBatcher struct {
	st   *store.Store
	opts store.FastOptions
	log  func(ctx context.Context, msg string, args ...any)

	mu       sync.Mutex
	waiting  []*fastCall
	inFlight int
}

type fastCall struct {
	msg  store.FastMessage
	wake chan struct{} // capacity 1: "look at lead and done again"
	// Guarded by fastBatcher.mu.
	lead, done, taken bool
}

// enqueue reports whether m was written by the fast path. false means nothing was written for
// it (not eligible, or the batch failed) and the caller must take the general path.
func (b *fastBatcher) enqueue(ctx context.Context, m store.FastMessage) bool {
	call := &fastCall{msg: m, wake: make(chan struct{}, 1)}
	b.mu.Lock()
	b.waiting = append(b.waiting, call)
	if b.inFlight < maxFastInFlight {
		b.inFlight++
		call.lead = true
	}
	b.mu.Unlock()
	for {
		b.mu.Lock()
		lead, done, taken := call.lead, call.done, call.taken
		b.mu.Unlock()
		if lead {
			return b.leadUntil(ctx, call)
		}
		if done {
			return taken
		}
		<-call.wake
	}
}

// leadUntil runs batches from the head of the queue until self is decided, then passes the
// statement slot on.
func (b *fastBatcher) leadUntil(ctx context.Context, self *fastCall) bool {
	for {
		b.mu.Lock()
		if self.done {
			taken := self.taken
			b.handOver()
			b.mu.Unlock()
			return taken
		}
		batch := b.take()
		b.mu.Unlock()
		taken := b.run(ctx, batch)
		b.mu.Lock()
		for i, call := range batch {
			call.done, call.taken = true, taken[i]
			if call != self {
				signal(call)
			}
		}
		b.mu.Unlock()
	}
}

// handOver passes a finished leader's slot to the oldest waiting call that does not lead
// yet, or frees it. Called with mu held.
func (b *fastBatcher) handOver() {
	for _, call := range b.waiting {
		if !call.lead {
			call.lead = true
			signal(call)
			return
		}
	}
	b.inFlight--
}

// take removes the next batch from the queue: at most maxFastBatch calls, and no event or
// message twice (a repeat waits for the next batch, where the first one's commit makes it a
// duplicate for the general path). Called with mu held.
func (b *fastBatcher) take() []*fastCall {
	var batch, rest []*fastCall
	events, messages := map[string]bool{}, map[string]bool{}
	for _, call := range b.waiting {
		ev, msg := call.msg.EventID, call.msg.MessageID
		if len(batch) == maxFastBatch || events[ev] || messages[msg] {
			rest = append(rest, call)
			continue
		}
		events[ev], messages[msg] = true, true
		batch = append(batch, call)
	}
	b.waiting = rest
	return batch
}

// run writes one batch. A failed statement wrote nothing, so every message of it is left to
// the general path, which reports any lasting fault (a database that is down) itself. A panic
// is turned into such a failure: other callers wait on this batch and the slot it holds, and
// letting it unwind would leave every later message waiting.
func (b *fastBatcher) run(ctx context.Context, batch []*fastCall) (taken []bool) {
	defer func() {
		if p := recover(); p != nil {
			b.log(ctx, "fast path batch panicked; its messages take the general path", "messages", len(batch), "panic", fmt.Sprint(p))
			taken = make([]bool, len(batch))
		}
	}()
	msgs := make([]store.FastMessage, len(batch))
	for i, call := range batch {
		msgs[i] = call.msg
	}
	// The batch is everyone's: one caller giving up must not fail the others' messages.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fastTimeout)
	defer cancel()
	taken, err := b.st.EnqueueFast(ctx, b.opts, msgs)
	if err != nil {
		b.log(ctx, "fast path batch not written; its messages take the general path", "messages", len(msgs), "err", err)
		return make([]bool, len(batch))
	}
	return taken
}

func signal(call *fastCall) {
	select {
	case call.wake <- struct{}{}:
	default: // a wake-up is already pending; the waiter rereads the state
	}
}
