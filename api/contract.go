package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"loopx/change"
	"loopx/store"
)

// The goal contract over HTTP: a goal's settings with their source and its contract, the
// machine defaults, finishing, reopening and replanning a goal, its trail of decisions,
// handoffs, acknowledgements and waivers.

// GoalAnswer is GET /v1/goals/{goal}: the goal, every setting with a machine default marked
// default or override, and its contract (criteria with which are met).
type GoalAnswer struct {
	store.Goal
	Settings []store.SettingValue `json:"settings"`
	Contract store.Contract       `json:"contract"`
}

func (s *Server) goalAnswer(ctx context.Context, g store.Goal, agentCaps []string) (GoalAnswer, error) {
	db := s.st.DB()
	d, err := store.GetMachineDefaults(ctx, db)
	if err != nil {
		return GoalAnswer{}, err
	}
	pol, err := s.st.GetPermissionPolicy(ctx, g.ID)
	if err != nil {
		return GoalAnswer{}, err
	}
	c, err := store.ReadContract(ctx, db, g, agentCaps)
	if err != nil {
		return GoalAnswer{}, err
	}
	return GoalAnswer{Goal: g, Settings: store.GoalSettings(g, d, pol), Contract: c}, nil
}

// LifecycleBody is the body of POST /v1/goals/{goal}/done and /reopen: why.
type LifecycleBody struct {
	Reason string `json:"reason,omitempty"`
}

func (s *Server) doneGoal(ctx context.Context, r *request) (int, any, error) {
	return s.decide(ctx, r, "finish goal", store.ProposalGoalDone)
}

func (s *Server) reopenGoal(ctx context.Context, r *request) (int, any, error) {
	return s.decide(ctx, r, "reopen goal", store.ProposalGoalReopen)
}

// decide finishes or reopens a goal for the admin token, through the change kernel.
func (s *Server) decide(ctx context.Context, r *request, action, kind string) (int, any, error) {
	if err := s.requireAdmin(r, action); err != nil {
		return 0, nil, err
	}
	var b LifecycleBody
	if err := decode(r, &b); err != nil {
		return 0, nil, err
	}
	return s.applyResult(ctx, r, change.Request{GoalID: r.PathValue("goal"), Kind: kind, Reason: b.Reason})
}

// ReplanBody is the body of POST /v1/goals/{goal}/replan: the new objective, why, and the
// todos to cancel and reopen.
type ReplanBody struct {
	Objective   string  `json:"objective"`
	Reason      string  `json:"reason,omitempty"`
	CancelTodos []int64 `json:"cancel_todos,omitempty"`
	ReopenTodos []int64 `json:"reopen_todos,omitempty"`
	Version     int64   `json:"version,omitempty"`
}

func (b ReplanBody) request(goalID string) change.Request {
	return change.Request{GoalID: goalID, Version: b.Version, Kind: store.ProposalGoalReplan, Reason: b.Reason,
		Replan: &change.ReplanChange{Objective: b.Objective, Cancel: b.CancelTodos, Reopen: b.ReopenTodos}}
}

func (s *Server) replanGoal(ctx context.Context, r *request) (int, any, error) {
	if err := s.requireAdmin(r, "replan goal"); err != nil {
		return 0, nil, err
	}
	var b ReplanBody
	if err := decode(r, &b); err != nil {
		return 0, nil, err
	}
	return s.applyResult(ctx, r, b.request(r.PathValue("goal")))
}

// applyResult applies req at once for the admin token and answers the result: the proposal
// record, and the goal (or the machine defaults) after the change.
func (s *Server) applyResult(ctx context.Context, r *request, req change.Request) (int, any, error) {
	res, err := s.changes.Apply(ctx, adminPerson, r.meta(), req)
	if err != nil {
		return 0, nil, err
	}
	out, err := s.resultAnswer(ctx, res)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, out, nil
}

func (s *Server) listTrail(ctx context.Context, r *request) (int, any, error) {
	if err := s.goalExists(ctx, r); err != nil {
		return 0, nil, err
	}
	limit, err := queryInt(r, "limit")
	if err != nil {
		return 0, nil, err
	}
	ds, err := s.st.ListTrail(ctx, r.PathValue("goal"), int(limit))
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, map[string]any{"decisions": nonNil(ds)}, nil
}

// DefaultsAnswer is GET /v1/defaults: the machine defaults, and per setting how many goals
// follow it.
type DefaultsAnswer struct {
	Defaults  store.MachineDefaults `json:"defaults"`
	Followers map[string]int        `json:"followers"`
}

func (s *Server) showDefaults(ctx context.Context, r *request) (int, any, error) {
	if err := s.requireAdmin(r, "read the machine defaults"); err != nil {
		return 0, nil, err
	}
	db := s.st.DB()
	d, err := store.GetMachineDefaults(ctx, db)
	if err != nil {
		return 0, nil, err
	}
	out := DefaultsAnswer{Defaults: d, Followers: map[string]int{}}
	for _, f := range store.Settings() {
		_, n, err := store.GoalsFollowing(ctx, db, []string{f}, 0)
		if err != nil {
			return 0, nil, err
		}
		out.Followers[f] = n
	}
	return http.StatusOK, out, nil
}

// DefaultsBody is the body of PATCH /v1/defaults and POST /v1/defaults/proposals.
type DefaultsBody struct {
	Version int64 `json:"version,omitempty"`
	change.DefaultsChange
}

func (s *Server) setDefaults(ctx context.Context, r *request) (int, any, error) {
	if err := s.requireAdmin(r, "change the machine defaults"); err != nil {
		return 0, nil, err
	}
	var b DefaultsBody
	if err := decode(r, &b); err != nil {
		return 0, nil, err
	}
	return s.applyResult(ctx, r, change.Request{Kind: store.ProposalDefaultsSet, Version: b.Version, Defaults: &b.DefaultsChange})
}

func (s *Server) proposeDefaults(ctx context.Context, r *request) (int, any, error) {
	if err := s.requireAdmin(r, "propose a change of the machine defaults"); err != nil {
		return 0, nil, err
	}
	var b DefaultsBody
	if err := decode(r, &b); err != nil {
		return 0, nil, err
	}
	p, err := s.changes.Propose(ctx, adminPerson, r.meta(), change.Request{Kind: store.ProposalDefaultsSet, Version: b.Version, Defaults: &b.DefaultsChange})
	if err != nil {
		return 0, nil, err
	}
	a, err := s.answer(ctx, p)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, a, nil
}

// HandoffBody is the body of POST /v1/goals/{goal}/todos/{todo}/handoff: to whom, what was
// done, what is next, open questions. An agent token hands over as its agent; the admin as a
// person (from_agent empty) unless it names one.
type HandoffBody struct {
	FromAgent   string  `json:"from_agent,omitempty"`
	ToAgent     string  `json:"to_agent"`
	Kind        string  `json:"kind,omitempty"`
	Done        string  `json:"done,omitempty"`
	Next        string  `json:"next,omitempty"`
	Questions   string  `json:"questions,omitempty"`
	EvidenceIDs []int64 `json:"evidence_ids,omitempty"`
}

func (s *Server) handOff(ctx context.Context, r *request) (int, any, error) {
	id, err := pathInt(r, "todo", "todo_id")
	if err != nil {
		return 0, nil, err
	}
	var b HandoffBody
	if err := decode(r, &b); err != nil {
		return 0, nil, err
	}
	from, err := s.actingAgent(r, "hand off todo", b.FromAgent, false)
	if err != nil {
		return 0, nil, err
	}
	h, err := s.st.HandOff(ctx, store.HandoffParams{
		GoalID: r.PathValue("goal"), TodoID: id, From: from, To: b.ToAgent, Kind: b.Kind,
		Done: b.Done, Next: b.Next, Questions: b.Questions, EvidenceIDs: b.EvidenceIDs, Meta: r.meta(),
	})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, h, nil
}

func (s *Server) listHandoffs(ctx context.Context, r *request) (int, any, error) {
	if err := s.goalExists(ctx, r); err != nil {
		return 0, nil, err
	}
	todo, err := queryInt(r, "todo_id")
	if err != nil {
		return 0, nil, err
	}
	turn, err := queryInt(r, "turn_id")
	if err != nil {
		return 0, nil, err
	}
	limit, err := queryInt(r, "limit")
	if err != nil {
		return 0, nil, err
	}
	pending := r.URL.Query().Get("pending_to")
	if pending != "" && !store.ValidID(pending) {
		return 0, nil, invalid("pending_to", "%q is not an agent id", pending)
	}
	hs, err := s.st.ListHandoffs(ctx, store.ListHandoffsParams{GoalID: r.PathValue("goal"), TodoID: todo, TurnID: turn,
		PendingTo: pending, Limit: int(limit)})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, map[string]any{"handoffs": nonNil(hs)}, nil
}

// AcknowledgeBody is the body of POST /v1/goals/{goal}/agents/{agent}/ack: the continuation
// (handoff_id) or the replan (decision_id) the agent has read.
type AcknowledgeBody struct {
	HandoffID  int64 `json:"handoff_id,omitempty"`
	DecisionID int64 `json:"decision_id,omitempty"`
}

func (s *Server) acknowledge(ctx context.Context, r *request) (int, any, error) {
	var b AcknowledgeBody
	if err := decode(r, &b); err != nil {
		return 0, nil, err
	}
	agent, err := s.actingAgent(r, "acknowledge", r.PathValue("agent"), true)
	if err != nil {
		return 0, nil, err
	}
	a, err := s.st.Acknowledge(ctx, store.AckParams{GoalID: r.PathValue("goal"), AgentID: agent,
		HandoffID: b.HandoffID, DecisionID: b.DecisionID, Meta: r.meta()})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, a, nil
}

// WaiverBody is the body of POST /v1/goals/{goal}/waivers: a criterion of a todo (or of the
// goal, with todo_id 0) that counts as met without evidence, and why.
type WaiverBody struct {
	TodoID    int64  `json:"todo_id,omitempty"`
	Criterion string `json:"criterion"`
	Reason    string `json:"reason"`
}

func (s *Server) waive(ctx context.Context, r *request) (int, any, error) {
	if err := s.requireAdmin(r, "waive a criterion"); err != nil {
		return 0, nil, err
	}
	var b WaiverBody
	if err := decode(r, &b); err != nil {
		return 0, nil, err
	}
	if b.TodoID < 0 {
		return 0, nil, invalid("todo_id", "ids are positive integers")
	}
	w, err := s.st.WaiveCriterion(ctx, store.WaiveParams{GoalID: r.PathValue("goal"), TodoID: b.TodoID,
		Criterion: b.Criterion, Reason: b.Reason, Meta: r.meta()})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, w, nil
}

// Criteria are acceptance criteria as a body gives them: objects {"id", "text"} or strings
// ("tests pass", "g2: docs updated").
type Criteria []store.Criterion

// UnmarshalJSON reads either form.
func (c *Criteria) UnmarshalJSON(b []byte) error {
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return errors.New("criteria are a list of {\"id\", \"text\"} objects or of strings")
	}
	out := make(Criteria, 0, len(raw))
	for _, r := range raw {
		var s string
		if json.Unmarshal(r, &s) == nil {
			out = append(out, store.ParseCriterion(s))
			continue
		}
		var o store.Criterion
		dec := json.NewDecoder(bytes.NewReader(r))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&o); err != nil {
			return errors.New("a criterion is a string or an object {\"id\", \"text\"}")
		}
		out = append(out, o)
	}
	*c = out
	return nil
}

func (c *Criteria) list() *[]store.Criterion {
	if c == nil {
		return nil
	}
	v := []store.Criterion(*c)
	return &v
}

// CapabilitiesBody is the body of POST /v1/goals/{goal}/agents/{agent}/capabilities: the
// capabilities to grant and revoke (or the whole list), applied through the change kernel.
type CapabilitiesBody struct {
	Capabilities *[]string `json:"capabilities,omitempty"`
	Grant        []string  `json:"grant,omitempty"`
	Revoke       []string  `json:"revoke,omitempty"`
}

func (s *Server) setCapabilities(ctx context.Context, r *request) (int, any, error) {
	if err := s.requireAdmin(r, "grant capabilities"); err != nil {
		return 0, nil, err
	}
	var b CapabilitiesBody
	if err := decode(r, &b); err != nil {
		return 0, nil, err
	}
	return s.applyResult(ctx, r, change.Request{GoalID: r.PathValue("goal"), Kind: store.ProposalAgentSet, AgentID: r.PathValue("agent"),
		Agent: change.AgentChange{Capabilities: b.Capabilities, Grant: b.Grant, Revoke: b.Revoke}})
}
