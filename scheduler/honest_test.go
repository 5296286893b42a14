package scheduler_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loopx/cards"
	"loopx/quota"
	"loopx/scheduler"
	"loopx/store"
	"loopx/store/storetest"
	"loopx/templates"
)

// A heartbeat of a poll agent starts nothing: a run answer is recorded as due (the host
// learns it at its next poll), never as ran.
func TestPollHeartbeatIsDueNotRan(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := storetest.NewClock(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	st := storetest.New(t, store.Options{Now: c.Now})
	s, err := scheduler.New(scheduler.Config{Store: st, Decider: quota.NewService(st, testTemplates(t), quota.Options{Now: c.Now}),
		Now: c.Now, MaxJitter: -1})
	require.NoError(t, err)
	_, err = st.CreateGoal(ctx, store.CreateGoalParams{ID: "poll", Owners: []string{"ou_a"}, HeartbeatSpec: "*/5 * * * *", Meta: admin})
	require.NoError(t, err)
	_, err = st.RegisterAgent(ctx, store.RegisterAgentParams{GoalID: "poll", AgentID: "host", Runner: store.RunnerPoll, Meta: admin})
	require.NoError(t, err)
	_, err = st.AddTodo(ctx, store.AddTodoParams{GoalID: "poll", Text: "Write the parser", Meta: admin})
	require.NoError(t, err)

	stats, err := s.Step(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, stats.Ticks)
	require.Zero(t, stats.Started)
	ticks, err := st.ListTicks(ctx, store.TicksParams{GoalID: "poll"})
	require.NoError(t, err)
	require.Len(t, ticks, 1)
	require.Equal(t, store.TickDue, ticks[0].Outcome, "nothing was run")
	require.Equal(t, quota.ActionNormalRun, ticks[0].Reason, "the tick says what is due")
	require.Zero(t, ticks[0].TurnID)
	_, err = store.GetLiveTurn(ctx, st.DB(), "poll", "host", c.Now())
	require.ErrorIs(t, err, store.ErrNotFound, "no turn was opened")

	// Nothing to do: the same heartbeat is a skip, as for any runner.
	_, err = st.StopGoal(ctx, store.GoalRef{GoalID: "poll", Meta: admin})
	require.NoError(t, err)
	c.Add(5 * time.Minute)
	_, err = s.Step(ctx)
	require.NoError(t, err)
	ticks, err = st.ListTicks(ctx, store.TicksParams{GoalID: "poll", Limit: 1})
	require.NoError(t, err)
	require.Equal(t, store.TickSkipped, ticks[0].Outcome)
}

// cardLines lists a card's texts in the order they are shown.
func cardLines(t *testing.T, content string) []string {
	t.Helper()
	var card struct {
		Body struct {
			Elements []struct {
				Content string `json:"content"`
				Text    struct {
					Content string `json:"content"`
				} `json:"text"`
			} `json:"elements"`
		} `json:"body"`
	}
	require.NoError(t, json.Unmarshal([]byte(content), &card))
	var out []string
	for _, e := range card.Body.Elements {
		if l := e.Content + e.Text.Content; l != "" { // the rule between sections has no text
			out = append(out, l)
		}
	}
	return out
}

// A digest lists the gates answered with what was chosen, and the cancelled ones as cancelled,
// not answered.
func TestDigestListsCancelledGatesAsCancelled(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := storetest.NewClock(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	st := storetest.New(t, store.Options{Now: c.Now})
	_, err := st.CreateGoal(ctx, store.CreateGoalParams{ID: "rel", Owners: []string{"ou_a"}, Meta: admin})
	require.NoError(t, err)
	_, err = st.RegisterAgent(ctx, store.RegisterAgentParams{GoalID: "rel", AgentID: "a1", Meta: admin})
	require.NoError(t, err)
	agent := store.Meta{Actor: "agent:rel/a1", Surface: "api"}
	ask := func(q string) store.Gate {
		g, err := st.AskGate(ctx, store.AskGateParams{GoalID: "rel", AgentID: "a1", Question: q, Options: []string{"approve", "later", "reject"}, Meta: agent})
		require.NoError(t, err)
		return g
	}
	answer := func(g store.Gate, a string) string {
		_, err := st.AnswerGate(ctx, store.AnswerGateParams{GoalID: "rel", GateID: g.ID, Answer: a, AnsweredBy: "ou_a", Meta: admin})
		require.NoError(t, err)
		return fmt.Sprintf("#%d %s", g.ID, g.Question)
	}
	c.Add(time.Minute)
	deploy := answer(ask("Deploy?"), "approve")
	notes := answer(ask("Publish the notes?"), "later")
	branch := answer(ask("Delete the branch?"), "reject")
	retry := ask("Retry the flaky job?")
	_, err = st.CancelGate(ctx, store.CancelGateParams{GoalID: "rel", GateID: retry.ID, AgentID: "a1", Meta: agent})
	require.NoError(t, err)
	c.Add(time.Minute)

	set, err := templates.New()
	require.NoError(t, err)
	dig, err := scheduler.NewDigests(scheduler.DigestConfig{Store: st, Cards: cards.New(set, "en")})
	require.NoError(t, err)
	var res scheduler.DigestResult
	require.NoError(t, st.WithTx(ctx, func(tx *store.Tx) error {
		res, err = dig.Report(ctx, tx, scheduler.ReportParams{GoalID: "rel", ChatID: "oc_room"})
		return err
	}))
	f := res.Facts
	require.Equal(t, 4, f.GatesAsked)
	require.Equal(t, 3, f.GatesAnswerd, "a cancelled gate was not answered")
	require.Equal(t, 1, f.GatesCancelled)
	for _, it := range f.Answered {
		require.NotEqual(t, store.GateCancelled, it.Status)
	}
	require.Len(t, f.Cancelled, 1)
	require.Equal(t, retry.ID, f.Cancelled[0].ID)

	lines := cardLines(t, res.Message.Content)
	section := ""
	bySection := map[string][]string{}
	for _, l := range lines {
		if len(l) > 2 && l[:2] == "**" {
			section = l
			continue
		}
		bySection[section] = append(bySection[section], l)
	}
	require.Equal(t, []string{deploy + " → approved", notes + " → answered: later", branch + " → rejected"},
		bySection["**Gates answered**"])
	require.Equal(t, []string{fmt.Sprintf("#%d Retry the flaky job? → withdrawn", retry.ID)},
		bySection["**Gates withdrawn** (by the agent that asked): 1"], "a cancelled gate reads withdrawn, the glossary's word")
}
