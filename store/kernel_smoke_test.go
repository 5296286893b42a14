package store_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"loopx/store"
	"loopx/store/storetest"
)

func TestTickSnapshotReadsFreshGoal(t *testing.T) {
	t.Parallel()
	st := storetest.New(t, store.Options{})
	ctx := t.Context()
	m := store.Meta{Actor: "admin", Surface: "api"}
	_, err := st.CreateGoal(ctx, store.CreateGoalParams{ID: "g1", Owners: []string{"ou_owner"}, Meta: m})
	require.NoError(t, err)
	_, err = st.RegisterAgent(ctx, store.RegisterAgentParams{GoalID: "g1", AgentID: "a1", Meta: m})
	require.NoError(t, err)
	td, err := st.AddTodo(ctx, store.AddTodoParams{GoalID: "g1", Text: "do it", Meta: m})
	require.NoError(t, err)
	snap, err := st.ReadShouldRunSnapshot(ctx, "g1", "a1", st.Now())
	require.NoError(t, err)
	require.True(t, snap.GoalFound)
	require.True(t, snap.AgentFound)
	require.Equal(t, 24, snap.Goal.AllowedSlots)
	require.Len(t, snap.Runnable, 1)
	require.Equal(t, td.ID, snap.Runnable[0].ID)
	require.Nil(t, snap.LiveTurn)
	require.Empty(t, snap.RecentProgress)
	none, err := st.ReadShouldRunSnapshot(ctx, "nope", "a1", st.Now())
	require.NoError(t, err)
	require.False(t, none.GoalFound)
}
