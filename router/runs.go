package router

import (
	"context"
	"time"

	"loopx/cards"
	"loopx/store"
)

// Defaults of /runs.
const (
	runsDefault    = 10             // turns listed when the command names no number
	runsSkipWindow = 24 * time.Hour // how far back skipped decisions are counted
)

// runs answers /runs: the goal's last turns (agent, when, outcome, todo, evidence, length)
// and its should-run skips of the last 24 hours grouped by reason, read from the run index.
func (h *handling) runs(ctx context.Context, tg *target, p Parsed) error {
	n := p.Count
	if n == 0 {
		n = runsDefault
	}
	now := h.c.opts.Now()
	turns, err := store.ListTurns(ctx, h.tx, store.ListRunsParams{GoalID: tg.goal.ID, Limit: n})
	if err != nil {
		return err
	}
	skips, err := store.CountDecisions(ctx, h.tx, store.ListRunsParams{
		GoalID: tg.goal.ID, Verdict: "skip", Since: now.Add(-runsSkipWindow)})
	if err != nil {
		return err
	}
	loc, zone := zoneOf(tg.goal.HeartbeatTZ)
	lang, err := h.langFor(ctx, &tg.goal)
	if err != nil {
		return err
	}
	list := []map[string]any{}
	for _, t := range turns {
		end := now
		if t.EndedAt != nil {
			end = *t.EndedAt
		}
		mins := max(0, int(end.Sub(t.StartedAt)/time.Minute))
		by, outcome := cards.Outcome(func(k string) string { return h.c.tpl.Word(lang, "turn."+k) }, t.State, t.Outcome)
		// The handoff the turn ended with: for whom, what is next, whether it was read.
		var handoff map[string]any
		hs, err := store.ListHandoffs(ctx, h.tx, store.ListHandoffsParams{GoalID: tg.goal.ID, TurnID: t.ID, Limit: 1})
		if err != nil {
			return err
		}
		if len(hs) == 1 {
			handoff = map[string]any{"To": hs[0].To, "Kind": hs[0].Kind, "Next": hs[0].Next, "Done": hs[0].Done, "Acked": hs[0].AckedAt != nil,
				"Self": hs[0].To == t.AgentID}
		}
		list = append(list, map[string]any{
			"Handoff": handoff,
			"ID":      t.ID, "Agent": t.AgentID, "Started": t.StartedAt.In(loc).Format(statusTimeLayout),
			"State": t.State, "Outcome": outcome, "HaltedBy": by, "TodoID": t.TodoID, "TodoText": t.TodoText,
			"Evidence": t.Evidence, "Spent": t.Spent, "Hours": mins / 60, "Minutes": mins % 60, "URL": h.turnURL(tg.goal.ID, t.ID),
		})
	}
	grouped := []map[string]any{}
	total := 0
	for _, c := range skips {
		total += c.Count
		grouped = append(grouped, map[string]any{"State": c.State, "Reason": c.Reason, "Count": c.Count})
	}
	heldAgents, err := store.ListHeldAgents(ctx, h.tx, tg.goal.ID)
	if err != nil {
		return err
	}
	held := []map[string]any{}
	for _, a := range heldAgents {
		held = append(held, map[string]any{"ID": a.ID, "Reason": a.HeldReason, "Failures": a.HeldFailures})
	}
	return h.reply(ctx, "runs", map[string]any{
		"GoalID": tg.goal.ID, "Zone": zone, "Turns": list, "Skips": grouped, "SkipTotal": total,
		"SkipHours": int(runsSkipWindow / time.Hour), "Held": held,
	}, tg)
}

// turnURL is the workspace page of a turn, "" when the workspace is not served.
func (h *handling) turnURL(goalID string, turnID int64) string {
	if h.c.opts.TurnURL == nil {
		return ""
	}
	return h.c.opts.TurnURL(goalID, turnID)
}
