package change_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"loopx/change"
	"loopx/quota"
	"loopx/store"
)

var agentMeta = store.Meta{Actor: "agent:g/a", Surface: "api"}

// confirm proposes req as the owner and confirms it, returning the result.
func confirm(t *testing.T, b testBundle, key string, req change.Request) change.Result {
	t.Helper()
	p, err := b.k.Propose(t.Context(), person(owner), chat(owner, key+"-p"), req)
	require.NoError(t, err)
	res, err := b.k.Confirm(t.Context(), person(owner2), chat(owner2, key+"-c"), p.ID)
	require.NoError(t, err)
	require.Equal(t, store.ProposalApplied, res.Proposal.State, res.Proposal.Reason)
	return res
}

func TestCapabilitiesGateClaims(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	caps := []string{"write-code", "publish"}
	confirm(t, b, "caps", change.Request{GoalID: "g", Kind: store.ProposalGoalSet, Goal: change.GoalChange{Capabilities: &caps}})

	// A todo may require only what the goal grants.
	_, err := b.st.AddTodo(ctx, store.AddTodoParams{GoalID: "g", Text: "pay", Requires: []string{"spend-money"}, Meta: agentMeta})
	require.ErrorIs(t, err, store.ErrInvalid)
	todo, err := b.st.AddTodo(ctx, store.AddTodoParams{GoalID: "g", Text: "release", Requires: []string{"publish"}, Meta: agentMeta})
	require.NoError(t, err)

	// Agent a holds none: its claim is refused, with the reason and an audit row.
	_, err = b.st.ClaimTodo(ctx, store.ClaimTodoParams{GoalID: "g", TodoID: todo.ID, AgentID: "a", Meta: agentMeta})
	require.ErrorIs(t, err, store.ErrForbidden)
	var se *store.Error
	require.True(t, errors.As(err, &se))
	require.Equal(t, store.ReasonMissingCapability, se.Reason)
	require.Contains(t, se.Msg, "publish")
	audits, err := b.st.ListAudit(ctx, store.ListAuditParams{GoalID: "g", Action: "todo.claim", Limit: 10})
	require.NoError(t, err)
	require.Len(t, audits, 1)
	require.False(t, audits[0].Allowed)

	// should-run does not offer it, and says why.
	d, _, err := quota.Peek(ctx, b.st, "g", "a", b.clock.Now())
	require.NoError(t, err)
	require.Equal(t, "missing_capability", d.Reason)
	require.Equal(t, []string{"write-code", "publish"}, d.Contract.Capabilities.Goal)

	// An owner grants it; the claim then succeeds.
	confirm(t, b, "grant", change.Request{GoalID: "g", Kind: store.ProposalAgentSet, AgentID: "a", Agent: change.AgentChange{Grant: []string{"publish"}}})
	_, err = b.st.ClaimTodo(ctx, store.ClaimTodoParams{GoalID: "g", TodoID: todo.ID, AgentID: "a", Meta: agentMeta})
	require.NoError(t, err)

	// Granting what the goal does not grant is refused; the goal withdrawing it takes it back.
	_, err = b.k.Propose(ctx, person(owner), chat(owner, "bad"), change.Request{GoalID: "g", Kind: store.ProposalAgentSet, AgentID: "a", Agent: change.AgentChange{Grant: []string{"spend-money"}}})
	require.ErrorIs(t, err, store.ErrInvalid)
	confirm(t, b, "withdraw", change.Request{GoalID: "g", Kind: store.ProposalGoalSet, Goal: change.GoalChange{RemoveCapabilities: []string{"publish"}}})
	a, err := b.st.GetAgent(ctx, "g", "a")
	require.NoError(t, err)
	require.Empty(t, a.Capabilities)
}

func TestTodoCriteriaNeedEvidenceOrAWaiver(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	todo, err := b.st.AddTodo(ctx, store.AddTodoParams{GoalID: "g", Text: "parser",
		Criteria: []store.Criterion{{Text: "parses the sample"}, {ID: "fast", Text: "under 1 s"}}, Meta: agentMeta})
	require.NoError(t, err)
	require.Equal(t, []store.Criterion{{ID: "c1", Text: "parses the sample"}, {ID: "fast", Text: "under 1 s"}}, todo.Criteria)

	done := store.TodoDone
	finish := func(version int64) (store.Todo, error) {
		return b.st.UpdateTodo(ctx, store.UpdateTodoParams{GoalID: "g", TodoID: todo.ID, AgentID: "a", Version: version, Status: &done, Meta: agentMeta})
	}
	_, err = finish(todo.Version)
	require.ErrorIs(t, err, store.ErrRefused)
	require.Contains(t, err.Error(), "c1 (parses the sample); fast (under 1 s)")

	// Evidence naming an unknown criterion is refused; naming c1 meets it.
	_, err = b.st.AddEvidence(ctx, store.AddEvidenceParams{GoalID: "g", AgentID: "a", TodoID: todo.ID, Summary: "ran it", Criteria: []string{"c9"}, Meta: agentMeta})
	require.ErrorIs(t, err, store.ErrInvalid)
	_, err = b.st.AddEvidence(ctx, store.AddEvidenceParams{GoalID: "g", AgentID: "a", TodoID: todo.ID, Summary: "ran it", Criteria: []string{"c1"}, Meta: agentMeta})
	require.NoError(t, err)
	_, err = finish(todo.Version)
	require.ErrorIs(t, err, store.ErrRefused)
	require.Contains(t, err.Error(), "fast (under 1 s)")
	require.NotContains(t, err.Error(), "c1 (")

	// An owner's waiver meets the other.
	_, err = b.st.WaiveCriterion(ctx, store.WaiveParams{GoalID: "g", TodoID: todo.ID, Criterion: "fast", Reason: "not measurable yet", Meta: chat(owner, "w")})
	require.NoError(t, err)
	out, err := finish(todo.Version)
	require.NoError(t, err)
	require.Equal(t, store.TodoDone, out.Status)
}

func TestDoneStopsTheGoalAndReopenRestartsIt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	cs := []store.Criterion{{Text: "docs updated"}}
	confirm(t, b, "crit", change.Request{GoalID: "g", Kind: store.ProposalGoalSet, Goal: change.GoalChange{Criteria: &cs}})
	_, err := b.st.AskGate(ctx, store.AskGateParams{GoalID: "g", AgentID: "a", Question: "ship?", Meta: agentMeta})
	require.NoError(t, err)

	p, err := b.k.Propose(ctx, person(owner), chat(owner, "done"), change.Request{GoalID: "g", Kind: store.ProposalGoalDone, Reason: "shipped"})
	require.NoError(t, err)
	words, err := change.Words(b.tpl, "en", p.Effects)
	require.NoError(t, err)
	require.Contains(t, words, "criterion g1 (docs updated) has no evidence: confirming waives it")
	require.Contains(t, words, "1 open gate is cancelled: g1")
	require.Contains(t, words, "heartbeats and scheduled reports stop until an owner reopens the goal")
	res, err := b.k.Confirm(ctx, person(owner), chat(owner, "done-c"), p.ID)
	require.NoError(t, err)
	require.Equal(t, store.GoalDone, res.Goal.Status)

	scheds, err := b.st.ListSchedules(ctx, "g")
	require.NoError(t, err)
	for _, s := range scheds {
		require.False(t, s.Enabled, "schedule %s of a done goal", s.Kind)
	}
	d, _, err := quota.Peek(ctx, b.st, "g", "a", b.clock.Now())
	require.NoError(t, err)
	require.Equal(t, quota.StateDone, d.State)
	require.Equal(t, "goal_done", d.Reason)
	gates, err := b.st.ListGates(ctx, store.ListGatesParams{GoalID: "g"})
	require.NoError(t, err)
	require.Equal(t, store.GateCancelled, gates[0].Status)

	trail, err := b.st.ListTrail(ctx, "g", 10)
	require.NoError(t, err)
	require.Len(t, trail, 1)
	require.Equal(t, store.DecisionDone, trail[0].Kind)
	require.Equal(t, "shipped", trail[0].Reason)
	require.JSONEq(t, `{"unmet_criteria":["g1"],"open_todos":[],"cancelled_gates":[1]}`, string(trail[0].Detail))

	// Nothing else changes a done goal; reopen does, through the same kernel.
	_, err = b.k.Propose(ctx, person(owner), chat(owner, "b"), budget(3))
	require.ErrorIs(t, err, store.ErrRefused)
	confirm(t, b, "reopen", change.Request{GoalID: "g", Kind: store.ProposalGoalReopen})
	scheds, err = b.st.ListSchedules(ctx, "g")
	require.NoError(t, err)
	for _, s := range scheds {
		if s.Kind == store.ScheduleHeartbeat {
			require.True(t, s.Enabled)
		}
	}
}

func TestLoopXProposesFinishingACompleteGoalOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	todo, err := b.st.AddTodo(ctx, store.AddTodoParams{GoalID: "g", Text: "one", Meta: agentMeta})
	require.NoError(t, err)
	made, err := b.k.ProposeCompletion(ctx, "g")
	require.NoError(t, err)
	require.False(t, made, "an open todo: not complete")

	done := store.TodoDone
	_, err = b.st.UpdateTodo(ctx, store.UpdateTodoParams{GoalID: "g", TodoID: todo.ID, AgentID: "a", Version: todo.Version, Status: &done, Meta: agentMeta})
	require.NoError(t, err)
	d, _, err := quota.Peek(ctx, b.st, "g", "a", b.clock.Now())
	require.NoError(t, err)
	require.Equal(t, "work_complete", d.Reason)

	made, err = b.k.ProposeCompletion(ctx, "g")
	require.NoError(t, err)
	require.True(t, made)
	made, err = b.k.ProposeCompletion(ctx, "g")
	require.NoError(t, err)
	require.False(t, made, "one proposal waits at a time")
	ps, err := store.ListProposals(ctx, b.st.DB(), "g", store.ProposalReady, 10)
	require.NoError(t, err)
	require.Len(t, ps, 1)
	require.Equal(t, store.ActorSystem, ps[0].ProposedBy)

	// Cancelled by an owner: not asked again until something changes.
	_, err = b.k.Cancel(ctx, person(owner), chat(owner, "no"), ps[0].ID)
	require.NoError(t, err)
	made, err = b.k.ProposeCompletion(ctx, "g")
	require.NoError(t, err)
	require.False(t, made)
}

func TestReplanIsRecordedAndAnnounced(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	obj := "Write the parser for CSV files"
	confirm(t, b, "obj", change.Request{GoalID: "g", Kind: store.ProposalGoalSet, Goal: change.GoalChange{Objective: &obj}})
	csv, err := b.st.AddTodo(ctx, store.AddTodoParams{GoalID: "g", Text: "CSV quoting rules", Meta: agentMeta})
	require.NoError(t, err)
	_, err = b.st.AddTodo(ctx, store.AddTodoParams{GoalID: "g", Text: "benchmark harness", Meta: agentMeta})
	require.NoError(t, err)
	// The agent saw the first objective change; acknowledge it.
	d, _, err := quota.Peek(ctx, b.st, "g", "a", b.clock.Now())
	require.NoError(t, err)
	require.NotNil(t, d.ObjectiveChanged)
	_, err = b.st.Acknowledge(ctx, store.AckParams{GoalID: "g", AgentID: "a", DecisionID: d.ObjectiveChanged.DecisionID, Meta: agentMeta})
	require.NoError(t, err)

	req := change.Request{GoalID: "g", Kind: store.ProposalGoalReplan, Reason: "the customer sends JSON now",
		Replan: &change.ReplanChange{Objective: "Write the parser for JSON files", Cancel: []int64{csv.ID}}}
	p, err := b.k.Propose(ctx, person(owner), chat(owner, "rp"), req)
	require.NoError(t, err)
	words, err := change.Words(b.tpl, "en", p.Effects)
	require.NoError(t, err)
	require.Contains(t, words, "todo 1 is cancelled: CSV quoting rules")
	require.Contains(t, words, "every agent is told of the new objective at its next turn, until it acknowledges it")
	res, err := b.k.Confirm(ctx, person(owner), chat(owner, "rp-c"), p.ID)
	require.NoError(t, err)
	require.Equal(t, store.ProposalApplied, res.Proposal.State)

	d, _, err = quota.Peek(ctx, b.st, "g", "a", b.clock.Now())
	require.NoError(t, err)
	require.NotNil(t, d.ObjectiveChanged)
	require.Equal(t, "Write the parser for JSON files", d.ObjectiveChanged.After)
	require.Equal(t, "the customer sends JSON now", d.ObjectiveChanged.Reason)
	require.Equal(t, res.Goal.Version, d.ObjectiveChanged.GoalVersion)
	cancelled, err := b.st.GetTodo(ctx, "g", csv.ID)
	require.NoError(t, err)
	require.Equal(t, store.TodoCancelled, cancelled.Status)

	_, err = b.st.Acknowledge(ctx, store.AckParams{GoalID: "g", AgentID: "a", DecisionID: d.ObjectiveChanged.DecisionID, Meta: agentMeta})
	require.NoError(t, err)
	d, _, err = quota.Peek(ctx, b.st, "g", "a", b.clock.Now())
	require.NoError(t, err)
	require.Nil(t, d.ObjectiveChanged)
	trail, err := b.st.ListTrail(ctx, "g", 10)
	require.NoError(t, err)
	require.Len(t, trail, 2)
	require.Equal(t, "the customer sends JSON now", trail[0].Reason)
}

func TestMachineDefaultsReachTheGoalsThatFollowThem(t *testing.T) {
	t.Parallel()
	b := setup(t) // goal g overrides allowed_slots (12)
	ctx := t.Context()
	admin := store.Meta{Actor: store.ActorAdmin, Surface: "api"}
	_, err := b.st.CreateGoal(ctx, store.CreateGoalParams{ID: "h", Owners: []string{owner}, Meta: admin})
	require.NoError(t, err)

	slots, window := 30, 12
	req := change.Request{Kind: store.ProposalDefaultsSet, Defaults: &change.DefaultsChange{AllowedSlots: &slots, WindowHours: &window}}
	_, err = b.k.Propose(ctx, person(owner), chat(owner, "d-owner"), req)
	require.ErrorIs(t, err, store.ErrForbidden, "only admins change the machine defaults")
	p, err := b.k.Propose(ctx, store.Person{Admin: true}, admin, req)
	require.NoError(t, err)
	require.Empty(t, p.GoalID)
	words, err := change.Words(b.tpl, "en", p.Effects)
	require.NoError(t, err)
	require.Contains(t, words, "turns per window changes for 1 goal that follows the default: h")
	require.Contains(t, words, "window (hours) changes for 2 goals that follow the default: g, h")
	res, err := b.k.Confirm(ctx, store.Person{Admin: true}, admin, p.ID)
	require.NoError(t, err)
	require.Equal(t, store.ProposalApplied, res.Proposal.State)
	require.Equal(t, 30, res.Defaults.AllowedSlots)

	g, err := b.st.GetGoal(ctx, "g")
	require.NoError(t, err)
	h, err := b.st.GetGoal(ctx, "h")
	require.NoError(t, err)
	require.Equal(t, 12, g.AllowedSlots, "g overrides it")
	require.Equal(t, store.SourceOverride, g.Source(store.SettingAllowedSlots))
	require.Equal(t, 30, h.AllowedSlots)
	require.Equal(t, store.SourceDefault, h.Source(store.SettingAllowedSlots))
	require.Equal(t, 12, g.WindowHours)
	require.Equal(t, 12, h.WindowHours)

	// g goes back to the default and follows it from then on.
	confirm(t, b, "back", change.Request{GoalID: "g", Kind: store.ProposalGoalSet, Goal: change.GoalChange{Defaults: []string{store.SettingAllowedSlots}}})
	g, err = b.st.GetGoal(ctx, "g")
	require.NoError(t, err)
	require.Equal(t, 30, g.AllowedSlots)
	require.Equal(t, store.SourceDefault, g.Source(store.SettingAllowedSlots))
}

func TestHandoffIsCarriedUntilAcknowledged(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	admin := store.Meta{Actor: store.ActorAdmin, Surface: "api"}
	_, err := b.st.RegisterAgent(ctx, store.RegisterAgentParams{GoalID: "g", AgentID: "b", Meta: admin})
	require.NoError(t, err)
	todo, err := b.st.AddTodo(ctx, store.AddTodoParams{GoalID: "g", Text: "parser", ClaimFor: "a", Meta: agentMeta})
	require.NoError(t, err)
	_, err = b.st.AddEvidence(ctx, store.AddEvidenceParams{GoalID: "g", AgentID: "a", TodoID: todo.ID, Summary: "half of it", Meta: agentMeta})
	require.NoError(t, err)

	// b cannot take over a todo with evidence without a note.
	metaB := store.Meta{Actor: "agent:g/b", Surface: "api"}
	_, err = b.st.ClaimTodo(ctx, store.ClaimTodoParams{GoalID: "g", TodoID: todo.ID, AgentID: "b", Transfer: true, Meta: metaB})
	require.ErrorIs(t, err, store.ErrRefused)

	h, err := b.st.HandOff(ctx, store.HandoffParams{GoalID: "g", TodoID: todo.ID, From: "a", To: "b", Kind: store.HandoffReview,
		Done: "the tokenizer", Next: "review the grammar", Meta: agentMeta})
	require.NoError(t, err)
	require.Len(t, h.EvidenceIDs, 1)
	moved, err := b.st.GetTodo(ctx, "g", todo.ID)
	require.NoError(t, err)
	require.Equal(t, "b", moved.ClaimedBy)

	d, _, err := quota.Peek(ctx, b.st, "g", "b", b.clock.Now())
	require.NoError(t, err)
	require.NotNil(t, d.Continuation)
	require.Equal(t, h.ID, d.Continuation.ID)
	require.Equal(t, store.HandoffReview, d.Continuation.Kind)
	require.Equal(t, todo.ID, d.SelectedTodo.ID)
	_, err = b.st.Acknowledge(ctx, store.AckParams{GoalID: "g", AgentID: "a", HandoffID: h.ID, Meta: agentMeta})
	require.ErrorIs(t, err, store.ErrNotFound, "only its receiver acknowledges it")
	_, err = b.st.Acknowledge(ctx, store.AckParams{GoalID: "g", AgentID: "b", HandoffID: h.ID, Meta: metaB})
	require.NoError(t, err)
	d, _, err = quota.Peek(ctx, b.st, "g", "b", b.clock.Now())
	require.NoError(t, err)
	require.Nil(t, d.Continuation)
}
