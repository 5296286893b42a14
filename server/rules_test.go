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
		cmd := map[string]string{"move": "todo"}[act]
		if act == "move" {
			// Moving a todo on the board has no chat command; it changes what owners decide,
			// like /budget: owners.
			require.Equal(t, chat["budget"], role, act)
			continue
		}
		if cmd == "" {
			cmd = act
		}
		want, ok := chat[cmd]
		require.True(t, ok, "chat has no rule for %q", cmd)
		require.Equal(t, want, role, "the workspace's %q needs what chat's %q needs", act, cmd)
	}
}
