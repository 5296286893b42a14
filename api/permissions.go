package api

import (
	"context"
	"net/http"
	"strconv"

	"loopx/store"
)

// PermissionBody is the body of POST /v1/goals/{goal}/permissions: a host's permission
// prompt, asked of the goal's owners (`loopx hook permission` sends it).
type PermissionBody struct {
	AgentID string `json:"agent_id,omitempty"`
	store.PermissionRequest
}

// PolicyBody is the body of PUT /v1/goals/{goal}/permission-policy; absent members keep
// their value.
type PolicyBody struct {
	// TimeoutSeconds is the goal's own limit; "default" (or null) follows the machine default.
	TimeoutSeconds *Setting  `json:"timeout_seconds,omitempty"`
	AllowTools     *[]string `json:"allow_tools,omitempty"`
	DenyTools      *[]string `json:"deny_tools,omitempty"`
}

func (s *Server) askPermission(ctx context.Context, r *request) (int, any, error) {
	var b PermissionBody
	if err := decode(r, &b); err != nil {
		return 0, nil, err
	}
	agent, err := s.actingAgent(r, "ask permission", b.AgentID, true)
	if err != nil {
		return 0, nil, err
	}
	a, err := s.st.AskPermission(ctx, store.AskPermissionParams{GoalID: r.PathValue("goal"), AgentID: agent,
		Request: b.PermissionRequest, Notice: s.cards.Ask, Meta: r.meta()})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, a, nil
}

func (s *Server) showGate(ctx context.Context, r *request) (int, any, error) {
	id, err := pathInt(r, "gate", "gate_id")
	if err != nil {
		return 0, nil, err
	}
	g, err := s.st.GetGate(ctx, r.PathValue("goal"), id)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, g, nil
}

// expirePermission closes a permission gate whose time is up, as denied (the hook calls it
// at its limit; a late owner's click is refused).
func (s *Server) expirePermission(ctx context.Context, r *request) (int, any, error) {
	id, err := pathInt(r, "gate", "gate_id")
	if err != nil {
		return 0, nil, err
	}
	if _, err := s.actingAgent(r, "expire permission", "", false); err != nil {
		return 0, nil, err
	}
	g, err := s.st.ExpirePermission(ctx, r.PathValue("goal"), id, s.cards.Update, r.meta())
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, g, nil
}

func (s *Server) showPolicy(ctx context.Context, r *request) (int, any, error) {
	p, err := s.st.GetPermissionPolicy(ctx, r.PathValue("goal"))
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, p, nil
}

func (s *Server) setPolicy(ctx context.Context, r *request) (int, any, error) {
	if err := s.requireAdmin(r, "set the permission policy"); err != nil {
		return 0, nil, err
	}
	var b PolicyBody
	if err := decode(r, &b); err != nil {
		return 0, nil, err
	}
	params := store.SetPermissionPolicyParams{GoalID: r.PathValue("goal"), AllowTools: b.AllowTools, DenyTools: b.DenyTools, Meta: r.meta()}
	if b.TimeoutSeconds != nil {
		if *b.TimeoutSeconds == "default" {
			params.TimeoutDefault = true
		} else {
			n, err := strconv.Atoi(string(*b.TimeoutSeconds))
			if err != nil {
				return 0, nil, invalid("timeout_seconds", "%q is not a number of seconds (10 to 86400) or default", string(*b.TimeoutSeconds))
			}
			params.TimeoutSeconds = &n
		}
	}
	p, err := s.st.SetPermissionPolicy(ctx, params)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, p, nil
}
