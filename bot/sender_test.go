package bot_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loopx/bot"
	"loopx/bot/sandbox"
	"loopx/server/larkstore"
)

// checkExactlyOnce asserts the chat holds exactly the n texts "<prefix>NNN" in commit order.
func checkExactlyOnce(t *testing.T, msgs []sandbox.Message, prefix string, n int) {
	t.Helper()
	require.Len(t, msgs, n)
	uuids := map[string]bool{}
	for i, m := range msgs {
		require.Equal(t, fmt.Sprintf("%s%03d", prefix, i), m.Text(), "message %d out of order or duplicated", i)
		require.False(t, uuids[m.UUID], "uuid %s sent twice", m.UUID)
		uuids[m.UUID] = true
	}
}

func (e *testBundle) waitAllSent(n int, within time.Duration) {
	e.t.Helper()
	require.Eventually(e.t, func() bool {
		return e.count(`SELECT count(*) FROM outbox WHERE state = 'sent'`) == n
	}, within, 20*time.Millisecond, "not all outbox rows were sent")
}

// Lark's real limits: one chat, two senders, never above 5 per second by the sandbox's count.
func TestBurstToOneChatHoldsFivePerSecond(t *testing.T) {
	t.Parallel()
	e := setup(t, bundleOpts{transport: bot.TransportHTTP})
	chat := e.sb.DefaultChatID()
	const n = 30
	for i := range n {
		e.insertOutbox("text", chat, fmt.Sprintf("burst-%03d", i), fmt.Sprintf("burst-uuid-%03d", i))
	}
	e.startSender("s1", bot.DefaultRateLimits)
	e.startSender("s2", bot.DefaultRateLimits)
	e.waitAllSent(n, 2*settle) // 30 sends at 4/s: about 8 s

	st := e.sb.Chat(chat).Stats()
	require.LessOrEqual(t, st.MaxPerSecond, 5, "chat limit exceeded")
	require.LessOrEqual(t, st.MaxAttemptsPerSecond, 5, "sends offered above the chat limit")
	require.Zero(t, st.RateLimited)
	checkExactlyOnce(t, e.sb.Chat(chat).BotMessages(), "burst-", n)
}

// 500 replies to one chat across two senders, with a 429 storm and a token revocation mid-run,
// at Lark's real limits (the sandbox counts 5 per chat per second like Lark; our senders keep
// 4/s), so it takes about two minutes.
func TestBurst500WithRateLimitStormAndRevocation(t *testing.T) {
	t.Parallel()
	e := setup(t, bundleOpts{transport: bot.TransportHTTP})
	chat := e.sb.DefaultChatID()
	const n = 500
	for i := range n {
		e.insertOutbox("text", chat, fmt.Sprintf("m-%03d", i), fmt.Sprintf("u-%03d", i))
	}
	e.startSender("s1", bot.DefaultRateLimits)
	e.startSender("s2", bot.DefaultRateLimits)

	sent := func() int { return e.count(`SELECT count(*) FROM outbox WHERE state = 'sent'`) }
	// The deadlines bound a stuck sender; at 4/s the whole run takes about two minutes.
	require.Eventually(t, func() bool { return sent() >= 60 }, 2*time.Minute, 20*time.Millisecond)
	e.sb.FailNext(sandbox.RouteCreate, 5, sandbox.Fail{HTTP: 429, Code: sandbox.CodeRateLimited, Msg: "request trigger frequency limit",
		Headers: map[string]string{"x-ogw-ratelimit-reset": "1"}})
	require.Eventually(t, func() bool { return sent() >= 250 }, 3*time.Minute, 20*time.Millisecond)
	issued := e.sb.TokenIssues()
	e.sb.Revoke()
	e.sb.FailNext(sandbox.RouteCreate, 3, sandbox.Fail{HTTP: 503, Code: 1, Msg: "unavailable"})
	e.waitAllSent(n, 3*time.Minute)

	require.Greater(t, e.sb.TokenIssues(), issued, "a fresh token was fetched after the revocation")
	st := e.sb.Chat(chat).Stats()
	require.LessOrEqual(t, st.MaxPerSecond, 5, "never above Lark's 5 messages/s for one chat, by the sandbox's count")
	require.LessOrEqual(t, st.MaxAttemptsPerSecond, 5, "sends offered above the chat limit")
	require.Zero(t, st.RateLimited, "the sandbox's own limiter never had to refuse a send")
	require.Zero(t, e.count(`SELECT count(*) FROM outbox WHERE state <> 'sent'`))
	checkExactlyOnce(t, e.sb.Chat(chat).BotMessages(), "m-", n)
}

// A committed reply goes out at once, woken by the outbox notification (a few milliseconds on
// a quiet machine), never after the 10 s fallback poll.
func TestCommittedReplyIsSentAtOnce(t *testing.T) {
	t.Parallel()
	e := setup(t, bundleOpts{transport: bot.TransportHTTP})
	// A 10 s fallback poll: only the outbox notification can make these sends quick.
	s, err := bot.NewSender(bot.NewClient(e.cfg, 5*time.Second), larkstore.Outbox{Store: e.st}, larkstore.Limiter{Store: e.st},
		bot.SenderOptions{Owner: "lat", Logger: quietLogger(), Poll: 10 * time.Second})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	// Warm up the token and connections.
	e.insertOutbox("text", e.sb.DefaultChatID(), "warm", "warm-1")
	e.waitAllSent(1, settle)
	var lat []time.Duration
	for i := range 7 {
		chat := fmt.Sprintf("oc_lat_%d", i)
		require.NoError(t, e.sb.AddChat(chat, sandbox.ChatGroup, chat))
		time.Sleep(300 * time.Millisecond) // let the rechecks after the last wake-up lapse
		start := time.Now()
		e.insertOutbox("text", chat, "ping", fmt.Sprintf("lat-%d", i))
		require.Eventually(t, func() bool { return len(e.sb.Chat(chat).BotMessages()) == 1 }, settle, time.Millisecond)
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	t.Logf("commit-to-Lark latency: median %s, worst %s", lat[len(lat)/2], lat[len(lat)-1])
	// The latency is the point, so it is asserted, with headroom for a busy machine: on a
	// quiet one the median is a few milliseconds (well under 100 ms); what must never happen is
	// a send that waited for the 10 s fallback poll, which these bounds still rule out.
	require.Less(t, lat[len(lat)/2], time.Second, "the notification wakes the sender")
	require.Less(t, lat[len(lat)-1], 5*time.Second, "never the fallback poll")
}

// Receipts are their own lane: a reply committed behind a burst of receipt reactions in the
// same chat goes out at once, while the reactions drain within Lark's reaction budget.
func TestReceiptBurstNeverHoldsAReply(t *testing.T) {
	t.Parallel()
	e := setup(t, bundleOpts{transport: bot.TransportHTTP})
	chat := e.sb.DefaultChatID()
	d := e.ownerSays("hello")
	const n = 120
	for i := range n {
		_, err := e.st.DB().Exec(t.Context(), `INSERT INTO outbox (uuid, kind, receive_id, target_message, content)
VALUES ($1, 'reaction', $2, $3, 'OK')`, fmt.Sprintf("r-%03d", i), chat, d.MessageID)
		require.NoError(t, err)
	}
	e.startSender("s1", bot.DefaultRateLimits)
	reactions := func() []sandbox.Reaction {
		m, ok := e.sb.Message(d.MessageID)
		require.True(t, ok)
		return m.Reactions
	}
	require.Eventually(t, func() bool { return len(reactions()) >= 10 }, settle, 5*time.Millisecond)
	start := time.Now()
	e.insertOutbox("text", chat, "the reply", "u-reply")
	require.Eventually(t, func() bool { return len(e.sb.Chat(chat).BotMessages()) == 1 }, settle, time.Millisecond)
	replyLatency := time.Since(start)
	// The proof that the reply did not queue behind the receipts is that receipts were still
	// queued when it arrived (they drain at under 45/s, so 120 take over 2.5 s however fast
	// the machine is). The latency bound has headroom for a busy machine: on a quiet one the
	// reply takes milliseconds.
	require.Less(t, len(reactions()), n, "the reply went out while receipts were still queued")
	require.Less(t, replyLatency, 2*time.Second, "the reply did not wait behind the receipts")
	e.drained()
	got := reactions()
	require.Len(t, got, e.count(`SELECT count(*) FROM outbox WHERE kind = 'reaction'`), "each reaction row sent once")
	// Within Lark's limit: at most 50 reactions in any one second as Lark sees them. The
	// sender books 45 a second; the time each send reaches Lark adds jitter on a busy machine
	// (a send booked early and delayed lands beside the next ones), which the 5 of margin
	// absorbs.
	for i := range got {
		j := i
		for j < len(got) && got[j].At.Sub(got[i].At) < time.Second {
			j++
		}
		require.LessOrEqual(t, j-i, 50, "reactions in the second after %s", got[i].At)
	}
	t.Logf("reply latency behind %d receipts: %s; receipts drained in %s", n, replyLatency, got[len(got)-1].At.Sub(got[0].At))
}

func TestPermanentFailuresAreMarkedWithTheirCode(t *testing.T) {
	t.Parallel()
	e := setup(t, bundleOpts{transport: bot.TransportHTTP})
	ctx := t.Context()
	// A missing scope first, alone, so the injected answer meets this send.
	require.NoError(t, e.sb.AddChat("oc_scope", sandbox.ChatGroup, "scope"))
	e.sb.FailNext(sandbox.RouteCreate, 1, sandbox.Fail{Code: 99991672, Msg: "Access denied. One of the following scopes is required: [im:message:send_as_bot]"})
	e.insertOutbox("text", "oc_scope", "needs scope", "f-5")
	e.startSender("s1", bot.DefaultRateLimits)
	require.Eventually(t, func() bool { return e.count(`SELECT count(*) FROM outbox WHERE state = 'failed'`) == 1 }, settle, 20*time.Millisecond)

	require.NoError(t, e.sb.AddChat("oc_gone", sandbox.ChatGroup, "gone"))
	e.sb.RemoveBot("oc_gone")
	e.insertOutbox("text", "oc_gone", "hello?", "f-1")
	e.insertOutbox("card", "oc_big", `{"schema":"2.0","body":{"elements":[{"tag":"markdown","content":"`+strings.Repeat("x", 31*1024)+`"}]}}`, "f-2")
	e.insertOutbox("text", "oc_big2", strings.Repeat("y", 151*1024), "f-3")
	e.insertOutbox("card", "oc_bad", `{not json`, "f-4")

	require.Eventually(t, func() bool { return e.count(`SELECT count(*) FROM outbox WHERE state = 'failed'`) == 5 }, settle, 20*time.Millisecond)
	var reasons []string
	rows, err := e.st.DB().Query(ctx, `SELECT uuid, last_code, last_error FROM outbox ORDER BY uuid`)
	require.NoError(t, err)
	codes := map[string]int{}
	for rows.Next() {
		var u, msg string
		var code int
		require.NoError(t, rows.Scan(&u, &code, &msg))
		codes[u] = code
		reasons = append(reasons, msg)
	}
	require.NoError(t, rows.Err())
	require.Contains(t, reasons[1], "30 KB")
	require.Contains(t, reasons[2], "150 KB")
	require.Contains(t, reasons[3], "not valid JSON")
	require.Equal(t, 230002, codes["f-1"])
	require.Equal(t, 99991672, codes["f-5"])
	require.Contains(t, reasons[4], "im:message:send_as_bot", "the scope Lark names is kept")

	fails, err := e.st.ListOutboxFailures(ctx, "oc_big", 10)
	require.NoError(t, err)
	require.Len(t, fails, 1)
}

func TestReplyToRecalledMessageFallsBackToNewMessage(t *testing.T) {
	t.Parallel()
	e := setup(t, bundleOpts{transport: bot.TransportHTTP})
	chat := e.sb.DefaultChatID()
	d, err := e.sb.UserSays(chat, sandbox.ChatGroup, owner, "question", sandbox.MentionBot())
	require.NoError(t, err)
	require.True(t, waitDelivery(t, d).Acked)
	// The reply the router queued will find its target recalled.
	e.sb.FailNext(sandbox.RouteReply, 1, sandbox.Fail{Code: sandbox.CodeMessageRecalled, Msg: "message recalled"})
	e.startSender("s1", bot.DefaultRateLimits)
	e.waitAllSent(1, settle)
	msgs := e.sb.Chat(chat).BotMessages()
	require.Len(t, msgs, 1)
	require.Empty(t, msgs[0].ParentID, "sent as a new message in the chat")
	require.Equal(t, "got: @_user_1 question", msgs[0].Text())
}

func TestCardUpdateAndReaction(t *testing.T) {
	t.Parallel()
	e := setup(t, bundleOpts{transport: bot.TransportHTTP})
	ctx := t.Context()
	chat := e.sb.DefaultChatID()
	d, err := e.sb.UserSays(chat, sandbox.ChatGroup, owner, "status?", sandbox.MentionBot())
	require.NoError(t, err)
	require.True(t, waitDelivery(t, d).Acked)
	card := e.insertOutbox("card", chat, `{"schema":"2.0","body":{"elements":[{"tag":"markdown","content":"v1"}]}}`, "cu-card")
	_, err = e.st.DB().Exec(ctx, `INSERT INTO outbox (uuid, kind, receive_id, update_of, content) VALUES ('cu-upd', 'card_update', $1, $2, $3)`,
		chat, card, `{"schema":"2.0","body":{"elements":[{"tag":"markdown","content":"v2"}]}}`)
	require.NoError(t, err)
	_, err = e.st.DB().Exec(ctx, `INSERT INTO outbox (uuid, kind, receive_id, target_message, content) VALUES ('cu-react', 'reaction', $1, $2, 'OK')`,
		chat, d.MessageID)
	require.NoError(t, err)
	e.startSender("s1", bot.DefaultRateLimits)
	e.waitAllSent(4, settle) // reply, card, update, reaction

	var cardMsg string
	require.NoError(t, e.st.DB().QueryRow(ctx, `SELECT lark_message_id FROM outbox WHERE id = $1`, card).Scan(&cardMsg))
	m, ok := e.sb.Message(cardMsg)
	require.True(t, ok)
	require.True(t, m.Updated)
	require.Contains(t, m.Content, "v2")
	user, ok := e.sb.Message(d.MessageID)
	require.True(t, ok)
	require.Len(t, user.Reactions, 1)
	require.Equal(t, "OK", user.Reactions[0].EmojiType)
}

// Shutdown lets an in-flight send finish and hands back what was not started.
func TestSenderShutdownFinishesInFlightAndReleases(t *testing.T) {
	t.Parallel()
	e := setup(t, bundleOpts{transport: bot.TransportHTTP})
	chat := e.sb.DefaultChatID()
	e.insertOutbox("text", chat, "slow", "sd-1")
	e.insertOutbox("text", chat, "queued", "sd-2")
	e.sb.FailNext(sandbox.RouteCreate, 1, sandbox.Fail{Delay: 800 * time.Millisecond})
	// A grace far above the 800 ms the send takes, so a busy machine cannot cut it.
	const grace = 10 * time.Second
	s, err := bot.NewSender(bot.NewClient(e.cfg, 5*time.Second), larkstore.Outbox{Store: e.st}, larkstore.Limiter{Store: e.st},
		bot.SenderOptions{Owner: "sd", Logger: quietLogger(), Grace: grace})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	// A row in state sending is in flight: its send runs on the sender's send context, which
	// the shutdown below does not cancel before the grace.
	require.Eventually(t, func() bool { return e.count(`SELECT count(*) FROM outbox WHERE state = 'sending'`) == 1 }, settle, 5*time.Millisecond)
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(grace + settle):
		t.Fatal("sender did not stop")
	}
	// Bounded by the grace, not by the queued row: the shutdown waited for the one send only.
	require.Less(t, time.Since(start), grace)
	require.Equal(t, 1, e.count(`SELECT count(*) FROM outbox WHERE uuid = 'sd-1' AND state = 'sent'`), "the in-flight send completed")
	require.Equal(t, 1, e.count(`SELECT count(*) FROM outbox WHERE uuid = 'sd-2' AND state = 'pending' AND claimed_by = ''`), "nothing left claimed")
	require.Len(t, e.sb.Chat(chat).BotMessages(), 1)
}

func TestWrongAppSecretFailsWithTheTokenCode(t *testing.T) {
	t.Parallel()
	e := setup(t, bundleOpts{transport: bot.TransportHTTP})
	cfg := e.cfg
	cfg.AppSecret = "not-the-secret"
	s, err := bot.NewSender(bot.NewClient(cfg, 5*time.Second), larkstore.Outbox{Store: e.st}, larkstore.Limiter{Store: e.st},
		bot.SenderOptions{Owner: "bad", Logger: quietLogger(), MaxAttempts: 2, Poll: 100 * time.Millisecond})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	e.insertOutbox("text", e.sb.DefaultChatID(), "hello", "bad-secret-1")
	require.Eventually(t, func() bool {
		return e.count(`SELECT count(*) FROM outbox WHERE state = 'failed' AND last_code = $1`, sandbox.CodeAppSecretInvalid) == 1
	}, settle, 20*time.Millisecond, "failed with Lark's token code after the retries")
	require.Empty(t, e.sb.Chat(e.sb.DefaultChatID()).BotMessages())
}
