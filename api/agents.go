package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

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
	// Settings that cannot work are a malformed request: refused before anything is stored.
	runner := b.Runner
	if runner == "" {
		runner = store.RunnerPoll
	}
	if err := store.CheckRunnerSettings(runner, b.RunnerConfig); err != nil {
		return 0, nil, asBadRequest(err)
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

// listAgents lists a goal's agents. Runner secrets are never shown, only that they are set
// and when they changed; an agent token sees its own settings and only the names, runners
// and modes of its peers.
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
	if !r.who.admin {
		for i := range as {
			if as[i].ID != r.who.agentID {
				as[i].RunnerConfig, as[i].Secrets = nil, nil
			}
		}
	}
	return http.StatusOK, map[string]any{"agents": nonNil(as)}, nil
}

// AgentUpdateBody is the body of PATCH /v1/goals/{goal}/agents/{agent}. RunnerConfig, when
// given, replaces the settings; secrets in it are set, secrets left out are kept unless named
// in UnsetSecrets.
type AgentUpdateBody struct {
	RunnerConfig json.RawMessage `json:"runner_config,omitempty"`
	UnsetSecrets []string        `json:"unset_secrets,omitempty"`
	WorkMode     *string         `json:"work_mode,omitempty"`
}

func (s *Server) updateAgent(ctx context.Context, r *request) (int, any, error) {
	if err := s.requireAdmin(r, "update agent"); err != nil {
		return 0, nil, err
	}
	var b AgentUpdateBody
	if err := decode(r, &b); err != nil {
		return 0, nil, err
	}
	a, err := s.st.UpdateAgent(ctx, store.UpdateAgentParams{
		GoalID: r.PathValue("goal"), AgentID: r.PathValue("agent"), RunnerConfig: b.RunnerConfig,
		UnsetSecrets: b.UnsetSecrets, WorkMode: b.WorkMode, Meta: r.meta(),
	})
	if err != nil {
		var se *store.Error
		if errors.As(err, &se) && errors.Is(err, store.ErrInvalid) && strings.HasPrefix(se.Field, "runner_config") {
			return 0, nil, asBadRequest(err)
		}
		return 0, nil, err
	}
	return http.StatusOK, a, nil
}

// asBadRequest answers a store validation error as a malformed request (400), keeping its
// field and message.
func asBadRequest(err error) error {
	var se *store.Error
	if errors.As(err, &se) {
		return badRequest(se.Field, "%s", se.Msg)
	}
	return err
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
