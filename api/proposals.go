package api

import (
	"context"
	"errors"
	"net/http"

	"loopx/change"
	"loopx/store"
)

// ProposalBody is the body of POST /v1/goals/{goal}/proposals: the change to preview.
type ProposalBody struct {
	Kind    string             `json:"kind"`
	AgentID string             `json:"agent_id,omitempty"`
	Goal    change.GoalChange  `json:"goal"`
	Agent   change.AgentChange `json:"agent"`
	// Reason says why (goal.done, goal.reopen, goal.replan); Replan is a replan's objective
	// and the todos it cancels and reopens.
	Reason string               `json:"reason,omitempty"`
	Replan *change.ReplanChange `json:"replan,omitempty"`
}

// ProposalAnswer is a proposal with its effects worded in the goal's language.
type ProposalAnswer struct {
	store.Proposal
	EffectsText []string `json:"effects_text"`
}

// ResultAnswer is the answer to confirm and cancel: the proposal in its new state, the goal
// after an applied change, and the fresh proposal that replaces a stale one.
type ResultAnswer struct {
	Proposal ProposalAnswer `json:"proposal"`
	Goal     *store.Goal    `json:"goal,omitempty"`
	// Defaults are the machine defaults after an applied change of them.
	Defaults  *store.MachineDefaults `json:"defaults,omitempty"`
	Fresh     *ProposalAnswer        `json:"fresh,omitempty"`
	Unchanged bool                   `json:"unchanged,omitempty"`
}

// admin is the admin token as a person on the role rule.
var adminPerson = store.Person{Admin: true}

func (s *Server) answer(ctx context.Context, p store.Proposal) (ProposalAnswer, error) {
	lang := s.lang
	if p.GoalID != "" { // a change of the machine defaults belongs to no goal
		g, err := store.GetGoal(ctx, s.st.DB(), p.GoalID)
		if err != nil {
			return ProposalAnswer{}, err
		}
		lang = g.Lang
	}
	words, err := change.Words(s.tpl, lang, p.Effects)
	if err != nil {
		return ProposalAnswer{}, err
	}
	p.State = p.StateAt(s.now())
	return ProposalAnswer{Proposal: p, EffectsText: nonNil(words)}, nil
}

func (s *Server) createProposal(ctx context.Context, r *request) (int, any, error) {
	if err := s.requireAdmin(r, "propose a change"); err != nil {
		return 0, nil, err
	}
	var b ProposalBody
	if err := decode(r, &b); err != nil {
		return 0, nil, err
	}
	p, err := s.changes.Propose(ctx, adminPerson, r.meta(), change.Request{
		GoalID: r.PathValue("goal"), Kind: b.Kind, AgentID: b.AgentID, Goal: b.Goal, Agent: b.Agent,
		Reason: b.Reason, Replan: b.Replan,
	})
	if err != nil {
		return 0, nil, err
	}
	a, err := s.answer(ctx, p)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, a, nil
}

func (s *Server) listProposals(ctx context.Context, r *request) (int, any, error) {
	state := r.URL.Query().Get("state")
	ps, err := store.ListProposals(ctx, s.st.DB(), r.PathValue("goal"), state, 50)
	if err != nil {
		return 0, nil, err
	}
	out := []ProposalAnswer{}
	for _, p := range ps {
		a, err := s.answer(ctx, p)
		if err != nil {
			return 0, nil, err
		}
		out = append(out, a)
	}
	return http.StatusOK, map[string]any{"proposals": out}, nil
}

// proposalOf reads the proposal in the path and checks it belongs to the goal in the path.
func (s *Server) proposalOf(ctx context.Context, r *request) (store.Proposal, error) {
	id, err := pathInt(r, "proposal", "proposal_id")
	if err != nil {
		return store.Proposal{}, err
	}
	p, err := store.GetProposal(ctx, s.st.DB(), id)
	if err == nil && !r.who.admin && p.GoalID != r.who.goalID {
		err = store.Errorf(store.ErrNotFound, "proposal_id", "no proposal p%d", id)
	}
	if err == nil && r.PathValue("goal") != "" && p.GoalID != r.PathValue("goal") {
		err = store.Errorf(store.ErrNotFound, "proposal_id", "no proposal p%d on goal %q", id, r.PathValue("goal"))
	}
	return p, err
}

func (s *Server) showProposal(ctx context.Context, r *request) (int, any, error) {
	p, err := s.proposalOf(ctx, r)
	if err != nil {
		return 0, nil, err
	}
	a, err := s.answer(ctx, p)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, a, nil
}

func (s *Server) confirmProposal(ctx context.Context, r *request) (int, any, error) {
	return s.settleProposal(ctx, r, "confirm a change", s.changes.Confirm)
}

func (s *Server) cancelProposal(ctx context.Context, r *request) (int, any, error) {
	return s.settleProposal(ctx, r, "cancel a change", s.changes.Cancel)
}

func (s *Server) settleProposal(ctx context.Context, r *request, action string,
	op func(context.Context, store.Person, store.Meta, int64) (change.Result, error)) (int, any, error) {
	if err := s.requireAdmin(r, action); err != nil {
		return 0, nil, err
	}
	var b struct{}
	if err := decode(r, &b); err != nil {
		return 0, nil, err
	}
	p, err := s.proposalOf(ctx, r)
	if err != nil {
		return 0, nil, err
	}
	res, err := op(ctx, adminPerson, r.meta(), p.ID)
	if err != nil {
		return 0, nil, err
	}
	out, err := s.resultAnswer(ctx, res)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, out, nil
}

func (s *Server) resultAnswer(ctx context.Context, res change.Result) (ResultAnswer, error) {
	pa, err := s.answer(ctx, res.Proposal)
	if err != nil {
		return ResultAnswer{}, err
	}
	out := ResultAnswer{Proposal: pa, Goal: res.Goal, Defaults: res.Defaults, Unchanged: res.Unchanged}
	if res.Fresh != nil {
		fa, err := s.answer(ctx, *res.Fresh)
		if err != nil {
			return ResultAnswer{}, err
		}
		out.Fresh = &fa
	}
	return out, nil
}

// applyDirect applies a change at once for the admin token, through the change kernel, so a
// script's change leaves the same proposal record, diff and receipt as a confirmed one. A
// change that changes nothing answers the goal as it is.
func (s *Server) applyDirect(ctx context.Context, r *request, req change.Request) (int, any, error) {
	res, err := s.changes.Apply(ctx, adminPerson, r.meta(), req)
	var se *store.Error
	if errors.As(err, &se) && errors.Is(err, store.ErrInvalid) && (se.Field == "goal" || se.Field == "status") {
		g, gerr := s.st.GetGoal(ctx, req.GoalID)
		if gerr != nil {
			return 0, nil, gerr
		}
		return http.StatusOK, g, nil
	}
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, res.Goal, nil
}
