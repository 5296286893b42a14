package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loopx/store"
	"loopx/store/storetest"
)

const owner = "ou_owner1"

var admin = store.Meta{Actor: "admin", Surface: "api"}

func newClock() *storetest.Clock {
	return storetest.NewClock(time.Now().UTC().Truncate(time.Microsecond))
}

// setup is a store with goal "g" (owner ou_owner1) and agent "a".
func setup(t *testing.T) (*store.Store, *storetest.Clock) {
	t.Helper()
	c := newClock()
	st := storetest.New(t, store.Options{Now: c.Now})
	_, err := st.CreateGoal(t.Context(), store.CreateGoalParams{ID: "g", Owners: []string{owner}, Members: []string{"ou_member1"}, Meta: admin})
	require.NoError(t, err)
	_, err = st.RegisterAgent(t.Context(), store.RegisterAgentParams{GoalID: "g", AgentID: "a", Meta: admin})
	require.NoError(t, err)
	return st, c
}

func agentMeta(id string) store.Meta { return store.Meta{Actor: "agent:g/" + id, Surface: "api"} }

// rowCounts counts the rows of every table an operation may write.
func rowCounts(t *testing.T, st *store.Store) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, tbl := range []string{"goal", "agent", "todo", "gate", "evidence", "turn", "quota_ledger", "audit", "receipt", "outbox", "hint_state"} {
		var n int
		require.NoError(t, st.DB().QueryRow(t.Context(), "SELECT count(*) FROM "+tbl).Scan(&n))
		out[tbl] = n
	}
	return out
}

// requireKind checks err is a *store.Error of kind naming field, with no reason.
func requireKind(t *testing.T, err error, kind error, field string) {
	t.Helper()
	requireReason(t, err, kind, field, "")
}

// requireReason checks err is a *store.Error of kind naming field, with reason.
func requireReason(t *testing.T, err error, kind error, field, reason string) {
	t.Helper()
	require.Error(t, err)
	require.ErrorIs(t, err, kind)
	var se *store.Error
	require.True(t, errors.As(err, &se), "want *store.Error, got %T: %v", err, err)
	require.Equal(t, field, se.Field, "error: %v", err)
	require.Equal(t, reason, se.Reason, "error: %v", err)
	require.NotEmpty(t, se.Msg)
}

func TestClaimTodoConcurrentOneWins(t *testing.T) {
	t.Parallel()
	st, _ := setup(t)
	ctx := t.Context()
	for i := range 20 {
		_, err := st.RegisterAgent(ctx, store.RegisterAgentParams{GoalID: "g", AgentID: fmt.Sprintf("c%d", i), Meta: admin})
		require.NoError(t, err)
	}
	td, err := st.AddTodo(ctx, store.AddTodoParams{GoalID: "g", Text: "one slice", Meta: admin})
	require.NoError(t, err)

	var wg sync.WaitGroup
	errs := make([]error, 20)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("c%d", i)
			_, errs[i] = st.ClaimTodo(ctx, store.ClaimTodoParams{GoalID: "g", TodoID: td.ID, AgentID: id, Meta: agentMeta(id)})
		}()
	}
	wg.Wait()
	winner := ""
	for i, err := range errs {
		if err == nil {
			require.Empty(t, winner, "two claims won")
			winner = fmt.Sprintf("c%d", i)
			continue
		}
		require.ErrorIs(t, err, store.ErrConflict)
	}
	require.NotEmpty(t, winner)
	got, err := st.GetTodo(ctx, "g", td.ID)
	require.NoError(t, err)
	require.Equal(t, winner, got.ClaimedBy)
	require.Equal(t, td.Version+1, got.Version)
}

func TestClaimNeverOverwritesWithoutTransfer(t *testing.T) {
	t.Parallel()
	st, c := setup(t)
	ctx := t.Context()
	_, err := st.RegisterAgent(ctx, store.RegisterAgentParams{GoalID: "g", AgentID: "b", Meta: admin})
	require.NoError(t, err)
	td, err := st.AddTodo(ctx, store.AddTodoParams{GoalID: "g", Text: "x", Meta: admin})
	require.NoError(t, err)
	_, err = st.ClaimTodo(ctx, store.ClaimTodoParams{GoalID: "g", TodoID: td.ID, AgentID: "a", Lease: time.Hour, Meta: agentMeta("a")})
	require.NoError(t, err)

	_, err = st.ClaimTodo(ctx, store.ClaimTodoParams{GoalID: "g", TodoID: td.ID, AgentID: "b", Meta: agentMeta("b")})
	requireReason(t, err, store.ErrConflict, "todo_id", store.ReasonClaimed)
	require.Contains(t, err.Error(), `"a"`)

	got, err := st.ClaimTodo(ctx, store.ClaimTodoParams{GoalID: "g", TodoID: td.ID, AgentID: "b", Transfer: true, Meta: agentMeta("b")})
	require.NoError(t, err)
	require.Equal(t, "b", got.ClaimedBy)

	// An expired claim lease may be taken over without transfer.
	_, err = st.ClaimTodo(ctx, store.ClaimTodoParams{GoalID: "g", TodoID: td.ID, AgentID: "b", Lease: time.Minute, Meta: agentMeta("b")})
	require.NoError(t, err)
	_, err = st.ClaimTodo(ctx, store.ClaimTodoParams{GoalID: "g", TodoID: td.ID, AgentID: "a", Meta: agentMeta("a")})
	requireReason(t, err, store.ErrConflict, "todo_id", store.ReasonClaimed)
	c.Add(2 * time.Minute)
	got, err = st.ClaimTodo(ctx, store.ClaimTodoParams{GoalID: "g", TodoID: td.ID, AgentID: "a", Meta: agentMeta("a")})
	require.NoError(t, err)
	require.Equal(t, "a", got.ClaimedBy)

	// An unregistered agent cannot claim.
	_, err = st.ClaimTodo(ctx, store.ClaimTodoParams{GoalID: "g", TodoID: td.ID, AgentID: "ghost", Meta: agentMeta("ghost")})
	requireKind(t, err, store.ErrNotFound, "agent_id")
}

func TestUpdateTodoCompareAndSet(t *testing.T) {
	t.Parallel()
	st, _ := setup(t)
	ctx := t.Context()
	td, err := st.AddTodo(ctx, store.AddTodoParams{GoalID: "g", Text: "x", ClaimFor: "a", Meta: admin})
	require.NoError(t, err)
	text := "y"
	upd, err := st.UpdateTodo(ctx, store.UpdateTodoParams{GoalID: "g", TodoID: td.ID, AgentID: "a", Version: td.Version, Text: &text, Meta: agentMeta("a")})
	require.NoError(t, err)
	require.Equal(t, "y", upd.Text)
	require.Equal(t, td.Version+1, upd.Version)

	before := rowCounts(t, st)
	_, err = st.UpdateTodo(ctx, store.UpdateTodoParams{GoalID: "g", TodoID: td.ID, AgentID: "a", Version: td.Version, Text: &text, Meta: agentMeta("a")})
	requireKind(t, err, store.ErrConflict, "version")
	before["audit"]++ // the conflict is audited, nothing else is written
	require.Equal(t, before, rowCounts(t, st))

	_, err = st.RegisterAgent(ctx, store.RegisterAgentParams{GoalID: "g", AgentID: "b", Meta: admin})
	require.NoError(t, err)
	_, err = st.UpdateTodo(ctx, store.UpdateTodoParams{GoalID: "g", TodoID: td.ID, AgentID: "b", Version: upd.Version, Text: &text, Meta: agentMeta("b")})
	requireReason(t, err, store.ErrConflict, "agent_id", store.ReasonClaimed)

	done := store.TodoDone
	fin, err := st.UpdateTodo(ctx, store.UpdateTodoParams{GoalID: "g", TodoID: td.ID, AgentID: "a", Version: upd.Version, Status: &done, Meta: agentMeta("a")})
	require.NoError(t, err)
	require.Equal(t, store.TodoDone, fin.Status)
	require.NotNil(t, fin.DoneAt)
}

func TestSpendSlotConcurrentOneDebit(t *testing.T) {
	t.Parallel()
	st, _ := setup(t)
	ctx := t.Context()
	td, err := st.AddTodo(ctx, store.AddTodoParams{GoalID: "g", Text: "x", Meta: admin})
	require.NoError(t, err)
	_, err = st.OpenTurn(ctx, store.OpenTurnParams{GoalID: "g", AgentID: "a", InstanceID: "turn-1", TodoID: td.ID, Meta: agentMeta("a")})
	require.NoError(t, err)

	var wg sync.WaitGroup
	res := make([]store.SpendReceipt, 20)
	errs := make([]error, 20)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i], errs[i] = st.SpendSlot(ctx, store.SpendSlotParams{GoalID: "g", AgentID: "a", TurnInstanceID: "turn-1", TodoID: td.ID, Meta: agentMeta("a")})
		}()
	}
	wg.Wait()
	fresh := 0
	for i := range 20 {
		require.NoError(t, errs[i])
		require.Equal(t, res[0].Entry.ID, res[i].Entry.ID, "every spend returns the same receipt")
		if !res[i].Replayed {
			fresh++
		}
	}
	require.Equal(t, 1, fresh)
	var n int
	require.NoError(t, st.DB().QueryRow(ctx, `SELECT count(*) FROM quota_ledger WHERE kind = 'slot_spent'`).Scan(&n))
	require.Equal(t, 1, n)
	turn, err := st.GetTurn(ctx, "g", "a", "turn-1")
	require.NoError(t, err)
	require.Equal(t, store.TurnOK, turn.State, "spending settles the live turn")
}

func TestSpendSlotRefusals(t *testing.T) {
	t.Parallel()
	st, _ := setup(t)
	ctx := t.Context()
	before := rowCounts(t, st)
	_, err := st.SpendSlot(ctx, store.SpendSlotParams{GoalID: "g", AgentID: "a", TurnInstanceID: "nope", Meta: agentMeta("a")})
	requireReason(t, err, store.ErrRefused, "turn_instance_id", store.ReasonNotOwed)
	after := rowCounts(t, st)
	require.Equal(t, before["quota_ledger"], after["quota_ledger"])
	require.Equal(t, before["audit"]+1, after["audit"], "the refusal is audited")

	_, err = st.OpenTurn(ctx, store.OpenTurnParams{GoalID: "g", AgentID: "a", InstanceID: "t-failed", Meta: agentMeta("a")})
	require.NoError(t, err)
	_, err = st.EndTurn(ctx, store.EndTurnParams{GoalID: "g", AgentID: "a", InstanceID: "t-failed", State: store.TurnFailed, Outcome: "tests red", LogTail: strings.Repeat("x", 13000), Meta: agentMeta("a")})
	require.NoError(t, err)
	turn, err := st.GetTurn(ctx, "g", "a", "t-failed")
	require.NoError(t, err)
	require.Len(t, turn.LogTail, store.MaxText)
	_, err = st.SpendSlot(ctx, store.SpendSlotParams{GoalID: "g", AgentID: "a", TurnInstanceID: "t-failed", Meta: agentMeta("a")})
	requireReason(t, err, store.ErrRefused, "turn_instance_id", store.ReasonNotOwed)

	// Settled for one todo, a spend for another is refused.
	t1, err := st.AddTodo(ctx, store.AddTodoParams{GoalID: "g", Text: "one", Meta: admin})
	require.NoError(t, err)
	t2, err := st.AddTodo(ctx, store.AddTodoParams{GoalID: "g", Text: "two", Meta: admin})
	require.NoError(t, err)
	_, err = st.OpenTurn(ctx, store.OpenTurnParams{GoalID: "g", AgentID: "a", InstanceID: "t-ok", Meta: agentMeta("a")})
	require.NoError(t, err)
	_, err = st.SpendSlot(ctx, store.SpendSlotParams{GoalID: "g", AgentID: "a", TurnInstanceID: "t-ok", TodoID: t1.ID, Meta: agentMeta("a")})
	require.NoError(t, err)
	_, err = st.SpendSlot(ctx, store.SpendSlotParams{GoalID: "g", AgentID: "a", TurnInstanceID: "t-ok", TodoID: t2.ID, Meta: agentMeta("a")})
	requireReason(t, err, store.ErrRefused, "todo_id", store.ReasonNotOwed)
}

func TestTurnsOneLiveAndExpiry(t *testing.T) {
	t.Parallel()
	st, c := setup(t)
	ctx := t.Context()
	_, err := st.OpenTurn(ctx, store.OpenTurnParams{GoalID: "g", AgentID: "a", InstanceID: "t1", Lease: time.Minute, Meta: agentMeta("a")})
	require.NoError(t, err)
	_, err = st.OpenTurn(ctx, store.OpenTurnParams{GoalID: "g", AgentID: "a", InstanceID: "t2", Meta: agentMeta("a")})
	requireKind(t, err, store.ErrConflict, "agent_id")

	c.Add(2 * time.Minute)
	expired, err := st.ExpireTurns(ctx)
	require.NoError(t, err)
	require.Len(t, expired, 1)
	require.Equal(t, store.TurnAbandoned, expired[0].State)
	_, err = st.SpendSlot(ctx, store.SpendSlotParams{GoalID: "g", AgentID: "a", TurnInstanceID: "t1", Meta: agentMeta("a")})
	requireReason(t, err, store.ErrRefused, "turn_instance_id", store.ReasonNotOwed)

	_, err = st.OpenTurn(ctx, store.OpenTurnParams{GoalID: "g", AgentID: "a", InstanceID: "t2", Lease: time.Minute, Meta: agentMeta("a")})
	require.NoError(t, err)
	// A lapsed lease does not block the next turn even before ExpireTurns runs.
	c.Add(2 * time.Minute)
	_, err = st.OpenTurn(ctx, store.OpenTurnParams{GoalID: "g", AgentID: "a", InstanceID: "t3", Meta: agentMeta("a")})
	require.NoError(t, err)
	t2, err := st.GetTurn(ctx, "g", "a", "t2")
	require.NoError(t, err)
	require.Equal(t, store.TurnAbandoned, t2.State)
	_, err = st.OpenTurn(ctx, store.OpenTurnParams{GoalID: "g", AgentID: "a", InstanceID: "t1", Meta: agentMeta("a")})
	require.ErrorIs(t, err, store.ErrConflict)
}

func TestEvidenceMarksLiveTurnProgress(t *testing.T) {
	t.Parallel()
	st, _ := setup(t)
	ctx := t.Context()
	td, err := st.AddTodo(ctx, store.AddTodoParams{GoalID: "g", Text: "x", Meta: admin})
	require.NoError(t, err)
	turn, err := st.OpenTurn(ctx, store.OpenTurnParams{GoalID: "g", AgentID: "a", InstanceID: "t1", Meta: agentMeta("a")})
	require.NoError(t, err)
	require.False(t, turn.Progress)
	ev, err := st.AddEvidence(ctx, store.AddEvidenceParams{GoalID: "g", AgentID: "a", TodoID: td.ID, Kind: "link", Summary: "PR opened", Ref: "https://example.com/pr/1", Meta: agentMeta("a")})
	require.NoError(t, err)
	require.Equal(t, turn.ID, ev.TurnID)
	got, err := st.GetTurn(ctx, "g", "a", "t1")
	require.NoError(t, err)
	require.True(t, got.Progress)
	list, err := st.ListEvidence(ctx, store.ListEvidenceParams{GoalID: "g", TodoID: td.ID})
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, "PR opened", list[0].Summary)
}

func TestGateLifecycle(t *testing.T) {
	t.Parallel()
	st, _ := setup(t)
	ctx := t.Context()
	td, err := st.AddTodo(ctx, store.AddTodoParams{GoalID: "g", Text: "deploy", ClaimFor: "a", Meta: admin})
	require.NoError(t, err)
	var noticed []int64
	g, err := st.AskGate(ctx, store.AskGateParams{GoalID: "g", AgentID: "a", Question: "deploy to prod?", TodoID: td.ID,
		Notice: func(_ context.Context, _ store.DB, g store.Gate) ([]store.OutboxInsert, error) {
			noticed = append(noticed, g.ID)
			return []store.OutboxInsert{{DedupeKey: fmt.Sprintf("gate:%d:ask", g.ID), Kind: "text", ReceiveID: "oc_chat", Content: g.Question, GoalID: "g", GateID: g.ID}}, nil
		}, Meta: agentMeta("a")})
	require.NoError(t, err)
	require.Equal(t, []int64{g.ID}, noticed)
	require.Equal(t, []string{"approve", "reject"}, g.Options)
	var outbox int
	require.NoError(t, st.DB().QueryRow(ctx, `SELECT count(*) FROM outbox WHERE gate_id = $1`, g.ID).Scan(&outbox))
	require.Equal(t, 1, outbox)
	blocked, err := st.GetTodo(ctx, "g", td.ID)
	require.NoError(t, err)
	require.Equal(t, store.TodoBlocked, blocked.Status)
	require.Equal(t, g.ID, blocked.BlockedByGate)

	// The todo cannot be reopened around the gate.
	open := store.TodoOpen
	_, err = st.UpdateTodo(ctx, store.UpdateTodoParams{GoalID: "g", TodoID: td.ID, AgentID: "a", Version: blocked.Version, Status: &open, Meta: agentMeta("a")})
	requireKind(t, err, store.ErrRefused, "status")

	// A stale card click conflicts; the current one approves and unblocks, keeping the claim.
	_, err = st.AnswerGate(ctx, store.AnswerGateParams{GoalID: "g", GateID: g.ID, Answer: "approve", AnsweredBy: owner, CardVersion: g.CardVersion + 5, Meta: store.Meta{Actor: owner, Surface: "card"}})
	requireKind(t, err, store.ErrConflict, "card_version")
	ans, err := st.AnswerGate(ctx, store.AnswerGateParams{GoalID: "g", GateID: g.ID, Answer: "approve", AnsweredBy: owner, Comment: "go", CardVersion: g.CardVersion, Meta: store.Meta{Actor: owner, Surface: "card"}})
	require.NoError(t, err)
	require.Equal(t, store.GateApproved, ans.Status)
	require.Equal(t, owner, ans.AnsweredBy)
	require.Equal(t, g.CardVersion+1, ans.CardVersion)
	reopened, err := st.GetTodo(ctx, "g", td.ID)
	require.NoError(t, err)
	require.Equal(t, store.TodoOpen, reopened.Status)
	require.Equal(t, "a", reopened.ClaimedBy)
	require.Zero(t, reopened.BlockedByGate)

	// Answering again is refused: the gate is closed.
	_, err = st.AnswerGate(ctx, store.AnswerGateParams{GoalID: "g", GateID: g.ID, Answer: "reject", AnsweredBy: owner, Meta: store.Meta{Actor: owner, Surface: "chat"}})
	requireReason(t, err, store.ErrRefused, "gate_id", store.ReasonGateClosed)

	// Reject keeps the todo blocked; cancel by another agent is refused; cancel by the asker reopens.
	g2, err := st.AskGate(ctx, store.AskGateParams{GoalID: "g", AgentID: "a", Question: "again?", TodoID: td.ID, Meta: agentMeta("a")})
	require.NoError(t, err)
	_, err = st.AnswerGate(ctx, store.AnswerGateParams{GoalID: "g", GateID: g2.ID, Answer: "reject", AnsweredBy: owner, Meta: store.Meta{Actor: owner, Surface: "chat"}})
	require.NoError(t, err)
	still, err := st.GetTodo(ctx, "g", td.ID)
	require.NoError(t, err)
	require.Equal(t, store.TodoBlocked, still.Status)

	_, err = st.RegisterAgent(ctx, store.RegisterAgentParams{GoalID: "g", AgentID: "b", Meta: admin})
	require.NoError(t, err)
	g3, err := st.AskGate(ctx, store.AskGateParams{GoalID: "g", AgentID: "a", Question: "whole goal?", Meta: agentMeta("a")})
	require.NoError(t, err)
	require.Zero(t, g3.TodoID)
	_, err = st.CancelGate(ctx, store.CancelGateParams{GoalID: "g", GateID: g3.ID, AgentID: "b", Meta: agentMeta("b")})
	requireKind(t, err, store.ErrForbidden, "agent_id")
	c3, err := st.CancelGate(ctx, store.CancelGateParams{GoalID: "g", GateID: g3.ID, AgentID: "a", Meta: agentMeta("a")})
	require.NoError(t, err)
	require.Equal(t, store.GateCancelled, c3.Status)
	_, err = st.CancelGate(ctx, store.CancelGateParams{GoalID: "g", GateID: g3.ID, AgentID: "a", Meta: agentMeta("a")})
	requireReason(t, err, store.ErrRefused, "gate_id", store.ReasonGateClosed)

	gates, err := st.ListGates(ctx, store.ListGatesParams{GoalID: "g"})
	require.NoError(t, err)
	require.Len(t, gates, 3)
	openGates, err := st.ListGates(ctx, store.ListGatesParams{GoalID: "g", Status: store.GateOpen})
	require.NoError(t, err)
	require.Empty(t, openGates)
}

func TestNonOwnerGateAnswerRefusedAndAudited(t *testing.T) {
	t.Parallel()
	st, _ := setup(t)
	ctx := t.Context()
	g, err := st.AskGate(ctx, store.AskGateParams{GoalID: "g", AgentID: "a", Question: "ok?", Meta: agentMeta("a")})
	require.NoError(t, err)
	before := rowCounts(t, st)
	_, err = st.AnswerGate(ctx, store.AnswerGateParams{GoalID: "g", GateID: g.ID, Answer: "approve", AnsweredBy: "ou_member1", Meta: store.Meta{Actor: "ou_member1", Surface: "chat"}})
	requireKind(t, err, store.ErrForbidden, "answered_by")
	after := rowCounts(t, st)
	require.Equal(t, before["audit"]+1, after["audit"])
	before["audit"]++
	require.Equal(t, before, after, "only the audit row is written")

	got, err := st.GetGate(ctx, "g", g.ID)
	require.NoError(t, err)
	require.Equal(t, store.GateOpen, got.Status)

	audits, err := st.ListAudit(ctx, store.ListAuditParams{GoalID: "g"})
	require.NoError(t, err)
	last := audits[len(audits)-1]
	require.False(t, last.Allowed)
	require.Equal(t, store.OutcomeRefused, last.Outcome, "a permission refusal is audited as it always was")
	require.Equal(t, "gate.answer", last.Action)
	require.Equal(t, "ou_member1", last.Actor)
	require.Equal(t, fmt.Sprintf("gate:%d", g.ID), last.Target)
	var detail map[string]any
	require.NoError(t, json.Unmarshal(last.Detail, &detail))
	require.Contains(t, detail["refused"], "not an owner")
}

func TestStallGateRejectStopsGoal(t *testing.T) {
	t.Parallel()
	st, _ := setup(t)
	ctx := t.Context()
	_, err := st.AskGate(ctx, store.AskGateParams{GoalID: "g", AgentID: "a", Kind: store.GateKindStall, Question: "stalled?", Meta: agentMeta("a")})
	requireKind(t, err, store.ErrInvalid, "kind") // only the stall guard opens stall gates
	var g store.Gate
	require.NoError(t, st.WithTx(ctx, func(tx *store.Tx) error {
		var opened bool
		g, opened, err = store.OpenStallGate(ctx, tx, store.StallGateParams{GoalID: "g", AgentID: "a", Question: "no progress in 3 turns: continue or pause?"}, st.Now())
		require.True(t, opened)
		return err
	}))
	// The goal has one open stall gate: opening it again answers with that gate.
	require.NoError(t, st.WithTx(ctx, func(tx *store.Tx) error {
		again, opened, err := store.OpenStallGate(ctx, tx, store.StallGateParams{GoalID: "g", AgentID: "a", Question: "again?"}, st.Now())
		require.False(t, opened)
		require.Equal(t, g.ID, again.ID)
		return err
	}))
	_, err = st.CancelGate(ctx, store.CancelGateParams{GoalID: "g", GateID: g.ID, AgentID: "a", Meta: agentMeta("a")})
	requireKind(t, err, store.ErrForbidden, "agent_id")
	_, err = st.AnswerGate(ctx, store.AnswerGateParams{GoalID: "g", GateID: g.ID, Answer: store.StallPause, AnsweredBy: owner, Meta: store.Meta{Actor: owner, Surface: "card"}})
	require.NoError(t, err)
	got, err := st.GetGate(ctx, "g", g.ID)
	require.NoError(t, err)
	require.Equal(t, store.GateRejected, got.Status)
	goal, err := st.GetGoal(ctx, "g")
	require.NoError(t, err)
	require.Equal(t, store.GoalStopped, goal.Status)
}

func TestGoalUpdateStopResume(t *testing.T) {
	t.Parallel()
	st, _ := setup(t)
	ctx := t.Context()
	g, err := st.GetGoal(ctx, "g")
	require.NoError(t, err)
	slots, spec, tz := 5, "*/15 9-18 * * 1-5", "Asia/Shanghai"
	upd, err := st.UpdateGoal(ctx, store.UpdateGoalParams{GoalID: "g", Version: g.Version, AllowedSlots: &slots, HeartbeatSpec: &spec, HeartbeatTZ: &tz, Meta: admin})
	require.NoError(t, err)
	require.Equal(t, 5, upd.AllowedSlots)
	require.Equal(t, spec, upd.HeartbeatSpec)
	require.Equal(t, g.Version+1, upd.Version)
	_, err = st.UpdateGoal(ctx, store.UpdateGoalParams{GoalID: "g", Version: g.Version, AllowedSlots: &slots, Meta: admin})
	requireKind(t, err, store.ErrConflict, "version")

	stopped, err := st.StopGoal(ctx, store.GoalRef{GoalID: "g", Meta: store.Meta{Actor: owner, Surface: "chat"}})
	require.NoError(t, err)
	require.Equal(t, store.GoalStopped, stopped.Status)
	resumed, err := st.ResumeGoal(ctx, store.GoalRef{GoalID: "g", Meta: store.Meta{Actor: owner, Surface: "chat"}})
	require.NoError(t, err)
	require.Equal(t, store.GoalActive, resumed.Status)

	mine, err := st.ListGoals(ctx, store.ListGoalsParams{Person: "ou_member1"})
	require.NoError(t, err)
	require.Len(t, mine, 1)
	none, err := st.ListGoals(ctx, store.ListGoalsParams{Person: "ou_stranger"})
	require.NoError(t, err)
	require.Empty(t, none)
}

func TestAgentTokens(t *testing.T) {
	t.Parallel()
	st, _ := setup(t)
	ctx := t.Context()
	ra, err := st.RegisterAgent(ctx, store.RegisterAgentParams{GoalID: "g", AgentID: "tok", Runner: store.RunnerExec,
		RunnerConfig: json.RawMessage(`{"argv":["codex","exec"]}`), Meta: admin})
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(ra.Token, "lxa_"))
	require.Len(t, ra.Token, 4+64)
	require.False(t, ra.IsDefault, "the goal's first agent stays the default")
	var stored []byte
	require.NoError(t, st.DB().QueryRow(ctx, `SELECT token_hash FROM agent WHERE id = 'tok'`).Scan(&stored))
	require.Equal(t, store.HashToken(ra.Token), stored)
	require.NotContains(t, string(stored), ra.Token)

	got, err := st.AgentByToken(ctx, ra.Token)
	require.NoError(t, err)
	require.Equal(t, "tok", got.ID)
	require.JSONEq(t, `{"argv":["codex","exec"]}`, string(got.RunnerConfig))

	rot, err := st.RotateAgentToken(ctx, store.AgentRef{GoalID: "g", AgentID: "tok", Meta: admin})
	require.NoError(t, err)
	require.NotEqual(t, ra.Token, rot.Token)
	_, err = st.AgentByToken(ctx, ra.Token)
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = st.AgentByToken(ctx, rot.Token)
	require.NoError(t, err)

	_, err = st.RegisterAgent(ctx, store.RegisterAgentParams{GoalID: "g", AgentID: "tok", Meta: admin})
	requireKind(t, err, store.ErrConflict, "agent_id")
}

// TestReceiptsReplayAndWriteNothing replays every mutating operation under its idempotency
// key: the result is identical and no row is written; another request under the same key is
// ErrConflict.
func TestReceiptsReplayAndWriteNothing(t *testing.T) {
	t.Parallel()
	st, _ := setup(t)
	ctx := t.Context()
	key := func(k string) store.Meta { return store.Meta{Actor: "admin", Surface: "api", IdempotencyKey: k} }
	td, err := st.AddTodo(ctx, store.AddTodoParams{GoalID: "g", Text: "base", Meta: admin})
	require.NoError(t, err)
	gate, err := st.AskGate(ctx, store.AskGateParams{GoalID: "g", AgentID: "a", Question: "q", Meta: admin})
	require.NoError(t, err)
	_, err = st.OpenTurn(ctx, store.OpenTurnParams{GoalID: "g", AgentID: "a", InstanceID: "live", Meta: admin})
	require.NoError(t, err)
	slots := 7

	ops := []struct {
		name string
		do   func(m store.Meta) (any, error)
	}{
		{"goal.create", func(m store.Meta) (any, error) {
			return st.CreateGoal(ctx, store.CreateGoalParams{ID: "g2", Owners: []string{owner}, Meta: m})
		}},
		{"goal.update", func(m store.Meta) (any, error) {
			return st.UpdateGoal(ctx, store.UpdateGoalParams{GoalID: "g", AllowedSlots: &slots, Meta: m})
		}},
		{"goal.stop", func(m store.Meta) (any, error) { return st.StopGoal(ctx, store.GoalRef{GoalID: "g2", Meta: m}) }},
		{"agent.register", func(m store.Meta) (any, error) {
			return st.RegisterAgent(ctx, store.RegisterAgentParams{GoalID: "g", AgentID: "r", Meta: m})
		}},
		{"todo.add", func(m store.Meta) (any, error) {
			return st.AddTodo(ctx, store.AddTodoParams{GoalID: "g", Text: "t", Meta: m})
		}},
		{"todo.claim", func(m store.Meta) (any, error) {
			return st.ClaimTodo(ctx, store.ClaimTodoParams{GoalID: "g", TodoID: td.ID, AgentID: "a", Meta: m})
		}},
		{"evidence.add", func(m store.Meta) (any, error) {
			return st.AddEvidence(ctx, store.AddEvidenceParams{GoalID: "g", AgentID: "a", Summary: "s", Meta: m})
		}},
		{"gate.ask", func(m store.Meta) (any, error) {
			return st.AskGate(ctx, store.AskGateParams{GoalID: "g", AgentID: "a", Question: "q2", Meta: m})
		}},
		{"gate.answer", func(m store.Meta) (any, error) {
			return st.AnswerGate(ctx, store.AnswerGateParams{GoalID: "g", GateID: gate.ID, Answer: "approve", AnsweredBy: owner, Meta: m})
		}},
		{"quota.refresh_state", func(m store.Meta) (any, error) {
			return st.RefreshState(ctx, store.RefreshStateParams{GoalID: "g", AgentID: "a", NextAction: "n", Meta: m})
		}},
		{"quota.spend_slot", func(m store.Meta) (any, error) {
			return st.SpendSlot(ctx, store.SpendSlotParams{GoalID: "g", AgentID: "a", TurnInstanceID: "live", Meta: m})
		}},
	}
	for _, op := range ops {
		first, err := op.do(key("k-" + op.name))
		require.NoError(t, err, op.name)
		before := rowCounts(t, st)
		again, err := op.do(key("k-" + op.name))
		require.NoError(t, err, op.name)
		require.Equal(t, before, rowCounts(t, st), "%s: a replay writes nothing", op.name)
		fj, _ := json.Marshal(first)
		aj, _ := json.Marshal(again)
		if op.name == "agent.register" {
			require.NotContains(t, string(aj), "lxa_", "a replay never shows the token again")
			var a, b store.Agent
			require.NoError(t, json.Unmarshal(fj, &a))
			require.NoError(t, json.Unmarshal(aj, &b))
			require.Equal(t, a.ID, b.ID)
			continue
		}
		require.JSONEq(t, string(fj), string(aj), op.name)
	}

	// Another request under a used key is refused and writes nothing.
	before := rowCounts(t, st)
	_, err = st.AddTodo(ctx, store.AddTodoParams{GoalID: "g", Text: "different", Meta: key("k-todo.add")})
	requireKind(t, err, store.ErrConflict, "idempotency_key")
	before["audit"]++ // the refusal is audited, nothing else is written
	require.Equal(t, before, rowCounts(t, st))
}

// TestBadInputWritesNothing: each validated field, given bad input, fails with ErrInvalid (or
// ErrNotFound for an unknown goal) naming the field, and no row changes.
func TestBadInputWritesNothing(t *testing.T) {
	t.Parallel()
	st, _ := setup(t)
	ctx := t.Context()
	long := strings.Repeat("x", store.MaxText+1)
	neg, zero, big := -1, 0, 721
	badSpec, tzSpec, badTZ := "61 * * * *", "CRON_TZ=UTC 0 9 * * *", "Mars/Olympus"
	cases := []struct {
		field string
		kind  error
		do    func() error
	}{
		{"goal_id", store.ErrInvalid, func() error {
			_, err := st.CreateGoal(ctx, store.CreateGoalParams{ID: "Bad Id", Meta: admin})
			return err
		}},
		{"goal_id", store.ErrInvalid, func() error {
			_, err := st.CreateGoal(ctx, store.CreateGoalParams{ID: strings.Repeat("a", 64), Meta: admin})
			return err
		}},
		{"objective", store.ErrInvalid, func() error {
			_, err := st.CreateGoal(ctx, store.CreateGoalParams{ID: "ok", Objective: long, Meta: admin})
			return err
		}},
		{"allowed_slots", store.ErrInvalid, func() error {
			_, err := st.CreateGoal(ctx, store.CreateGoalParams{ID: "ok", AllowedSlots: &neg, Meta: admin})
			return err
		}},
		{"window_hours", store.ErrInvalid, func() error {
			_, err := st.CreateGoal(ctx, store.CreateGoalParams{ID: "ok", WindowHours: &zero, Meta: admin})
			return err
		}},
		{"window_hours", store.ErrInvalid, func() error {
			_, err := st.UpdateGoal(ctx, store.UpdateGoalParams{GoalID: "g", WindowHours: &big, Meta: admin})
			return err
		}},
		{"allowed_slots", store.ErrInvalid, func() error {
			_, err := st.UpdateGoal(ctx, store.UpdateGoalParams{GoalID: "g", AllowedSlots: &neg, Meta: admin})
			return err
		}},
		{"heartbeat_spec", store.ErrInvalid, func() error {
			_, err := st.CreateGoal(ctx, store.CreateGoalParams{ID: "ok", HeartbeatSpec: badSpec, Meta: admin})
			return err
		}},
		{"heartbeat_spec", store.ErrInvalid, func() error {
			_, err := st.UpdateGoal(ctx, store.UpdateGoalParams{GoalID: "g", HeartbeatSpec: &tzSpec, Meta: admin})
			return err
		}},
		{"report_spec", store.ErrInvalid, func() error {
			_, err := st.CreateGoal(ctx, store.CreateGoalParams{ID: "ok", ReportSpec: "every day", Meta: admin})
			return err
		}},
		{"heartbeat_tz", store.ErrInvalid, func() error {
			_, err := st.UpdateGoal(ctx, store.UpdateGoalParams{GoalID: "g", HeartbeatTZ: &badTZ, Meta: admin})
			return err
		}},
		{"report_tz", store.ErrInvalid, func() error {
			_, err := st.CreateGoal(ctx, store.CreateGoalParams{ID: "ok", ReportTZ: "Local", Meta: admin})
			return err
		}},
		{"lang", store.ErrInvalid, func() error {
			_, err := st.CreateGoal(ctx, store.CreateGoalParams{ID: "ok", Lang: "fr", Meta: admin})
			return err
		}},
		{"owners", store.ErrInvalid, func() error {
			_, err := st.CreateGoal(ctx, store.CreateGoalParams{ID: "ok", Owners: []string{"alice"}, Meta: admin})
			return err
		}},
		{"goal_id", store.ErrNotFound, func() error {
			_, err := st.AddTodo(ctx, store.AddTodoParams{GoalID: "nope", Text: "x", Meta: admin})
			return err
		}},
		{"text", store.ErrInvalid, func() error {
			_, err := st.AddTodo(ctx, store.AddTodoParams{GoalID: "g", Text: long, Meta: admin})
			return err
		}},
		{"priority", store.ErrInvalid, func() error {
			p := 5
			_, err := st.AddTodo(ctx, store.AddTodoParams{GoalID: "g", Text: "x", Priority: &p, Meta: admin})
			return err
		}},
		{"agent_id", store.ErrInvalid, func() error {
			_, err := st.RegisterAgent(ctx, store.RegisterAgentParams{GoalID: "g", AgentID: "-bad", Meta: admin})
			return err
		}},
		{"runner", store.ErrInvalid, func() error {
			_, err := st.RegisterAgent(ctx, store.RegisterAgentParams{GoalID: "g", AgentID: "ok", Runner: "ssh", Meta: admin})
			return err
		}},
		{"runner_config", store.ErrInvalid, func() error {
			_, err := st.RegisterAgent(ctx, store.RegisterAgentParams{GoalID: "g", AgentID: "ok", RunnerConfig: json.RawMessage(`[1]`), Meta: admin})
			return err
		}},
		{"question", store.ErrInvalid, func() error {
			_, err := st.AskGate(ctx, store.AskGateParams{GoalID: "g", AgentID: "a", Question: long, Meta: admin})
			return err
		}},
		{"summary", store.ErrInvalid, func() error {
			_, err := st.AddEvidence(ctx, store.AddEvidenceParams{GoalID: "g", AgentID: "a", Summary: long, Meta: admin})
			return err
		}},
		{"next_action", store.ErrInvalid, func() error {
			_, err := st.RefreshState(ctx, store.RefreshStateParams{GoalID: "g", AgentID: "a", NextAction: long, Meta: admin})
			return err
		}},
		{"title", store.ErrInvalid, func() error {
			_, err := st.CreateGoal(ctx, store.CreateGoalParams{ID: "ok", Title: strings.Repeat("t", 201), Meta: admin})
			return err
		}},
		{"members", store.ErrInvalid, func() error {
			m := []string{"ou_ok", "on_union_id"}
			_, err := st.UpdateGoal(ctx, store.UpdateGoalParams{GoalID: "g", Members: &m, Meta: admin})
			return err
		}},
		{"stall_turns", store.ErrInvalid, func() error {
			_, err := st.CreateGoal(ctx, store.CreateGoalParams{ID: "ok", StallTurns: &neg, Meta: admin})
			return err
		}},
		{"options", store.ErrInvalid, func() error {
			_, err := st.AskGate(ctx, store.AskGateParams{GoalID: "g", AgentID: "a", Question: "q", Options: []string{"yes", ""}, Meta: admin})
			return err
		}},
		{"comment", store.ErrInvalid, func() error {
			_, err := st.AnswerGate(ctx, store.AnswerGateParams{GoalID: "g", GateID: 1, Answer: "approve", AnsweredBy: owner, Comment: long, Meta: admin})
			return err
		}},
		{"ref", store.ErrInvalid, func() error {
			_, err := st.AddEvidence(ctx, store.AddEvidenceParams{GoalID: "g", AgentID: "a", Summary: "s", Ref: strings.Repeat("r", 2001), Meta: admin})
			return err
		}},
		{"kind", store.ErrInvalid, func() error {
			_, err := st.AddEvidence(ctx, store.AddEvidenceParams{GoalID: "g", AgentID: "a", Summary: "s", Kind: "video", Meta: admin})
			return err
		}},
		{"lease", store.ErrInvalid, func() error {
			_, err := st.ClaimTodo(ctx, store.ClaimTodoParams{GoalID: "g", TodoID: 1, AgentID: "a", Lease: -time.Second, Meta: admin})
			return err
		}},
		{"turn_instance_id", store.ErrInvalid, func() error {
			_, err := st.OpenTurn(ctx, store.OpenTurnParams{GoalID: "g", AgentID: "a", InstanceID: "has space", Meta: admin})
			return err
		}},
		{"agent_id", store.ErrNotFound, func() error {
			_, err := st.AddEvidence(ctx, store.AddEvidenceParams{GoalID: "g", AgentID: "ghost", Summary: "s", Meta: admin})
			return err
		}},
		{"version", store.ErrInvalid, func() error {
			_, err := st.UpdateTodo(ctx, store.UpdateTodoParams{GoalID: "g", TodoID: 1, Meta: admin})
			return err
		}},
		{"surface", store.ErrInvalid, func() error {
			_, err := st.AddTodo(ctx, store.AddTodoParams{GoalID: "g", Text: "x", Meta: store.Meta{Actor: "admin", Surface: "email"}})
			return err
		}},
	}
	before := rowCounts(t, st)
	for _, c := range cases {
		err := c.do()
		requireKind(t, err, c.kind, c.field)
	}
	require.Equal(t, before, rowCounts(t, st))
}

func TestRenewTurnAndPruneReceipts(t *testing.T) {
	t.Parallel()
	st, c := setup(t)
	ctx := t.Context()
	_, err := st.OpenTurn(ctx, store.OpenTurnParams{GoalID: "g", AgentID: "a", InstanceID: "r1", Lease: time.Minute, Meta: admin})
	require.NoError(t, err)
	c.Add(50 * time.Second)
	rn, err := st.RenewTurn(ctx, store.RenewTurnParams{GoalID: "g", AgentID: "a", InstanceID: "r1", Lease: 10 * time.Minute, Meta: admin})
	require.NoError(t, err)
	require.True(t, rn.LeaseExpiresAt.Equal(c.Now().Add(10*time.Minute)))
	c.Add(11 * time.Minute)
	_, err = st.RenewTurn(ctx, store.RenewTurnParams{GoalID: "g", AgentID: "a", InstanceID: "r1", Meta: admin})
	requireKind(t, err, store.ErrRefused, "turn_instance_id")

	_, err = st.AddTodo(ctx, store.AddTodoParams{GoalID: "g", Text: "x", Meta: store.Meta{Actor: "admin", Surface: "api", IdempotencyKey: "k1"}})
	require.NoError(t, err)
	p, err := st.Prune(ctx, store.Retention{Receipts: time.Hour}, c.Now())
	require.NoError(t, err)
	require.Zero(t, p.Receipts)
	p, err = st.Prune(ctx, store.Retention{Receipts: time.Hour}, c.Now().Add(time.Hour+time.Second))
	require.NoError(t, err)
	require.Equal(t, int64(1), p.Receipts)
}
