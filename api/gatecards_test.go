package api_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"loopx/store"
)

// A gate asked through the API posts its card to the goal's bound chat; answering it through
// the API updates that card in place.
func TestGateCardsFromTheAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.goalWithAgent(t, "g", "a")
	require.NoError(t, store.Bind(t.Context(), b.pool, store.Binding{ChatID: "oc_team", GoalID: "g", CreatedBy: "ou_owner"}))

	r := b.do(t, "POST", "/v1/goals/g/gates", tok, newKey(), map[string]any{"question": "Ship it?"})
	require.Equal(t, 201, r.status, "%s", r.body)
	gid := int64(r.json(t)["gate_id"].(float64))
	rows, err := store.ListOutboxAfter(t.Context(), b.pool, 0, 0)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.Equal(t, "card", rows[0].Kind)
	require.Equal(t, "oc_team", rows[0].ReceiveID)
	require.Equal(t, gid, rows[0].GateID)
	require.Contains(t, rows[0].Content, "Ship it?")

	r = b.admin(t, "POST", "/v1/goals/g/gates/"+itoa(gid)+"/answer", map[string]any{"answer": "approve", "answered_by": "ou_owner"})
	require.Equal(t, 200, r.status, "%s", r.body)
	rows, err = store.ListOutboxAfter(t.Context(), b.pool, rows[0].ID, 0)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.Equal(t, "card_update", rows[0].Kind)
	require.Contains(t, rows[0].Content, "Approved")
}
