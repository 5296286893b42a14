package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"loopx/scheduler/quota"
	"loopx/store"
)

// ShouldRunBody is the body of POST /v1/goals/{goal}/should-run.
type ShouldRunBody struct {
	AgentID        string `json:"agent_id,omitempty"`
	TurnInstanceID string `json:"turn_instance_id,omitempty"`
	BeginTurn      bool   `json:"begin_turn,omitempty"`
	LeaseSeconds   int    `json:"lease_seconds,omitempty"`
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
		Meta: r.meta(),
	}
	if b.TurnInstanceID != "" {
		// The turn instance id is the replay key: the quota service stores the heartbeat
		// receipt with the decision, in its transaction.
		d, err := s.quota.ShouldRun(ctx, p)
		if err != nil {
			return 0, nil, err
		}
		return http.StatusOK, d, nil
	}
	return s.shouldRunOnce(ctx, r, p)
}

// shouldRunOnce makes a should-run without a turn instance id replayable by its
// Idempotency-Key: a receipt of the answer is stored under the key after the decision. No
// transaction is held across the decision (it would take a second pool connection per
// request). Two concurrent requests with one key may both decide; the second to store its
// receipt answers with the first one's, so both callers see one answer. A decision without a
// turn writes only a tick_decision ledger row, so the rare extra row is harmless.
func (s *Server) shouldRunOnce(ctx context.Context, r *request, p quota.ShouldRunParams) (int, any, error) {
	key := "should-run|" + r.who.actor() + "|" + r.key
	hash, err := store.RequestHash("api.should_run", []any{p.GoalID, p.AgentID, p.BeginTurn, p.LeaseDuration})
	if err != nil {
		return 0, nil, err
	}
	pool := s.st.Pool()
	// The stored body is decoded back into a Decision (jsonb does not keep key order), so a
	// replay encodes to the same bytes as the first answer.
	replay := func() (quota.Decision, bool, error) {
		var d quota.Decision
		rc, found, err := store.LookupReceipt(ctx, pool, key, hash)
		if err != nil || !found {
			return d, false, err
		}
		if err := json.Unmarshal(rc.Body, &d); err != nil {
			return d, false, fmt.Errorf("decode should-run receipt: %w", err)
		}
		return d, true, nil
	}
	if d, found, err := replay(); err != nil || found {
		return http.StatusOK, d, err
	}
	d, err := s.quota.ShouldRun(ctx, p)
	if err != nil {
		return 0, nil, err
	}
	body, err := json.Marshal(d)
	if err != nil {
		return 0, nil, fmt.Errorf("encode should-run receipt: %w", err)
	}
	err = store.SaveReceipt(ctx, pool, store.Receipt{Key: key, RequestHash: hash, Status: http.StatusOK, Body: body, CreatedAt: s.now()})
	if errors.Is(err, store.ErrConflict) {
		if d, found, err := replay(); err != nil || found {
			return http.StatusOK, d, err
		}
	}
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, d, nil
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
	snap, err := store.ReadTickSnapshot(ctx, s.st.Pool(), r.PathValue("goal"), agent, now)
	if err != nil {
		return 0, nil, err
	}
	if !snap.GoalFound {
		return 0, nil, &Error{Status: http.StatusNotFound, Code: CodeNotFound, Field: "goal_id", Message: "no goal " + r.PathValue("goal")}
	}
	d := quota.Decide(snap, now)
	d.Mode = "status"
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
		NextAction: b.NextAction, Meta: r.meta(),
	})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, e, nil
}
