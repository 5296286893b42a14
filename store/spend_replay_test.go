package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loopx/store"
)

// A retried spend answers the original receipt, even when the retry's clock reads earlier than
// the spend (concurrent requests take their clock before the first one commits).
func TestSpendRetryAnswersTheOriginalCount(t *testing.T) {
	t.Parallel()
	st, clk := setup(t)
	ctx := t.Context()
	td, err := st.AddTodo(ctx, store.AddTodoParams{GoalID: "g", Text: "x", Meta: admin})
	require.NoError(t, err)
	_, err = st.OpenTurn(ctx, store.OpenTurnParams{GoalID: "g", AgentID: "a", InstanceID: "turn-1", TodoID: td.ID, Meta: agentMeta("a")})
	require.NoError(t, err)
	spend := func() store.SpendReceipt {
		rc, err := st.SpendSlot(ctx, store.SpendSlotParams{GoalID: "g", AgentID: "a", TurnInstanceID: "turn-1", TodoID: td.ID, Meta: agentMeta("a")})
		require.NoError(t, err)
		return rc
	}
	first := spend()
	require.Equal(t, 1, first.SpentSlots)
	clk.Add(-time.Second)
	again := spend()
	require.True(t, again.Replayed)
	require.Equal(t, first.SpentSlots, again.SpentSlots)
	require.Equal(t, first.Entry, again.Entry)
}
