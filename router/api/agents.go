package api

import (
	"context"
	"encoding/json"
	"net/http"

	"loopx/store"
)

// AgentBody is the body of POST /v1/goals/{goal}/agents.
type AgentBody struct {
	AgentID      string          `json:"agent_id"`
	Runner       string          `json:"runner,omitempty"`
	RunnerConfig json.RawMessage `json:"runner_config,omitempty"`
	WorkMode     string          `json:"work_mode,omitempty"`
	IsDefault    bool            `json:"is_default,omitempty"`
}

func (s *Server) registerAgent(ctx context.Context, r *request) (int, any, error) {
	if err := s.requireAdmin(r, "register agent"); err != nil {
		return 0, nil, err
	}
	var b AgentBody
	if err := decode(r, &b); err != nil {
		return 0, nil, err
	}
	if !store.ValidID(b.AgentID) {
		return 0, nil, invalid("agent_id", "%q is not a valid id: use 1-63 characters a-z 0-9 . _ -, starting with a letter or digit", b.AgentID)
	}
	a, err := s.st.RegisterAgent(ctx, store.RegisterAgentParams{
		GoalID: r.PathValue("goal"), AgentID: b.AgentID, Runner: b.Runner,
		RunnerConfig: b.RunnerConfig, WorkMode: b.WorkMode, IsDefault: b.IsDefault, Meta: r.meta(),
	})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, a, nil
}

func (s *Server) listAgents(ctx context.Context, r *request) (int, any, error) {
	as, err := s.st.ListAgents(ctx, r.PathValue("goal"))
	if err != nil {
		return 0, nil, err
	}
	if len(as) == 0 {
		if err := s.goalExists(ctx, r); err != nil {
			return 0, nil, err
		}
	}
	return http.StatusOK, map[string]any{"agents": nonNil(as)}, nil
}

func (s *Server) rotateToken(ctx context.Context, r *request) (int, any, error) {
	if err := s.requireAdmin(r, "rotate agent token"); err != nil {
		return 0, nil, err
	}
	var b struct{}
	if err := decode(r, &b); err != nil {
		return 0, nil, err
	}
	a, err := s.st.RotateAgentToken(ctx, store.AgentRef{
		GoalID: r.PathValue("goal"), AgentID: r.PathValue("agent"), Meta: r.meta(),
	})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, a, nil
}
