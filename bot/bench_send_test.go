package bot_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loopx/bot/sandbox"
	"loopx/store"
)

// The send side of the ingest benchmark (LOOPX_BENCH_SERVE): how long a committed outbox row
// takes to reach the Lark sandbox. Every latency is measured from the row's created_at (the
// start of the transaction that committed it, so never later than the commit) to the moment
// the sandbox stored the send; both clocks are this machine's.

// sendProbe commits agent-style replies (text rows, 20 a second over 10 chats, within every
// chat's and the app's message budget) while the ingest runs: the message lane's latency under
// load, with no wait imposed by Lark's limits.
type sendProbe struct {
	st     *store.Store
	sb     *sandbox.Sandbox
	cancel context.CancelFunc
	done   chan struct{}
	n      int
}

const probeChats = 10

func startSendProbe(t *testing.T, st *store.Store, sb *sandbox.Sandbox) *sendProbe {
	t.Helper()
	for i := range probeChats {
		require.NoError(t, sb.AddChat(fmt.Sprintf("oc_probe_%d", i), sandbox.ChatGroup, "probe"))
	}
	ctx, cancel := context.WithCancel(t.Context())
	p := &sendProbe{st: st, sb: sb, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			_, err := st.DB().Exec(ctx, `INSERT INTO outbox (uuid, kind, receive_id, content) VALUES ($1, 'text', $2, 'probe')`,
				fmt.Sprintf("probe-%d", p.n), fmt.Sprintf("oc_probe_%d", p.n%probeChats))
			if err != nil {
				if ctx.Err() == nil {
					t.Errorf("insert probe reply: %v", err)
				}
				return
			}
			p.n++
		}
	}()
	return p
}

// finish stops the probe, waits for its replies to be sent and reports their latency.
func (p *sendProbe) finish(t *testing.T) string {
	p.cancel()
	<-p.done
	require.Eventually(t, func() bool {
		return countRows(t, p.st, `SELECT count(*) FROM outbox WHERE uuid LIKE 'probe-%' AND state <> 'sent'`) == 0
	}, 30*time.Second, 20*time.Millisecond, "probe replies sent")
	created := map[string]time.Time{}
	rows, err := p.st.DB().Query(t.Context(), `SELECT uuid, created_at FROM outbox WHERE uuid LIKE 'probe-%'`)
	require.NoError(t, err)
	for rows.Next() {
		var u string
		var at time.Time
		require.NoError(t, rows.Scan(&u, &at))
		created[u] = at
	}
	require.NoError(t, rows.Err())
	var lat []time.Duration
	for i := range probeChats {
		for _, m := range p.sb.Chat(fmt.Sprintf("oc_probe_%d", i)).BotMessages() {
			if at, ok := created[m.UUID]; ok {
				lat = append(lat, m.CreatedAt.Sub(at))
			}
		}
	}
	require.Len(t, lat, len(created), "every probe reply reached the sandbox once")
	return fmt.Sprintf("replies committed during the 8-sender ingest (%d, 20/s), commit → Lark: %s\n", len(lat), percentiles(lat))
}

// receiptLatency pushes 100 events at 10 a second, within Lark's reaction budget, and reports
// how long each receipt took from commit to Lark.
func receiptLatency(t *testing.T, st *store.Store, sb *sandbox.Sandbox, build func() *http.Request, push func(*http.Request) time.Duration) string {
	t.Helper()
	marker := drainReceipts(t, st)
	const n = 100
	var wg sync.WaitGroup
	for range n {
		req := build()
		wg.Go(func() { push(req) })
		time.Sleep(100 * time.Millisecond)
	}
	wg.Wait()
	lat, _ := receiptTimes(t, st, sb, marker, n, 30*time.Second)
	return fmt.Sprintf("receipts at light load (%d events, 10/s), commit → Lark: %s\n", n, percentiles(lat))
}

// receiptBacklog pushes a burst of 300 events from 8 senders and reports how long until the
// last receipt reached Lark, beside the floor Lark's reaction limit sets (50 a second).
func receiptBacklog(t *testing.T, st *store.Store, sb *sandbox.Sandbox, build func() *http.Request, push func(*http.Request) time.Duration) string {
	t.Helper()
	marker := drainReceipts(t, st)
	const n, senders = 300, 8
	reqs := make([]*http.Request, n)
	for i := range reqs {
		reqs[i] = build()
	}
	var wg sync.WaitGroup
	for w := range senders {
		wg.Go(func() {
			for i := w; i < n; i += senders {
				push(reqs[i])
			}
		})
	}
	wg.Wait()
	_, span := receiptTimes(t, st, sb, marker, n, 3*time.Minute)
	floor := time.Duration(n) * time.Second / 50
	return fmt.Sprintf("receipt backlog after a burst of %d events: the last receipt reached Lark %.1f s after the first commit (Lark's 50/s floor: %.1f s; LoopX books 45/s and 950/min)\n",
		n, span.Seconds(), floor.Seconds())
}

// drainReceipts ends the benchmark's earlier receipt backlog (marked sent: Lark's reaction
// budget would take many minutes for it) and frees the reaction budget, so the next
// measurement starts from an idle lane. It returns the outbox id the next rows follow.
func drainReceipts(t *testing.T, st *store.Store) (marker int64) {
	t.Helper()
	ctx := t.Context()
	_, err := st.DB().Exec(ctx, `UPDATE outbox SET state = 'sent', sent_at = now(), claimed_by = '', claimed_until = NULL
WHERE kind = 'reaction' AND state IN ('pending', 'sending')`)
	require.NoError(t, err)
	time.Sleep(time.Second) // sends already booked finish
	_, err = st.DB().Exec(ctx, `DELETE FROM send_rate WHERE scope LIKE 'reaction%'`)
	require.NoError(t, err)
	require.NoError(t, st.DB().QueryRow(ctx, `SELECT coalesce(max(id), 0) FROM outbox`).Scan(&marker))
	return marker
}

// receiptTimes waits for the n receipts queued after marker to be sent, and returns each one's
// commit → Lark latency and the span from the first commit to the last receipt.
func receiptTimes(t *testing.T, st *store.Store, sb *sandbox.Sandbox, marker int64, n int, within time.Duration) ([]time.Duration, time.Duration) {
	t.Helper()
	q := fmt.Sprintf(`SELECT count(*) FROM outbox WHERE id > %d AND kind = 'reaction' AND state = 'sent'`, marker)
	require.Eventually(t, func() bool { return countRows(t, st, q) >= n }, within, 20*time.Millisecond, "receipts sent")
	rows, err := st.DB().Query(t.Context(), `SELECT target_message, created_at FROM outbox WHERE id > $1 AND kind = 'reaction'`, marker)
	require.NoError(t, err)
	var lat []time.Duration
	var first, last time.Time
	for rows.Next() {
		var msg string
		var at time.Time
		require.NoError(t, rows.Scan(&msg, &at))
		m, ok := sb.Message(msg)
		require.True(t, ok, "message %s in the sandbox", msg)
		require.Len(t, m.Reactions, 1, "one receipt on %s", msg)
		sent := m.Reactions[0].At
		lat = append(lat, sent.Sub(at))
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if sent.After(last) {
			last = sent
		}
	}
	require.NoError(t, rows.Err())
	require.Len(t, lat, n)
	return lat, last.Sub(first)
}

func percentiles(d []time.Duration) string {
	if len(d) == 0 {
		return "no samples"
	}
	slices.Sort(d)
	r := func(x time.Duration) time.Duration { return x.Round(100 * time.Microsecond) }
	return fmt.Sprintf("p50 %s, p99 %s, max %s", r(d[len(d)/2]), r(d[len(d)*99/100]), r(d[len(d)-1]))
}
