package mcp_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"loopx/api/client"
	"loopx/mcp"
	"loopx/quota"
	"loopx/store"
	"loopx/templates"
)

// followTask does what templates.LoopSteps tells a model to do for `/loopx <task>`, step by
// step, against the real server: todo_add (claim), should_run with its todo_id; on a skip it
// stops; on a run it records evidence for the turn's todo, refresh_state and spend_slot. It
// returns the task's todo and the should_run answer.
func followTask(t *testing.T, cs *sdk.ClientSession, task string) (int64, mcp.ShouldRunOut) {
	t.Helper()
	steps := templates.LoopSteps(templates.LoopCall{Command: "/loopx", Task: `"` + task + `"`})
	for _, want := range []string{"`todo_add` with `{\"text\": \"<the task>\", \"claim\": true}`", "`should_run`\n     with `{\"todo_id\":",
		"`should_run: false`", "`done` (the goal\n   is finished", "`your_turn.todo_id`",
		"`continuation`", "`acknowledge` with `{\"handoff_id\": <its handoff_id>}`", "`objective_changed`", "`{\"decision_id\": <its decision_id>}`",
		"`evidence_add` with `{\"todo_id\": <the turn's todo_id>", "`\"criteria\": [<ids>]`", "`selected_todo.criteria`",
		"`\"handoff\": {\"done\": \"...\", \"next\": \"...\", \"questions\": \"...\"}`", "`spend_slot` with `{}`"} {
		require.Contains(t, steps, want, "the steps this walk follows")
	}
	todo := ok[mcp.TodoOut](t, cs, "todo_add", map[string]any{"text": task, "claim": true})
	d := ok[mcp.ShouldRunOut](t, cs, "should_run", map[string]any{"todo_id": todo.Todo.ID})
	if !d.ShouldRun {
		return todo.Todo.ID, d
	}
	require.NotNil(t, d.YourTurn, d.NextStep)
	require.NotNil(t, d.Contract, "step 3 reads the contract")
	if c := d.Continuation; c != nil {
		ok[store.Ack](t, cs, "acknowledge", map[string]any{"handoff_id": c.ID})
	}
	if oc := d.ObjectiveChanged; oc != nil {
		ok[store.Ack](t, cs, "acknowledge", map[string]any{"decision_id": oc.DecisionID})
	}
	turnTodo := d.YourTurn.TodoID
	ev := map[string]any{"todo_id": turnTodo, "summary": "did " + task, "kind": "note"}
	if st := d.SelectedTodo; st != nil && len(st.Criteria) > 0 {
		ev["criteria"] = store.CriterionIDs(st.Criteria)
	}
	ok[mcp.EvidenceOut](t, cs, "evidence_add", ev)
	ok[mcp.TodoOut](t, cs, "todo_finish", map[string]any{"todo_id": turnTodo})
	ok[mcp.RefreshStateOut](t, cs, "refresh_state", map[string]any{"next_action": "check " + task,
		"handoff": map[string]any{"done": "did " + task, "next": "check " + task}})
	ok[mcp.SpendSlotOut](t, cs, "spend_slot", map[string]any{})
	return todo.Todo.ID, d
}

// TestLoopStepsAgainstTheServer walks the /loopx steps for a task in each state the server
// can be in and checks, in SQL, that a run's turn, evidence and spent slot all name the
// task's todo, and that a skip opens no turn and says why (next_step).
func TestLoopStepsAgainstTheServer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	one := 1

	// named checks the turn of agent codex on goal: its todo, its evidence's and its spend's.
	named := func(t *testing.T, goal string, todo int64) {
		t.Helper()
		var turnTodo, evTodo, spentTodo, turns int64
		require.NoError(t, b.pool.QueryRow(ctx, `
			SELECT (SELECT count(*) FROM turn WHERE goal_id = $1),
			       (SELECT coalesce(todo_id, 0) FROM turn WHERE goal_id = $1 ORDER BY id DESC LIMIT 1),
			       (SELECT coalesce(e.todo_id, 0) FROM evidence e JOIN turn t ON t.id = e.turn_id WHERE t.goal_id = $1 ORDER BY e.id DESC LIMIT 1),
			       (SELECT coalesce(q.todo_id, 0) FROM quota_ledger q JOIN turn t ON t.id = q.turn_id WHERE t.goal_id = $1 AND q.kind = 'slot_spent' ORDER BY q.id DESC LIMIT 1)`,
			goal).Scan(&turns, &turnTodo, &evTodo, &spentTodo))
		require.Equal(t, int64(1), turns)
		require.Equal(t, []int64{todo, todo, todo}, []int64{turnTodo, evTodo, spentTodo}, "turn, evidence and spent slot name the task's todo")
	}
	noTurn := func(t *testing.T, goal string, d mcp.ShouldRunOut, state, says string) {
		t.Helper()
		require.False(t, d.ShouldRun)
		require.Equal(t, state, d.State, d.NextStep)
		require.Nil(t, d.YourTurn)
		require.Contains(t, d.NextStep, says)
		require.Contains(t, d.NextStep, "without spending", "the skip tells the model to stop as step 2 says")
		require.Zero(t, b.count(`SELECT count(*) FROM turn WHERE goal_id = '`+goal+`' AND instance_id LIKE 'mcp-%'`))
	}
	newGoal := func(t *testing.T, id string, slots *int) *sdk.ClientSession {
		t.Helper()
		_, err := b.st.CreateGoal(ctx, store.CreateGoalParams{ID: id, Owners: []string{b.ownerID}, AllowedSlots: slots, Meta: setupMeta})
		require.NoError(t, err)
		reg, err := b.st.RegisterAgent(ctx, store.RegisterAgentParams{GoalID: id, AgentID: "codex", Meta: setupMeta})
		require.NoError(t, err)
		return connect(t, mcp.Options{API: b.client(reg.Token), GoalID: id, AgentID: "codex"})
	}

	t.Run("empty goal", func(t *testing.T) {
		s := newGoal(t, "empty", nil)
		todo, d := followTask(t, s, "write the README")
		require.True(t, d.ShouldRun, d.NextStep)
		named(t, "empty", todo)
	})
	t.Run("backlog", func(t *testing.T) {
		s := newGoal(t, "backlog", nil)
		p0 := 0
		for _, text := range []string{"older urgent work", "older work"} {
			_, err := b.st.AddTodo(ctx, store.AddTodoParams{GoalID: "backlog", Text: text, Priority: &p0, Meta: setupMeta})
			require.NoError(t, err)
		}
		todo, d := followTask(t, s, "the user's task")
		require.True(t, d.ShouldRun, d.NextStep)
		require.Equal(t, todo, d.SelectedTodo.ID, "the task's todo, not the backlog's first")
		named(t, "backlog", todo)
	})
	t.Run("open gate", func(t *testing.T) {
		s := newGoal(t, "gated", nil)
		g, err := b.st.AskGate(ctx, store.AskGateParams{GoalID: "gated", Question: "May we touch production?", Meta: setupMeta})
		require.NoError(t, err)
		_, d := followTask(t, s, "deploy it")
		noTurn(t, "gated", d, quota.StateWaiting, "gate(s) ["+itoa(g.ID)+"]")
	})
	t.Run("busy", func(t *testing.T) {
		s := newGoal(t, "busy", nil)
		_, err := b.st.OpenTurn(ctx, store.OpenTurnParams{GoalID: "busy", AgentID: "codex", InstanceID: "elsewhere-1", Meta: setupMeta})
		require.NoError(t, err)
		_, d := followTask(t, s, "more work")
		noTurn(t, "busy", d, quota.StateBusy, "Another turn of this agent is live")
	})
	t.Run("handed over and replanned", func(t *testing.T) {
		s := newGoal(t, "relay", nil)
		_, err := b.st.RegisterAgent(ctx, store.RegisterAgentParams{GoalID: "relay", AgentID: "peer", Meta: setupMeta})
		require.NoError(t, err)
		older, err := b.st.AddTodo(ctx, store.AddTodoParams{GoalID: "relay", Text: "the grammar", ClaimFor: "peer", Meta: setupMeta})
		require.NoError(t, err)
		h, err := b.st.HandOff(ctx, store.HandoffParams{GoalID: "relay", TodoID: older.ID, From: "peer", To: "codex", Kind: store.HandoffReview,
			Done: "the grammar", Next: "review it", Meta: setupMeta})
		require.NoError(t, err)
		admin := b.client(adminToken)
		_, err = admin.Do(ctx, client.Request{Method: "POST", Path: client.GoalPath("relay", "replan"), IdempotencyKey: "replan-relay",
			Body: map[string]any{"objective": "Ship the grammar too", "reason": "asked by the customer"}})
		require.NoError(t, err)
		todo, d := followTask(t, s, "the user's task")
		require.True(t, d.ShouldRun, d.NextStep)
		require.Equal(t, todo, d.SelectedTodo.ID, "the task's todo, not the handed one")
		require.Equal(t, h.ID, d.Continuation.ID)
		require.Contains(t, d.NextStep, "acknowledge with handoff_id "+itoa(h.ID))
		require.Contains(t, d.NextStep, "acknowledge with decision_id "+itoa(d.ObjectiveChanged.DecisionID))
		named(t, "relay", todo)
		require.Equal(t, 1, b.count(`SELECT count(*) FROM handoff WHERE id = $1 AND acked_at IS NOT NULL`, h.ID), "the steps acknowledged it")
		require.Equal(t, 1, b.count(`SELECT count(*) FROM handoff WHERE goal_id = 'relay' AND from_agent = 'codex' AND to_agent = 'codex' AND todo_id = $1`, todo),
			"the turn ended with a handoff")
	})
	t.Run("done", func(t *testing.T) {
		s := newGoal(t, "finished", nil)
		_, err := b.client(adminToken).Do(ctx, client.Request{Method: "POST", Path: client.GoalPath("finished", "done"), IdempotencyKey: "done-finished",
			Body: map[string]any{"reason": "shipped"}})
		require.NoError(t, err)
		_, d := followTask(t, s, "late work")
		noTurn(t, "finished", d, quota.StateDone, "The goal is done")
	})
	t.Run("throttled", func(t *testing.T) {
		s := newGoal(t, "spent", &one)
		_, err := b.st.OpenTurn(ctx, store.OpenTurnParams{GoalID: "spent", AgentID: "codex", InstanceID: "earlier-1", Meta: setupMeta})
		require.NoError(t, err)
		_, err = b.st.SpendSlot(ctx, store.SpendSlotParams{GoalID: "spent", AgentID: "codex", TurnInstanceID: "earlier-1", Meta: setupMeta})
		require.NoError(t, err)
		_, d := followTask(t, s, "one more thing")
		noTurn(t, "spent", d, quota.StateThrottled, "Skip (throttled)")
		require.NotNil(t, d.Quota.NextEligibleAt, "the steps name quota.next_eligible_at")
	})
}

// TestTurnMovesToTheTaskMidTurn: should_run first (the backlog's todo), then todo_add with
// claim binds the live turn to the task; once evidence is recorded, the turn stays.
func TestTurnMovesToTheTaskMidTurn(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cs := b.session(t, b.client(b.token))
	d := ok[mcp.ShouldRunOut](t, cs, "should_run", nil)
	require.Equal(t, b.todoID, d.YourTurn.TodoID, "the backlog's todo")
	task := ok[mcp.TodoOut](t, cs, "todo_add", map[string]any{"text": "the user's task", "claim": true})
	require.Contains(t, task.NextStep, "now on todo")
	mid := ok[mcp.ShouldRunOut](t, cs, "should_run", nil)
	require.Equal(t, task.Todo.ID, mid.YourTurn.TodoID)
	require.Equal(t, 1, b.count(`SELECT count(*) FROM turn WHERE todo_id = `+itoa(task.Todo.ID)))

	// should_run with todo_id mid-turn moves it back, still before any evidence.
	back := ok[mcp.ShouldRunOut](t, cs, "should_run", map[string]any{"todo_id": b.todoID})
	require.Equal(t, b.todoID, back.YourTurn.TodoID)
	ok[mcp.EvidenceOut](t, cs, "evidence_add", map[string]any{"todo_id": b.todoID, "summary": "done"})
	later := ok[mcp.TodoOut](t, cs, "todo_add", map[string]any{"text": "a follow-up", "claim": true})
	require.Contains(t, later.NextStep, "stays on todo")
	res := call(t, cs, "should_run", map[string]any{"todo_id": later.Todo.ID})
	require.True(t, res.IsError)
	require.Contains(t, text(res), "already recorded evidence")
	spent := ok[mcp.SpendSlotOut](t, cs, "spend_slot", nil)
	require.Equal(t, b.todoID, spent.Receipt.Entry.TodoID)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// lostAnswer drops the answer of the first call to a path ending in suffix after the server
// handled it, as a host sees a connection that broke before the answer came.
type lostAnswer struct {
	mcp.API
	suffix  string
	dropped atomic.Bool
}

func (l *lostAnswer) Do(ctx context.Context, r client.Request) (json.RawMessage, error) {
	raw, err := l.API.Do(ctx, r)
	if err == nil && strings.HasSuffix(r.Path, l.suffix) && l.dropped.CompareAndSwap(false, true) {
		return nil, &net503{}
	}
	return raw, err
}

// TestRetryAfterRestartHasOneEffect: a write whose answer was lost, retried by a new server
// process (the host restarted `loopx mcp`), leaves one row: inside a turn the key comes from
// the live turn the server knows, outside one from the agent's latest turn. The restarted
// process adopts the live turn, so spend_slot settles it.
func TestRetryAfterRestartHasOneEffect(t *testing.T) {
	t.Parallel()
	b := setup(t)
	args := map[string]any{"summary": "benchmarks recorded", "kind": "note"}

	// Outside a turn (none yet).
	first := b.session(t, &lostAnswer{API: b.client(b.token), suffix: "/evidence"})
	require.True(t, call(t, first, "evidence_add", args).IsError)
	ok[mcp.EvidenceOut](t, b.session(t, b.client(b.token)), "evidence_add", args)
	require.Equal(t, 1, b.count(`SELECT count(*) FROM evidence WHERE summary = 'benchmarks recorded'`))

	// Inside a turn.
	first = b.session(t, &lostAnswer{API: b.client(b.token), suffix: "/evidence"})
	d := ok[mcp.ShouldRunOut](t, first, "should_run", nil)
	require.True(t, d.ShouldRun)
	args = map[string]any{"todo_id": b.todoID, "summary": "parser done", "kind": "note"}
	require.True(t, call(t, first, "evidence_add", args).IsError)
	restarted := b.session(t, b.client(b.token))
	ev := ok[mcp.EvidenceOut](t, restarted, "evidence_add", args)
	require.Equal(t, d.Turn.ID, ev.Evidence.TurnID)
	require.Equal(t, 1, b.count(`SELECT count(*) FROM evidence WHERE summary = 'parser done'`))
	spent := ok[mcp.SpendSlotOut](t, restarted, "spend_slot", nil)
	require.Equal(t, d.YourTurn.TurnInstanceID, spent.Receipt.Turn.InstanceID, "the restarted process adopted the live turn")

	// Between turns again: the next turn's key differs, so the same call there is new.
	ok[mcp.EvidenceOut](t, restarted, "evidence_add", map[string]any{"summary": "benchmarks recorded", "kind": "note"})
	require.Equal(t, 2, b.count(`SELECT count(*) FROM evidence WHERE summary = 'benchmarks recorded'`))
}
