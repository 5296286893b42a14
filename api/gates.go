package api

import (
	"context"
	"net/http"

	"loopx/store"
)

// GateBody is the body of POST /v1/goals/{goal}/gates.
type GateBody struct {
	AgentID  string   `json:"agent_id,omitempty"`
	Question string   `json:"question"`
	Options  []string `json:"options,omitempty"`
	TodoID   int64    `json:"todo_id,omitempty"`
}

// AnswerBody is the body of POST .../gates/{gate}/answer. AnsweredBy is the open_id of the
// goal owner on whose behalf the admin answers; the store refuses anyone else.
type AnswerBody struct {
	Answer     string `json:"answer"`
	AnsweredBy string `json:"answered_by"`
	Comment    string `json:"comment,omitempty"`
}

// CancelBody is the body of POST .../gates/{gate}/cancel.
type CancelBody struct {
	AgentID string `json:"agent_id,omitempty"`
}

func (s *Server) askGate(ctx context.Context, r *request) (int, any, error) {
	var b GateBody
	if err := decode(r, &b); err != nil {
		return 0, nil, err
	}
	agent, err := s.actingAgent(r, "ask gate", b.AgentID, true)
	if err != nil {
		return 0, nil, err
	}
	if b.TodoID < 0 {
		return 0, nil, invalid("todo_id", "must be a todo id, or 0 to block the whole goal")
	}
	if err := store.CheckGateOptions(b.Options); err != nil {
		return 0, nil, asBadRequest(err)
	}
	g, err := s.st.AskGate(ctx, store.AskGateParams{
		GoalID: r.PathValue("goal"), AgentID: agent, Question: b.Question, Options: b.Options,
		TodoID: b.TodoID, Notice: s.cards.Ask, Meta: r.meta(),
	})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, g, nil
}

func (s *Server) listGates(ctx context.Context, r *request) (int, any, error) {
	limit, err := queryInt(r, "limit")
	if err != nil {
		return 0, nil, err
	}
	gs, err := s.st.ListGates(ctx, store.ListGatesParams{
		GoalID: r.PathValue("goal"), Status: r.URL.Query().Get("status"), Limit: int(limit),
	})
	if err != nil {
		return 0, nil, err
	}
	if len(gs) == 0 {
		if err := s.goalExists(ctx, r); err != nil {
			return 0, nil, err
		}
	}
	return http.StatusOK, map[string]any{"gates": nonNil(gs)}, nil
}

func (s *Server) answerGate(ctx context.Context, r *request) (int, any, error) {
	id, err := pathInt(r, "gate", "gate_id")
	if err != nil {
		return 0, nil, err
	}
	// Owners answer; an agent never answers its own question.
	if err := s.requireAdmin(r, "answer gate"); err != nil {
		return 0, nil, err
	}
	var b AnswerBody
	if err := decode(r, &b); err != nil {
		return 0, nil, err
	}
	if b.AnsweredBy == "" {
		return 0, nil, invalid("answered_by", "is required: the open_id of the goal owner who decides (--as)")
	}
	g, err := s.st.AnswerGate(ctx, store.AnswerGateParams{
		GoalID: r.PathValue("goal"), GateID: id, Answer: b.Answer, AnsweredBy: b.AnsweredBy,
		Comment: b.Comment, Notice: s.cards.Update, Meta: r.meta(),
	})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, g, nil
}

func (s *Server) cancelGate(ctx context.Context, r *request) (int, any, error) {
	id, err := pathInt(r, "gate", "gate_id")
	if err != nil {
		return 0, nil, err
	}
	var b CancelBody
	if err := decode(r, &b); err != nil {
		return 0, nil, err
	}
	agent, err := s.actingAgent(r, "cancel gate", b.AgentID, true)
	if err != nil {
		return 0, nil, err
	}
	g, err := s.st.CancelGate(ctx, store.CancelGateParams{
		GoalID: r.PathValue("goal"), GateID: id, AgentID: agent, Notice: s.cards.Update, Meta: r.meta(),
	})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, g, nil
}
