package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loopx/store"
	"loopx/store/storetest"
)

// ReadGoalProblems returns only the goal's failed rows and missed fires in the window, newest
// first, cut at the limit, with totals over everything that matched.
func TestReadGoalProblemsScopesToGoalNewestFirst(t *testing.T) {
	t.Parallel()
	st := storetest.New(t, store.Options{})
	ctx := t.Context()
	for _, g := range []string{"g", "other"} {
		_, err := st.CreateGoal(ctx, store.CreateGoalParams{ID: g, Owners: []string{"ou_owner"}, Meta: admin})
		require.NoError(t, err)
		_, err = st.RegisterAgent(ctx, store.RegisterAgentParams{GoalID: g, AgentID: "codex", Meta: admin})
		require.NoError(t, err)
	}
	empty, err := store.ReadGoalProblems(ctx, st.DB(), "g", time.Now().Add(-time.Hour), 3)
	require.NoError(t, err)
	require.Equal(t, store.GoalProblems{}, empty)

	// Outbox: four failed rows of g (codes 230002, 230001, 99991672, 230002), one sent row of
	// g and one failed row of another goal.
	for i, r := range []struct {
		goal, state string
		code        int
	}{{"g", "failed", 230002}, {"g", "sent", 0}, {"other", "failed", 230002}, {"g", "failed", 230001},
		{"g", "failed", 99991672}, {"g", "failed", 230002}} {
		_, err := st.DB().Exec(ctx, `INSERT INTO outbox (uuid, kind, receive_id, content, goal_id, state, last_code, last_error, attempts)
			VALUES (gen_random_uuid()::text, 'text', 'oc_x', $1::int::text, $2, $3, $4, 'lark said no', 1)`, i, r.goal, r.state, r.code)
		require.NoError(t, err)
	}

	now := time.Now().UTC().Truncate(time.Second)
	var ticks []store.Tick
	for _, g := range []string{"g", "other"} {
		scheds, err := st.ListSchedules(ctx, g)
		require.NoError(t, err)
		var hb store.Schedule
		for _, s := range scheds {
			if s.Kind == "heartbeat" && s.AgentID == "codex" {
				hb = s
			}
		}
		require.NotZero(t, hb.ID, "schedules of %s: %+v", g, scheds)
		for h := 1; h <= 5; h++ {
			fire := now.Add(-time.Duration(h) * time.Hour)
			outcome := store.TickMissed
			if h == 2 {
				outcome = store.TickRan
			}
			ticks = append(ticks, store.Tick{ScheduleID: hb.ID, GoalID: g, AgentID: "codex", Kind: "heartbeat",
				FireAt: fire, RunAt: fire, Outcome: outcome, Reason: "down", DecidedAt: now})
		}
	}
	// And one missed fire of g outside the window.
	ticks = append(ticks, store.Tick{ScheduleID: ticks[0].ScheduleID, GoalID: "g", AgentID: "codex", Kind: "heartbeat",
		FireAt: now.Add(-30 * time.Hour), RunAt: now.Add(-30 * time.Hour), Outcome: store.TickMissed, DecidedAt: now})
	_, err = store.InsertTicks(ctx, st.DB(), ticks)
	require.NoError(t, err)

	p, err := store.ReadGoalProblems(ctx, st.DB(), "g", now.Add(-24*time.Hour), 3)
	require.NoError(t, err)
	require.Equal(t, 4, p.FailureTotal)
	require.Len(t, p.Failures, 3)
	codes := []int{p.Failures[0].Code, p.Failures[1].Code, p.Failures[2].Code}
	require.Equal(t, []int{230002, 99991672, 230001}, codes, "newest first")
	require.Greater(t, p.Failures[0].ID, p.Failures[1].ID)
	require.Equal(t, "g", p.Failures[0].GoalID)
	require.Equal(t, "lark said no", p.Failures[0].Error)
	require.Equal(t, "oc_x", p.Failures[0].ReceiveID)
	require.Equal(t, 1, p.Failures[0].Attempts)
	require.False(t, p.Failures[0].CreatedAt.IsZero())

	require.Equal(t, 4, p.MissedTotal, "four missed fires in the last 24 h; the ran one and the old one do not count")
	require.Len(t, p.Missed, 3)
	for i, h := range []int{1, 3, 4} {
		require.True(t, now.Add(-time.Duration(h)*time.Hour).Equal(p.Missed[i].FireAt), "missed[%d] = %v", i, p.Missed[i].FireAt)
		require.Equal(t, store.TickMissed, p.Missed[i].Outcome)
		require.Equal(t, "codex", p.Missed[i].AgentID)
		require.Equal(t, "heartbeat", p.Missed[i].Kind)
	}

	_, err = store.ReadGoalProblems(ctx, st.DB(), "g", now, 0)
	require.ErrorIs(t, err, store.ErrInvalid)
}
