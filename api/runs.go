package api

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"loopx/store"
)

// The run index: a goal's turns and recorded should-run decisions, newest first, with
// filters and cursor paging. Each page carries next_cursor when more rows may follow.

func (s *Server) listTurns(ctx context.Context, r *request) (int, any, error) {
	p, err := runsParams(r)
	if err != nil {
		return 0, nil, err
	}
	turns, err := store.ListTurns(ctx, s.st.DB(), p)
	if err != nil {
		return 0, nil, err
	}

	if len(turns) == 0 {
		if err := s.goalExists(ctx, r); err != nil {
			return 0, nil, err
		}
	}
	out := map[string]any{"turns": turns}
	if len(turns) > 0 && len(turns) == p.Limit {
		out["next_cursor"] = strconv.FormatInt(turns[len(turns)-1].ID, 10)
	}
	return http.StatusOK, out, nil
}

func (s *Server) showTurn(ctx context.Context, r *request) (int, any, error) {
	id, err := pathInt(r, "turn", "turn_id")
	if err != nil {
		return 0, nil, err
	}
	if err := s.goalExists(ctx, r); err != nil {
		return 0, nil, err
	}
	t, err := store.GetTurnByID(ctx, s.st.DB(), r.PathValue("goal"), id)
	if err != nil {
		return 0, nil, err
	}
	r.who.hideLog(&t)
	hs, err := store.ListHandoffs(ctx, s.st.DB(), store.ListHandoffsParams{GoalID: t.GoalID, TurnID: t.ID, Limit: 10})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, TurnAnswer{Turn: t, Handoffs: nonNil(hs)}, nil
}

// TurnAnswer is GET /v1/goals/{goal}/turns/{turn}: the turn and the handoffs it ended with.
type TurnAnswer struct {
	store.Turn
	Handoffs []store.Handoff `json:"handoffs"`
}

func (s *Server) listDecisions(ctx context.Context, r *request) (int, any, error) {
	p, err := runsParams(r)
	if err != nil {
		return 0, nil, err
	}
	p.Verdict = r.URL.Query().Get("decision")
	ds, err := store.ListDecisions(ctx, s.st.DB(), p)
	if err != nil {
		return 0, nil, err
	}
	if len(ds) == 0 {
		if err := s.goalExists(ctx, r); err != nil {
			return 0, nil, err
		}
	}
	out := map[string]any{"decisions": ds}
	if len(ds) > 0 && len(ds) == p.Limit {
		out["next_cursor"] = strconv.FormatInt(ds[len(ds)-1].ID, 10)
	}
	return http.StatusOK, out, nil
}

// runsParams reads the filters both lists share: agent_id, state (comma-separated), since
// and until (RFC 3339), limit and cursor.
func runsParams(r *request) (store.ListRunsParams, error) {
	q := r.URL.Query()
	p := store.ListRunsParams{GoalID: r.PathValue("goal"), AgentID: q.Get("agent_id")}
	if v := q.Get("state"); v != "" {
		p.States = strings.Split(v, ",")
	}
	for name, dst := range map[string]*time.Time{"since": &p.Since, "until": &p.Until} {
		if v := q.Get(name); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return p, badRequest(name, "%q is not an RFC 3339 time such as 2026-12-02T09:00:00Z", v)
			}
			*dst = t
		}
	}
	limit, err := queryInt(r, "limit")
	if err != nil {
		return p, err
	}
	p.Limit = int(limit)
	if p.Limit == 0 {
		p.Limit = store.DefaultRunsLimit
	}
	if v := q.Get("cursor"); v != "" {
		c, err := strconv.ParseInt(v, 10, 64)
		if err != nil || c <= 0 {
			return p, badRequest("cursor", "%q is not a cursor; pass next_cursor from the previous page", v)
		}
		p.Before = c
	}
	return p, nil
}

// goalExists answers 404 for a goal that does not exist, so that listing an unknown goal is
// not mistaken for listing an empty one.
func (s *Server) goalExists(ctx context.Context, r *request) error {
	_, err := store.GetGoal(ctx, s.st.DB(), r.PathValue("goal"))
	return err
}
