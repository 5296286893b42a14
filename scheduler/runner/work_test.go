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

// Progress notes are what an exec agent printed too, and the progress card shows them to the
// whole chat: the secrets the runner handed the turn are redacted from them like from its
// log tail.
func TestProgressNotesAreRedacted(t *testing.T) {
	t.Parallel()
	const key = "sk-live-5d1e0b7a93c24f68"
	agent := script(t, `echo "::progress:: calling the API with $API_KEY"
echo "::progress:: as $(printf '%s' "$API_KEY" | base64)"
echo "::progress:: token $LOOPX_TOKEN"
echo done`)
	b := setupWork(t, store.RunnerExec, runner.ExecSettings{Argv: []string{"/bin/sh", agent}, Env: map[string]string{"API_KEY": key}}, nil)
	b.fire(t)
	b.sched.Wait()
	turns := b.turns(t)
	require.Len(t, turns, 1)
	rows, err := b.st.DB().Query(t.Context(), `SELECT text FROM turn_note WHERE turn_id = $1 ORDER BY id`, turns[0].id)
	require.NoError(t, err)
	var notes []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		notes = append(notes, s)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"calling the API with " + runner.Redacted, "as " + runner.Redacted, "token " + runner.Redacted}, notes)
	_, err = b.sched.TurnCards(t.Context())
	require.NoError(t, err)
	require.Zero(t, b.count(t, `SELECT count(*) FROM outbox WHERE content LIKE '%' || $1 || '%' OR content LIKE '%lxt\_%'`, key[3:]),
		"no card shows the key or the turn token")
}

// A live progress card changes in place at most once per scheduler.CardRefresh in its chat,
// however many notes come; its last update, the outcome, waits its turn too.
func TestProgressCardRefreshesAtMostEveryFiveSeconds(t *testing.T) {
	t.Parallel()
	b := setupWork(t, store.RunnerExec, runner.ExecSettings{Argv: []string{"/bin/true"}}, nil)
	ctx := t.Context()
	host := store.Meta{Actor: "agent:g/a1", Surface: "api"}
	tu, err := b.st.OpenTurn(ctx, store.OpenTurnParams{GoalID: "g", AgentID: "a1", InstanceID: "t-mcp", TodoID: b.todo.ID,
		Via: "mcp", Meta: host})
	require.NoError(t, err)
	sweep := func() {
		t.Helper()
		_, err := b.sched.TurnCards(ctx)
		require.NoError(t, err)
	}
	note := func(text string) {
		t.Helper()
		_, err := b.st.AddTurnNote(ctx, store.TurnNoteParams{GoalID: "g", AgentID: "a1", Text: text, Meta: host})
		require.NoError(t, err)
	}
	card, err := store.GetOutboxByKey(ctx, b.st.DB(), store.TurnCardKey(tu.ID, "oc_room"))
	require.NoError(t, err)
	require.Zero(t, card.ID, "no card before the sweep")
	sweep()
	card, err = store.GetOutboxByKey(ctx, b.st.DB(), store.TurnCardKey(tu.ID, "oc_room"))
	require.NoError(t, err)
	require.NotZero(t, card.ID, "an MCP turn gets a progress card by default")
	updates := func() int {
		return b.count(t, `SELECT count(*) FROM outbox WHERE kind = 'card_update' AND update_of = $1`, card.ID)
	}
	last := func() string {
		t.Helper()
		var content string
		require.NoError(t, b.st.DB().QueryRow(ctx, `SELECT content FROM outbox WHERE kind = 'card_update' AND update_of = $1
			ORDER BY id DESC LIMIT 1`, card.ID).Scan(&content))
		return content
	}

	note("step 1")
	b.clock.Add(time.Second)
	sweep()
	require.Zero(t, updates(), "1 s after the card was posted: not yet")
	b.clock.Add(scheduler.CardRefresh - time.Second)
	sweep()
	require.Equal(t, 1, updates(), "5 s after: the note is shown")
	require.Contains(t, last(), "step 1")

	for i := 2; i <= 6; i++ { // a burst of notes within one refresh
		note("step " + strconv.Itoa(i))
		b.clock.Add(500 * time.Millisecond)
		sweep()
	}
	require.Equal(t, 1, updates(), "notes within 5 s of the last update wait")
	b.clock.Add(scheduler.CardRefresh)
	sweep()
	require.Equal(t, 2, updates(), "then one update shows them all")
	require.Contains(t, last(), "step 6")
	sweep()
	require.Equal(t, 2, updates(), "nothing new: no update")

	_, err = b.st.AddEvidence(ctx, store.AddEvidenceParams{GoalID: "g", AgentID: "a1", TurnID: tu.ID, Kind: "note",
		Summary: "wrote the parser", Meta: host})
	require.NoError(t, err)
	_, err = b.st.EndTurn(ctx, store.EndTurnParams{GoalID: "g", AgentID: "a1", InstanceID: "t-mcp", State: store.TurnOK,
		Outcome: "parser done", Meta: host})
	require.NoError(t, err)
	b.clock.Add(time.Second)
	sweep()
	require.Equal(t, 2, updates(), "the outcome waits for the chat's spacing too")
	b.clock.Add(scheduler.CardRefresh)
	sweep()
	require.Equal(t, 3, updates(), "then the card ends with the outcome")
	require.Contains(t, last(), "Done · a1 · #g")
	require.Contains(t, last(), "parser done")
	require.Contains(t, last(), "wrote the parser")
	b.clock.Add(time.Minute)
	sweep()
	require.Equal(t, 3, updates(), "an ended card is never updated again")
}

// A failed, timed-out or empty turn each gets one failure card saying what went wrong: an
// empty exec turn says it produced nothing, a host's failed turn shows its error (it has no
// log), a turn whose lease ran out says it timed out; each with owner-only [Retry now]
// [Pause agent].
func TestFailureCardsSayWhatWentWrong(t *testing.T) {
	t.Parallel()
	idle := script(t, `echo "looked around"; exit 0`)
	b := setupWork(t, store.RunnerExec, runner.ExecSettings{Argv: []string{"/bin/sh", idle}}, nil)
	ctx := t.Context()
	for _, id := range []string{"host", "gone"} {
		_, err := b.st.RegisterAgent(ctx, store.RegisterAgentParams{GoalID: "g", AgentID: id, Meta: admin})
		require.NoError(t, err)
	}
	cardOf := func(turnID int64) string {
		t.Helper()
		var content string
		require.NoError(t, b.st.DB().QueryRow(ctx, `SELECT o.content FROM outbox o
			WHERE o.dedupe_key = $1 OR o.update_of = (SELECT id FROM outbox WHERE dedupe_key = $1)
			ORDER BY o.id DESC LIMIT 1`, store.TurnCardKey(turnID, "oc_room")).Scan(&content))
		return content
	}
	cards := func(turnID int64) int {
		return b.count(t, `SELECT count(*) FROM outbox WHERE dedupe_key = $1`, store.TurnCardKey(turnID, "oc_room"))
	}

	// An exec turn that exits 0 with no evidence and no progress produced nothing.
	b.fire(t)
	b.sched.Wait()
	turns := b.turns(t)
	require.Len(t, turns, 1)
	require.Equal(t, store.TurnOK, turns[0].state)
	b.clock.Add(scheduler.CardRefresh)
	_, err := b.sched.TurnCards(ctx)
	require.NoError(t, err)
	empty := cardOf(turns[0].id)
	require.Contains(t, empty, "Nothing produced · a1 · #g")
	require.Contains(t, empty, "The turn ended without evidence or progress.")
	require.Contains(t, empty, `"action":"retry"`)
	require.Contains(t, empty, `"action":"pause"`)

	// A host's turn that failed: its error stands where a log would.
	hostMeta := store.Meta{Actor: "agent:g/host", Surface: "api"}
	ht, err := b.st.OpenTurn(ctx, store.OpenTurnParams{GoalID: "g", AgentID: "host", InstanceID: "t-host", Via: "cli", Meta: hostMeta})
	require.NoError(t, err)
	_, err = b.st.EndTurn(ctx, store.EndTurnParams{GoalID: "g", AgentID: "host", InstanceID: "t-host", State: store.TurnFailed,
		Outcome: "the model API answered 529: overloaded", Meta: hostMeta})
	require.NoError(t, err)
	// A turn whose host vanished: its lease runs out.
	gt, err := b.st.OpenTurn(ctx, store.OpenTurnParams{GoalID: "g", AgentID: "gone", InstanceID: "t-gone", Via: "cli",
		Lease: time.Minute, Meta: store.Meta{Actor: "agent:g/gone", Surface: "api"}})
	require.NoError(t, err)
	b.clock.Add(2 * time.Minute)
	expired, err := b.st.ExpireTurns(ctx)
	require.NoError(t, err)
	require.Len(t, expired, 1)
	for range 2 { // a second sweep (another replica) posts nothing more
		_, err = b.sched.TurnCards(ctx)
		require.NoError(t, err)
	}
	failed := cardOf(ht.ID)
	require.Contains(t, failed, "Failed · host · #g")
	require.Contains(t, failed, "**Error**")
	require.Contains(t, failed, "the model API answered 529: overloaded")
	require.Contains(t, failed, `"action":"retry"`)
	timedOut := cardOf(gt.ID)
	require.Contains(t, timedOut, "Abandoned · gone · #g")
	require.Contains(t, timedOut, "its lease ran out with no word from the agent")
	require.Contains(t, timedOut, `"action":"pause"`)
	require.Equal(t, 1, cards(ht.ID), "one card per turn")
	require.Equal(t, 1, cards(gt.ID), "one card per turn")
}

// More live turns than one sweep page (cardBatch, 50) all get their progress card, and a note
// on the last of them still reaches its card: a page of cards waiting on their chat's spacing
// does not hide the turns behind it.
func TestEveryLiveTurnGetsItsCard(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	b := setupWork(t, store.RunnerExec, runner.ExecSettings{Argv: []string{"/bin/true"}}, nil)
	const n = 120
	for i := range n {
		agent := "m" + strconv.Itoa(i)
		_, err := b.st.RegisterAgent(ctx, store.RegisterAgentParams{GoalID: "g", AgentID: agent, Meta: admin})
		require.NoError(t, err)
		_, err = b.st.AddTodo(ctx, store.AddTodoParams{GoalID: "g", Text: "work " + agent, ClaimFor: agent, Meta: admin})
		require.NoError(t, err)
		d, err := b.qs.ShouldRun(ctx, quota.ShouldRunParams{GoalID: "g", AgentID: agent, BeginTurn: true, Via: "mcp",
			TurnInstanceID: "live-" + agent, Meta: admin})
		require.NoError(t, err)
		require.Equal(t, "run", d.Decision, d.Reason)
	}
	for range 3 { // later steps of the scheduler find nothing more to post
		_, err := b.sched.TurnCards(ctx)
		require.NoError(t, err)
	}
	require.Equal(t, n, b.count(t, `SELECT count(*) FROM outbox WHERE dedupe_key LIKE 'turn:%:card:oc_room' AND kind = 'card'`), "one card per live turn")
	last := "m" + strconv.Itoa(n-1)
	_, err := b.st.AddTurnNote(ctx, store.TurnNoteParams{GoalID: "g", AgentID: last, Text: "halfway there", Meta: admin})
	require.NoError(t, err)
	b.clock.Add(scheduler.CardRefresh + time.Second)
	_, err = b.sched.TurnCards(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM outbox o JOIN turn t ON t.id = (SELECT turn_id FROM turn_card c WHERE c.outbox_id = o.update_of LIMIT 1)
		WHERE o.kind = 'card_update' AND t.agent_id = $1 AND o.content LIKE '%halfway there%'`, last), "the note reached the last turn's card")
}
