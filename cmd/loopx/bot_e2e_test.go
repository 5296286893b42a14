package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loopx/bot/sandbox"
	"loopx/store"
	"loopx/store/storetest"
)

// TestTwoReplicasShareOneLarkApp runs two real `loopx serve` processes on one database and one
// (sandbox) Lark app over the long connection: an event and its redeliveries, landing on
// either replica, have one effect; a burst of replies is sent exactly once within the chat
// limit while one replica is stopped with SIGTERM mid-burst.
func TestTwoReplicasShareOneLarkApp(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	sb, err := sandbox.New(sandbox.Options{})
	require.NoError(t, err)
	sb.Start(ctx)
	t.Cleanup(sb.Close)

	dbURL := storetest.NewDatabase(t)
	pool, err := store.Open(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	st := store.New(pool, store.Options{})
	meta := store.Meta{Actor: "admin", Surface: "system"}
	owner := "ou_e2e_owner"
	_, err = st.CreateGoal(ctx, store.CreateGoalParams{ID: "docs", Owners: []string{owner}, Meta: meta})
	require.NoError(t, err)
	_, err = st.RegisterAgent(ctx, store.RegisterAgentParams{GoalID: "docs", AgentID: "codex", IsDefault: true, Meta: meta})
	require.NoError(t, err)
	chat := sb.DefaultChatID()
	_, err = pool.Exec(ctx, `INSERT INTO binding (chat_id, goal_id, agent_id, created_by) VALUES ($1, 'docs', 'codex', $2)`, chat, owner)
	require.NoError(t, err)

	env := func(name string) map[string]string {
		return map[string]string{"DATABASE_URL": dbURL, "LOOPX_ADMIN_TOKEN": e2eAdminToken,
			"LARK_APP_ID": sb.AppID(), "LARK_APP_SECRET": sb.AppSecret(), "LARK_BASE_URL": sb.URL(),
			"LARK_TRANSPORT": "ws", "LOOPX_SCHEDULER": "off", "LOOPX_REPLICA": name, "LOG_LEVEL": "info"}
	}
	replicas := map[string]*serveProc{"a": startServe(t, env("a")), "b": startServe(t, env("b"))}
	require.Eventually(t, func() bool { return len(sb.WSConnections()) == 2 }, time.Minute, 20*time.Millisecond,
		"both replicas hold a long connection")

	d, err := sb.UserSays(chat, sandbox.ChatGroup, owner, "please refresh the changelog", sandbox.MentionBot())
	require.NoError(t, err)
	res, err := d.Wait(ctx)
	require.NoError(t, err)
	require.True(t, res.Acked, res.Err)
	for range 4 { // Lark pushes each redelivery to a random connection
		r, err := sb.Redeliver(d).Wait(ctx)
		require.NoError(t, err)
		require.True(t, r.Acked, r.Err)
	}
	count := func(sql string, args ...any) int {
		var n int
		require.NoError(t, pool.QueryRow(ctx, sql, args...).Scan(&n))
		return n
	}
	require.Equal(t, 1, count(`SELECT count(*) FROM inbox_item WHERE source_message = $1`, d.MessageID))
	require.Eventually(t, func() bool {
		m, _ := sb.Message(d.MessageID)
		return len(m.Reactions) == 1
	}, time.Minute, 20*time.Millisecond, "one receipt")

	// A burst of replies; the replica sending one is stopped while the send is in flight.
	const n = 24
	for i := range n {
		_, err := pool.Exec(ctx, `INSERT INTO outbox (uuid, kind, receive_id, content) VALUES ($1, 'text', $2, $3)`,
			fmt.Sprintf("e2e-burst-%02d", i), chat, fmt.Sprintf("burst %02d", i))
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		return count(`SELECT count(*) FROM outbox WHERE state = 'sent' AND uuid LIKE 'e2e-burst-%'`) >= 3
	},
		time.Minute, 10*time.Millisecond)
	// Slow Lark down so that a send is in flight when the signal arrives: every remaining send
	// takes half a second, long enough to see which replica holds the chat's one in-flight
	// row, however busy the machine. That replica is the one stopped.
	sb.FailNext(sandbox.RouteCreate, n, sandbox.Fail{Delay: 500 * time.Millisecond})
	var holder string
	require.Eventually(t, func() bool {
		err := pool.QueryRow(ctx, `SELECT claimed_by FROM outbox WHERE state = 'sending' AND uuid LIKE 'e2e-burst-%' LIMIT 1`).Scan(&holder)
		return err == nil
	}, time.Minute, 5*time.Millisecond, "a send in flight")
	name, _, _ := strings.Cut(holder, "/") // a sender's claims are "<replica>/<random>"
	require.Contains(t, replicas, name, "claimed by %q", holder)
	start := time.Now()
	replicas[name].stop(t) // SIGTERM; fails the test if the process does not exit cleanly (see stop)
	t.Logf("replica %s stopped %s after SIGTERM with a send in flight", name, time.Since(start).Round(time.Millisecond))

	require.Eventually(t, func() bool {
		return count(`SELECT count(*) FROM outbox WHERE state = 'sent' AND uuid LIKE 'e2e-burst-%'`) == n
	},
		2*time.Minute, 20*time.Millisecond, "the other replica delivered the rest")
	var burst []string
	for _, m := range sb.Chat(chat).BotMessages() {
		if m.MsgType == "text" {
			burst = append(burst, m.Text())
		}
	}
	require.Len(t, burst, n, "every reply exactly once")
	for i, text := range burst {
		require.Equal(t, fmt.Sprintf("burst %02d", i), text, "commit order kept")
	}
	require.LessOrEqual(t, sb.Chat(chat).Stats().MaxPerSecond, 5, "never above 5/s for the chat")
}
