package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"loopx/change"
	"loopx/store"
)

// GoalBody is the body of POST /v1/goals and PATCH /v1/goals/{goal}. On PATCH only the
// fields present change, and Version (the version read) is required.
type GoalBody struct {
	GoalID        string    `json:"goal_id,omitempty"`
	Version       int64     `json:"version,omitempty"`
	Title         *string   `json:"title,omitempty"`
	Objective     *string   `json:"objective,omitempty"`
	Owners        *[]string `json:"owners,omitempty"`
	Members       *[]string `json:"members,omitempty"`
	WindowHours   *int      `json:"window_hours,omitempty"`
	AllowedSlots  *int      `json:"allowed_slots,omitempty"`
	HeartbeatSpec *string   `json:"heartbeat_spec,omitempty"`
	HeartbeatTZ   *string   `json:"heartbeat_tz,omitempty"`
	ReportSpec    *string   `json:"report_spec,omitempty"`
	ReportTZ      *string   `json:"report_tz,omitempty"`
	Lang          *string   `json:"lang,omitempty"`
	StallTurns    *int      `json:"stall_turns,omitempty"`
	// Settings with a machine default: a value, or null (or "default") for the machine's.
	BreakerFailures *Setting `json:"breaker_failures,omitempty"` // 0 (off) to 100
	ProgressCard    *Setting `json:"progress_card,omitempty"`    // true | false
	QuietDigests    *Setting `json:"quiet_digests,omitempty"`    // true | false
	// The gate reminder ladder ("30,60,120", or "default") and from which reminder owners
	// get it directly.
	ReminderMinutes       *string `json:"reminder_minutes,omitempty"`
	ReminderEscalateAfter *int    `json:"reminder_escalate_after,omitempty"`
	// Defaults names settings to put back to the machine default (PATCH).
	Defaults []string `json:"defaults,omitempty"`
	// The contract: scope, capabilities the goal grants, acceptance criteria.
	ScopeEditable      *[]string `json:"scope_editable,omitempty"`
	ScopeProtected     *[]string `json:"scope_protected,omitempty"`
	ScopeNotes         *string   `json:"scope_notes,omitempty"`
	Capabilities       *[]string `json:"capabilities,omitempty"`
	AddCapabilities    []string  `json:"add_capabilities,omitempty"`
	RemoveCapabilities []string  `json:"remove_capabilities,omitempty"`
	Criteria           *Criteria `json:"criteria,omitempty"`
	AddCriteria        Criteria  `json:"add_criteria,omitempty"`
	RemoveCriteria     []string  `json:"remove_criteria,omitempty"`
}

// Change is the goal change a PATCH body asks for.
func (b GoalBody) Change() change.GoalChange {
	return change.GoalChange{
		Title: b.Title, Objective: b.Objective, Owners: b.Owners, Members: b.Members,
		WindowHours: b.WindowHours, AllowedSlots: b.AllowedSlots,
		HeartbeatSpec: b.HeartbeatSpec, HeartbeatTZ: b.HeartbeatTZ,
		ReportSpec: b.ReportSpec, ReportTZ: b.ReportTZ, Lang: b.Lang, StallTurns: b.StallTurns,
		BreakerFailures: b.BreakerFailures.str(), ProgressCard: b.ProgressCard.str(), QuietDigests: b.QuietDigests.str(),
		ReminderMinutes: b.ReminderMinutes, ReminderEscalateAfter: b.ReminderEscalateAfter, Defaults: b.Defaults,
		ScopeEditable: b.ScopeEditable, ScopeProtected: b.ScopeProtected, ScopeNotes: b.ScopeNotes,
		Capabilities: b.Capabilities, AddCapabilities: b.AddCapabilities, RemoveCapabilities: b.RemoveCapabilities,
		Criteria: b.Criteria.list(), AddCriteria: b.AddCriteria, RemoveCriteria: b.RemoveCriteria,
	}
}

// Setting is a goal setting with a machine default as a body gives it: a number, true or
// false, "on", "off", or null / "default" for the machine default.
type Setting string

// UnmarshalJSON reads any of the forms.
func (s *Setting) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	switch x := v.(type) {
	case nil:
		*s = "default"
	case bool:
		*s = Setting(map[bool]string{true: "on", false: "off"}[x])
	case float64:
		*s = Setting(strconv.FormatFloat(x, 'f', -1, 64))
	case string:
		*s = Setting(x)
	default:
		return fmt.Errorf("a setting is a number, true, false, \"default\" or null")
	}
	return nil
}

func (s *Setting) str() *string {
	if s == nil {
		return nil
	}
	v := string(*s)
	return &v
}

// createSettings turns the settings of a new goal into the store's (unset: the default).
func createSettings(b GoalBody) (breaker *int, progress, quiet *bool, err error) {
	if b.BreakerFailures != nil && *b.BreakerFailures != "default" {
		v := string(*b.BreakerFailures)
		if v == "off" {
			v = "0"
		}
		n, perr := strconv.Atoi(v)
		if perr != nil || n < 0 || n > 100 {
			return nil, nil, nil, invalid("breaker_failures", "%q is not a number of failures from 0 (off) to 100, or default", v)
		}
		breaker = &n
	}
	onOff := func(field string, s *Setting) (*bool, error) {
		if s == nil || *s == "default" {
			return nil, nil
		}
		switch *s {
		case "on", "true":
			t := true
			return &t, nil
		case "off", "false":
			f := false
			return &f, nil
		}
		return nil, invalid(field, "%q is not true, false or default", string(*s))
	}
	if progress, err = onOff("progress_card", b.ProgressCard); err != nil {
		return nil, nil, nil, err
	}
	quiet, err = onOff("quiet_digests", b.QuietDigests)
	return breaker, progress, quiet, err
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func (s *Server) createGoal(ctx context.Context, r *request) (int, any, error) {
	if err := s.requireAdmin(r, "create goal"); err != nil {
		return 0, nil, err
	}
	var b GoalBody
	if err := decode(r, &b); err != nil {
		return 0, nil, err
	}
	if !store.ValidID(b.GoalID) {
		return 0, nil, invalid("goal_id", "%q is not a valid id: use 1-63 characters a-z 0-9 . _ -, starting with a letter or digit", b.GoalID)
	}
	if b.Version != 0 {
		return 0, nil, badRequest("version", "is only for changing a goal")
	}
	breaker, progress, quiet, err := createSettings(b)
	if err != nil {
		return 0, nil, err
	}
	if b.Defaults != nil || b.AddCapabilities != nil || b.RemoveCapabilities != nil || b.AddCriteria != nil ||
		b.RemoveCriteria != nil || b.ReminderMinutes != nil || b.ReminderEscalateAfter != nil {
		return 0, nil, badRequest("body", "a new goal takes lists whole (capabilities, criteria); reminders and defaults are set afterwards")
	}
	var criteria []store.Criterion
	if b.Criteria != nil {
		criteria = *b.Criteria
	}
	g, err := s.st.CreateGoal(ctx, store.CreateGoalParams{
		BreakerFailures: breaker, ProgressCard: progress, QuietDigests: quiet,
		ID: b.GoalID, Title: deref(b.Title), Objective: deref(b.Objective),
		Owners: deref(b.Owners), Members: deref(b.Members),
		WindowHours: b.WindowHours, AllowedSlots: b.AllowedSlots,
		HeartbeatSpec: deref(b.HeartbeatSpec), HeartbeatTZ: deref(b.HeartbeatTZ),
		ReportSpec: deref(b.ReportSpec), ReportTZ: deref(b.ReportTZ),
		Lang: deref(b.Lang), StallTurns: b.StallTurns,
		ScopeEditable: deref(b.ScopeEditable), ScopeProtected: deref(b.ScopeProtected), ScopeNotes: deref(b.ScopeNotes),
		Capabilities: deref(b.Capabilities), Criteria: criteria, Meta: r.meta(),
	})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, g, nil
}

func (s *Server) listGoals(ctx context.Context, r *request) (int, any, error) {
	if !r.who.admin { // an agent sees its own goal only
		g, err := s.st.GetGoal(ctx, r.who.goalID)
		if err != nil {
			return 0, nil, err
		}
		return http.StatusOK, map[string]any{"goals": []store.Goal{g}}, nil
	}
	q := r.URL.Query()
	limit, err := queryInt(r, "limit")
	if err != nil {
		return 0, nil, err
	}
	gs, err := s.st.ListGoals(ctx, store.ListGoalsParams{
		Status: q.Get("status"), Person: q.Get("person"), Limit: int(limit), After: q.Get("after"),
	})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, map[string]any{"goals": nonNil(gs)}, nil
}

func (s *Server) showGoal(ctx context.Context, r *request) (int, any, error) {
	g, err := s.st.GetGoal(ctx, r.PathValue("goal"))
	if err != nil {
		return 0, nil, err
	}
	var caps []string
	if !r.who.admin {
		a, err := s.st.GetAgent(ctx, g.ID, r.who.agentID)
		if err != nil {
			return 0, nil, err
		}
		caps = a.Capabilities
	}
	out, err := s.goalAnswer(ctx, g, caps)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, out, nil
}

func (s *Server) setGoal(ctx context.Context, r *request) (int, any, error) {
	if err := s.requireAdmin(r, "change goal"); err != nil {
		return 0, nil, err
	}
	var b GoalBody
	if err := decode(r, &b); err != nil {
		return 0, nil, err
	}
	if b.GoalID != "" && b.GoalID != r.PathValue("goal") {
		return 0, nil, badRequest("goal_id", "a goal's id cannot change")
	}
	if b.Version <= 0 {
		return 0, nil, invalid("version", "is required: send the version you read (loopx goal show), so a concurrent change is not overwritten")
	}
	// A script holding the admin token applies directly, through the change kernel: the same
	// proposal record, diff and receipt as a change confirmed in chat or the workspace.
	return s.applyDirect(ctx, r, change.Request{
		GoalID: r.PathValue("goal"), Version: b.Version, Kind: store.ProposalGoalSet, Goal: b.Change(),
	})
}

func (s *Server) stopGoal(ctx context.Context, r *request) (int, any, error) {
	return s.lifecycle(ctx, r, "stop goal", store.ProposalGoalPause)
}

func (s *Server) resumeGoal(ctx context.Context, r *request) (int, any, error) {
	return s.lifecycle(ctx, r, "resume goal", store.ProposalGoalResume)
}

// lifecycle stops or resumes a goal for the admin token, through the change kernel; stopping
// a stopped goal (or resuming a running one) answers it unchanged.
func (s *Server) lifecycle(ctx context.Context, r *request, action, kind string) (int, any, error) {
	if err := s.requireAdmin(r, action); err != nil {
		return 0, nil, err
	}
	var b struct{}
	if err := decode(r, &b); err != nil {
		return 0, nil, err
	}
	return s.applyDirect(ctx, r, change.Request{GoalID: r.PathValue("goal"), Kind: kind})
}

func nonNil[T any](v []T) []T {
	if v == nil {
		return []T{}
	}
	return v
}
