package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"loopx/quota"
	"loopx/store"
)

// Status is the answer of GET /v1/goals/{goal}/status?agent_id=: what a person (`loopx
// status`) or an agent (the goal_status MCP tool) needs to see about one agent in one read.
// It records nothing.
type Status struct {
	Goal     store.Goal     `json:"goal"`
	AgentID  string         `json:"agent_id"`
	Decision quota.Decision `json:"decision"` // what should-run would answer now (mode "status")
	NeedsYou NeedsYou       `json:"needs_you"`
	LiveTurn *store.Turn    `json:"live_turn"`
	LastTurn *store.Turn    `json:"last_turn"` // the agent's most recent turn, live or ended
	// LastTurnEvidence is what the last turn recorded, oldest first (at most 20).
	LastTurnEvidence []store.Evidence  `json:"last_turn_evidence"`
	Heartbeat        *HeartbeatStatus  `json:"heartbeat"` // nil: the goal has no heartbeat for the agent
	Inbox            store.InboxCounts `json:"inbox"`
}

// NeedsYou lists what waits for a person.
type NeedsYou struct {
	OpenGates      []store.Gate  `json:"open_gates"`
	Stalled        bool          `json:"stalled"`
	Paused         bool          `json:"paused"`
	Held           bool          `json:"held"`      // the agent is held (the breaker or an owner): see decision.held
	NoOwners       bool          `json:"no_owners"` // nobody can answer a gate
	FailedSends    int           `json:"failed_sends"`
	RecentFailures []SendFailure `json:"recent_failures"` // newest first, at most 3
	MissedFires24h int           `json:"missed_fires_24h"`
}

// SendFailure is an outbox message Lark refused for good.
type SendFailure struct {
	ID        int64     `json:"outbox_id"`
	Kind      string    `json:"kind"`
	ReceiveID string    `json:"receive_id"`
	Code      int       `json:"code"`
	Error     string    `json:"error"`
	Attempts  int       `json:"attempts"`
	CreatedAt time.Time `json:"created_at"`
}

// HeartbeatStatus is the agent's heartbeat schedule.
type HeartbeatStatus struct {
	Spec       string     `json:"spec"`
	TZ         string     `json:"tz"`
	Enabled    bool       `json:"enabled"`
	Held       bool       `json:"held"` // stopped until an explicit resume
	NextFireAt *time.Time `json:"next_fire_at"`
}

func (s *Server) goalStatus(ctx context.Context, r *request) (int, any, error) {
	agent, err := s.actingAgent(r, "read status", r.URL.Query().Get("agent_id"), true)
	if err != nil {
		return 0, nil, err
	}
	goalID, now, db := r.PathValue("goal"), s.now(), s.st.DB()
	d, snap, err := quota.Peek(ctx, s.st, goalID, agent, now)
	if err != nil {
		return 0, nil, err
	}
	if !snap.GoalFound {
		return 0, nil, notFound("goal_id", "no goal %s; create it (loopx connect or loopx goal create)", goalID)
	}
	if !snap.AgentFound {
		return 0, nil, notFound("agent_id", "no agent %s on goal %s; register it (loopx connect or loopx agent register)", agent, goalID)
	}
	st := Status{Goal: snap.Goal, AgentID: agent, Decision: d}
	st.NeedsYou.Stalled = st.Decision.State == quota.StateStalled
	st.NeedsYou.Paused = st.Decision.State == quota.StatePaused
	st.NeedsYou.Held = snap.Agent.HeldAt != nil
	st.NeedsYou.NoOwners = len(snap.Goal.Owners) == 0
	if st.NeedsYou.OpenGates, err = store.ListOpenGates(ctx, db, goalID); err != nil {
		return 0, nil, err
	}
	probs, err := store.ReadGoalProblems(ctx, db, goalID, now.Add(-24*time.Hour), 3)
	if err != nil {
		return 0, nil, err
	}
	st.NeedsYou.FailedSends, st.NeedsYou.MissedFires24h = probs.FailureTotal, probs.MissedTotal
	for _, f := range probs.Failures {
		st.NeedsYou.RecentFailures = append(st.NeedsYou.RecentFailures, SendFailure{ID: f.ID, Kind: f.Kind,
			ReceiveID: f.ReceiveID, Code: f.Code, Error: f.Error, Attempts: f.Attempts, CreatedAt: f.CreatedAt})
	}
	if t, err := store.GetLiveTurn(ctx, db, goalID, agent, now); err == nil {
		st.LiveTurn = &t
	} else if !errors.Is(err, store.ErrNotFound) {
		return 0, nil, err
	}
	if t, err := store.GetLatestTurn(ctx, db, goalID, agent); err == nil {
		st.LastTurn = &t
		if st.LastTurnEvidence, err = store.ListTurnEvidence(ctx, db, goalID, t.ID, 20); err != nil {
			return 0, nil, err
		}
	} else if !errors.Is(err, store.ErrNotFound) {
		return 0, nil, err
	}
	scheds, err := s.st.ListSchedules(ctx, goalID)
	if err != nil {
		return 0, nil, err
	}
	for _, sc := range scheds {
		if sc.Kind != store.ScheduleHeartbeat || sc.AgentID != agent || sc.Spec == "" {
			continue
		}
		hb := &HeartbeatStatus{Spec: sc.Spec, TZ: sc.TZ, Enabled: sc.Enabled, Held: sc.Held}
		if !sc.NextFireAt.IsZero() && sc.Enabled && !sc.Held {
			at := sc.NextFireAt
			hb.NextFireAt = &at
		}
		st.Heartbeat = hb
	}
	if st.Inbox, err = store.CountInbox(ctx, db, goalID, agent, now); err != nil {
		return 0, nil, err
	}
	st.NeedsYou.OpenGates = nonNil(st.NeedsYou.OpenGates)
	st.NeedsYou.RecentFailures = nonNil(st.NeedsYou.RecentFailures)
	st.LastTurnEvidence = nonNil(st.LastTurnEvidence)
	return http.StatusOK, st, nil
}
