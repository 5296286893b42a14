package web_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"loopx/quota"
	"loopx/store"
	"loopx/templates"
)

// TestTurnPageWordsCoverTheDecisions: the turn page says the decision that started a turn in
// words, in both languages: every reason and effective action should-run answers (quota's
// Decide) and every turn state has a word, so none falls back to its code with spaces (which
// reads as English on a Chinese page).
func TestTurnPageWordsCoverTheDecisions(t *testing.T) {
	t.Parallel()
	p, err := templates.NewPages()
	require.NoError(t, err)
	// The reasons quota.Decide answers (decide.go).
	reasons := []string{"goal_not_found", "agent_not_found", "goal_stopped", "goal_done", "quota_zero", "stop_requested",
		"held_failures", "held_owner", "live_turn", "window_exhausted", "inbox_pending", "monitor_only", "owner_gate_open",
		"no_runnable_todo", "no_progress", "runnable_todo", "missing_capability", "work_complete"}
	actions := []string{quota.ActionQuotaSkip, quota.ActionBusySkip, quota.ActionThrottledSkip, quota.ActionInboxReply,
		quota.ActionMonitorOnly, quota.ActionGateWait, quota.ActionIdle, quota.ActionStallGate, quota.ActionNormalRun,
		quota.ActionNotFound, quota.ActionHeld, quota.ActionStop, quota.ActionGoalDone, quota.ActionContinuation}
	states := []string{store.TurnLive, store.TurnOK, store.TurnFailed, store.TurnAbandoned, store.TurnStopped}
	var missing []string
	for _, lang := range []string{"en", "zh"} {
		for prefix, values := range map[string][]string{"why_": reasons, "action_": actions, "turn_": states, "outcome_": {"killed", "expired"},
			// The contract's words: handoff kinds, the trail's decisions, on/off settings.
			"hk_":       {store.HandoffResume, store.HandoffReview, store.HandoffVerify, store.HandoffAnswerGate},
			"decision_": {store.DecisionReplan, store.DecisionDone, store.DecisionReopen}, "onoff_": {"on", "off"}} {
			for _, v := range values {
				if k := prefix + v; p.Word(lang, k) == k {
					missing = append(missing, lang+": "+k)
				}
			}
		}
	}
	require.Empty(t, missing, "words the turn page needs (templates/web/words.*.json)")
}
