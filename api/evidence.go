package api

import (
	"context"
	"net/http"

	"loopx/store"
)

// EvidenceBody is the body of POST /v1/goals/{goal}/evidence.
type EvidenceBody struct {
	AgentID string `json:"agent_id,omitempty"`
	TodoID  int64  `json:"todo_id,omitempty"`
	TurnID  int64  `json:"turn_id,omitempty"`
	Kind    string `json:"kind,omitempty"`
	Summary string `json:"summary"`
	Ref     string `json:"ref,omitempty"`
	// Criteria are the acceptance criteria (the todo's or the goal's ids) it meets.
	Criteria []string `json:"criteria,omitempty"`
	// File is a deliverable attached to the evidence (base64); see FileBody.
	File *FileBody `json:"file,omitempty"`
}

func (s *Server) addEvidence(ctx context.Context, r *request) (int, any, error) {
	var b EvidenceBody
	if err := decode(r, &b); err != nil {
		return 0, nil, err
	}
	agent, err := s.actingAgent(r, "add evidence", b.AgentID, true)
	if err != nil {
		return 0, nil, err
	}
	if b.TodoID < 0 || b.TurnID < 0 {
		return 0, nil, invalid("todo_id", "ids are positive integers")
	}
	file, err := s.upload(ctx, b.File, "file")
	if err != nil {
		return 0, nil, err
	}
	e, err := s.st.AddEvidence(ctx, store.AddEvidenceParams{
		GoalID: r.PathValue("goal"), AgentID: agent, TodoID: b.TodoID, TurnID: b.TurnID,
		Kind: b.Kind, Summary: b.Summary, Ref: b.Ref, Criteria: b.Criteria, File: file, Meta: r.meta(),
	})
	if err != nil {
		return 0, nil, err
	}
	withURLs(e.Files)
	return http.StatusCreated, e, nil
}

func (s *Server) listEvidence(ctx context.Context, r *request) (int, any, error) {
	todo, err := queryInt(r, "todo_id")
	if err != nil {
		return 0, nil, err
	}
	limit, err := queryInt(r, "limit")
	if err != nil {
		return 0, nil, err
	}
	after, err := queryInt(r, "after_id")
	if err != nil {
		return 0, nil, err
	}
	es, err := s.st.ListEvidence(ctx, store.ListEvidenceParams{
		GoalID: r.PathValue("goal"), TodoID: todo, AgentID: r.URL.Query().Get("agent_id"),
		Limit: int(limit), AfterID: after,
	})
	if err != nil {
		return 0, nil, err
	}
	if len(es) == 0 {
		if err := s.goalExists(ctx, r); err != nil {
			return 0, nil, err
		}
	}
	for i := range es {
		withURLs(es[i].Files)
	}
	return http.StatusOK, map[string]any{"evidence": nonNil(es)}, nil
}
