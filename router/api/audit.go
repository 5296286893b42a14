package api

import (
	"context"
	"net/http"

	"loopx/store"
)

func (s *Server) listAudit(ctx context.Context, r *request) (int, any, error) {
	if err := s.requireAdmin(r, "read audit"); err != nil {
		return 0, nil, err
	}
	goal := r.URL.Query().Get("goal_id")
	if goal != "" && !store.ValidID(goal) {
		return 0, nil, badRequest("goal_id", "%q is not a valid id", goal)
	}
	limit, err := queryInt(r, "limit")
	if err != nil {
		return 0, nil, err
	}
	after, err := queryInt(r, "after_id")
	if err != nil {
		return 0, nil, err
	}
	as, err := s.st.ListAudit(ctx, store.ListAuditParams{GoalID: goal, Limit: int(limit), AfterID: after})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, map[string]any{"audit": nonNil(as)}, nil
}

// Whoami is the answer of GET /v1/whoami: what the token authenticates as.
type Whoami struct {
	Admin   bool   `json:"admin"`
	GoalID  string `json:"goal_id,omitempty"`
	AgentID string `json:"agent_id,omitempty"`
}

func (s *Server) whoami(_ context.Context, r *request) (int, any, error) {
	return http.StatusOK, Whoami{Admin: r.who.admin, GoalID: r.who.goalID, AgentID: r.who.agentID}, nil
}
