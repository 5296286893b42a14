package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loopx/store"
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
