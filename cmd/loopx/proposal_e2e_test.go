package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"loopx/store/storetest"
)

// TestGoalSetPreviewThenConfirm previews a budget change with the CLI, confirms it, and
// shows that a proposal overtaken by another change goes stale with a fresh one.
func TestGoalSetPreviewThenConfirm(t *testing.T) {
	t.Parallel()
	s := startServe(t, map[string]string{"DATABASE_URL": storetest.NewDatabase(t), "LOOPX_ADMIN_TOKEN": e2eAdminToken, "LOOPX_BOT": "off", "LOOPX_SCHEDULER": "off"})
	admin := e2eAdminToken
	s.ok(t, admin, "goal", "create", "--goal-id", "demo", "--owner", "ou_owner", "--allowed-slots", "12")

	r := s.cli(t, admin, "goal", "set", "--goal-id", "demo", "--allowed-slots", "50", "--preview")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "p1 · #demo · goal.set · preview_ready (goal version 1)")
	require.Contains(t, r.stdout, "allowed_slots: 12 → 50")
	require.Contains(t, r.stdout, "• quota 12 of 12 left in 24 h → 50 of 50 in 24 h")
	require.Contains(t, r.stdout, "confirm: loopx proposal confirm p1")
	g := s.ok(t, admin, "goal", "show", "--goal-id", "demo")
	require.Equal(t, float64(12), g["allowed_slots"], "a preview changes nothing")

	r = s.cli(t, admin, "proposal", "confirm", "p1")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "p1 · #demo · goal.set · applied")
	g = s.ok(t, admin, "goal", "show", "--goal-id", "demo")
	require.Equal(t, float64(50), g["allowed_slots"])

	// Stale: another change lands between preview and confirm.
	s.ok(t, admin, "goal", "stop", "--goal-id", "demo", "--preview")
	s.ok(t, admin, "goal", "set", "--goal-id", "demo", "--window-hours", "48")
	r = s.cli(t, admin, "proposal", "confirm", "p2")
	require.Equal(t, 1, r.code, "a stale proposal is not applied: %s", r.stdout)
	require.Contains(t, r.stdout, "p2 · #demo · goal.pause · stale")
	require.Contains(t, r.stdout, "confirm: loopx proposal confirm p")
	require.True(t, strings.Contains(r.stderr, "proposal p2 is stale, not applied"), r.stderr)
	g = s.ok(t, admin, "goal", "show", "--goal-id", "demo")
	require.Equal(t, "active", g["status"])
}
