package router_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"loopx/router"
	"loopx/store"
)

// The fast path (one batched statement for a plain message to a chat's one binding) commits
// exactly the rows the general, transactional path commits, for the messages it takes, and
// leaves every other message to the general path. The general path is forced by handing the
// message over inside a transaction, which the fast path never joins.
func TestFastPathMatchesGeneralPath(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 12001)
	msgs := []router.Message{
		{SenderID: owner, Text: "@_user_1 please refresh the changelog"},
		{SenderID: member, Text: "@_user_1 the build is red"},
		{SenderID: admin, Text: "@_user_1 hello from the admin"},
		{SenderID: stranger, Text: "@_user_1 let me in"},
		{SenderID: owner, Text: "@_user_1 /queue after this turn"},
		{SenderID: owner, Text: "@_user_1 /steer now please"},
		{SenderID: owner, Text: "@_user_1 #infra deploy it"},
		{SenderID: owner, Text: "@_user_1 /status"},
		{SenderID: owner, Text: "@_user_1 " + long},
		{SenderID: owner, Text: "no mention, not addressed"},
		{SenderID: owner, Text: "@_user_1 in a thread", RootID: "om_root", ParentID: "om_root", ThreadID: "omt_1"},
		{SenderID: owner, Text: "direct", ChatID: "oc_p2p", ChatType: router.ChatP2P},
		{SenderID: owner, Text: "@_user_1 please refresh the changelog", EventID: "ev_f1", MessageID: "om_f1"}, // redelivery
	}
	dumps := make([][]string, 2)
	for i, general := range []bool{false, true} {
		e := setup(t)
		if general {
			router.DisableFastPath(e.chat)
		}
		for n, m := range msgs {
			if m.EventID == "" {
				m.EventID, m.MessageID = fmt.Sprintf("ev_f%d", n+1), fmt.Sprintf("om_f%d", n+1)
			}
			if m.ChatID == "" {
				m.ChatID, m.ChatType = room, router.ChatGroup
			}
			if strings.Contains(m.Text, "@_user_1") {
				m.Mentions = []router.Mention{{Key: "@_user_1", OpenID: bot, Name: "LoopX"}}
			}
			require.NoError(t, e.chat.HandleMessage(t.Context(), m))
		}
		dumps[i] = dumpChatEffects(t, e.st)
	}
	require.Equal(t, dumps[1], dumps[0])
	require.Contains(t, strings.Join(dumps[0], "\n"), `inbox_item: (docs,codex,"",inbox,"please refresh the changelog",ou_owner,oc_room,om_f1,`, "the plain message was enqueued")
}

// dumpChatEffects lists every row a chat message can write, without ids and times, with an
// audit target "inbox:<id>" shown as the item's source message.
func dumpChatEffects(t *testing.T, st *store.Store) []string {
	t.Helper()
	var out []string
	for table, sql := range map[string]string{
		"inbox_item": `SELECT row(goal_id, agent_id, session_id, mode, text, sender, source_chat, source_message,
			source_thread, state, turn_id)::text FROM inbox_item ORDER BY id`,
		"audit": `SELECT row(actor, surface, action, goal_id, CASE WHEN target LIKE 'inbox:%' THEN 'inbox:' ||
			(SELECT source_message FROM inbox_item WHERE id = substr(target, 7)::bigint) ELSE target END,
			allowed, detail)::text FROM audit ORDER BY id`,
		"outbox": `SELECT row(dedupe_key, kind, receive_id_type, receive_id, reply_to, reply_in_thread,
			target_message, content, goal_id, agent_id, session_id, state)::text FROM outbox ORDER BY id`,
		"lark_event": `SELECT row(event_id, event_type)::text FROM lark_event ORDER BY event_id`,
		"unrouted":   `SELECT row(chat_id, message_id, sender, text, reason)::text FROM unrouted ORDER BY id`,
	} {
		rows, err := st.DB().Query(t.Context(), sql)
		require.NoError(t, err)
		for rows.Next() {
			var s string
			require.NoError(t, rows.Scan(&s))
			out = append(out, table+": "+s)
		}
		require.NoError(t, rows.Err())
	}
	slices.Sort(out)
	return out
}

// Concurrent messages, each event delivered twice at once, are grouped into shared statements
// and each still has exactly one effect; every second delivery is reported as a duplicate.
func TestConcurrentMessagesHaveOneEffectEach(t *testing.T) {
	t.Parallel()
	var dups atomic.Int32
	e := setup(t, func(c *config) {
		c.Router.OnDuplicate = func(context.Context, string) { dups.Add(1) }
		c.Inbox.MaxPending = 1000
	})
	const n = 120
	var wg sync.WaitGroup
	for i := range n {
		m := router.Message{EventID: fmt.Sprintf("ev_c%d", i), MessageID: fmt.Sprintf("om_c%d", i), ChatID: room,
			ChatType: router.ChatGroup, SenderID: owner, Text: fmt.Sprintf("@_user_1 message %d", i),
			Mentions: []router.Mention{{Key: "@_user_1", OpenID: bot, Name: "LoopX"}}}
		for range 2 {
			wg.Go(func() { require.NoError(t, e.chat.HandleMessage(t.Context(), m)) })
		}
	}
	wg.Wait()
	items := e.inbox("docs", "codex")
	require.Len(t, items, n)
	seen := map[string]bool{}
	for _, it := range items {
		require.False(t, seen[it.SourceMessage], "one item per message")
		seen[it.SourceMessage] = true
	}
	receipts := 0
	for _, r := range e.outbox() {
		if r.Kind == "reaction" {
			receipts++
		}
	}
	require.Equal(t, n, receipts, "one receipt per message")
	var audits int
	require.NoError(t, e.st.DB().QueryRow(t.Context(), `SELECT count(*) FROM audit WHERE action = 'chat.message'`).Scan(&audits))
	require.Equal(t, n, audits)
	require.Equal(t, int32(n), dups.Load(), "every second delivery is a duplicate")
}

// When the database is gone, a batch fails, every message of it falls back to the general
// path, and each caller gets that path's error: nobody is left waiting on the batch.
func TestFailedBatchLeavesNoCallerWaiting(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.pool.Close()
	var wg sync.WaitGroup
	var failed atomic.Int32
	for i := range 16 {
		m := router.Message{EventID: fmt.Sprintf("ev_x%d", i), MessageID: fmt.Sprintf("om_x%d", i), ChatID: room,
			ChatType: router.ChatGroup, SenderID: owner, Text: "@_user_1 hello",
			Mentions: []router.Mention{{Key: "@_user_1", OpenID: bot, Name: "LoopX"}}}
		wg.Go(func() {
			if e.chat.HandleMessage(t.Context(), m) != nil {
				failed.Add(1)
			}
		})
	}
	wg.Wait()
	require.Equal(t, int32(16), failed.Load(), "every caller was answered with an error, so Lark redelivers")
}

// OnCommit is told what each committed message may have queued, and nothing for what committed
// nothing: a message the fast path took queued its receipt reaction alone (so the sender's
// message lane is not woken for it), the general path replies and receipts, a duplicate and a
// message not for the bot nothing at all.
func TestOnCommitSaysWhatWasQueued(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var told []router.Queued
	e := setup(t, func(c *config) {
		c.Router.OnCommit = func(_ context.Context, q router.Queued) {
			mu.Lock()
			told = append(told, q)
			mu.Unlock()
		}
	})
	take := func() []router.Queued {
		mu.Lock()
		defer mu.Unlock()
		out := told
		told = nil
		return out
	}
	take() // the setup's /bind
	plain := e.say(owner, "please refresh the changelog")
	require.Equal(t, []router.Queued{{Reactions: true}}, take(), "the fast path queued the receipt alone")
	require.Len(t, e.outbox(), 1)
	e.say(owner, "/status")
	require.Equal(t, []router.Queued{{Messages: true, Reactions: true}}, take(), "a command took the general path")
	e.send(plain, false) // the same event again
	e.send(router.Message{SenderID: owner, Text: "not for the bot"}, false)
	require.Empty(t, take(), "a duplicate and a message not for the bot commit nothing")
}
