package quota_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loopx/quota"
	"loopx/store"
	"loopx/store/storetest"
)

// benchSeed fills the database in a few set-based statements: 10,000 goals with an agent and
// a few todos each, a goal "measured" with 1,000 todos, 200 past turns, spends inside and
// outside the window, open gates, old inbox items, 100,000 tick rows and 100,000 heartbeat
// receipts across the goals, and a hint state per agent.
var benchSeed = []string{
	`INSERT INTO goal (id, title, owners, allowed_slots)
	 SELECT 'bench-' || lpad(i::text, 5, '0'), 'goal ' || i, '{ou_bench}', 24 FROM generate_series(0, 9998) i`,
	`INSERT INTO goal (id, title, owners, allowed_slots, stall_turns) VALUES ('measured', 'measured goal', '{ou_bench}', 1000, 3)`,
	`INSERT INTO agent (goal_id, id, is_default) SELECT id, 'a', true FROM goal`,
	`INSERT INTO agent (goal_id, id) VALUES ('measured', 'other')`,
	`INSERT INTO todo (goal_id, text, priority, status)
	 SELECT 'bench-' || lpad((i % 9999)::text, 5, '0'), 'todo ' || i, i % 5, CASE WHEN i % 3 = 0 THEN 'done' ELSE 'open' END
	 FROM generate_series(0, 49999) i`,
	`INSERT INTO todo (goal_id, text, priority, status, claimed_by)
	 SELECT 'measured', 'measured todo ' || i || ' ' || repeat('text ', 40), i % 5,
	        CASE i % 4 WHEN 0 THEN 'done' ELSE 'open' END, CASE WHEN i % 7 = 0 THEN 'other' END
	 FROM generate_series(1, 1000) i`,
	`INSERT INTO gate (goal_id, agent_id, question, todo_id)
	 SELECT 'measured', 'a', 'gate on ' || id, id FROM todo WHERE goal_id = 'measured' AND status = 'open' ORDER BY id DESC LIMIT 5`,
	`UPDATE todo t SET status = 'blocked', blocked_by_gate = g.id FROM gate g WHERE g.todo_id = t.id`,
	`INSERT INTO turn (goal_id, agent_id, instance_id, state, progress, lease_expires_at, started_at, ended_at)
	 SELECT 'measured', 'a', 'old-' || i, 'ok', i % 2 = 0, now(), now() - ((201 - i) || ' minutes')::interval, now()
	 FROM generate_series(1, 200) i`,
	`INSERT INTO quota_ledger (goal_id, agent_id, kind, slots, created_at)
	 SELECT 'measured', 'a', 'slot_spent', 1, now() - (i || ' hours')::interval FROM generate_series(1, 100) i`,
	`INSERT INTO quota_ledger (goal_id, agent_id, kind, detail, created_at)
	 SELECT 'bench-' || lpad((i % 9999)::text, 5, '0'), 'a', 'tick_decision', '{"state":"idle"}', now() - (i || ' seconds')::interval
	 FROM generate_series(1, 100000) i`,
	`INSERT INTO inbox_item (goal_id, agent_id, text, sender, state)
	 SELECT 'measured', 'a', 'old message ' || i, 'ou_bench', 'acked' FROM generate_series(1, 500) i`,
	`INSERT INTO hint_state (goal_id, agent_id, identity, step) SELECT goal_id, id, 'idle|no_runnable_todo|0|', 2 FROM agent`,
	`INSERT INTO receipt (key, request_hash, status, body)
	 SELECT 'heartbeat|bench-' || lpad((i % 9999)::text, 5, '0') || '|a|old-' || i, '\x00', 200,
	        jsonb_build_object('ok', true, 'state', 'idle', 'message', repeat('x', 800))
	 FROM generate_series(1, 100000) i`,
	`ANALYZE`,
}

// BenchmarkShouldRun measures the server-side should-run decision (snapshot + decide +
// record, one transaction, with a heartbeat receipt) at 10,000 goals, interleaved with a
// `select 1` on the same pool as the baseline. Run with -benchtime 2000x for a stable p99:
//
//	go test ./quota -run '^$' -bench BenchmarkShouldRun -benchtime 2000x
func BenchmarkShouldRun(b *testing.B) {
	pool := storetest.NewPool(b)
	ctx := b.Context()
	for _, q := range benchSeed {
		_, err := pool.Exec(ctx, q)
		require.NoError(b, err, q)
	}
	st := store.New(pool, store.Options{})
	svc := quota.NewService(st, testTemplates(b), quota.Options{})
	var decisions, selects []time.Duration
	i := 0
	for b.Loop() {
		t0 := time.Now()
		var one int
		require.NoError(b, pool.QueryRow(ctx, `select 1`).Scan(&one))
		t1 := time.Now()
		d, err := svc.ShouldRun(ctx, quota.ShouldRunParams{GoalID: "measured", AgentID: "a", TurnInstanceID: fmt.Sprintf("bench-%d", i)})
		t2 := time.Now()
		require.NoError(b, err)
		require.Equal(b, quota.StateEligible, d.State)
		selects = append(selects, t1.Sub(t0))
		decisions = append(decisions, t2.Sub(t1))
		i++
	}
	b.ReportMetric(pct(decisions, 50), "p50-ms")
	b.ReportMetric(pct(decisions, 99), "p99-ms")
	b.ReportMetric(pct(selects, 50), "select1-p50-ms")
	b.ReportMetric(pct(selects, 99), "select1-p99-ms")
}

// pct returns the p-th percentile in milliseconds (nearest rank).
func pct(ds []time.Duration, p int) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	idx := (len(s)*p+99)/100 - 1
	idx = max(0, min(idx, len(s)-1))
	return float64(s[idx].Microseconds()) / 1000
}
