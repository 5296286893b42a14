package server

import (
	"testing"

	"github.com/stretchr/testify/require"

	"loopx/router"
	"loopx/web"
)

// TestWorkspaceActsWithChatsRules: every act of the workspace needs the role chat needs for
// the same act (router and web may not import each other, so the check lives where both are
// wired).
func TestWorkspaceActsWithChatsRules(t *testing.T) {
	t.Parallel()
	chat := router.Needs()
	for act, role := range web.Needs() {
		if act == "move" {
			// Moving a todo on the board has no chat command; it changes what owners decide,
			// like /budget: owners.
			require.Equal(t, chat["budget"], role, act)
			continue
		}
		if _, ok := chat[act]; !ok && (act == "waive" || act == "handoff") {
			// Waiving a criterion and handing a todo on are owners' decisions, like /budget,
			// until chat has a command of the same name, whose rule then holds.
			require.Equal(t, chat["budget"], role, act)
			continue
		}
		want, ok := chat[act]
		cmd := act
		require.True(t, ok, "chat has no rule for %q", cmd)
		require.Equal(t, want, role, "the workspace's %q needs what chat's %q needs", act, cmd)
	}
}
