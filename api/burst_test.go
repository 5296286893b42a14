package api_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// sameKeyBurst sends n copies of one request at once, under one Idempotency-Key, and returns
// the answers.
func (b *testBundle) sameKeyBurst(t *testing.T, n int, method, path, token, key string, body any) []response {
	t.Helper()
	out := make([]response, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { out[i] = b.do(t, method, path, token, key, body) })
	}
	wg.Wait()
	return out
}

// requireOneAnswer checks that every answer of a burst is the first one, byte for byte.
func requireOneAnswer(t *testing.T, rs []response, status int) {
	t.Helper()
	for i, r := range rs {
		require.Equal(t, status, r.status, "answer %d: %s", i, r.body)
		require.Equal(t, string(rs[0].body), string(r.body), "answer %d differs from the first", i)
	}
}

func (b *testBundle) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(t.Context(), sql, args...).Scan(&n))
	return n
}

// Twenty parallel calls under one Idempotency-Key, arriving while the first is in flight, are
// answered with the first call's answer (the waiters wait for it, then replay its receipt)
// and have one effect. The pool is pgx's default for two cores (4 connections), smaller than
// the burst. A different request under a used key is 409 naming idempotency_key, with no
// constraint name in the answer.
func TestSameKeyBurstsAnswerOnceWithOneEffect(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 20

	goal := map[string]any{"goal_id": "burst", "title": "Burst", "owners": []string{"ou_owner"}}
	rs := b.sameKeyBurst(t, n, "POST", "/v1/goals", adminToken, "create-burst", goal)
	requireOneAnswer(t, rs, 201)
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM goal WHERE id = 'burst'`))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM audit WHERE action = 'goal.create' AND goal_id = 'burst'`))

	reg := b.mustAdmin(t, "POST", "/v1/goals/burst/agents", map[string]any{"agent_id": "codex"}, 201)
	agentTok := reg["token"].(string)

	rs = b.sameKeyBurst(t, n, "POST", "/v1/goals/burst/todos", adminToken, "todo-burst", map[string]any{"text": "write the parser"})
	requireOneAnswer(t, rs, 201)
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM todo WHERE goal_id = 'burst'`))

	// should-run without a turn id: the key is the replay key; one decision row per key.
	rs = b.sameKeyBurst(t, n, "POST", "/v1/goals/burst/should-run", agentTok, "sr-burst", map[string]any{"agent_id": "codex"})
	requireOneAnswer(t, rs, 200)
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM quota_ledger WHERE goal_id = 'burst' AND kind = 'tick_decision'`))

	// should-run with a turn id and begin_turn opens one turn; spend-slot spends it once.
	rs = b.sameKeyBurst(t, n, "POST", "/v1/goals/burst/should-run", agentTok, "sr-turn",
		map[string]any{"agent_id": "codex", "turn_instance_id": "t1", "begin_turn": true})
	requireOneAnswer(t, rs, 200)
	require.Equal(t, "run", rs[0].json(t)["decision"])
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM turn WHERE goal_id = 'burst'`))

	rs = b.sameKeyBurst(t, n, "POST", "/v1/goals/burst/spend-slot", agentTok, "spend-burst",
		map[string]any{"agent_id": "codex", "turn_instance_id": "t1"})
	requireOneAnswer(t, rs, 200)
	require.EqualValues(t, 1, rs[0].json(t)["spent_slots"])
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM quota_ledger WHERE goal_id = 'burst' AND kind = 'slot_spent'`))

	// Another request under a used key: 409 naming the key, no constraint name.
	other := b.do(t, "POST", "/v1/goals/burst/todos", adminToken, "todo-burst", map[string]any{"text": "something else"})
	require.Equal(t, 409, other.status, "%s", other.body)
	e := other.err(t)
	require.Equal(t, "idempotency_key", e.Field)
	require.NotContains(t, string(other.body), "_pkey")
	require.NotContains(t, string(other.body), "_key)")
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM todo WHERE goal_id = 'burst'`))
}

// A conflict the database detects is answered with the input at fault, never a constraint's
// name: a second goal with an existing id.
func TestConflictsNameTheFieldNotTheConstraint(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.mustAdmin(t, "POST", "/v1/goals", map[string]any{"goal_id": "twice", "owners": []string{"ou_owner"}}, 201)
	r := b.admin(t, "POST", "/v1/goals", map[string]any{"goal_id": "twice", "owners": []string{"ou_owner"}})
	require.Equal(t, 409, r.status, "%s", r.body)
	require.Equal(t, "goal_id", r.err(t).Field)
	require.NotContains(t, string(r.body), "pkey")
}
