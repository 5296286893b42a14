package web

import (
	"cmp"
	"context"
	"errors"
	"net/http"

	"loopx/cards"
	"loopx/store"
)

// turn is the page of one turn: the decision that opened it, its todo and agent, when it
// started and ended, its outcome, the runner's log tail, the evidence it recorded and its
// spend. Sections are independent blocks of turn.html, so the turn's handoff or files can be
// added beside them.
func (s *Server) turn(ctx context.Context, r *http.Request, ss *session, v *view) (string, int, error) {
	g, err := s.goalAs(ctx, ss, r.PathValue("goal"))
	id, ok := parseID(r.PathValue("turn"))
	if errors.Is(err, store.ErrNotFound) || !ok {
		return s.notFound(v)
	}
	if err != nil {
		return "", 0, err
	}
	if ss.Lang == "" {
		v.Lang = cmp.Or(g.Lang, v.Lang)
	}
	tp, err := store.ReadTurnPage(ctx, s.st.DB(), g.ID, id)
	if errors.Is(err, store.ErrNotFound) {
		return s.notFound(v)
	}
	if err != nil {
		return "", 0, err
	}
	v.Goal, v.Role, v.Turn, v.Live = g.Goal, string(g.Role), tp, g.ID
	// The runner's log may hold what the agent printed; like the API, which gives it only to
	// the admin and the turn's agent, the page shows it to the people answerable for the goal
	// (owners, admins), not to every member.
	v.ShowLog = g.Role.AtLeast(store.RoleOwner)
	v.TurnOutcome.HaltedBy, v.TurnOutcome.Text = cards.Outcome(func(k string) string { return s.pages.Word(v.Lang, "outcome_"+k) },
		tp.Turn.State, tp.Turn.Outcome)
	// The handoff the turn ended with (refresh-state's): what it did, what is next, for whom.
	hs, err := store.ListHandoffs(ctx, s.st.DB(), store.ListHandoffsParams{GoalID: g.ID, TurnID: tp.Turn.ID, Limit: 1})
	if err != nil {
		return "", 0, err
	}
	if len(hs) > 0 {
		v.Handoff = &hs[0]
	}
	v.Title = s.pages.Word(v.Lang, "turn_n", tp.Turn.ID) + " · #" + g.ID
	return "turn", http.StatusOK, nil
}
