package scheduler_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loopx/quota"
	"loopx/scheduler"
	"loopx/store"
	"loopx/store/storetest"
)

// Run sleeps (MaxSleep is 5 minutes) and is woken by NOTIFY when a goal gets a heartbeat:
// the new schedule is armed well within MaxSleep, which only the notification can do. (The
// deadline is 30 s, not "a second or two", so a busy machine does not fail it; it is still
// ten times shorter than the sleep.)
func TestRunWakesOnScheduleChange(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := storetest.New(t, store.Options{})
	s, err := scheduler.New(scheduler.Config{Store: st, Decider: quota.NewService(st, testTemplates(t), quota.Options{}), Replica: "run"})
	require.NoError(t, err)
	runCtx, stop := contextWithCancel(t)
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx) }()
	// Run is asleep on an empty database: its LISTEN connection is up and no statement of
	// this database's runs (the first step, woken by the LISTEN itself, is over).
	require.Eventually(t, func() bool {
		var listening, active int
		require.NoError(t, st.DB().QueryRow(ctx, `SELECT
				count(*) FILTER (WHERE query = 'LISTEN '||$1 AND state = 'idle'),
				count(*) FILTER (WHERE state <> 'idle' AND pid <> pg_backend_pid())
			FROM pg_stat_activity WHERE datname = current_database()`, store.ScheduleChannel).Scan(&listening, &active))
		return listening == 1 && active == 0
	}, 30*time.Second, 20*time.Millisecond, "Run listens and sleeps")

	_, err = st.CreateGoal(ctx, store.CreateGoalParams{ID: "wake", Owners: []string{"ou_a"}, HeartbeatSpec: "*/5 * * * *", Meta: admin})
	require.NoError(t, err)
	_, err = st.RegisterAgent(ctx, store.RegisterAgentParams{GoalID: "wake", AgentID: "a1", Meta: admin})
	require.NoError(t, err)

	require.Eventually(t, func() bool {
		list, err := st.ListSchedules(ctx, "wake")
		require.NoError(t, err)
		for _, sc := range list {
			if sc.Kind == store.ScheduleHeartbeat && !sc.NextFireAt.IsZero() {
				return true
			}
		}
		return false
	}, 30*time.Second, 20*time.Millisecond, "the heartbeat was armed after the notification")

	stop()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second): // a hang, not a slow machine
		t.Fatal("Run did not return after cancel")
	}
}

// stop_until_explicit_resume holds the heartbeat; resuming the goal releases it.
func TestPausedGoalHoldsHeartbeatUntilResume(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := storetest.NewClock(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	st := storetest.New(t, store.Options{Now: c.Now})
	s, err := scheduler.New(scheduler.Config{Store: st, Decider: quota.NewService(st, testTemplates(t), quota.Options{Now: c.Now}),
		Now: c.Now, MaxJitter: -1})
	require.NoError(t, err)
	_, err = st.CreateGoal(ctx, store.CreateGoalParams{ID: "hold", Owners: []string{"ou_a"}, HeartbeatSpec: "*/5 * * * *", Meta: admin})
	require.NoError(t, err)
	_, err = st.RegisterAgent(ctx, store.RegisterAgentParams{GoalID: "hold", AgentID: "a1", Meta: admin})
	require.NoError(t, err)
	step := func(d time.Duration) scheduler.Stats {
		c.Add(d)
		stats, err := s.Step(ctx)
		require.NoError(t, err)
		return stats
	}
	first := step(0)
	require.Equal(t, 1, first.Ticks, "12:00 fires at once")
	require.Positive(t, first.DBTime, "the time spent firing is counted (loopx_scheduler_db_seconds_total)")
	require.Equal(t, first.DBTime, s.Totals().DBTime)
	_, err = st.StopGoal(ctx, store.GoalRef{GoalID: "hold", Meta: admin})
	require.NoError(t, err)
	require.Equal(t, 1, step(5*time.Minute).Ticks)
	ticks, err := st.ListTicks(ctx, store.TicksParams{GoalID: "hold", Limit: 1})
	require.NoError(t, err)
	require.Equal(t, quota.StatePaused, ticks[0].Reason)
	list, err := st.ListSchedules(ctx, "hold")
	require.NoError(t, err)
	for _, sc := range list {
		if sc.Kind == store.ScheduleHeartbeat {
			require.True(t, sc.Held)
		}
	}
	require.Zero(t, step(3*time.Hour).Ticks, "held: no ticks while paused")

	_, err = st.ResumeGoal(ctx, store.GoalRef{GoalID: "hold", Meta: admin})
	require.NoError(t, err)
	step(0)
	require.Equal(t, 1, step(5*time.Minute).Ticks, "resumed: the heartbeat fires again")
	// The held hours are not missed fires: the hold was a decision, recorded once.
	missed, err := st.ListTicks(ctx, store.TicksParams{GoalID: "hold", Outcome: store.TickMissed})
	require.NoError(t, err)
	require.Empty(t, missed)
}

// DST through the loop: a daily 02:30 America/New_York heartbeat fires once on the spring-
// forward day (at 03:00 EDT, when the gap ends), and a daily 01:30 fires once on the fall-back
// day although 01:30 happens twice; the Shanghai and UTC goals keep their plain cadence.
func TestLoopAcrossDST(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := storetest.NewDatabase(t)
	for _, day := range []struct {
		name       string
		start      time.Time
		spec, tz   string
		wantFireAt []time.Time
	}{
		{"spring", time.Date(2026, 3, 7, 12, 0, 0, 0, time.UTC), "30 2 * * *", "America/New_York",
			[]time.Time{time.Date(2026, 3, 8, 7, 0, 0, 0, time.UTC), time.Date(2026, 3, 9, 6, 30, 0, 0, time.UTC)}},
		{"fall", time.Date(2026, 10, 31, 12, 0, 0, 0, time.UTC), "30 1 * * *", "America/New_York",
			[]time.Time{time.Date(2026, 11, 1, 5, 30, 0, 0, time.UTC), time.Date(2026, 11, 2, 6, 30, 0, 0, time.UTC)}},
		{"shanghai", time.Date(2026, 3, 7, 12, 0, 0, 0, time.UTC), "0 9 * * *", "Asia/Shanghai",
			[]time.Time{time.Date(2026, 3, 8, 1, 0, 0, 0, time.UTC), time.Date(2026, 3, 9, 1, 0, 0, 0, time.UTC)}},
		{"utc", time.Date(2026, 3, 7, 12, 0, 0, 0, time.UTC), "0 9 * * *", "UTC",
			[]time.Time{time.Date(2026, 3, 8, 9, 0, 0, 0, time.UTC), time.Date(2026, 3, 9, 9, 0, 0, 0, time.UTC)}},
	} {
		c := storetest.NewClock(day.start)
		r := newReplica(t, url, day.name, c, &idleDecider{}, func(cfg *scheduler.Config) { cfg.MaxJitter = -1 })
		prefix := "dst-" + day.name + "-"
		seedGoals(t, r.pool, prefix, 1, day.spec, day.tz, store.RunnerWebhook)
		for c.Now().Before(day.start.Add(48 * time.Hour)) {
			_, err := r.sched.Step(ctx)
			require.NoError(t, err)
			c.Add(10 * time.Minute)
		}
		list, err := r.st.ListTicks(ctx, store.TicksParams{GoalID: prefix + "000001"})
		require.NoError(t, err)
		var got []time.Time
		for i := len(list) - 1; i >= 0; i-- {
			require.NotEqual(t, store.TickMissed, list[i].Outcome)
			got = append(got, list[i].FireAt.UTC())
		}
		require.Equal(t, day.wantFireAt, got, day.name)
	}
}
