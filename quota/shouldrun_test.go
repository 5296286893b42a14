package quota_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loopx/quota"
	"loopx/store"
	"loopx/store/storetest"
	"loopx/templates"
)

const owner = "ou_owner1"

var admin = store.Meta{Actor: "admin", Surface: "api"}

type testBundle struct {
	st  *store.Store
	svc *quota.Service
	clk *storetest.Clock
}

// setup: goal "g" (owner ou_owner1, 3 slots per 24 h, stall after 3 turns) with agent "a".
func setup(t *testing.T, notice store.NoticeFunc) testBundle {
	t.Helper()
	clk := storetest.NewClock(time.Now().UTC().Truncate(time.Microsecond))
	st := storetest.New(t, store.Options{Now: clk.Now})
	slots := 3
	_, err := st.CreateGoal(t.Context(), store.CreateGoalParams{ID: "g", Owners: []string{owner}, AllowedSlots: &slots, Meta: admin})
	require.NoError(t, err)
	_, err = st.RegisterAgent(t.Context(), store.RegisterAgentParams{GoalID: "g", AgentID: "a", Meta: admin})
	require.NoError(t, err)
	return testBundle{st: st, svc: quota.NewService(st, testTemplates(t), quota.Options{GateNotice: notice}), clk: clk}
}

func (e testBundle) ask(t *testing.T, p quota.ShouldRunParams) quota.Decision {
	t.Helper()
	if p.GoalID == "" {
		p.GoalID, p.AgentID = "g", "a"
	}
	d, err := e.svc.ShouldRun(t.Context(), p)
	require.NoError(t, err)
	return d
}

func (e testBundle) addTodo(t *testing.T, text string, prio int) store.Todo {
	t.Helper()
	td, err := e.st.AddTodo(t.Context(), store.AddTodoParams{GoalID: "g", Text: text, Priority: &prio, Meta: admin})
	require.NoError(t, err)
	return td
}

func count(t *testing.T, st *store.Store, q string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, st.DB().QueryRow(t.Context(), q, args...).Scan(&n))
	return n
}

func TestShouldRunStatesAgainstDatabase(t *testing.T) {
	t.Parallel()
	ctx := t.Context()

	t.Run("idle then eligible then busy", func(t *testing.T) {
		t.Parallel()
		e := setup(t, nil)
		d := e.ask(t, quota.ShouldRunParams{})
		require.Equal(t, quota.StateIdle, d.State)
		require.False(t, d.ShouldRun)
		require.Equal(t, 1, count(t, e.st, `SELECT count(*) FROM quota_ledger WHERE kind = 'tick_decision'`))
		require.Zero(t, count(t, e.st, `SELECT count(*) FROM quota_ledger WHERE kind = 'slot_spent'`), "a skip never spends")

		low := e.addTodo(t, "low", 3)
		high := e.addTodo(t, "high", 0)
		_ = low
		d = e.ask(t, quota.ShouldRunParams{BeginTurn: true, TurnInstanceID: "t1"})
		require.Equal(t, quota.StateEligible, d.State)
		require.True(t, d.ShouldRun)
		require.Equal(t, high.ID, d.SelectedTodo.ID)
		require.NotNil(t, d.Turn)
		require.Equal(t, "t1", d.Turn.InstanceID)
		require.Equal(t, high.ID, d.Turn.TodoID)
		require.Equal(t, 3, d.Quota.AllowedSlots)

		d = e.ask(t, quota.ShouldRunParams{})
		require.Equal(t, quota.StateBusy, d.State)
		require.Contains(t, d.Message, "t1")
	})

	t.Run("paused by stop and by zero quota, over everything", func(t *testing.T) {
		t.Parallel()
		e := setup(t, nil)
		e.addTodo(t, "x", 2)
		_, err := e.st.OpenTurn(ctx, store.OpenTurnParams{GoalID: "g", AgentID: "a", InstanceID: "live", Meta: admin})
		require.NoError(t, err)
		_, err = e.st.StopGoal(ctx, store.GoalRef{GoalID: "g", Meta: admin})
		require.NoError(t, err)
		d := e.ask(t, quota.ShouldRunParams{})
		require.Equal(t, quota.StatePaused, d.State)
		require.Equal(t, "goal_stopped", d.Reason)
		require.Equal(t, "stop_until_explicit_resume", d.SchedulerHint.Action)

		_, err = e.st.ResumeGoal(ctx, store.GoalRef{GoalID: "g", Meta: admin})
		require.NoError(t, err)
		zero := 0
		_, err = e.st.UpdateGoal(ctx, store.UpdateGoalParams{GoalID: "g", AllowedSlots: &zero, Meta: admin})
		require.NoError(t, err)
		d = e.ask(t, quota.ShouldRunParams{})
		require.Equal(t, quota.StatePaused, d.State)
		require.Equal(t, "quota_zero", d.Reason)
	})

	t.Run("throttled until the oldest spend leaves the window", func(t *testing.T) {
		t.Parallel()
		e := setup(t, nil)
		e.addTodo(t, "x", 2)
		var first time.Time
		for i := range 3 {
			d := e.ask(t, quota.ShouldRunParams{BeginTurn: true, TurnInstanceID: fmt.Sprintf("s%d", i)})
			require.True(t, d.ShouldRun, "turn %d", i)
			_, err := e.st.AddEvidence(ctx, store.AddEvidenceParams{GoalID: "g", AgentID: "a", Summary: "step done", Meta: admin})
			require.NoError(t, err)
			r, err := e.st.SpendSlot(ctx, store.SpendSlotParams{GoalID: "g", AgentID: "a", TurnInstanceID: fmt.Sprintf("s%d", i), Meta: admin})
			require.NoError(t, err)
			if i == 0 {
				first = r.Entry.CreatedAt
			}
			e.clk.Add(time.Hour)
		}
		d := e.ask(t, quota.ShouldRunParams{})
		require.Equal(t, quota.StateThrottled, d.State)
		require.Equal(t, 3, d.Quota.SpentSlots)
		require.NotNil(t, d.Quota.NextEligibleAt)
		require.True(t, first.Add(24*time.Hour).Equal(*d.Quota.NextEligibleAt), "got %s want %s", d.Quota.NextEligibleAt, first.Add(24*time.Hour))

		e.clk.Add(21*time.Hour + time.Minute) // the first spend has left the window
		d = e.ask(t, quota.ShouldRunParams{})
		require.Equal(t, quota.StateEligible, d.State)
		require.Equal(t, 2, d.Quota.SpentSlots)
	})

	t.Run("inbox runs a reply turn while the todo waits on a gate", func(t *testing.T) {
		t.Parallel()
		e := setup(t, nil)
		td := e.addTodo(t, "x", 2)
		g, err := e.st.AskGate(ctx, store.AskGateParams{GoalID: "g", AgentID: "a", Question: "ok?", TodoID: td.ID, Meta: admin})
		require.NoError(t, err)
		d := e.ask(t, quota.ShouldRunParams{})
		require.Equal(t, quota.StateWaiting, d.State)
		require.Equal(t, []int64{g.ID}, d.Gates.Blocking)
		require.Equal(t, "backoff_waiting_for_user", d.SchedulerHint.Action)

		_, err = e.st.DB().Exec(ctx, `INSERT INTO inbox_item (goal_id, agent_id, mode, text, sender) VALUES ('g', 'a', 'inbox', 'status?', 'ou_owner1'), ('g', 'a', 'steer', 'stop that', 'ou_owner1')`)
		require.NoError(t, err)
		d = e.ask(t, quota.ShouldRunParams{})
		require.Equal(t, quota.StateInbox, d.State)
		require.Equal(t, quota.ActionInboxReply, d.EffectiveAction)
		require.True(t, d.ShouldRun)
		require.Equal(t, quota.InboxCounts{Pending: 2, Steer: 1}, d.Inbox)
	})

	t.Run("goal-wide gate waits", func(t *testing.T) {
		t.Parallel()
		e := setup(t, nil)
		e.addTodo(t, "x", 2)
		g, err := e.st.AskGate(ctx, store.AskGateParams{GoalID: "g", AgentID: "a", Question: "which way?", Meta: admin})
		require.NoError(t, err)
		d := e.ask(t, quota.ShouldRunParams{})
		require.Equal(t, quota.StateWaiting, d.State)
		require.Equal(t, []int64{g.ID}, d.Gates.Open)
	})

	t.Run("unknown goal and agent name the field", func(t *testing.T) {
		t.Parallel()
		e := setup(t, nil)
		_, err := e.svc.ShouldRun(ctx, quota.ShouldRunParams{GoalID: "nope", AgentID: "a"})
		require.ErrorIs(t, err, store.ErrNotFound)
		require.ErrorContains(t, err, "goal_id")
		_, err = e.svc.ShouldRun(ctx, quota.ShouldRunParams{GoalID: "g", AgentID: "nope"})
		require.ErrorIs(t, err, store.ErrNotFound)
		require.ErrorContains(t, err, "agent_id")
		_, err = e.svc.ShouldRun(ctx, quota.ShouldRunParams{GoalID: "Bad!", AgentID: "a"})
		require.ErrorIs(t, err, store.ErrInvalid)
		require.Zero(t, count(t, e.st, `SELECT count(*) FROM quota_ledger`))
	})
}

func TestShouldRunStallOpensOneGate(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	var notices []int64
	e := setup(t, func(_ context.Context, _ store.DB, g store.Gate) ([]store.OutboxInsert, error) {
		notices = append(notices, g.ID)
		return []store.OutboxInsert{{DedupeKey: fmt.Sprintf("gate:%d", g.ID), Kind: "text", ReceiveID: "oc_chat", Content: g.Question, GoalID: g.GoalID, GateID: g.ID}}, nil
	})
	e.addTodo(t, "x", 2)
	for i := range 3 {
		id := fmt.Sprintf("n%d", i)
		d := e.ask(t, quota.ShouldRunParams{BeginTurn: true, TurnInstanceID: id})
		require.True(t, d.ShouldRun, "turn %d: %s", i, d.State)
		_, err := e.st.EndTurn(ctx, store.EndTurnParams{GoalID: "g", AgentID: "a", InstanceID: id, State: store.TurnOK, Meta: admin})
		require.NoError(t, err)
	}
	d := e.ask(t, quota.ShouldRunParams{})
	require.Equal(t, quota.StateStalled, d.State)
	require.False(t, d.ShouldRun)
	require.Len(t, d.Gates.Open, 1)
	require.Len(t, notices, 1)
	require.Equal(t, 1, count(t, e.st, `SELECT count(*) FROM outbox WHERE gate_id = $1`, d.Gates.Open[0]))
	gate, err := e.st.GetGate(ctx, "g", d.Gates.Open[0])
	require.NoError(t, err)
	require.Equal(t, store.GateKindStall, gate.Kind)
	require.Equal(t, "no progress in 3 turns: continue or pause?", gate.Question)

	// While the stall gate is open the agent waits; no second gate opens.
	for range 2 {
		d = e.ask(t, quota.ShouldRunParams{})
		require.Equal(t, quota.StateWaiting, d.State)
	}
	require.Equal(t, 1, count(t, e.st, `SELECT count(*) FROM gate WHERE kind = 'stall'`))

	// The owner says continue: the stall count restarts from the answer.
	_, err = e.st.AnswerGate(ctx, store.AnswerGateParams{GoalID: "g", GateID: gate.ID, Answer: "continue", AnsweredBy: owner, Meta: store.Meta{Actor: owner, Surface: "card"}})
	require.NoError(t, err)
	e.clk.Add(time.Second)
	d = e.ask(t, quota.ShouldRunParams{})
	require.Equal(t, quota.StateEligible, d.State)
}

func TestShouldRunHeartbeatReceiptReplays(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.addTodo(t, "x", 2)
	first := e.ask(t, quota.ShouldRunParams{TurnInstanceID: "hb-1", BeginTurn: true})
	require.NotNil(t, first.HeartbeatReceipt)
	require.Equal(t, "committed", first.HeartbeatReceipt.Status)
	require.Equal(t, "hb-1", first.HeartbeatReceipt.TurnInstanceID)
	require.False(t, first.Replayed)

	tables := []string{"quota_ledger", "turn", "receipt", "hint_state", "audit", "gate"}
	before := map[string]int{}
	for _, tb := range tables {
		before[tb] = count(t, e.st, "SELECT count(*) FROM "+tb)
	}
	e.clk.Add(time.Minute)
	again := e.ask(t, quota.ShouldRunParams{TurnInstanceID: "hb-1", BeginTurn: true})
	require.True(t, again.Replayed)
	for _, tb := range tables {
		require.Equal(t, before[tb], count(t, e.st, "SELECT count(*) FROM "+tb), tb)
	}
	fj, err := json.Marshal(first)
	require.NoError(t, err)
	aj, err := json.Marshal(again)
	require.NoError(t, err)
	require.Equal(t, string(fj), string(aj))

	// A new instance id is a new decision: the agent is now busy with hb-1.
	next := e.ask(t, quota.ShouldRunParams{TurnInstanceID: "hb-2"})
	require.Equal(t, quota.StateBusy, next.State)
	require.NotEqual(t, first.HeartbeatReceipt.LedgerID, next.HeartbeatReceipt.LedgerID)
}

func TestSpendOnSkippedTurnRefused(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	d := e.ask(t, quota.ShouldRunParams{TurnInstanceID: "skip-1", BeginTurn: true})
	require.Equal(t, quota.StateIdle, d.State)
	require.Nil(t, d.Turn)
	_, err := e.st.SpendSlot(t.Context(), store.SpendSlotParams{GoalID: "g", AgentID: "a", TurnInstanceID: "skip-1", Meta: admin})
	require.ErrorIs(t, err, store.ErrRefused)
	require.ErrorContains(t, err, "skipped")
	require.Zero(t, count(t, e.st, `SELECT count(*) FROM quota_ledger WHERE kind = 'slot_spent'`))
}

func TestShouldRunHintProgressesAndResets(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	want := []int{30, 60, 120, 120}
	for i, w := range want {
		d := e.ask(t, quota.ShouldRunParams{})
		require.Equal(t, quota.StateIdle, d.State)
		require.Equal(t, w, d.SchedulerHint.IntervalMinutes, "tick %d", i)
	}
	e.addTodo(t, "x", 2)
	d := e.ask(t, quota.ShouldRunParams{})
	require.Equal(t, "run_now", d.SchedulerHint.Action)
	require.Equal(t, 3, d.SchedulerHint.IntervalMinutes)
	require.Equal(t, "FREQ=MINUTELY;INTERVAL=3", d.SchedulerHint.RRule)
	d = e.ask(t, quota.ShouldRunParams{})
	require.Equal(t, 6, d.SchedulerHint.IntervalMinutes)
}

// TestWholeTurn runs the tick contract end to end on the store: should-run (begin) → claim →
// evidence → refresh-state → spend → should-run again.
func TestWholeTurn(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := setup(t, nil)
	td := e.addTodo(t, "write the parser", 1)
	am := store.Meta{Actor: "agent:g/a", Surface: "api"}

	d := e.ask(t, quota.ShouldRunParams{TurnInstanceID: "w1", BeginTurn: true})
	require.True(t, d.ShouldRun)
	require.Equal(t, td.ID, d.SelectedTodo.ID)
	_, err := e.st.ClaimTodo(ctx, store.ClaimTodoParams{GoalID: "g", TodoID: td.ID, AgentID: "a", Lease: time.Hour, Meta: am})
	require.NoError(t, err)
	_, err = e.st.AddEvidence(ctx, store.AddEvidenceParams{GoalID: "g", AgentID: "a", TodoID: td.ID, Kind: "command", Summary: "go test ./parser passes", Meta: am})
	require.NoError(t, err)
	_, err = e.st.RefreshState(ctx, store.RefreshStateParams{GoalID: "g", AgentID: "a", TurnInstanceID: "w1", NextAction: "handle comments", Meta: am})
	require.NoError(t, err)
	r, err := e.st.SpendSlot(ctx, store.SpendSlotParams{GoalID: "g", AgentID: "a", TurnInstanceID: "w1", TodoID: td.ID, Meta: am})
	require.NoError(t, err)
	require.Equal(t, 1, r.SpentSlots)
	require.True(t, r.Turn.Progress)
	require.Equal(t, store.TurnOK, r.Turn.State)

	d = e.ask(t, quota.ShouldRunParams{TurnInstanceID: "w2"})
	require.Equal(t, quota.StateEligible, d.State)
	require.Equal(t, 1, d.Quota.SpentSlots)
	require.Equal(t, "handle comments", d.NextAction)
	require.Equal(t, "a", d.SelectedTodo.ClaimedBy)
}

func TestShouldRunConcurrentBeginOpensOneTurn(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.addTodo(t, "x", 2)
	var wg sync.WaitGroup
	ds := make([]quota.Decision, 10)
	errs := make([]error, 10)
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ds[i], errs[i] = e.svc.ShouldRun(t.Context(), quota.ShouldRunParams{GoalID: "g", AgentID: "a", TurnInstanceID: fmt.Sprintf("c%d", i), BeginTurn: true})
		}()
	}
	wg.Wait()
	runs := 0
	for i := range 10 {
		require.NoError(t, errs[i])
		if ds[i].Turn != nil {
			runs++
			continue
		}
		require.Equal(t, quota.StateBusy, ds[i].State)
	}
	require.Equal(t, 1, runs)
	require.Equal(t, 1, count(t, e.st, `SELECT count(*) FROM turn`))
}

func TestShouldRunSameInstanceConcurrentReplays(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.addTodo(t, "x", 2)
	var wg sync.WaitGroup
	out := make([]string, 8)
	errs := make([]error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := e.svc.ShouldRun(t.Context(), quota.ShouldRunParams{GoalID: "g", AgentID: "a", TurnInstanceID: "same", BeginTurn: true})
			errs[i] = err
			b, _ := json.Marshal(d)
			out[i] = string(b)
		}()
	}
	wg.Wait()
	for i := range 8 {
		require.NoError(t, errs[i])
		require.Equal(t, out[0], out[i])
	}
	require.Equal(t, 1, count(t, e.st, `SELECT count(*) FROM quota_ledger WHERE kind = 'tick_decision'`))
	require.Equal(t, 1, count(t, e.st, `SELECT count(*) FROM turn`))
}

// A goal that just stalled, asked by many concurrent should-runs at once, gets one stall gate
// and one notice; the others answer with that gate. Each should-run holds one connection and
// its gate card reads through it: with a pool of exactly as many connections as callers
// (and the card renderer reading the goal through the executor it is given), nobody waits
// for a second connection, so the burst finishes well within its deadline.
func TestConcurrentStallOpensOneGateOnOneConnectionEach(t *testing.T) {
	t.Parallel()
	const callers = 8
	url := storetest.NewDatabase(t)
	pool, err := store.Open(t.Context(), url+"&pool_max_conns="+fmt.Sprint(callers))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	st := store.New(pool, store.Options{})
	ctx := t.Context()
	_, err = st.CreateGoal(ctx, store.CreateGoalParams{ID: "g", Owners: []string{owner}, Meta: admin})
	require.NoError(t, err)
	_, err = st.RegisterAgent(ctx, store.RegisterAgentParams{GoalID: "g", AgentID: "a", Meta: admin})
	require.NoError(t, err)
	_, err = st.AddTodo(ctx, store.AddTodoParams{GoalID: "g", Text: "x", Meta: admin})
	require.NoError(t, err)
	var notices atomic.Int32
	svc := quota.NewService(st, testTemplates(t), quota.Options{GateNotice: func(ctx context.Context, db store.DB, g store.Gate) ([]store.OutboxInsert, error) {
		notices.Add(1)
		goal, err := store.GetGoal(ctx, db, g.GoalID) // through the should-run's own connection
		if err != nil {
			return nil, err
		}
		return []store.OutboxInsert{{Kind: "text", ReceiveIDType: "open_id", ReceiveID: goal.Owners[0], Content: g.Question, GoalID: g.GoalID, GateID: g.ID}}, nil
	}})
	for i := range 3 {
		id := fmt.Sprintf("n%d", i)
		d, err := svc.ShouldRun(ctx, quota.ShouldRunParams{GoalID: "g", AgentID: "a", BeginTurn: true, TurnInstanceID: id})
		require.NoError(t, err)
		require.True(t, d.ShouldRun)
		_, err = st.EndTurn(ctx, store.EndTurnParams{GoalID: "g", AgentID: "a", InstanceID: id, State: store.TurnOK, Meta: admin})
		require.NoError(t, err)
	}

	burstCtx, cancel := context.WithTimeout(ctx, 2*time.Minute) // bounds a stuck burst, not a slow machine
	defer cancel()
	var wg sync.WaitGroup
	gates := make([][]int64, callers)
	errs := make([]error, callers)
	for i := range callers {
		wg.Go(func() {
			d, err := svc.ShouldRun(burstCtx, quota.ShouldRunParams{GoalID: "g", AgentID: "a", BeginTurn: true, TurnInstanceID: fmt.Sprintf("x%d", i)})
			gates[i], errs[i] = d.Gates.Open, err
		})
	}
	wg.Wait()
	for i := range callers {
		require.NoError(t, errs[i])
		require.Len(t, gates[i], 1, "caller %d sees the one stall gate", i)
		require.Equal(t, gates[0], gates[i])
	}
	require.Equal(t, int32(1), notices.Load(), "one notice")
	require.Equal(t, 1, count(t, st, `SELECT count(*) FROM gate WHERE kind = 'stall' AND status = 'open'`))
	require.Equal(t, 1, count(t, st, `SELECT count(*) FROM outbox WHERE gate_id = $1`, gates[0][0]))
	require.Equal(t, 1, count(t, st, `SELECT count(*) FROM audit WHERE action = 'gate.stall'`))
}

// testTemplates is the embedded template set, as serve builds it once.
func testTemplates(t testing.TB) *templates.Set {
	t.Helper()
	tpl, err := templates.New()
	require.NoError(t, err)
	return tpl
}

// TestNamedTodoComesBeforeAContinuation: a continuation's todo comes first for a heartbeat,
// but should-run with todo_id opens the turn on the todo named (the /loopx task), and still
// carries the continuation.
func TestNamedTodoComesBeforeAContinuation(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	_, err := e.st.RegisterAgent(t.Context(), store.RegisterAgentParams{GoalID: "g", AgentID: "peer", Meta: admin})
	require.NoError(t, err)
	handed := e.addTodo(t, "the grammar", 2)
	task := e.addTodo(t, "the user's task", 2)
	h, err := e.st.HandOff(t.Context(), store.HandoffParams{GoalID: "g", TodoID: handed.ID, From: "peer", To: "a", Next: "review it", Meta: admin})
	require.NoError(t, err)

	d := e.ask(t, quota.ShouldRunParams{})
	require.Equal(t, handed.ID, d.SelectedTodo.ID, "the continuation's todo comes first")
	d = e.ask(t, quota.ShouldRunParams{TodoID: task.ID, TurnInstanceID: "t1", BeginTurn: true})
	require.True(t, d.ShouldRun)
	require.Equal(t, task.ID, d.SelectedTodo.ID, "the named todo")
	require.Equal(t, task.ID, d.Turn.TodoID)
	require.Equal(t, h.ID, d.Continuation.ID, "still carried")
}
