package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"loopx/quota"
	"loopx/store"
)

// ShouldRunBody is the body of POST /v1/goals/{goal}/should-run.
type ShouldRunBody struct {
	AgentID        string `json:"agent_id,omitempty"`
	TurnInstanceID string `json:"turn_instance_id,omitempty"`
	BeginTurn      bool   `json:"begin_turn,omitempty"`
	LeaseSeconds   int    `json:"lease_seconds,omitempty"`
	// Via says how the host runs the turn (mcp, cli): an MCP turn gets a live progress card by
	// default.
	Via string `json:"via,omitempty"`
	// TodoID selects the todo the turn is for (claimed when the turn opens); 0 = the
	// highest-priority runnable one.
	TodoID int64 `json:"todo_id,omitempty"`
}

// BindTurnBody is the body of POST /v1/goals/{goal}/turns/bind: move the agent's live turn,
// which has recorded nothing yet, to another todo.
type BindTurnBody struct {
	AgentID        string `json:"agent_id,omitempty"`
	TurnInstanceID string `json:"turn_instance_id"`
	TodoID         int64  `json:"todo_id"`
}

// SpendBody is the body of POST /v1/goals/{goal}/spend-slot.
type SpendBody struct {
	AgentID        string `json:"agent_id,omitempty"`
	TurnInstanceID string `json:"turn_instance_id"`
	TodoID         int64  `json:"todo_id,omitempty"`
}

// RefreshBody is the body of POST /v1/goals/{goal}/refresh-state.
type RefreshBody struct {
	AgentID        string `json:"agent_id,omitempty"`
	TurnInstanceID string `json:"turn_instance_id,omitempty"`
	NextAction     string `json:"next_action,omitempty"`
	// Handoff ends the turn with a handoff record: what was done, what is next, for whom.
	Handoff *store.TurnHandoff `json:"handoff,omitempty"`
}

func (s *Server) shouldRun(ctx context.Context, r *request) (int, any, error) {
	var b ShouldRunBody
	if err := decode(r, &b); err != nil {
		return 0, nil, err
	}
	agent, err := s.actingAgent(r, "should-run", b.AgentID, true)
	if err != nil {
		return 0, nil, err
	}
	if b.LeaseSeconds < 0 {
		return 0, nil, invalid("lease_seconds", "must be 0 (the default lease) or more")
	}
	p := quota.ShouldRunParams{
		GoalID: r.PathValue("goal"), AgentID: agent, TurnInstanceID: b.TurnInstanceID,
		BeginTurn: b.BeginTurn, LeaseDuration: time.Duration(b.LeaseSeconds) * time.Second,
		Via: b.Via, TodoID: b.TodoID, Meta: r.meta(),
	}
	// The turn instance id, else the Idempotency-Key, is the replay key: the quota service
	// stores the receipt with the decision, in its transaction.
	d, err := s.quota.ShouldRun(ctx, p)
	if err != nil {
		if errors.Is(err, store.ErrConflict) {
			// should-run keeps its own receipt path; its refusals are audited like the others'.
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if aerr := s.st.AuditFailure(actx, r.meta(), "quota.should_run", p.GoalID, store.AgentTarget(p.GoalID, agent), err); aerr != nil {
				s.logger.ErrorContext(ctx, "audit refusal", "err", aerr)
			}
		}
		return 0, nil, err
	}
	return http.StatusOK, d, nil
}

func (s *Server) bindTurn(ctx context.Context, r *request) (int, any, error) {
	var b BindTurnBody
	if err := decode(r, &b); err != nil {
		return 0, nil, err
	}
	agent, err := s.actingAgent(r, "bind turn", b.AgentID, true)
	if err != nil {
		return 0, nil, err
	}
	if b.TodoID <= 0 {
		return 0, nil, invalid("todo_id", "is required: the todo the live turn is for")
	}
	t, err := s.st.BindTurnTodo(ctx, store.BindTurnParams{GoalID: r.PathValue("goal"), AgentID: agent,
		InstanceID: b.TurnInstanceID, TodoID: b.TodoID, Meta: r.meta()})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, t, nil
}

func (s *Server) spendSlot(ctx context.Context, r *request) (int, any, error) {
	var b SpendBody
	if err := decode(r, &b); err != nil {
		return 0, nil, err
	}
	agent, err := s.actingAgent(r, "spend slot", b.AgentID, true)
	if err != nil {
		return 0, nil, err
	}
	if b.TurnInstanceID == "" {
		return 0, nil, invalid("turn_instance_id", "is required: the turn that ran (from should-run --begin-turn)")
	}
	rc, err := s.st.SpendSlot(ctx, store.SpendSlotParams{
		GoalID: r.PathValue("goal"), AgentID: agent, TurnInstanceID: b.TurnInstanceID,
		TodoID: b.TodoID, Meta: r.meta(),
	})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, rc, nil
}

// quotaStatus answers the should-run decision without recording anything.
func (s *Server) quotaStatus(ctx context.Context, r *request) (int, any, error) {
	agent, err := s.actingAgent(r, "quota status", r.URL.Query().Get("agent_id"), true)
	if err != nil {
		return 0, nil, err
	}
	now := s.now()
	d, snap, err := quota.Peek(ctx, s.st, r.PathValue("goal"), agent, now)
	if err != nil {
		return 0, nil, err
	}
	if !snap.GoalFound {
		return 0, nil, notFound("goal_id", "no goal %s", r.PathValue("goal"))
	}
	return http.StatusOK, d, nil
}

func (s *Server) refreshState(ctx context.Context, r *request) (int, any, error) {
	var b RefreshBody
	if err := decode(r, &b); err != nil {
		return 0, nil, err
	}
	agent, err := s.actingAgent(r, "refresh state", b.AgentID, true)
	if err != nil {
		return 0, nil, err
	}
	e, err := s.st.RefreshState(ctx, store.RefreshStateParams{
		GoalID: r.PathValue("goal"), AgentID: agent, TurnInstanceID: b.TurnInstanceID,
		NextAction: b.NextAction, Handoff: b.Handoff, Meta: r.meta(),
	})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, e, nil
}
