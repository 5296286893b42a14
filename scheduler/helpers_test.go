package scheduler_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"loopx/quota"
	"loopx/scheduler"
	"loopx/store"
	"loopx/store/storetest"
	"loopx/templates"
)

// idleDecider answers like should-run does for an agent with nothing to do (skip, idle), with
// no backoff interval so the cron cadence holds. The scale tests give their agents the
// webhook runner, which the scheduler wakes through noRunner (never, since every answer is a
// skip); the count of calls checks that no fire was decided more often than expected.
type idleDecider struct {
	calls atomic.Int64
	fail  func(p quota.ShouldRunParams) error // optional: called first; an error is returned
}

func (d *idleDecider) ShouldRun(ctx context.Context, p quota.ShouldRunParams) (quota.Decision, error) {
	d.calls.Add(1)
	if d.fail != nil {
		if err := d.fail(p); err != nil {
			return quota.Decision{}, err
		}
	}
	return quota.Decision{OK: true, Mode: "should-run", GoalID: p.GoalID, AgentID: p.AgentID,
		Decision: "skip", State: quota.StateIdle, Reason: "no_runnable_todo",
		SchedulerHint: quota.SchedulerHint{Action: "backoff_until_state_change", CadenceClass: "quiet_wait"}}, nil
}

// noRunner is the runner of the scale tests' agents; idleDecider never lets it run.
type noRunner struct{ t testing.TB }

func (r noRunner) Run(context.Context, scheduler.Job) scheduler.Result {
	r.t.Errorf("a turn was started although every answer was a skip")
	return scheduler.Result{State: store.TurnFailed}
}

// seedGoals inserts n goals with one agent each, straight in SQL (fast for thousands). The
// in-process scale tests give it the webhook runner (woken through noRunner); process tests
// against a real serve give it poll (the host asks should-run itself; ticks only record).
func seedGoals(t testing.TB, pool *pgxpool.Pool, prefix string, n int, spec, tz, runner string) {
	t.Helper()
	ctx := context.Background()
	_, err := pool.Exec(ctx, `INSERT INTO goal (id, title, heartbeat_spec, heartbeat_tz, owners)
		SELECT $1 || lpad(i::text, 6, '0'), 'goal ' || i, $2, $3, '{ou_owner}'
		FROM generate_series(1, $4) AS i`, prefix, spec, tz, n)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO agent (goal_id, id, runner, is_default)
		SELECT id, 'a1', $2, true FROM goal WHERE id LIKE $1 || '%'`, prefix, runner)
	require.NoError(t, err)
}

// replica is one scheduler instance with its own pool, as a separate process would have.
type replica struct {
	name  string
	pool  *pgxpool.Pool
	st    *store.Store
	sched *scheduler.Scheduler
}

func newReplica(t testing.TB, url, name string, c *storetest.Clock, d scheduler.Decider, mod func(*scheduler.Config)) *replica {
	t.Helper()
	pool, err := store.Open(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	st := store.New(pool, store.Options{Now: c.Now})
	cfg := scheduler.Config{Store: st, Decider: d, Replica: name, Now: c.Now,
		Runners: map[string]scheduler.Runner{store.RunnerWebhook: noRunner{t}}}
	if mod != nil {
		mod(&cfg)
	}
	s, err := scheduler.New(cfg)
	require.NoError(t, err)
	return &replica{name: name, pool: pool, st: st, sched: s}
}

// stepAll runs one Step on every replica at once and waits for all of them.
func stepAll(ctx context.Context, t testing.TB, rs []*replica) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(rs))
	for i, r := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = r.sched.Step(ctx)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "replica %s", rs[i].name)
	}
}

type tickRow struct {
	schedule int64
	goal     string
	fire     time.Time
	next     *time.Time
	outcome  string
	catchUp  bool
}

func allTicks(t testing.TB, pool *pgxpool.Pool) map[int64][]tickRow {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT schedule_id, goal_id, fire_at, next_fire_at, outcome, catch_up
		FROM tick ORDER BY schedule_id, fire_at`)
	require.NoError(t, err)
	defer rows.Close()
	out := map[int64][]tickRow{}
	for rows.Next() {
		var r tickRow
		require.NoError(t, rows.Scan(&r.schedule, &r.goal, &r.fire, &r.next, &r.outcome, &r.catchUp))
		out[r.schedule] = append(out[r.schedule], r)
	}
	require.NoError(t, rows.Err())
	return out
}

// checkChains asserts the audit invariant: per schedule the tick fire times strictly increase,
// each tick's planned next fire is the next row's fire time (no silent gap), and the last
// one's is the schedule's pending fire. It returns the number of ticks checked.
func checkChains(t testing.TB, pool *pgxpool.Pool) int {
	t.Helper()
	ticks := allTicks(t, pool)
	pending := map[int64]time.Time{}
	rows, err := pool.Query(context.Background(), `SELECT id, next_fire_at FROM schedule WHERE next_fire_at IS NOT NULL`)
	require.NoError(t, err)
	for rows.Next() {
		var id int64
		var at time.Time
		require.NoError(t, rows.Scan(&id, &at))
		pending[id] = at
	}
	rows.Close()
	n := 0
	for sched, list := range ticks {
		for i, r := range list {
			require.NotNil(t, r.next, "schedule %d tick %s has no planned next fire", sched, r.fire)
			want := pending[sched]
			if i+1 < len(list) {
				want = list[i+1].fire
			}
			require.True(t, r.next.Equal(want), "schedule %d: tick %s plans %s but the next row is %s (gap)", sched, r.fire, *r.next, want)
			n++
		}
	}
	return n
}

func goalIDs(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%06d", prefix, i+1)
	}
	return out
}

var _ = storetest.ServerURL

func contextWithCancel(t testing.TB) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx, cancel
}

// testTemplates is the embedded template set, as serve builds it once.
func testTemplates(t testing.TB) *templates.Set {
	t.Helper()
	tpl, err := templates.New()
	require.NoError(t, err)
	return tpl
}
