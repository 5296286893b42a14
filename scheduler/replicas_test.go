package scheduler_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loopx/quota"
	"loopx/scheduler"
	"loopx/store"
	"loopx/store/storetest"
)

// Three replicas, each with its own pool, 1,000 goals with one-minute heartbeats (poll
// runner), an injected clock covering 32 fire times. One replica dies in the middle of a
// batch. Every (schedule, fire time) gets exactly one tick row, there are no duplicates and
// no gaps, and nothing was recorded missed.
func TestReplicasFireEachTimeOnce(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("scale test")
	}
	ctx := t.Context()
	url := storetest.NewDatabase(t)
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	c := storetest.NewClock(t0)
	const goals = 1000

	var rs []*replica
	for _, name := range []string{"r1", "r2", "r3"} {
		rs = append(rs, newReplica(t, url, name, c, &idleDecider{}, nil))
	}
	seedGoals(t, rs[0].pool, "g", goals, "* * * * *", "UTC", store.RunnerWebhook)

	// r3 dies halfway through a batch at minute 15: its context is cancelled from inside its
	// should-run call, so its claiming transaction never commits.
	killCtx, kill := context.WithCancel(ctx)
	defer kill()
	dying := &idleDecider{}
	var armed bool
	dying.fail = func(quota.ShouldRunParams) error {
		if armed && dying.calls.Load() > 40 {
			kill()
			return context.Canceled
		}
		return nil
	}
	rs[2] = newReplica(t, url, "r3", c, dying, nil)

	end := t0.Add(32 * time.Minute)
	live := rs
	for c.Now().Before(end) {
		c.Add(10 * time.Second)
		if !armed && c.Now().Sub(t0) >= 15*time.Minute {
			armed = true
			dying.calls.Store(0)
		}
		errs := make(chan error, len(live))
		done := make(chan struct{})
		go func() {
			defer close(done)
			for range live {
				<-errs
			}
		}()
		for i, r := range live {
			stepCtx := ctx
			if r.name == "r3" {
				stepCtx = killCtx
			}
			go func() {
				_, err := r.sched.Step(stepCtx)
				if err != nil && !(live[i].name == "r3" && errors.Is(err, context.Canceled)) {
					t.Errorf("replica %s: %v", r.name, err)
				}
				errs <- err
			}()
		}
		<-done
		if killCtx.Err() != nil && len(live) == 3 {
			live = live[:2] // r3 is dead for the rest of the run
		}
	}
	require.Error(t, killCtx.Err(), "r3 was killed mid-run")

	// Exactly the expected fire times per goal: every minute from t0+1m whose run time
	// (fire + the goal's jitter) has passed.
	ticks := allTicks(t, rs[0].pool)
	require.Len(t, ticks, goals)
	total := 0
	byGoal := map[string][]tickRow{}
	for _, list := range ticks {
		byGoal[list[0].goal] = list
	}
	for _, g := range goalIDs("g", goals) {
		j := scheduler.Jitter(g, 60*time.Second)
		var want []time.Time
		for f := t0.Add(time.Minute); !f.Add(j).After(end); f = f.Add(time.Minute) {
			want = append(want, f)
		}
		require.GreaterOrEqual(t, len(want), 30)
		list := byGoal[g]
		got := make([]time.Time, len(list))
		for i, r := range list {
			got[i] = r.fire.UTC()
			require.Equal(t, "skipped", r.outcome, "goal %s fire %s", g, r.fire)
			require.False(t, r.catchUp)
		}
		require.Equal(t, want, got, "goal %s", g)
		total += len(list)
	}
	var rows, distinct, missed int
	require.NoError(t, rs[0].pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT (schedule_id, fire_at)),
		count(*) FILTER (WHERE outcome = 'missed') FROM tick`).Scan(&rows, &distinct, &missed))
	require.Equal(t, total, rows)
	require.Equal(t, rows, distinct, "no duplicates")
	require.Zero(t, missed)
	require.Equal(t, total, checkChains(t, rs[0].pool))

	var byReplica = map[string]int{}
	r, err := rs[0].pool.Query(ctx, `SELECT replica, count(*) FROM tick GROUP BY replica`)
	require.NoError(t, err)
	for r.Next() {
		var name string
		var n int
		require.NoError(t, r.Scan(&name, &n))
		byReplica[name] = n
	}
	r.Close()
	require.Positive(t, byReplica["r1"])
	require.Positive(t, byReplica["r2"])
	require.Positive(t, byReplica["r3"], "r3 worked before it died")
	var late int
	require.NoError(t, rs[0].pool.QueryRow(ctx, `SELECT count(*) FROM tick WHERE replica = 'r3' AND decided_at > $1`,
		t0.Add(16*time.Minute)).Scan(&late))
	require.Zero(t, late, "r3 wrote nothing after it died")
	t.Logf("%d goals, %d ticks, by replica %v", goals, total, byReplica)
}

// All replicas down across 10 fire times: on restart each schedule gets one catch-up tick
// (the newest fire) and 9 missed rows, and the chain stays gap-free.
func TestDowntimeOneCatchUpNineMissed(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := storetest.NewDatabase(t)
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	c := storetest.NewClock(t0)
	const goals = 100
	a := newReplica(t, url, "before", c, &idleDecider{}, nil)
	seedGoals(t, a.pool, "d", goals, "* * * * *", "UTC", store.RunnerWebhook)
	for range 18 { // three minutes
		c.Add(10 * time.Second)
		_, err := a.sched.Step(ctx)
		require.NoError(t, err)
	}
	stop := c.Now()
	before := allTicks(t, a.pool)

	c.Add(10 * time.Minute)
	b := newReplica(t, url, "after", c, &idleDecider{}, nil)
	st, err := b.sched.Step(ctx)
	require.NoError(t, err)
	require.Equal(t, goals, st.Schedules)
	require.Equal(t, goals*10, st.Ticks)
	require.Equal(t, goals*9, st.Missed)

	after := allTicks(t, b.pool)
	for sched, list := range after {
		fresh := list[len(before[sched]):]
		require.Len(t, fresh, 10, "schedule %d", sched)
		for i, r := range fresh {
			if i < 9 {
				require.Equal(t, "missed", r.outcome)
				require.False(t, r.catchUp)
			} else {
				require.Equal(t, "skipped", r.outcome, "the catch-up tick asked should-run")
				require.True(t, r.catchUp)
			}
			require.True(t, r.fire.After(stop.Add(-time.Minute)))
		}
	}
	checkChains(t, b.pool)

	// A second restart right away finds nothing due: the catch-up is not repeated.
	st, err = newReplica(t, url, "again", c, &idleDecider{}, nil).sched.Step(ctx)
	require.NoError(t, err)
	require.Zero(t, st.Ticks)

	// /status sees the missed fires.
	status, err := b.st.ReadTickStatus(ctx, "d000001", c.Now())
	require.NoError(t, err)
	require.Equal(t, 9, status.Missed24h)
	require.Equal(t, "missed", status.LastMiss.Outcome)
	require.True(t, status.Last.CatchUp)
}
