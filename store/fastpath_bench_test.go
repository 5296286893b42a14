package store_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"loopx/store"
	"loopx/store/storetest"
)

// BenchmarkEnqueueFast measures one fast-path statement (and its commit) per batch at batch
// sizes a chat burst produces, per message, beside two baselines on the same pool: a
// single-row INSERT commit (the unit of the ingest benchmark's pgbench baseline), and floor,
// the same three rows per message (inbox item, audit row, receipt) written by one statement
// that reads and checks nothing (no binding, sender, duplicate or bound check). floor is what
// the statement would cost if its checks were free. Agents keep up: every 256 messages the items are acknowledged (outside
// the timer), so each inbox stays shallow and the bound check counts a few items, as in a
// deployment whose agents drain their inboxes.
func BenchmarkEnqueueFast(b *testing.B) {
	st := storetest.New(b, store.Options{})
	ctx := b.Context()
	const goals = 32
	for g := range goals {
		id := fmt.Sprintf("g%02d", g)
		_, err := st.CreateGoal(ctx, store.CreateGoalParams{ID: id, Owners: []string{"ou_bench"}, Meta: sys})
		require.NoError(b, err)
		_, err = st.RegisterAgent(ctx, store.RegisterAgentParams{GoalID: id, AgentID: "codex", IsDefault: true, Meta: sys})
		require.NoError(b, err)
		_, err = st.DB().Exec(ctx, `INSERT INTO binding (chat_id, goal_id, created_by) VALUES ($1, $2, 'ou_bench')`,
			fmt.Sprintf("oc_%02d", g), id)
		require.NoError(b, err)
	}
	_, err := st.DB().Exec(ctx, `CREATE TABLE bench_insert (id bigserial PRIMARY KEY, payload text NOT NULL)`)
	require.NoError(b, err)
	opts := store.FastOptions{MaxPending: 200, Receipt: "OK"}
	b.Run("insert", func(b *testing.B) {
		for b.Loop() {
			_, err := st.DB().Exec(ctx, `INSERT INTO bench_insert (payload) VALUES ('event')`)
			require.NoError(b, err)
		}
	})
	seq := 0
	batch := func(b *testing.B, size int) []store.FastMessage {
		if seq%256 < size {
			b.StopTimer()
			_, err := st.DB().Exec(ctx, `UPDATE inbox_item SET state = 'acked' WHERE state = 'pending'`)
			require.NoError(b, err)
			b.StartTimer()
		}
		msgs := make([]store.FastMessage, size)
		for i := range msgs {
			seq++
			msgs[i] = store.FastMessage{EventID: fmt.Sprintf("ev_%d", seq), ChatID: fmt.Sprintf("oc_%02d", seq%goals),
				MessageID: fmt.Sprintf("om_%d", seq), Sender: "ou_bench", Mode: store.ModeInbox, Text: "please look at the build"}
		}
		return msgs
	}
	for _, size := range []int{1, 4, 8, 16, 64} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			for b.Loop() {
				taken, err := st.EnqueueFast(ctx, opts, batch(b, size))
				require.NoError(b, err)
				require.NotContains(b, taken, false)
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*size), "µs/msg")
		})
	}
	for _, size := range []int{1, 4, 8} {
		b.Run(fmt.Sprintf("floor/batch=%d", size), func(b *testing.B) {
			for b.Loop() {
				msgs := batch(b, size)
				var events, chats, messages, texts, uuids []string
				for _, m := range msgs {
					events, chats, messages, texts = append(events, m.EventID), append(chats, m.ChatID),
						append(messages, m.MessageID), append(texts, m.Text)
					uuids = append(uuids, fmt.Sprintf("floor-%s", m.EventID))
				}
				var n int
				require.NoError(b, st.DB().QueryRow(ctx, `
					WITH msg AS (
					    SELECT m.*, 'g' || substr(m.chat_id, 4) AS goal_id
					    FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[])
					        WITH ORDINALITY AS m(event_id, chat_id, message_id, text, uuid, n)
					), item AS (
					    INSERT INTO inbox_item (goal_id, agent_id, mode, text, sender, source_chat, source_message)
					    SELECT goal_id, 'codex', 'inbox', text, 'ou_bench', chat_id, message_id FROM msg
					    RETURNING id, goal_id
					), audited AS (
					    INSERT INTO audit (actor, surface, action, goal_id, target, allowed, detail)
					    SELECT 'ou_bench', 'chat', 'chat.message', goal_id, 'inbox:' || id, true,
					           jsonb_build_object('agent_id', 'codex', 'mode', 'inbox', 'session_id', '')
					    FROM item
					), receipt AS (
					    INSERT INTO outbox (uuid, dedupe_key, kind, receive_id, target_message, content, goal_id, agent_id)
					    SELECT uuid, 'evt:' || event_id || ':receipt', 'reaction', chat_id, message_id, 'OK', goal_id, 'codex'
					    FROM msg
					)
					SELECT count(*) FROM item`, events, chats, messages, texts, uuids).Scan(&n))
				require.Equal(b, size, n)
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*size), "µs/msg")
		})
	}
}
