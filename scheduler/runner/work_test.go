package runner_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loopx/cards"
	"loopx/quota"
	"loopx/scheduler"
	"loopx/scheduler/runner"
	"loopx/store"
	"loopx/store/storetest"
)

// workBundle is goal "g" (bound to chat oc_room) with agent "a1" driven by a real scheduler
// that renders turn cards, as serve wires it.
type workBundle struct {
	*testBundle
	cards *cards.Set
}

func setupWork(t *testing.T, kind string, settings any, breaker *int) *workBundle {
	t.Helper()
	ctx := t.Context()
	c := storetest.NewClock(time.Now().UTC().Truncate(time.Minute).Add(time.Hour + 50*time.Second))
	st := storetest.New(t, store.Options{Now: c.Now})
	off := 0
	_, err := st.CreateGoal(ctx, store.CreateGoalParams{ID: "g", Title: "Test goal", Owners: []string{"ou_owner"},
		HeartbeatSpec: "* * * * *", HeartbeatTZ: "UTC", StallTurns: &off, BreakerFailures: breaker, Meta: admin})
	require.NoError(t, err)
	raw, err := json.Marshal(settings)
	require.NoError(t, err)
	_, err = st.RegisterAgent(ctx, store.RegisterAgentParams{GoalID: "g", AgentID: "a1", Runner: kind, RunnerConfig: raw, Meta: admin})
	require.NoError(t, err)
	todo, err := st.AddTodo(ctx, store.AddTodoParams{GoalID: "g", Text: "Do the thing", Meta: admin})
	require.NoError(t, err)
	require.NoError(t, st.WithTx(ctx, func(tx *store.Tx) error {
		return store.Bind(ctx, tx, store.Binding{ChatID: "oc_room", GoalID: "g", CreatedBy: "ou_owner"})
	}))
	tpl := testTemplates(t)
	cs := cards.New(tpl, "en")
	qs := quota.NewService(st, tpl, quota.Options{Now: c.Now})
	base := runner.Base{URL: "http://127.0.0.1:7377", Goals: st, Tokens: st, Templates: tpl, Secrets: st, Files: st}
	sched, err := scheduler.New(scheduler.Config{
		Store: st, Decider: qs, Now: c.Now, MaxJitter: -1, Replica: "t", Cards: cs, StopPoll: 50 * time.Millisecond,
		Runners: map[string]scheduler.Runner{
			store.RunnerExec:    &runner.Exec{Base: base, Grace: 500 * time.Millisecond, Notes: st},
			store.RunnerWebhook: &runner.Webhook{Base: base, Backoff: 50 * time.Millisecond},
		},
	})
	require.NoError(t, err)
	return &workBundle{testBundle: &testBundle{st: st, qs: qs, sched: sched, clock: c, goal: "g", agent: "a1", todo: todo}, cards: cs}
}

func (b *workBundle) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, b.st.DB().QueryRow(t.Context(), sql, args...).Scan(&n))
	return n
}

// After the goal's breaker_failures failed turns in a row the agent is held: exactly one
// hold (audited), one breaker card, one failure card per turn; heartbeats then start nothing
// and should-run answers held until an owner resumes it.
func TestBreakerHoldsAfterFailuresInARow(t *testing.T) {
	t.Parallel()
	agent := script(t, `echo "compiling"; echo "error: broken" >&2; exit 2`)
	two := 2
	b := setupWork(t, store.RunnerExec, runner.ExecSettings{Argv: []string{"/bin/sh", agent}}, &two)
	for range 2 {
		b.clock.Add(5 * time.Minute)
		b.fire(t)
		b.sched.Wait()
	}
	require.Len(t, b.turns(t), 2)
	a, err := b.st.GetAgent(t.Context(), "g", "a1")
	require.NoError(t, err)
	require.NotNil(t, a.HeldAt, "held after two failures")
	require.Equal(t, store.HeldFailures, a.HeldReason)
	require.Equal(t, 2, a.HeldFailures)
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM audit WHERE action = 'agent.hold'`))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM outbox WHERE dedupe_key LIKE 'breaker:%'`))
	// Sweeping again (another replica, a later step) adds nothing.
	_, err = b.sched.TurnCards(t.Context())
	require.NoError(t, err)
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM outbox WHERE dedupe_key LIKE 'breaker:%'`))
	require.Equal(t, 2, b.count(t, `SELECT count(*) FROM outbox WHERE dedupe_key LIKE 'turn:%:card:oc_room' AND kind = 'card'`), "one card per turn")

	d, err := b.qs.ShouldRun(t.Context(), quota.ShouldRunParams{GoalID: "g", AgentID: "a1"})
	require.NoError(t, err)
	require.Equal(t, quota.StateHeld, d.State)
	require.Equal(t, "held_failures", d.Reason)
	require.Equal(t, 2, d.Held.Failures)
	require.Equal(t, "stop_until_explicit_resume", d.SchedulerHint.Action)
	b.clock.Add(5 * time.Minute)
	b.fire(t)
	b.sched.Wait()
	require.Len(t, b.turns(t), 2, "no heartbeat opens a turn for a held agent")

	_, err = b.st.ResumeAgent(t.Context(), store.ResumeParams{GoalID: "g", AgentID: "a1", Notice: b.cards.Turns().BreakerUpdate,
		Meta: store.Meta{Actor: "ou_owner", Surface: "chat"}})
	require.NoError(t, err)
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM outbox WHERE dedupe_key LIKE 'breaker:%:resumed'`), "the breaker card shows the resume")
	b.clock.Add(5 * time.Minute)
	b.fire(t)
	b.sched.Wait()
	require.Len(t, b.turns(t), 3, "resumed: the heartbeat runs it again")
	a, err = b.st.GetAgent(t.Context(), "g", "a1")
	require.NoError(t, err)
	require.Nil(t, a.HeldAt, "one failure after the resume does not hold it")
}

// A stop request kills an exec turn's whole process group (a child that ignores SIGTERM
// too) within the grace period, and the turn is recorded as stopped.
func TestStopKillsTheExecTurn(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	agent := script(t, `trap '' TERM; sleep 300 & echo $! > "$OUT/child"; echo "::progress:: started the long job"; wait`)
	b := setupWork(t, store.RunnerExec, runner.ExecSettings{Argv: []string{"/bin/sh", agent}, Env: map[string]string{"OUT": out}}, nil)
	b.fire(t)
	childFile := filepath.Join(out, "child")
	waitFor(t, "the agent to start", func() bool { _, err := os.Stat(childFile); return err == nil })
	raw, err := os.ReadFile(childFile)
	require.NoError(t, err)
	child, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	require.NoError(t, err)
	waitFor(t, "the progress note", func() bool {
		return b.count(t, `SELECT count(*) FROM turn_note WHERE text = 'started the long job'`) == 1
	})

	start := time.Now()
	turn, err := b.st.RequestStop(t.Context(), store.StopParams{GoalID: "g", AgentID: "a1", Meta: store.Meta{Actor: "ou_owner", Surface: "chat"}})
	require.NoError(t, err)
	require.NotNil(t, turn.StopRequestedAt)
	b.sched.Wait()
	require.Less(t, time.Since(start), 5*time.Second, "the group is killed within the grace period")
	waitFor(t, "the child to die", func() bool { return syscall.Kill(child, 0) == syscall.ESRCH })
	turns := b.turns(t)
	require.Len(t, turns, 1)
	require.Equal(t, store.TurnStopped, turns[0].state)
	require.Contains(t, turns[0].outcome, "halted by ou_owner")
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM audit WHERE action = 'turn.stop'`))
	// A stopped turn is no failure: no failure card, the breaker does not count it.
	require.Zero(t, b.count(t, `SELECT count(*) FROM outbox WHERE dedupe_key LIKE 'breaker:%'`))
	n, err := store.FailuresInRow(t.Context(), b.st.DB(), "g", "a1")
	require.NoError(t, err)
	require.Zero(t, n)
}

// A webhook turn an owner stops is abandoned and its agent's cancel URL gets a signed POST.
func TestStopCallsTheWebhookCancelURL(t *testing.T) {
	t.Parallel()
	const secret = "0123456789abcdef-cancel"
	started := make(chan struct{}, 1)
	var cancelled atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/cancel" {
			ts, _ := strconv.ParseInt(r.Header.Get(runner.HeaderTimestamp), 10, 64)
			if r.Header.Get(runner.HeaderSignature) == runner.Sign(secret, ts, body) {
				cancelled.Store(string(body))
			}
			return
		}
		started <- struct{}{}
		<-r.Context().Done() // a long turn
	}))
	defer srv.Close()
	b := setupWork(t, store.RunnerWebhook, runner.WebhookSettings{URL: srv.URL + "/turn", Secret: secret, CancelURL: srv.URL + "/cancel"}, nil)
	b.fire(t)
	<-started
	_, err := b.st.RequestStop(t.Context(), store.StopParams{GoalID: "g", AgentID: "a1", Meta: store.Meta{Actor: "ou_owner", Surface: "chat"}})
	require.NoError(t, err)
	b.sched.Wait()
	turns := b.turns(t)
	require.Len(t, turns, 1)
	require.Equal(t, store.TurnStopped, turns[0].state)
	require.Contains(t, turns[0].outcome, "cancel URL answered 200")
	body, _ := cancelled.Load().(string)
	require.Contains(t, body, `"cancelled":true`, "the cancel URL was called, signed")
	require.Contains(t, body, turns[0].instance)
}

// A heartbeat fired now goes through should-run at once; a claim replayed (a second step)
// starts nothing more.
func TestRunNowFiresThroughShouldRun(t *testing.T) {
	t.Parallel()
	agent := script(t, `echo "::progress:: working"; echo done`)
	b := setupWork(t, store.RunnerExec, runner.ExecSettings{Argv: []string{"/bin/sh", agent}}, nil)
	req, err := b.st.RequestRun(t.Context(), store.RunParams{GoalID: "g", AgentID: "a1", ChatID: "oc_room", ReplyTo: "om_run",
		Lang: "en", Meta: store.Meta{Actor: "ou_owner", Surface: "chat"}})
	require.NoError(t, err)
	st, err := b.sched.Step(t.Context())
	require.NoError(t, err)
	require.Equal(t, 1, st.RunNow)
	b.sched.Wait()
	turns := b.turns(t)
	require.Len(t, turns, 1)
	require.Equal(t, store.RunInstanceID(req.ID), turns[0].instance)
	got, err := b.st.GetRunRequest(t.Context(), req.ID)
	require.NoError(t, err)
	require.Equal(t, "done", got.State)
	require.Contains(t, string(got.Outcome), `"started": true`)
	reply, err := store.GetOutboxByKey(t.Context(), b.st.DB(), store.RunReplyKey(req.ID))
	require.NoError(t, err)
	require.Equal(t, "om_run", reply.ReplyTo)
	require.Contains(t, reply.Content, "Started a turn of a1 on #g")
	st, err = b.sched.Step(t.Context())
	require.NoError(t, err)
	require.Zero(t, st.RunNow)
	require.Len(t, b.turns(t), 1)
	// The turn made no progress but the note: a progress card showed it, then its outcome.
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM outbox WHERE dedupe_key = $1`, store.TurnCardKey(turns[0].id, "oc_room")))
}

// /run on a goal whose todos are all finished, then on the goal once done, says why no turn
// started in words, not should-run's reasons.
func TestRunNowSaysWhyInWords(t *testing.T) {
	t.Parallel()
	agent := script(t, `echo done`)
	b := setupWork(t, store.RunnerExec, runner.ExecSettings{Argv: []string{"/bin/sh", agent}}, nil)
	ctx := t.Context()
	todos, err := b.st.ListTodos(ctx, store.ListTodosParams{GoalID: "g"})
	require.NoError(t, err)
	done := store.TodoDone
	_, err = b.st.UpdateTodo(ctx, store.UpdateTodoParams{GoalID: "g", TodoID: todos[0].ID, AgentID: "a1", Version: todos[0].Version, Status: &done, Meta: admin})
	require.NoError(t, err)
	reply := func(lang string) string {
		t.Helper()
		req, err := b.st.RequestRun(ctx, store.RunParams{GoalID: "g", AgentID: "a1", ChatID: "oc_room", ReplyTo: "om_run_" + lang,
			Lang: lang, Meta: store.Meta{Actor: "ou_owner", Surface: "chat"}})
		require.NoError(t, err)
		_, err = b.sched.Step(ctx)
		require.NoError(t, err)
		b.sched.Wait()
		out, err := store.GetOutboxByKey(ctx, b.st.DB(), store.RunReplyKey(req.ID))
		require.NoError(t, err)
		return out.Content
	}
	require.Contains(t, reply("en"), "No turn started for a1 on #g: every todo is finished; /done finishes the goal.")
	require.NoError(t, b.st.WithTx(ctx, func(tx *store.Tx) error {
		g, err := store.LockGoal(ctx, tx, "g")
		if err != nil {
			return err
		}
		_, _, err = store.FinishGoal(ctx, tx, g, nil, b.clock.Now())
		return err
	}))
	require.Contains(t, reply("zh"), "目标已完成；用 /reopen 重新打开")
}

// A scheduled digest with nothing new is not sent; the first one after says how long it
// was quiet.
func TestQuietDigests(t *testing.T) {
	t.Parallel()
	agent := script(t, `echo idle`)
	b := setupWork(t, store.RunnerExec, runner.ExecSettings{Argv: []string{"/bin/sh", agent}}, nil)
	d, err := scheduler.NewDigests(scheduler.DigestConfig{Store: b.st, Cards: b.cards})
	require.NoError(t, err)
	ctx := t.Context()
	var res scheduler.DigestResult
	at := b.clock.Now()
	digest := func() {
		t.Helper()
		require.NoError(t, b.st.WithTx(ctx, func(tx *store.Tx) error {
			var err error
			res, err = d.Scheduled(ctx, tx, "g", at)
			return err
		}))
	}
	at = at.Add(24 * time.Hour)
	digest() // the first window holds the todo added at setup: sent
	require.Empty(t, res.Reason)
	require.NotEmpty(t, res.Outbox)
	for range 2 {
		at = at.Add(24 * time.Hour)
		digest()
		require.Equal(t, "quiet", res.Reason, "nothing happened: not sent")
		require.Empty(t, res.Outbox)
	}
	b.clock.Set(at.Add(time.Hour))
	_, err = b.st.AddTodo(ctx, store.AddTodoParams{GoalID: "g", Text: "something new", Meta: admin})
	require.NoError(t, err)
	at = at.Add(24 * time.Hour)
	digest()
	require.Empty(t, res.Reason)
	require.Len(t, res.Outbox, 1)
	require.Contains(t, res.Message.Content, "Quiet for 2 d before this report")
}
