package change

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"loopx/store"
)

// ReplanChange is a replan: the new objective and the todos it cancels or reopens (the
// preview suggests which; the person chooses).
type ReplanChange struct {
	Objective string  `json:"objective"`
	Cancel    []int64 `json:"cancel_todos,omitempty"`
	Reopen    []int64 `json:"reopen_todos,omitempty"`
}

// contractEffects words what a change of the contract does: the scope, capabilities granted
// or withdrawn (with the agents that lose them), criteria added or removed.
func contractEffects(ctx context.Context, db store.DB, before, after store.Goal) ([]store.Effect, error) {
	var fx []store.Effect
	if !slices.Equal(before.ScopeEditable, after.ScopeEditable) || !slices.Equal(before.ScopeProtected, after.ScopeProtected) ||
		before.ScopeNotes != after.ScopeNotes {
		fx = append(fx, store.Effect{Code: "scope", Args: map[string]string{
			"editable": strings.Join(after.ScopeEditable, ", "), "protected": strings.Join(after.ScopeProtected, ", "),
			"notes": clipStr(after.ScopeNotes)}})
	}
	if added := store.Missing(after.Capabilities, before.Capabilities); len(added) > 0 {
		fx = append(fx, store.Effect{Code: "capabilities_added", Args: map[string]string{"names": strings.Join(added, ", ")}})
	}
	if removed := store.Missing(before.Capabilities, after.Capabilities); len(removed) > 0 {
		fx = append(fx, store.Effect{Code: "capabilities_removed", Args: map[string]string{"names": strings.Join(removed, ", ")}})
		agents, err := store.ListAgents(ctx, db, before.ID)
		if err != nil {
			return nil, err
		}
		for _, a := range agents {
			if lose := store.Missing(a.Capabilities, after.Capabilities); len(lose) > 0 {
				fx = append(fx, store.Effect{Code: "capabilities_revoked", Args: map[string]string{"agent": a.ID, "names": strings.Join(lose, ", ")}})
			}
		}
	}
	ids := func(cs []store.Criterion) []string { return store.CriterionIDs(cs) }
	if added := store.Missing(ids(after.Criteria), ids(before.Criteria)); len(added) > 0 {
		fx = append(fx, store.Effect{Code: "criteria_added", Args: map[string]string{"ids": strings.Join(added, ", ")}})
	}
	if removed := store.Missing(ids(before.Criteria), ids(after.Criteria)); len(removed) > 0 {
		fx = append(fx, store.Effect{Code: "criteria_removed", Args: map[string]string{"ids": strings.Join(removed, ", ")}})
	}
	return fx, nil
}

// computeDone previews finishing goal g: what is unmet and still open, and what finishing
// does (heartbeats and reports stop, open gates are cancelled, live turns finish).
func computeDone(ctx context.Context, db store.DB, g store.Goal, req Request, now time.Time) (computed, error) {
	if g.Status == store.GoalDone {
		return computed{}, &store.Error{Kind: store.ErrInvalid, Field: "status", Reason: store.ReasonGoalDone,
			Msg: fmt.Sprintf("goal %s is already done", g.ID)}
	}
	f, err := store.ReadCompletion(ctx, db, g, now)
	if err != nil {
		return computed{}, err
	}
	out := computed{
		req:  Request{GoalID: g.ID, Kind: req.Kind, Reason: strings.TrimSpace(req.Reason)},
		diff: []store.FieldChange{{Field: "status", Before: g.Status, After: store.GoalDone}},
	}
	unmet := store.Unmet(f.Criteria)
	for _, c := range unmet {
		out.effects = append(out.effects, store.Effect{Code: "done_unmet", Args: map[string]string{"id": c.ID, "text": clipStr(c.Text)}})
	}
	if len(g.Criteria) > 0 && len(unmet) == 0 {
		out.effects = append(out.effects, store.Effect{Code: "done_all_met", Args: map[string]string{"n": itoa(len(g.Criteria))}})
	}
	if n := len(f.OpenTodos); n > 0 {
		first := make([]string, 0, 3)
		for _, t := range f.OpenTodos[:min(n, 3)] {
			first = append(first, "#"+strconv.FormatInt(t.ID, 10)+" "+clipStr(t.Text))
		}
		out.effects = append(out.effects, store.Effect{Code: "done_open_todos", Args: map[string]string{"n": itoa(n), "first": strings.Join(first, "; ")}})
	}
	if n := len(f.OpenGates); n > 0 {
		gates := make([]string, len(f.OpenGates))
		for i, gt := range f.OpenGates {
			gates[i] = "g" + strconv.FormatInt(gt.ID, 10)
		}
		out.effects = append(out.effects, store.Effect{Code: "done_gates", Args: map[string]string{"n": itoa(n), "gates": strings.Join(gates, ", ")}})
	}
	if f.LiveTurns > 0 {
		out.effects = append(out.effects, store.Effect{Code: "done_live", Args: map[string]string{"n": itoa(f.LiveTurns)}})
	}
	out.effects = append(out.effects, store.Effect{Code: "done_stops"})
	return out, nil
}

// applyDone finishes the goal and records the decision, with what was unmet when it was
// confirmed.
func (k *Kernel) applyDone(ctx context.Context, tx *store.Tx, g store.Goal, req Request, p store.Proposal, m store.Meta, now time.Time) (store.Goal, error) {
	f, err := store.ReadCompletion(ctx, tx, g, now)
	if err != nil {
		return store.Goal{}, err
	}
	out, cancelled, err := store.FinishGoal(ctx, tx, g, k.opts.GateNotice, now)
	if err != nil {
		return store.Goal{}, err
	}
	gates := make([]int64, len(cancelled))
	for i, gt := range cancelled {
		gates[i] = gt.ID
	}
	todos := make([]int64, len(f.OpenTodos))
	for i, t := range f.OpenTodos {
		todos[i] = t.ID
	}
	_, err = store.InsertDecision(ctx, tx, store.GoalDecision{GoalID: g.ID, Kind: store.DecisionDone, ProposalID: p.ID,
		GoalVersion: out.Version, Before: g.Status, After: out.Status, Reason: req.Reason,
		Detail: detail(map[string]any{"unmet_criteria": store.CriterionIDs(store.Unmet(f.Criteria)),
			"open_todos": todos, "cancelled_gates": gates}),
		ProposedBy: p.ProposedBy, DecidedBy: m.Actor}, now)
	return out, err
}

func computeReopen(g store.Goal, req Request, now time.Time) (computed, error) {
	if g.Status != store.GoalDone {
		return computed{}, store.Errorf(store.ErrInvalid, "status", "goal %s is not done; there is nothing to reopen", g.ID)
	}
	return computed{
		req:  Request{GoalID: g.ID, Kind: req.Kind, Reason: strings.TrimSpace(req.Reason)},
		diff: []store.FieldChange{{Field: "status", Before: store.GoalDone, After: store.GoalActive}},
		effects: []store.Effect{{Code: "reopen", Args: map[string]string{
			"next": fireAt(g.HeartbeatSpec, g.HeartbeatTZ, now), "tz": g.HeartbeatTZ}}},
	}, nil
}

func applyReopen(ctx context.Context, tx *store.Tx, g store.Goal, req Request, p store.Proposal, m store.Meta, now time.Time) (store.Goal, error) {
	out, err := store.ReopenGoal(ctx, tx, g, now)
	if err != nil {
		return store.Goal{}, err
	}
	_, err = store.InsertDecision(ctx, tx, store.GoalDecision{GoalID: g.ID, Kind: store.DecisionReopen, ProposalID: p.ID,
		GoalVersion: out.Version, Before: g.Status, After: out.Status, Reason: req.Reason,
		ProposedBy: p.ProposedBy, DecidedBy: m.Actor}, now)
	return out, err
}

// computeReplan previews a new objective: the diff, the todos it cancels and reopens as
// asked, and suggestions for the others (open todos that share no word with the new
// objective but did with the old one; finished ones that now match it).
func computeReplan(ctx context.Context, db store.DB, g store.Goal, req Request) (computed, error) {
	if g.Status == store.GoalDone {
		return computed{}, doneRefusal(g)
	}
	objective := strings.TrimSpace(req.Replan.Objective)
	if err := store.CheckGoal(store.Goal{ID: g.ID, Objective: objective, WindowHours: 1, HeartbeatTZ: "UTC", ReportTZ: "UTC", Lang: "en"}); err != nil {
		return computed{}, err
	}
	if objective == g.Objective {
		return computed{}, store.Errorf(store.ErrInvalid, "objective", "goal %s already has this objective", g.ID)
	}
	todos, err := store.ListGoalTodos(ctx, db, g.ID, 200)
	if err != nil {
		return computed{}, err
	}
	byID := map[int64]store.Todo{}
	for _, t := range todos {
		byID[t.ID] = t
	}
	pick := func(field string, ids []int64, ok func(store.Todo) bool, want string) ([]int64, error) {
		var out []int64
		for _, id := range ids {
			t, found := byID[id]
			if !found {
				return nil, store.Errorf(store.ErrNotFound, field, "goal %s has no todo %d", g.ID, id)
			}
			if !ok(t) {
				return nil, store.Errorf(store.ErrInvalid, field, "todo %d is %s; only %s todos can be listed here", id, t.Status, want)
			}
			if !slices.Contains(out, id) {
				out = append(out, id)
			}
		}
		return out, nil
	}
	open := func(t store.Todo) bool { return t.Status == store.TodoOpen || t.Status == store.TodoBlocked }
	closed := func(t store.Todo) bool { return t.Status == store.TodoDone || t.Status == store.TodoCancelled }
	cancel, err := pick("cancel_todos", req.Replan.Cancel, open, "open or blocked")
	if err != nil {
		return computed{}, err
	}
	reopen, err := pick("reopen_todos", req.Replan.Reopen, closed, "done or cancelled")
	if err != nil {
		return computed{}, err
	}
	out := computed{
		req: Request{GoalID: g.ID, Kind: req.Kind, Reason: strings.TrimSpace(req.Reason),
			Replan: &ReplanChange{Objective: objective, Cancel: cancel, Reopen: reopen}},
		diff: []store.FieldChange{{Field: "objective", Before: g.Objective, After: objective}},
	}
	say := func(code string, t store.Todo) {
		out.effects = append(out.effects, store.Effect{Code: code, Args: map[string]string{"id": strconv.FormatInt(t.ID, 10), "text": clipStr(t.Text)}})
	}
	oldWords, newWords := words(g.Objective), words(objective)
	kept := 0
	for _, t := range todos {
		switch {
		case slices.Contains(cancel, t.ID):
			say("replan_cancel", t)
		case slices.Contains(reopen, t.ID):
			say("replan_reopen", t)
		case open(t):
			tw := words(t.Text)
			if !overlaps(tw, newWords) && overlaps(tw, oldWords) {
				say("replan_suggest_cancel", t)
			} else {
				kept++
			}
		case closed(t):
			tw := words(t.Text)
			if overlaps(tw, newWords) && !overlaps(tw, oldWords) {
				say("replan_suggest_reopen", t)
			}
		}
	}
	if kept > 0 {
		out.effects = append(out.effects, store.Effect{Code: "replan_keep", Args: map[string]string{"n": itoa(kept)}})
	}
	out.effects = append(out.effects, store.Effect{Code: "replan_told"})
	return out, nil
}

// applyReplan writes the new objective, cancels and reopens the todos the replan names, and
// records the decision every agent's should-run announces until it acknowledges it.
func applyReplan(ctx context.Context, tx *store.Tx, g store.Goal, req Request, p store.Proposal, m store.Meta, now time.Time) (store.Goal, error) {
	rp := req.Replan
	after := g
	after.Objective = rp.Objective
	out, err := store.WriteGoal(ctx, tx, after, now)
	if err != nil {
		return store.Goal{}, err
	}
	if err := store.SetTodoStatuses(ctx, tx, g.ID, rp.Cancel, store.TodoCancelled, now); err != nil {
		return store.Goal{}, err
	}
	if err := store.SetTodoStatuses(ctx, tx, g.ID, rp.Reopen, store.TodoOpen, now); err != nil {
		return store.Goal{}, err
	}
	_, err = store.InsertDecision(ctx, tx, store.GoalDecision{GoalID: g.ID, Kind: store.DecisionReplan, ProposalID: p.ID,
		GoalVersion: out.Version, Before: g.Objective, After: out.Objective, Reason: req.Reason,
		Detail:     detail(map[string]any{"cancelled_todos": orNoIDs(rp.Cancel), "reopened_todos": orNoIDs(rp.Reopen)}),
		ProposedBy: p.ProposedBy, DecidedBy: m.Actor}, now)
	return out, err
}

func orNoIDs(v []int64) []int64 {
	if v == nil {
		return []int64{}
	}
	return v
}

// words are the significant words of s for the replan's suggestions: lower-case words of
// three letters or more (less a few common ones), and each pair of neighbouring Han
// characters (Chinese has no spaces between words).
func words(s string) map[string]bool {
	out := map[string]bool{}
	stop := map[string]bool{"the": true, "and": true, "for": true, "with": true, "from": true, "into": true, "that": true,
		"this": true, "all": true, "our": true, "new": true, "use": true}
	var word []rune
	var prevHan rune
	flush := func() {
		if w := string(word); len(word) >= 3 && !stop[w] {
			out[w] = true
		}
		word = word[:0]
	}
	for _, r := range strings.ToLower(s) {
		switch {
		case unicode.Is(unicode.Han, r):
			flush()
			if prevHan != 0 {
				out[string([]rune{prevHan, r})] = true
			}
			prevHan = r
			continue
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			word = append(word, r)
		default:
			flush()
		}
		prevHan = 0
	}
	flush()
	return out
}

func overlaps(a, b map[string]bool) bool {
	for w := range a {
		if b[w] {
			return true
		}
	}
	return false
}

// ProposeCompletion makes the proposal to finish goalID when its work looks complete (see
// store.CompletionDue): proposed by LoopX itself, announced to the goal's chats (or its
// owners), for an owner to confirm. It answers whether a proposal was made; at most one
// waits at a time, and after an owner cancels one LoopX asks again only once something
// changed. Safe to call from every replica and every should-run.
func (k *Kernel) ProposeCompletion(ctx context.Context, goalID string) (bool, error) {
	m := store.Meta{Actor: store.ActorSystem, Surface: "system"}
	made, err := store.Do(ctx, k.st, "proposal.complete", m, struct{}{}, func(tx *store.Tx, now time.Time) (bool, store.Audit, error) {
		g, err := store.LockGoal(ctx, tx, goalID)
		if err != nil {
			return false, store.Audit{}, err
		}
		due, err := store.CompletionDue(ctx, tx, g)
		if err != nil || !due {
			return false, store.NoAudit(), err
		}
		c, err := computeDone(ctx, tx, g, Request{GoalID: g.ID, Kind: store.ProposalGoalDone}, now)
		if err != nil {
			return false, store.Audit{}, err
		}
		c.effects = append([]store.Effect{{Code: "done_complete"}}, c.effects...)
		params, err := json.Marshal(c.req)
		if err != nil {
			return false, store.Audit{}, fmt.Errorf("encode proposal parameters: %w", err)
		}
		p, err := store.InsertProposal(ctx, tx, store.ProposalInsert{
			GoalID: g.ID, Kind: store.ProposalGoalDone, Params: params, Diff: c.diff, Effects: c.effects,
			GoalVersion: g.Version, Need: store.RoleOwner, ProposedBy: m.Actor, Surface: m.Surface, Now: now,
		})
		var se *store.Error
		if errors.As(err, &se) && se.Kind == store.ErrConflict {
			return false, store.NoAudit(), nil // another replica (or an owner) proposed it first
		}
		if err != nil {
			return false, store.Audit{}, err
		}
		if k.opts.Announce != nil {
			if err := k.opts.Announce(ctx, tx, p); err != nil {
				return false, store.Audit{}, fmt.Errorf("announce completion: %w", err)
			}
		}
		return true, store.Audit{GoalID: g.ID, Target: target(p.ID), Detail: detail(map[string]any{
			"proposal_id": p.ID, "kind": p.Kind, "diff": p.Diff, "goal_version": p.GoalVersion})}, nil
	})
	if err != nil {
		return false, fmt.Errorf("propose completion of %s: %w", goalID, err)
	}
	return made, nil
}
