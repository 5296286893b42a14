package scheduler_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loopx/cards"
	"loopx/scheduler"
	"loopx/store"
	"loopx/store/storetest"
	"loopx/templates"
)

// A report says what was decided in its window (the goal finished, reopened, replanned), in
// the report's language, and a window where only a decision happened is not quiet.
func TestDigestSaysWhatWasDecided(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	start := time.Date(2026, 5, 3, 2, 0, 0, 0, time.UTC)
	clock := storetest.NewClock(start)
	st := storetest.New(t, store.Options{Now: clock.Now})
	set, err := templates.New()
	require.NoError(t, err)
	dig, err := scheduler.NewDigests(scheduler.DigestConfig{Store: st, Cards: cards.New(set, "en")})
	require.NoError(t, err)
	for _, lang := range []string{"en", "zh"} {
		_, err := st.CreateGoal(ctx, store.CreateGoalParams{ID: "g-" + lang, Owners: []string{"ou_a"}, ReportSpec: "0 9 * * *",
			ReportTZ: "UTC", Lang: lang, Meta: admin})
		require.NoError(t, err)
		require.NoError(t, st.WithTx(ctx, func(tx *store.Tx) error {
			if err := store.Bind(ctx, tx, store.Binding{ChatID: "oc_" + lang, GoalID: "g-" + lang, CreatedBy: "ou_a"}); err != nil {
				return err
			}
			for i, d := range []store.GoalDecision{
				{Kind: store.DecisionReplan, Before: "Ship 1.4", After: "Ship 1.5", Reason: "1.4 was skipped"},
				{Kind: store.DecisionDone, Before: store.GoalActive, After: store.GoalDone},
				{Kind: store.DecisionReopen, Before: store.GoalDone, After: store.GoalActive, Reason: "one more fix"},
			} {
				d.GoalID, d.GoalVersion, d.ProposedBy, d.DecidedBy = "g-"+lang, int64(i+2), "ou_a", "ou_a"
				if _, err := store.InsertDecision(ctx, tx, d, start.Add(time.Duration(i+1)*time.Hour)); err != nil {
					return err
				}
			}
			return nil
		}))
	}
	fire := start.Add(24 * time.Hour)
	clock.Set(fire)
	want := map[string][]string{
		"en": {"**Decisions**", "**Replanned** · 2026-05-03 03:00 · confirmed by", `"Ship 1.4" → "Ship 1.5"`, "because 1.4 was skipped",
			"**Finished the goal** · 2026-05-03 04:00", "**Reopened the goal** · 2026-05-03 05:00", "one more fix"},
		"zh": {"**决定**", "**重新规划** · 2026-05-03 03:00 · 由", "“Ship 1.4”→“Ship 1.5”", "原因：1.4 was skipped",
			"**目标已完成** · 2026-05-03 04:00", "**目标已重新打开** · 2026-05-03 05:00", "原因：one more fix"},
	}
	for lang, words := range want {
		var res scheduler.DigestResult
		require.NoError(t, st.WithTx(ctx, func(tx *store.Tx) error {
			var err error
			res, err = dig.Scheduled(ctx, tx, "g-"+lang, fire)
			return err
		}))
		require.True(t, res.Created)
		require.Empty(t, res.Reason, "nothing else happened, but decisions were made: the report is sent")
		require.True(t, res.Facts.Nothing())
		require.Len(t, res.Outbox, 1)
		text := cardText(t, res.Outbox[0].Content)
		for _, w := range words {
			require.Contains(t, text, w, lang)
		}
		// The next window holds no decision: quiet, nothing sent.
		require.NoError(t, st.WithTx(ctx, func(tx *store.Tx) error {
			var err error
			res, err = dig.Scheduled(ctx, tx, "g-"+lang, fire.Add(24*time.Hour))
			return err
		}))
		require.Equal(t, "quiet", res.Reason)
	}
}
