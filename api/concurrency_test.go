package api_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestConcurrentClaimsAndSpendsThroughTheAPI: 20 agents claim one todo at once (exactly one
// wins, the others get 409), and 20 concurrent spends for one turn, each with its own
// idempotency key, debit one slot.
func TestConcurrentClaimsAndSpendsThroughTheAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.mustAdmin(t, "POST", "/v1/goals", map[string]any{"goal_id": "g1", "owners": []string{"ou_owner"}, "allowed_slots": 10}, 201)
	const n = 20
	tokens := make([]string, n)
	for i := range n {
		tokens[i] = b.agent(t, "g1", "a"+itoa(int64(i)))
	}
	todo := itoa(int64(b.mustAdmin(t, "POST", "/v1/goals/g1/todos", map[string]any{"text": "one"}, 201)["todo_id"].(float64)))

	statuses := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r := b.do(t, "POST", "/v1/goals/g1/todos/"+todo+"/claim", tokens[i], newKey(), map[string]any{})
			statuses[i] = r.status
		})
	}
	wg.Wait()
	wins, winner := 0, -1
	for i, s := range statuses {
		if s == 200 {
			wins, winner = wins+1, i
		} else {
			require.Equal(t, 409, s)
		}
	}
	require.Equal(t, 1, wins, "exactly one claim wins: %v", statuses)

	// One turn for the winner (the todo is its), then 20 concurrent spends for it.
	tok := tokens[winner]
	r := b.do(t, "POST", "/v1/goals/g1/should-run", tok, newKey(), map[string]any{"turn_instance_id": "t-1", "begin_turn": true})
	require.Equal(t, 200, r.status, "%s", r.body)
	require.Equal(t, "run", r.json(t)["decision"], "%s", r.body)
	bodies := make([]string, n)
	for i := range n {
		wg.Go(func() {
			r := b.do(t, "POST", "/v1/goals/g1/spend-slot", tok, newKey(), map[string]any{"turn_instance_id": "t-1"})
			require.Equal(t, 200, r.status, "%s", r.body)
			bodies[i] = string(r.body)
		})
	}
	wg.Wait()
	var spent int
	require.NoError(t, b.pool.QueryRow(t.Context(), `SELECT count(*) FROM quota_ledger WHERE kind = 'slot_spent'`).Scan(&spent))
	require.Equal(t, 1, spent, "one debit for one turn")
	for _, body := range bodies[1:] {
		require.Equal(t, bodies[0], body, "every spend answers the same receipt")
	}
}
