package api_test

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestStatusShowsWhatNeedsYouAndTheLastTurn reads GET /v1/goals/{goal}/status through a turn:
// the open gate, the live turn, then the settled turn with its evidence; it records nothing
// and an agent may read only its own goal.
func TestStatusShowsWhatNeedsYouAndTheLastTurn(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.goalWithAgent(t, "g", "a")
	other := b.goalWithAgent(t, "h", "a")
	todo := b.mustAdmin(t, "POST", "/v1/goals/g/todos", map[string]any{"text": "parse"}, 201)["todo_id"].(float64)

	read := func() map[string]any {
		r := b.do(t, "GET", "/v1/goals/g/status", tok, "", nil)
		require.Equal(t, 200, r.status, "%s", r.body)
		return r.json(t)
	}
	st := read()
	require.Equal(t, "g", st["goal"].(map[string]any)["id"])
	require.Equal(t, "a", st["agent_id"])
	require.Equal(t, "status", st["decision"].(map[string]any)["mode"])
	require.Nil(t, st["live_turn"])
	require.Nil(t, st["last_turn"])
	require.Nil(t, st["heartbeat"], "no heartbeat spec")
	require.Empty(t, st["needs_you"].(map[string]any)["open_gates"])
	require.Equal(t, false, st["needs_you"].(map[string]any)["no_owners"])

	d := b.do(t, "POST", "/v1/goals/g/should-run", tok, newKey(), map[string]any{"turn_instance_id": "t1", "begin_turn": true})
	require.Equal(t, 200, d.status, "%s", d.body)
	r := b.do(t, "POST", "/v1/goals/g/evidence", tok, newKey(), map[string]any{"todo_id": todo, "summary": "40 tests pass"})
	require.Equal(t, 201, r.status, "%s", r.body)
	r = b.do(t, "POST", "/v1/goals/g/gates", tok, newKey(), map[string]any{"todo_id": todo, "question": "ship?"})
	require.Equal(t, 201, r.status, "%s", r.body)
	before := b.counts(t)
	st = read()
	require.Equal(t, before, b.counts(t), "reading the status writes nothing")
	require.Equal(t, "t1", st["live_turn"].(map[string]any)["turn_instance_id"])
	gates := st["needs_you"].(map[string]any)["open_gates"].([]any)
	require.Len(t, gates, 1)
	require.Equal(t, "ship?", gates[0].(map[string]any)["question"])

	r = b.do(t, "POST", "/v1/goals/g/spend-slot", tok, newKey(), map[string]any{"turn_instance_id": "t1"})
	require.Equal(t, 200, r.status, "%s", r.body)
	st = read()
	require.Nil(t, st["live_turn"])
	last := st["last_turn"].(map[string]any)
	require.Equal(t, "t1", last["turn_instance_id"])
	require.Equal(t, "ok", last["state"])
	ev := st["last_turn_evidence"].([]any)
	require.Len(t, ev, 1)
	require.Equal(t, "40 tests pass", ev[0].(map[string]any)["summary"])
	require.EqualValues(t, 1, st["decision"].(map[string]any)["quota"].(map[string]any)["spent_slots"])

	r = b.do(t, "GET", "/v1/goals/g/status", other, "", nil)
	require.Equal(t, 403, r.status, "another goal's agent")
	r = b.do(t, "GET", "/v1/goals/g/status?agent_id=nobody", adminToken, "", nil)
	require.Equal(t, 404, r.status)
	require.Equal(t, "agent_id", r.err(t).Field)
}
