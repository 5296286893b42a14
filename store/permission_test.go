package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loopx/store"
	"loopx/store/storetest"
)

// TestPermissionGates: the goal's rules decide without asking (deny wins); otherwise a
// permission gate opens that blocks nothing in should-run, expires at the goal's limit,
// refuses a late answer, and an "allow for this turn" answer allows the tool again in that
// turn; an overdue gate whose hook is gone is closed by the sweep.
func TestPermissionGates(t *testing.T) {
	t.Parallel()
	st, clk := setup(t)
	ctx := t.Context()
	ask := func(tool, turn string) store.PermissionAnswer {
		t.Helper()
		a, err := st.AskPermission(ctx, store.AskPermissionParams{GoalID: "g", AgentID: "a", Meta: agentMeta("a"),
			Request: store.PermissionRequest{Host: "claude-code", Tool: tool, Summary: "rm -rf build/", Folder: "/src", Turn: turn}})
		require.NoError(t, err)
		return a
	}
	secs := 60
	_, err := st.SetPermissionPolicy(ctx, store.SetPermissionPolicyParams{GoalID: "g", TimeoutSeconds: &secs,
		AllowTools: &[]string{"Read", "mcp__github__get_*"}, DenyTools: &[]string{"WebFetch", "Read"}, Meta: admin})
	require.NoError(t, err)
	require.Equal(t, store.PermitDeny, ask("Read", "t1").Decision, "deny wins over allow")
	require.Equal(t, store.PermitAllow, ask("mcp__github__get_issue", "t1").Decision, "a prefix rule")
	bad := []string{"a*b"}
	_, err = st.SetPermissionPolicy(ctx, store.SetPermissionPolicyParams{GoalID: "g", AllowTools: &bad, Meta: admin})
	require.ErrorIs(t, err, store.ErrInvalid)

	a := ask("Bash", "t1")
	require.Equal(t, store.PermitAsk, a.Decision)
	g := *a.Gate
	require.Equal(t, store.GateKindPermission, g.Kind)
	require.Equal(t, "Agent a asks to run Bash: rm -rf build/ (in /src)", g.Question)
	require.Equal(t, []string{"approve", "allow_turn", "reject"}, g.Options)
	require.WithinDuration(t, clk.Now().Add(time.Minute), *a.ExpiresAt, time.Second)
	snap, err := st.ReadShouldRunSnapshot(ctx, "g", "a", clk.Now())
	require.NoError(t, err)
	require.Empty(t, snap.OpenGates, "a permission gate blocks nothing in should-run")

	_, err = st.AnswerGate(ctx, store.AnswerGateParams{GoalID: "g", GateID: g.ID, Answer: "allow_turn", AnsweredBy: "ou_stranger", Meta: admin})
	require.ErrorIs(t, err, store.ErrForbidden, "owners only")
	out, err := st.AnswerGate(ctx, store.AnswerGateParams{GoalID: "g", GateID: g.ID, Answer: "allow_turn", AnsweredBy: owner, Meta: admin})
	require.NoError(t, err)
	require.Equal(t, store.PermitAllow, store.PermissionDecision(out))
	again := ask("Bash", "t1")
	require.Equal(t, store.PermitAllow, again.Decision)
	require.Equal(t, "turn_allowed", again.Reason)
	require.Equal(t, store.PermitAsk, ask("Bash", "t2").Decision, "another turn asks again")

	// Nobody answers: not before the limit, then denied; a late answer is refused.
	late := ask("Write", "t2").Gate
	_, err = st.ExpirePermission(ctx, "g", late.ID, nil, agentMeta("a"))
	require.ErrorIs(t, err, store.ErrRefused, "still waiting")
	clk.Add(61 * time.Second)
	_, err = st.AnswerGate(ctx, store.AnswerGateParams{GoalID: "g", GateID: late.ID, Answer: "approve", AnsweredBy: owner, Meta: admin})
	require.ErrorIs(t, err, store.ErrRefused, "too late: denied already")
	closed, err := st.ExpirePermission(ctx, "g", late.ID, nil, agentMeta("a"))
	require.NoError(t, err)
	require.True(t, store.PermissionExpired(closed))
	require.Equal(t, store.PermitDeny, store.PermissionDecision(closed))

	// The sweep closes what no hook closed.
	lost := ask("Edit", "t3").Gate
	swept, err := st.ExpireOverduePermissions(ctx, time.Minute, nil)
	require.NoError(t, err)
	require.Empty(t, swept, "not overdue yet")
	clk.Add(3 * time.Minute)
	swept, err = st.ExpireOverduePermissions(ctx, time.Minute, nil)
	require.NoError(t, err)
	require.Len(t, swept, 2, "the t2 Bash gate and the lost one")
	require.Contains(t, []int64{swept[0].ID, swept[1].ID}, lost.ID)
}

// TestPermissionScope: a request naming paths the goal's scope protects is denied without
// asking, even for a tool the rules allow; a path outside the editable ones is asked, even
// for an allowed tool or one allowed for the turn, and the gate names it; paths inside
// follow the rules as before.
func TestPermissionScope(t *testing.T) {
	t.Parallel()
	clk := newClock()
	st := storetest.New(t, store.Options{Now: clk.Now})
	ctx := t.Context()
	_, err := st.CreateGoal(ctx, store.CreateGoalParams{ID: "g", Owners: []string{owner}, ScopeEditable: []string{"src/**", "docs/*.md"},
		ScopeProtected: []string{"src/secrets/**", "**/.env"}, Meta: admin})
	require.NoError(t, err)
	_, err = st.RegisterAgent(ctx, store.RegisterAgentParams{GoalID: "g", AgentID: "a", Meta: admin})
	require.NoError(t, err)
	_, err = st.SetPermissionPolicy(ctx, store.SetPermissionPolicyParams{GoalID: "g", AllowTools: &[]string{"Write"}, Meta: admin})
	require.NoError(t, err)
	ask := func(tool, turn string, paths ...string) store.PermissionAnswer {
		t.Helper()
		a, err := st.AskPermission(ctx, store.AskPermissionParams{GoalID: "g", AgentID: "a", Meta: agentMeta("a"),
			Request: store.PermissionRequest{Host: "claude-code", Tool: tool, Summary: "write", Folder: "/src/app", Turn: turn, Paths: paths}})
		require.NoError(t, err)
		return a
	}

	a := ask("Write", "t1", "src/main.go", "src/secrets/key.pem")
	require.Equal(t, store.PermitDeny, a.Decision, "protected wins over the allow rule")
	require.Equal(t, "scope_protected", a.Reason)
	require.Equal(t, []string{"src/secrets/key.pem"}, a.Protected)
	require.Nil(t, a.Gate, "denied without asking")
	require.Equal(t, "scope_protected", ask("Edit", "t1", "src/app/.env").Reason)

	require.Equal(t, "rule_allow", ask("Write", "t1", "src/main.go", "docs/guide.md").Reason, "inside the scope the rules decide")

	a = ask("Write", "t1", "src/main.go", "deploy/prod.yaml", "../other/x.go")
	require.Equal(t, store.PermitAsk, a.Decision, "outside the editable paths: asked even for an allowed tool")
	require.Equal(t, []string{"deploy/prod.yaml", "../other/x.go"}, a.Gate.Request.Outside)
	_, err = st.AnswerGate(ctx, store.AnswerGateParams{GoalID: "g", GateID: a.Gate.ID, Answer: store.PermissionAllowTurn, AnsweredBy: owner, Meta: admin})
	require.NoError(t, err)
	require.Equal(t, store.PermitAsk, ask("Write", "t1", "deploy/prod.yaml").Decision, "asked again, even after allow for this turn")

	// A client's own Outside is replaced; bad paths are refused.
	a, err = st.AskPermission(ctx, store.AskPermissionParams{GoalID: "g", AgentID: "a", Meta: agentMeta("a"),
		Request: store.PermissionRequest{Tool: "Bash", Summary: "ls", Outside: []string{"made/up"}}})
	require.NoError(t, err)
	require.Empty(t, a.Gate.Request.Outside)
	_, err = st.AskPermission(ctx, store.AskPermissionParams{GoalID: "g", AgentID: "a", Meta: agentMeta("a"),
		Request: store.PermissionRequest{Tool: "Write", Paths: []string{"a\nb"}}})
	require.ErrorIs(t, err, store.ErrInvalid)

	// A goal with no scope asks as before, without naming paths outside.
	_, err = st.CreateGoal(ctx, store.CreateGoalParams{ID: "free", Owners: []string{owner}, Meta: admin})
	require.NoError(t, err)
	_, err = st.RegisterAgent(ctx, store.RegisterAgentParams{GoalID: "free", AgentID: "a", Meta: admin})
	require.NoError(t, err)
	a, err = st.AskPermission(ctx, store.AskPermissionParams{GoalID: "free", AgentID: "a", Meta: agentMeta("a"),
		Request: store.PermissionRequest{Tool: "Write", Paths: []string{"anything/at/all.go", "../out.txt"}}})
	require.NoError(t, err)
	require.Equal(t, store.PermitAsk, a.Decision)
	require.Empty(t, a.Gate.Request.Outside)
}
