package web

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"

	"loopx/change"
	"loopx/store"
)

// Replanning from the workspace: the owner writes the new objective and why, ticks the open
// todos it cancels and the finished ones it reopens, and previews it; the preview suggests
// which todos no longer fit (or fit again), and "Take the suggestions" brings the form back
// with them ticked. Confirming records the decision on the goal's trail, and every agent's
// next should-run announces the new objective until it acknowledges it.

// replanView is the replan form.
type replanView struct {
	Objective, Reason string
	Open, Closed      []todoChoice
	// From is the preview whose choices and suggestions the form took; posting the form
	// replaces it (the earlier preview is cancelled).
	From int64
}

// todoChoice is a todo on the replan form: ticked, and whether the preview suggested it.
type todoChoice struct {
	store.Todo
	Checked, Suggested bool
}

// replanTodos caps the todos the form lists (the open ones first).
const replanTodos = 200

func (s *Server) replan(ctx context.Context, r *http.Request, ss *session, v *view) (string, int, error) {
	g, err := s.goalAs(ctx, ss, r.PathValue("goal"))
	if errors.Is(err, store.ErrNotFound) {
		return s.notFound(v)
	}
	if err != nil {
		return "", 0, err
	}
	if !g.Role.AtLeast(store.RoleOwner) {
		return s.notFound(v) // a form only owners may use is a page only owners see
	}
	if ss.Lang == "" {
		v.Lang = cmp.Or(g.Lang, v.Lang)
	}
	v.Goal, v.Role, v.Title = g.Goal, string(g.Role), s.pages.Word(v.Lang, "replan")+" · #"+g.ID
	rv := replanView{Objective: g.Objective}
	var cancel, reopen, suggest []int64
	if id, ok := parseID(r.URL.Query().Get("from")); ok {
		p, _, err := change.Get(ctx, s.st.DB(), ss.person(s.admins), id)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return "", 0, err
		}
		if err == nil && p.GoalID == g.ID && p.Kind == store.ProposalGoalReplan {
			var req change.Request
			if err := json.Unmarshal(p.Params, &req); err != nil {
				return "", 0, err
			}
			if req.Replan != nil {
				rv.Objective, rv.Reason, rv.From = req.Replan.Objective, req.Reason, p.ID
				cancel, reopen = req.Replan.Cancel, req.Replan.Reopen
			}
			for _, e := range p.Effects {
				if e.Code == "replan_suggest_cancel" || e.Code == "replan_suggest_reopen" {
					if n, err := strconv.ParseInt(e.Args["id"], 10, 64); err == nil {
						suggest = append(suggest, n)
					}
				}
			}
		}
	}
	todos, err := store.ListGoalTodos(ctx, s.st.DB(), g.ID, replanTodos)
	if err != nil {
		return "", 0, err
	}
	for _, t := range todos {
		c := todoChoice{Todo: t, Suggested: slices.Contains(suggest, t.ID)}
		if t.Status == store.TodoOpen || t.Status == store.TodoBlocked {
			c.Checked = c.Suggested || slices.Contains(cancel, t.ID)
			rv.Open = append(rv.Open, c)
		} else {
			c.Checked = c.Suggested || slices.Contains(reopen, t.ID)
			rv.Closed = append(rv.Closed, c)
		}
	}
	v.Replan = rv
	return "replan", http.StatusOK, nil
}

// replaced cancels the preview a new replan preview replaces (the form's "replaces"), so one
// replan waits for confirmation, not one per attempt. Only a ready replan of the same goal
// is cancelled; failing to cancel it leaves it to expire, which is logged.
func (s *Server) replaced(ctx context.Context, r *http.Request, ss *session, goalID string, fresh int64) {
	id, ok := parseID(r.PostFormValue("replaces"))
	if !ok || id == fresh || r.PostFormValue("kind") != store.ProposalGoalReplan {
		return
	}
	p, _, err := change.Get(ctx, s.st.DB(), ss.person(s.admins), id)
	if err != nil || p.GoalID != goalID || p.Kind != store.ProposalGoalReplan || p.State != store.ProposalReady {
		return
	}
	m := ss.meta(r)
	if m.IdempotencyKey != "" {
		m.IdempotencyKey += "-replaced"
	}
	if _, err := s.opts.Changes.Cancel(ctx, ss.person(s.admins), m, p.ID); err != nil {
		s.log.WarnContext(ctx, "cancel the replan preview a new one replaces", "proposal_id", p.ID, "err", err)
	}
}
