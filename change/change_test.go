package change_test

import (
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loopx/change"
	"loopx/store"
	"loopx/store/storetest"
	"loopx/templates"
)

const (
	owner  = "ou_owner1"
	owner2 = "ou_owner2"
	member = "ou_member1"
)

type testBundle struct {
	st    *store.Store
	k     *change.Kernel
	clock *storetest.Clock
	tpl   *templates.Set
}

// setup is a kernel over a store with goal "g" (owners ou_owner1 and ou_owner2, member
// ou_member1, 12 slots per 24 h, a heartbeat at 09:30 Asia/Shanghai) and agent "a".
func setup(t *testing.T) testBundle {
	t.Helper()
	clock := storetest.NewClock(time.Date(2026, 12, 3, 1, 0, 0, 0, time.UTC))
	st := storetest.New(t, store.Options{Now: clock.Now})
	admin := store.Meta{Actor: "admin", Surface: "api"}
	slots := 12
	_, err := st.CreateGoal(t.Context(), store.CreateGoalParams{
		ID: "g", Owners: []string{owner, owner2}, Members: []string{member}, AllowedSlots: &slots,
		HeartbeatSpec: "30 9 * * *", HeartbeatTZ: "Asia/Shanghai", Meta: admin,
	})
	require.NoError(t, err)
	_, err = st.RegisterAgent(t.Context(), store.RegisterAgentParams{GoalID: "g", AgentID: "a", Meta: admin})
	require.NoError(t, err)
	tpl, err := templates.New()
	require.NoError(t, err)
	k, err := change.New(st, change.Options{Templates: tpl})
	require.NoError(t, err)
	return testBundle{st: st, k: k, clock: clock, tpl: tpl}
}

func person(id string) store.Person { return store.Person{OpenID: id} }

func chat(actor, key string) store.Meta {
	return store.Meta{Actor: actor, Surface: "chat", IdempotencyKey: key}
}

func budget(n int) change.Request {
	return change.Request{GoalID: "g", Kind: store.ProposalGoalSet, Goal: change.GoalChange{AllowedSlots: &n}}
}

// receipts counts the audit rows of action on goal g that were allowed.
func receipts(t *testing.T, st *store.Store, action string) []store.Audit {
	t.Helper()
	all, err := st.ListAudit(t.Context(), store.ListAuditParams{GoalID: "g", Limit: 1000})
	require.NoError(t, err)
	var out []store.Audit
	for _, a := range all {
		if a.Action == action {
			out = append(out, a)
		}
	}
	return out
}

func TestProposeShowsDiffAndEffects(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p, err := b.k.Propose(t.Context(), person(owner), chat(owner, "k1"), budget(50))
	require.NoError(t, err)
	require.Equal(t, store.ProposalReady, p.State)
	require.Equal(t, []store.FieldChange{{Field: "allowed_slots", Before: "12", After: "50"}}, p.Diff)
	require.Equal(t, int64(1), p.GoalVersion)
	require.Equal(t, store.RoleOwner, p.Need)
	require.Equal(t, b.clock.Now().Add(store.ProposalTTL), p.ExpiresAt.UTC())
	words, err := change.Words(b.tpl, "en", p.Effects)
	require.NoError(t, err)
	require.Equal(t, []string{"quota 12 of 12 left in 24 h → 50 of 50 in 24 h"}, words)

	// Nothing is applied before confirmation.
	g, err := b.st.GetGoal(t.Context(), "g")
	require.NoError(t, err)
	require.Equal(t, 12, g.AllowedSlots)

	hb := "0 10 * * *"
	p2, err := b.k.Propose(t.Context(), person(owner), chat(owner, "k2"), change.Request{GoalID: "g", Kind: store.ProposalGoalSet, Goal: change.GoalChange{HeartbeatSpec: &hb}})
	require.NoError(t, err)
	words, err = change.Words(b.tpl, "en", p2.Effects)
	require.NoError(t, err)
	require.Equal(t, []string{"next heartbeat 09:30 Asia/Shanghai → 10:00 Asia/Shanghai"}, words)

	_, err = b.st.AskGate(t.Context(), store.AskGateParams{GoalID: "g", AgentID: "a", Question: "ship?", Meta: store.Meta{Actor: "agent:g/a", Surface: "api"}})
	require.NoError(t, err)
	p3, err := b.k.Propose(t.Context(), person(owner), chat(owner, "k3"), change.Request{GoalID: "g", Kind: store.ProposalGoalPause})
	require.NoError(t, err)
	words, err = change.Words(b.tpl, "en", p3.Effects)
	require.NoError(t, err)
	require.Contains(t, words, "1 open gate will wait while paused")

	// A change that changes nothing is refused before anything is stored.
	_, err = b.k.Propose(t.Context(), person(owner), chat(owner, "k4"), budget(12))
	require.ErrorIs(t, err, store.ErrInvalid)
	_, err = b.k.Propose(t.Context(), person(owner), chat(owner, "k5"), budget(-1))
	var se *store.Error
	require.ErrorAs(t, err, &se)
	require.Equal(t, "allowed_slots", se.Field)
}

func TestConfirmAppliesOnceWithReceipt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p, err := b.k.Propose(t.Context(), person(owner), chat(owner, "k1"), budget(50))
	require.NoError(t, err)

	// Another owner confirms: the proposer and the confirmer may differ.
	res, err := b.k.Confirm(t.Context(), person(owner2), chat(owner2, "c1"), p.ID)
	require.NoError(t, err)
	require.Equal(t, store.ProposalApplied, res.Proposal.State)
	require.Equal(t, owner, res.Proposal.ProposedBy)
	require.Equal(t, owner2, res.Proposal.DecidedBy)
	require.NotNil(t, res.Goal)
	require.Equal(t, 50, res.Goal.AllowedSlots)
	require.Equal(t, int64(2), res.Proposal.AppliedVersion)

	// A second confirmation (another click) changes nothing.
	again, err := b.k.Confirm(t.Context(), person(owner), chat(owner, "c2"), p.ID)
	require.NoError(t, err)
	require.True(t, again.Unchanged)
	g, err := b.st.GetGoal(t.Context(), "g")
	require.NoError(t, err)
	require.Equal(t, int64(2), g.Version)

	rc := receipts(t, b.st, "proposal.confirm")
	require.Len(t, rc, 1)
	var d map[string]any
	require.NoError(t, json.Unmarshal(rc[0].Detail, &d))
	require.Equal(t, owner, d["proposed_by"])
	require.Equal(t, owner2, d["confirmed_by"])
	require.Equal(t, "applied", d["state"])
	require.Equal(t, []any{map[string]any{"field": "allowed_slots", "before": "12", "after": "50"}}, d["diff"])
	require.Equal(t, owner2, rc[0].Actor)
}

func TestConcurrentConfirmsApplyOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p, err := b.k.Propose(t.Context(), person(owner), chat(owner, "k1"), budget(50))
	require.NoError(t, err)
	var wg sync.WaitGroup
	results := make([]change.Result, 4)
	errs := make([]error, 4)
	for i := range results {
		wg.Go(func() {
			who := []string{owner, owner2}[i%2]
			results[i], errs[i] = b.k.Confirm(t.Context(), person(who), chat(who, "c"+string(rune('a'+i))), p.ID)
		})
	}
	wg.Wait()
	applied := 0
	for i := range results {
		require.NoError(t, errs[i])
		if !results[i].Unchanged {
			applied++
		}
	}
	require.Equal(t, 1, applied)
	require.Len(t, receipts(t, b.st, "proposal.confirm"), 1)
}

func TestConcurrentChangeMakesItStale(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p, err := b.k.Propose(t.Context(), person(owner), chat(owner, "k1"), budget(50))
	require.NoError(t, err)
	// Someone changes the window meanwhile.
	w := 48
	_, err = b.st.UpdateGoal(t.Context(), store.UpdateGoalParams{GoalID: "g", WindowHours: &w, Meta: store.Meta{Actor: "admin", Surface: "api"}})
	require.NoError(t, err)

	res, err := b.k.Confirm(t.Context(), person(owner), chat(owner, "c1"), p.ID)
	require.NoError(t, err)
	require.Equal(t, store.ProposalStale, res.Proposal.State)
	require.Contains(t, res.Proposal.Reason, "version 2, not 1")
	require.NotNil(t, res.Fresh)
	require.Equal(t, store.ProposalReady, res.Fresh.State)
	require.Equal(t, int64(2), res.Fresh.GoalVersion)
	require.Equal(t, res.Fresh.ID, res.Proposal.SuccessorID)
	g, err := b.st.GetGoal(t.Context(), "g")
	require.NoError(t, err)
	require.Equal(t, 12, g.AllowedSlots, "a stale proposal applies nothing")

	// The fresh one applies.
	res2, err := b.k.Confirm(t.Context(), person(owner), chat(owner, "c2"), res.Fresh.ID)
	require.NoError(t, err)
	require.Equal(t, store.ProposalApplied, res2.Proposal.State)
	require.Equal(t, 50, res2.Goal.AllowedSlots)
	require.Equal(t, 48, res2.Goal.WindowHours)
	require.Len(t, receipts(t, b.st, "proposal.confirm"), 2, "the stale answer and the applied one each write a receipt")
}

func TestExpiredOrCancelledCannotApply(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p, err := b.k.Propose(t.Context(), person(owner), chat(owner, "k1"), budget(50))
	require.NoError(t, err)
	b.clock.Add(store.ProposalTTL + time.Second)
	require.Equal(t, store.ProposalExpired, p.StateAt(b.clock.Now()))
	res, err := b.k.Confirm(t.Context(), person(owner), chat(owner, "c1"), p.ID)
	require.NoError(t, err)
	require.Equal(t, store.ProposalExpired, res.Proposal.State)

	p2, err := b.k.Propose(t.Context(), person(owner), chat(owner, "k2"), budget(60))
	require.NoError(t, err)
	res, err = b.k.Cancel(t.Context(), person(owner2), chat(owner2, "x1"), p2.ID)
	require.NoError(t, err)
	require.Equal(t, store.ProposalCancelled, res.Proposal.State)
	res, err = b.k.Confirm(t.Context(), person(owner), chat(owner, "c2"), p2.ID)
	require.NoError(t, err)
	require.True(t, res.Unchanged)
	require.Equal(t, store.ProposalCancelled, res.Proposal.State)

	g, err := b.st.GetGoal(t.Context(), "g")
	require.NoError(t, err)
	require.Equal(t, 12, g.AllowedSlots)
	require.Equal(t, int64(1), g.Version)
	cancelled := receipts(t, b.st, "proposal.cancel")
	require.Len(t, cancelled, 1)
	expired := receipts(t, b.st, "proposal.confirm")
	require.Len(t, expired, 1, "the expired confirmation's receipt")
	for _, rc := range append(cancelled, expired...) {
		var d map[string]any
		require.NoError(t, json.Unmarshal(rc.Detail, &d))
		require.NotEmpty(t, d["diff"], "every receipt carries the diff")
		require.Equal(t, false, d["applied"])
	}
}

func TestMemberCannotConfirmOwnerChange(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.k.Propose(t.Context(), person(member), chat(member, "k0"), budget(50))
	require.ErrorIs(t, err, store.ErrForbidden, "a member cannot propose either")
	p, err := b.k.Propose(t.Context(), person(owner), chat(owner, "k1"), budget(50))
	require.NoError(t, err)
	for _, who := range []string{member, "ou_stranger"} {
		_, err = b.k.Confirm(t.Context(), person(who), chat(who, "c1"), p.ID)
		require.ErrorIs(t, err, store.ErrForbidden, who)
		_, err = b.k.Cancel(t.Context(), person(who), chat(who, "x1"), p.ID)
		require.ErrorIs(t, err, store.ErrForbidden, who)
	}
	still, err := store.GetProposal(t.Context(), b.st.DB(), p.ID)
	require.NoError(t, err)
	require.Equal(t, store.ProposalReady, still.State)
	all, err := b.st.ListAudit(t.Context(), store.ListAuditParams{GoalID: "g", Limit: 1000})
	require.NoError(t, err)
	refused := 0
	for _, a := range all {
		if !a.Allowed && (a.Action == "proposal.confirm" || a.Action == "proposal.cancel" || a.Action == "proposal.create") {
			refused++
		}
	}
	require.Equal(t, 5, refused, "every refusal is audited")

	// An agent's runner is the admins': an owner may not propose it, an admin may.
	runner := store.RunnerExec
	req := change.Request{GoalID: "g", Kind: store.ProposalAgentSet, AgentID: "a", Agent: change.AgentChange{Runner: &runner}}
	_, err = b.k.Propose(t.Context(), person(owner), chat(owner, "k2"), req)
	require.ErrorIs(t, err, store.ErrForbidden)
	ap, err := b.k.Propose(t.Context(), store.Person{Admin: true}, store.Meta{Actor: "admin", Surface: "api", IdempotencyKey: "k3"}, req)
	require.NoError(t, err)
	require.Equal(t, store.RoleAdmin, ap.Need)
	_, err = b.k.Confirm(t.Context(), person(owner), chat(owner, "c3"), ap.ID)
	require.ErrorIs(t, err, store.ErrForbidden)

	// A secret's value never enters a proposal (it is stored and shown): secrets are set
	// with the agent update, which seals them.
	withEnv := json.RawMessage(`{"argv":["true"],"env":{"OPENAI_API_KEY":"sk-not-in-a-proposal"}}`)
	_, err = b.k.Propose(t.Context(), store.Person{Admin: true}, store.Meta{Actor: "admin", Surface: "api", IdempotencyKey: "k4"},
		change.Request{GoalID: "g", Kind: store.ProposalAgentSet, AgentID: "a", Agent: change.AgentChange{Runner: &runner, RunnerConfig: &withEnv}})
	var se *store.Error
	require.ErrorAs(t, err, &se)
	require.ErrorIs(t, err, store.ErrInvalid)
	require.Equal(t, "runner_config.env", se.Field)
	var n int
	require.NoError(t, b.st.DB().QueryRow(t.Context(), `SELECT count(*) FROM proposal WHERE params::text LIKE '%sk-not-in-a-proposal%'`).Scan(&n))
	require.Zero(t, n)
}

func TestSameKeyReplays(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p1, err := b.k.Propose(t.Context(), person(owner), chat(owner, "same"), budget(50))
	require.NoError(t, err)
	p2, err := b.k.Propose(t.Context(), person(owner), chat(owner, "same"), budget(50))
	require.NoError(t, err)
	require.Equal(t, p1.ID, p2.ID)
	_, err = b.k.Propose(t.Context(), person(owner), chat(owner, "same"), budget(51))
	require.ErrorIs(t, err, store.ErrConflict)
	var se *store.Error
	require.True(t, errors.As(err, &se))
	require.Equal(t, "idempotency_key", se.Field)
	list, err := store.ListProposals(t.Context(), b.st.DB(), "g", "", 0)
	require.NoError(t, err)
	require.Len(t, list, 1)

	r1, err := b.k.Confirm(t.Context(), person(owner), chat(owner, "conf"), p1.ID)
	require.NoError(t, err)
	r2, err := b.k.Confirm(t.Context(), person(owner), chat(owner, "conf"), p1.ID)
	require.NoError(t, err)
	require.Equal(t, r1.Proposal.State, r2.Proposal.State)
	require.False(t, r2.Unchanged, "a replay returns the first answer")
	require.Len(t, receipts(t, b.st, "proposal.confirm"), 1)
}

func TestApplyDirectlyWritesTheSameReceipt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin := store.Person{Admin: true}
	res, err := b.k.Apply(t.Context(), admin, store.Meta{Actor: "admin", Surface: "api", IdempotencyKey: "d1"}, change.Request{GoalID: "g", Kind: store.ProposalGoalPause})
	require.NoError(t, err)
	require.Equal(t, store.ProposalApplied, res.Proposal.State)
	require.Equal(t, store.GoalStopped, res.Goal.Status)
	rc := receipts(t, b.st, "proposal.apply")
	require.Len(t, rc, 1)
	var d map[string]any
	require.NoError(t, json.Unmarshal(rc[0].Detail, &d))
	require.Equal(t, "admin", d["proposed_by"])
	require.Equal(t, "admin", d["confirmed_by"])
	require.NotEmpty(t, d["diff"])

	// Owners edit: add and remove people; the diff shows the full lists.
	res, err = b.k.Apply(t.Context(), admin, store.Meta{Actor: "admin", Surface: "api"}, change.Request{GoalID: "g", Kind: store.ProposalGoalSet,
		Goal: change.GoalChange{AddOwners: []string{"ou_new"}, RemoveOwners: []string{owner2}}})
	require.NoError(t, err)
	require.Equal(t, []string{owner, "ou_new"}, res.Goal.Owners)
	require.Equal(t, []store.FieldChange{{Field: "owners", Before: owner + ", " + owner2, After: owner + ", ou_new"}}, res.Proposal.Diff)

	// Agent settings: the default flag and work mode.
	mode := "monitor_only"
	res, err = b.k.Apply(t.Context(), admin, store.Meta{Actor: "admin", Surface: "api"}, change.Request{GoalID: "g", Kind: store.ProposalAgentSet, AgentID: "a",
		Agent: change.AgentChange{WorkMode: &mode}})
	require.NoError(t, err)
	a, err := b.st.GetAgent(t.Context(), "g", "a")
	require.NoError(t, err)
	require.Equal(t, "monitor_only", a.WorkMode)
	words, err := change.Words(b.tpl, "zh", res.Proposal.Effects)
	require.NoError(t, err)
	require.Equal(t, []string{"智能体 a 只做观察：不领取待办，也不消耗配额"}, words)
}
