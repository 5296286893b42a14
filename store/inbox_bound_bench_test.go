package store_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"loopx/store"
	"loopx/store/storetest"
)

// BenchmarkEnqueueBound measures one fast-path statement (and its commit) per batch at batch
// sizes a chat burst produces, per message, beside a single-row INSERT commit on the same
// pool (the unit of the ingest benchmark's pgbench baseline). Agents keep up: every 256
// messages the items are acknowledged (outside the timer), so each inbox stays shallow and
// the bound check counts a few items, as in a deployment whose agents drain their inboxes.
func BenchmarkEnqueueBound(b *testing.B) {
	st := storetest.New(b, store.Options{})
	ctx := b.Context()
	const goals = 32
	for g := range goals {
		id := fmt.Sprintf("g%02d", g)
		_, err := st.CreateGoal(ctx, store.CreateGoalParams{ID: id, Owners: []string{"ou_bench"}, Meta: sys})
		require.NoError(b, err)
		_, err = st.RegisterAgent(ctx, store.RegisterAgentParams{GoalID: id, AgentID: "codex", IsDefault: true, Meta: sys})
		require.NoError(b, err)
		_, err = st.Pool().Exec(ctx, `INSERT INTO binding (chat_id, goal_id, created_by) VALUES ($1, $2, 'ou_bench')`,
			fmt.Sprintf("oc_%02d", g), id)
		require.NoError(b, err)
	}
	_, err := st.Pool().Exec(ctx, `CREATE TABLE bench_insert (id bigserial PRIMARY KEY, payload text NOT NULL)`)
	require.NoError(b, err)
	opts := store.BoundOptions{EventType: "im.message.receive_v1", MaxPending: 200, Receipt: "OK"}
	b.Run("insert", func(b *testing.B) {
		for b.Loop() {
			_, err := st.Pool().Exec(ctx, `INSERT INTO bench_insert (payload) VALUES ('event')`)
			require.NoError(b, err)
		}
	})
	seq := 0
	for _, size := range []int{1, 4, 8, 16, 64} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			for b.Loop() {
				if seq%256 < size {
					b.StopTimer()
					_, err := st.Pool().Exec(ctx, `UPDATE inbox_item SET state = 'acked' WHERE state = 'pending'`)
					require.NoError(b, err)
					b.StartTimer()
				}
				msgs := make([]store.BoundMessage, size)
				for i := range msgs {
					seq++
					msgs[i] = store.BoundMessage{EventID: fmt.Sprintf("ev_%d", seq), ChatID: fmt.Sprintf("oc_%02d", seq%goals),
						MessageID: fmt.Sprintf("om_%d", seq), Sender: "ou_bench", Mode: store.ModeInbox, Text: "please look at the build"}
				}
				taken, err := store.EnqueueBound(ctx, st.Pool(), opts, msgs)
				require.NoError(b, err)
				require.NotContains(b, taken, false)
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*size), "µs/msg")
		})
	}
}
