package store_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loopx/store"
	"loopx/store/storetest"
)

func TestTurnTokenActsAsAgentWhileTurnIsLive(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := storetest.New(t, store.Options{})
	meta := store.Meta{Actor: "admin", Surface: "api"}
	_, err := st.CreateGoal(ctx, store.CreateGoalParams{ID: "tok", Owners: []string{"ou_1"}, Meta: meta})
	require.NoError(t, err)
	_, err = st.RegisterAgent(ctx, store.RegisterAgentParams{GoalID: "tok", AgentID: "a1", Runner: "exec",
		RunnerConfig: json.RawMessage(`{"argv":["true"]}`), Meta: meta})
	require.NoError(t, err)
	turn, err := st.OpenTurn(ctx, store.OpenTurnParams{GoalID: "tok", AgentID: "a1", InstanceID: "t1", Meta: meta})
	require.NoError(t, err)

	token, err := st.IssueTurnToken(ctx, turn, time.Now().Add(time.Hour))
	require.NoError(t, err)
	a, err := st.AgentByToken(ctx, token)
	require.NoError(t, err)
	require.Equal(t, "tok", a.GoalID)
	require.Equal(t, "a1", a.ID)

	expired, err := st.IssueTurnToken(ctx, turn, time.Now().Add(-time.Second))
	require.NoError(t, err)
	_, err = st.AgentByToken(ctx, expired)
	require.ErrorIs(t, err, store.ErrNotFound)

	_, err = st.EndTurn(ctx, store.EndTurnParams{GoalID: "tok", AgentID: "a1", InstanceID: "t1", State: store.TurnOK, Meta: meta})
	require.NoError(t, err)
	_, err = st.AgentByToken(ctx, token)
	require.ErrorIs(t, err, store.ErrNotFound, "the token ends with its turn")
	require.NoError(t, st.RevokeTurnTokens(ctx, turn.ID))
}
