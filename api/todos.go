package api

import (
	"context"
	"net/http"
	"strings"
	"time"

	"loopx/store"
)

// TodoBody is the body of POST /v1/goals/{goal}/todos.
type TodoBody struct {
	Text     string `json:"text"`
	Role     string `json:"role,omitempty"`
	Priority *int   `json:"priority,omitempty"`
	ClaimFor string `json:"claim_for,omitempty"`
	// Criteria must each be named by evidence before the todo is done; Requires are the
	// capabilities an agent needs to claim it.
	Criteria Criteria `json:"criteria,omitempty"`
	Requires []string `json:"requires,omitempty"`
}

// ClaimBody is the body of POST .../todos/{todo}/claim.
type ClaimBody struct {
	AgentID      string `json:"agent_id,omitempty"`
	Transfer     bool   `json:"transfer,omitempty"`
	LeaseSeconds int    `json:"lease_seconds,omitempty"`
	// Note and Next record a handoff from the previous holder on a transfer (a todo with
	// evidence needs a note).
	Note string `json:"note,omitempty"`
	Next string `json:"next,omitempty"`
}

// TodoUpdateBody is the body of PATCH .../todos/{todo} and POST .../todos/{todo}/done.
type TodoUpdateBody struct {
	AgentID    string  `json:"agent_id,omitempty"`
	Version    int64   `json:"version"`
	Text       *string `json:"text,omitempty"`
	Priority   *int    `json:"priority,omitempty"`
	Status     *string `json:"status,omitempty"`
	ClearClaim bool    `json:"clear_claim,omitempty"`
	// Criteria and Requires replace the todo's (the admin token only: agents cannot).
	Criteria *Criteria `json:"criteria,omitempty"`
	Requires *[]string `json:"requires,omitempty"`
}

// TodoAnswer is GET .../todos/{todo}: the todo, each criterion with whether it is met, and
// its handoffs, newest first.
type TodoAnswer struct {
	store.Todo
	CriteriaStatus []store.CriterionStatus `json:"criteria_status"`
	Handoffs       []store.Handoff         `json:"handoffs"`
}

func (s *Server) addTodo(ctx context.Context, r *request) (int, any, error) {
	var b TodoBody
	if err := decode(r, &b); err != nil {
		return 0, nil, err
	}
	claimFor := b.ClaimFor
	if claimFor != "" {
		var err error
		if claimFor, err = s.actingAgent(r, "add todo", claimFor, false); err != nil {
			return 0, nil, err
		}
	}
	t, err := s.st.AddTodo(ctx, store.AddTodoParams{
		GoalID: r.PathValue("goal"), Role: b.Role, Text: b.Text, Priority: b.Priority,
		ClaimFor: claimFor, Criteria: b.Criteria, Requires: b.Requires, Meta: r.meta(),
	})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, t, nil
}

func (s *Server) listTodos(ctx context.Context, r *request) (int, any, error) {
	q := r.URL.Query()
	limit, err := queryInt(r, "limit")
	if err != nil {
		return 0, nil, err
	}
	after, err := queryInt(r, "after_id")
	if err != nil {
		return 0, nil, err
	}
	var statuses []string
	if v := q.Get("status"); v != "" {
		statuses = strings.Split(v, ",")
	}
	ts, err := s.st.ListTodos(ctx, store.ListTodosParams{
		GoalID: r.PathValue("goal"), Statuses: statuses, ClaimedBy: q.Get("claimed_by"),
		Limit: int(limit), AfterID: after,
	})
	if err != nil {
		return 0, nil, err
	}
	if len(ts) == 0 {
		if err := s.goalExists(ctx, r); err != nil {
			return 0, nil, err
		}
	}
	return http.StatusOK, map[string]any{"todos": nonNil(ts)}, nil
}

func (s *Server) showTodo(ctx context.Context, r *request) (int, any, error) {
	id, err := pathInt(r, "todo", "todo_id")
	if err != nil {
		return 0, nil, err
	}
	t, err := s.st.GetTodo(ctx, r.PathValue("goal"), id)
	if err != nil {
		return 0, nil, err
	}
	st, err := store.CriteriaStatus(ctx, s.st.DB(), t.GoalID, t.ID, t.Criteria)
	if err != nil {
		return 0, nil, err
	}
	hs, err := s.st.ListHandoffs(ctx, store.ListHandoffsParams{GoalID: t.GoalID, TodoID: t.ID, Limit: 20})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, TodoAnswer{Todo: t, CriteriaStatus: st, Handoffs: nonNil(hs)}, nil
}

func (s *Server) claimTodo(ctx context.Context, r *request) (int, any, error) {
	id, err := pathInt(r, "todo", "todo_id")
	if err != nil {
		return 0, nil, err
	}
	var b ClaimBody
	if err := decode(r, &b); err != nil {
		return 0, nil, err
	}
	agent, err := s.actingAgent(r, "claim todo", b.AgentID, true)
	if err != nil {
		return 0, nil, err
	}
	if b.LeaseSeconds < 0 {
		return 0, nil, invalid("lease_seconds", "must be 0 (no expiry) or more")
	}
	t, err := s.st.ClaimTodo(ctx, store.ClaimTodoParams{
		GoalID: r.PathValue("goal"), TodoID: id, AgentID: agent, Transfer: b.Transfer,
		Lease: time.Duration(b.LeaseSeconds) * time.Second, Note: b.Note, Next: b.Next, Meta: r.meta(),
	})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, t, nil
}

func (s *Server) updateTodo(ctx context.Context, r *request) (int, any, error) {
	var b TodoUpdateBody
	if err := decode(r, &b); err != nil {
		return 0, nil, err
	}
	return s.changeTodo(ctx, r, "update todo", b)
}

func (s *Server) doneTodo(ctx context.Context, r *request) (int, any, error) {
	var b TodoUpdateBody
	if err := decode(r, &b); err != nil {
		return 0, nil, err
	}
	if b.Status != nil || b.Text != nil || b.Priority != nil || b.ClearClaim || b.Criteria != nil || b.Requires != nil {
		return 0, nil, badRequest("body", "done takes only agent_id and version; use PATCH to change other fields")
	}
	done := store.TodoDone
	b.Status = &done
	return s.changeTodo(ctx, r, "finish todo", b)
}

func (s *Server) changeTodo(ctx context.Context, r *request, action string, b TodoUpdateBody) (int, any, error) {
	id, err := pathInt(r, "todo", "todo_id")
	if err != nil {
		return 0, nil, err
	}
	// An agent token always acts as its agent (so the claim check applies); the admin acts
	// as a person unless it names an agent.
	agent, err := s.actingAgent(r, action, b.AgentID, false)
	if err != nil {
		return 0, nil, err
	}
	if b.Version <= 0 {
		return 0, nil, invalid("version", "is required: send the version you read (loopx todo list), so a concurrent change is not overwritten")
	}
	t, err := s.st.UpdateTodo(ctx, store.UpdateTodoParams{
		GoalID: r.PathValue("goal"), TodoID: id, AgentID: agent, Version: b.Version,
		Text: b.Text, Priority: b.Priority, Status: b.Status, ClearClaim: b.ClearClaim,
		Criteria: b.Criteria.list(), Requires: b.Requires, Meta: r.meta(),
	})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, t, nil
}
