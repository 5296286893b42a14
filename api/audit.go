package api

import (
	"context"
	"net/http"
	"time"

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
	q := r.URL.Query()
	p := store.ListAuditParams{GoalID: goal, Limit: int(limit), AfterID: after,
		Actor: q.Get("actor"), Action: q.Get("action"), Outcome: q.Get("outcome")}
	for name, dst := range map[string]*time.Time{"since": &p.Since, "until": &p.Until} {
		if v := q.Get(name); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return 0, nil, badRequest(name, "%q is not an RFC 3339 time such as 2026-01-02T15:04:05Z", clipHeader(v))
			}
			*dst = t
		}
	}
	as, err := s.st.ListAudit(ctx, p)
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

// Diagnostics is the answer of GET /v1/diagnostics (admin): what `loopx doctor` reports
// from inside the server.
type Diagnostics struct {
	// UnreadableSecrets are stored runner secrets this server's key cannot open.
	UnreadableSecrets []store.UnreadableSecret `json:"unreadable_secrets"`
	// SecretKeyID names the key this server seals with (an id, never the key).
	SecretKeyID string `json:"secret_key_id"`
	// TransactionPooling: the database is reached through a pooler in transaction mode.
	TransactionPooling bool `json:"transaction_pooling"`
}

func (s *Server) diagnostics(ctx context.Context, r *request) (int, any, error) {
	if err := s.requireAdmin(r, "read diagnostics"); err != nil {
		return 0, nil, err
	}
	bad, err := s.st.ListUnreadableSecrets(ctx)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, Diagnostics{UnreadableSecrets: nonNil(bad), SecretKeyID: s.st.SecretKeyID(),
		TransactionPooling: s.st.TransactionPooling()}, nil
}
