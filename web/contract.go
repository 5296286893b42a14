package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"loopx/change"
	"loopx/store"
	"loopx/templates"
)

// The goal contract on the goal page: the objective, scope, capabilities (the goal's and each
// agent's) and acceptance criteria with what met them; the board's todos with their criteria,
// required capabilities and latest handoff; every setting with its source; the trail of
// decisions. Owners change the contract through the change kernel (the forms post to
// /proposals, so every change is previewed), waive criteria and hand todos on; both are the
// store's operations chat and the API use, audited there.

// criterionView is a criterion with what met it: the evidence (when the page holds it) or the
// owner's waiver.
type criterionView struct {
	store.CriterionStatus
	Evidence *store.Evidence
}

// todoView is a todo of the board with its contract.
type todoView struct {
	store.Todo
	Checks  []criterionView // its criteria, met or not
	Unmet   int
	Handoff *store.Handoff // the newest handoff of the todo, nil when none
	// Expand opens the todo's waivers: the finish the owner just tried was refused for them.
	Expand bool
}

// contractView is the goal's own contract as the page shows it.
type contractView struct {
	Scope    store.Scope
	Criteria []criterionView
	Unmet    int
	// Grants are the agents' capabilities, for the capabilities the goal grants.
	Grants []grantView
}

// grantView is one agent's capabilities: each the goal grants, held or not.
type grantView struct {
	AgentID string
	Caps    []capView
	Any     bool // it holds at least one
}

type capView struct {
	Name string
	Held bool
}

// settingView is a goal setting as the page shows it: its name and value in words, the
// machine default, whether the goal follows it, and whether the page can put it back.
type settingView struct {
	Setting, Name, Value, Default string
	Input                         string // the value as the settings form takes it
	Own                           bool   // set for this goal (an override)
	Reset                         bool   // goal.set can put it back to the machine default
}

// decisionView is one entry of the trail, its detail read.
type decisionView struct {
	store.GoalDecision
	Cancelled []int64 // todos a replan cancelled
	Reopened  []int64 // and reopened
	Unmet     []string
	OpenTodos []int64 // todos still open when the goal was finished
	Gates     []int64 // gates finishing it withdrew
}

// trailLimit caps the trail on the goal page; handoffLimit the handoffs read for the board.
const (
	trailLimit   = 50
	handoffLimit = 200
	pendingLimit = 50 // an agent's unread handoffs the page counts
	// criteriaTodos caps the todos whose criteria the board reads one by one (the board's
	// first, which are the open ones).
	criteriaTodos = 60
)

// readContract fills the goal page's contract parts of v from the page already read: the
// goal's criteria and grants, the board, the trail, what each agent has not read yet, and
// the settings.
func (s *Server) readContract(ctx context.Context, g store.Goal, page store.GoalPage, v *view) error {
	evidence := map[int64]*store.Evidence{}
	for i, e := range page.Evidence {
		evidence[e.ID] = &page.Evidence[i]
	}
	checks := func(st []store.CriterionStatus) ([]criterionView, int) {
		out := make([]criterionView, len(st))
		unmet := 0
		for i, c := range st {
			out[i] = criterionView{CriterionStatus: c, Evidence: evidence[c.EvidenceID]}
			if !c.Met {
				unmet++
			}
		}
		return out, unmet
	}
	st, err := store.CriteriaStatus(ctx, s.st.DB(), g.ID, 0, g.Criteria)
	if err != nil {
		return err
	}
	v.Contract.Scope = g.Scope()
	v.Contract.Criteria, v.Contract.Unmet = checks(st)
	for _, a := range page.Agents {
		gv := grantView{AgentID: a.ID}
		for _, c := range g.Capabilities {
			held := slices.Contains(a.Capabilities, c)
			gv.Caps = append(gv.Caps, capView{Name: c, Held: held})
			gv.Any = gv.Any || held
		}
		v.Contract.Grants = append(v.Contract.Grants, gv)
	}
	if err := s.readBoard(ctx, g, page, v, checks); err != nil {
		return err
	}
	replan, err := s.readTrail(ctx, g, v)
	if err != nil {
		return err
	}
	if err := s.readUnread(ctx, g, replan, v); err != nil {
		return err
	}
	if v.UnmetTodo != 0 {
		s.criteriaFlash(v)
	}
	return s.readSettings(ctx, g, v)
}

// readBoard fills the board's todos with their criteria (met or not) and latest handoff.
func (s *Server) readBoard(ctx context.Context, g store.Goal, page store.GoalPage, v *view,
	checks func([]store.CriterionStatus) ([]criterionView, int)) error {
	db := s.st.DB()
	handoffs, err := store.ListHandoffs(ctx, db, store.ListHandoffsParams{GoalID: g.ID, Limit: handoffLimit})
	if err != nil {
		return err
	}
	latest := map[int64]*store.Handoff{}
	for i, h := range handoffs { // newest first
		if h.TodoID != 0 && latest[h.TodoID] == nil {
			latest[h.TodoID] = &handoffs[i]
		}
	}
	read := 0
	for _, t := range page.Todos {
		tv := todoView{Todo: t, Handoff: latest[t.ID], Expand: t.ID == v.UnmetTodo}
		if len(t.Criteria) > 0 && (read < criteriaTodos || t.ID == v.UnmetTodo) {
			read++
			st, err := store.CriteriaStatus(ctx, db, g.ID, t.ID, t.Criteria)
			if err != nil {
				return err
			}
			tv.Checks, tv.Unmet = checks(st)
		}
		v.Todos = append(v.Todos, tv)
	}
	return nil
}

// readTrail fills the trail of decisions, newest first, and the decision that finished a
// done goal; it answers the newest replan (nil when none).
func (s *Server) readTrail(ctx context.Context, g store.Goal, v *view) (*store.GoalDecision, error) {
	trail, err := store.ListTrail(ctx, s.st.DB(), g.ID, trailLimit)
	if err != nil {
		return nil, err
	}
	var replan *store.GoalDecision
	for i, d := range trail {
		var detail struct {
			Cancelled []int64  `json:"cancelled_todos"`
			Reopened  []int64  `json:"reopened_todos"`
			Unmet     []string `json:"unmet_criteria"`
			Open      []int64  `json:"open_todos"`
			Gates     []int64  `json:"cancelled_gates"`
		}
		if len(d.Detail) > 0 {
			if err := json.Unmarshal(d.Detail, &detail); err != nil {
				return nil, fmt.Errorf("read decision %d: %w", d.ID, err)
			}
		}
		v.Trail = append(v.Trail, decisionView{GoalDecision: d, Cancelled: detail.Cancelled, Reopened: detail.Reopened,
			Unmet: detail.Unmet, OpenTodos: detail.Open, Gates: detail.Gates})
		if d.Kind == store.DecisionReplan && replan == nil {
			replan = &trail[i]
		}
	}
	for i := range v.Trail {
		if v.Trail[i].Kind == store.DecisionDone && g.Status == store.GoalDone {
			v.Done = &v.Trail[i] // the newest
			break
		}
	}
	return replan, nil
}

// readUnread fills, for each agent, the handoffs it has not acknowledged (oldest first: its
// should-run carries the oldest as its continuation) and the replan it has not.
func (s *Server) readUnread(ctx context.Context, g store.Goal, replan *store.GoalDecision, v *view) error {
	for i := range v.Agents {
		a := &v.Agents[i]
		pending, err := store.ListHandoffs(ctx, s.st.DB(), store.ListHandoffsParams{GoalID: g.ID, PendingTo: a.ID, Limit: pendingLimit})
		if err != nil {
			return err
		}
		slices.Reverse(pending)
		a.Pending = pending
		if replan != nil && replan.ID > a.ReplanAcked {
			a.Unread = replan
		}
	}
	return nil
}

// criteriaFlash names, in words, the criteria that kept the todo the owner tried to finish
// open.
func (s *Server) criteriaFlash(v *view) {
	for _, t := range v.Todos {
		if t.ID != v.UnmetTodo || t.Unmet == 0 {
			continue
		}
		var items []string
		for _, c := range t.Checks {
			if !c.Met {
				items = append(items, s.pages.Word(v.Lang, "criterion_item", c.ID, c.Text))
			}
		}
		v.Flash = s.pages.Word(v.Lang, "flash_criteria_unmet", t.ID, strings.Join(items, s.pages.Word(v.Lang, "list_sep")))
	}
}

// effectiveSettings are the goal's settings with a machine default, each at its effective
// value (as store.GoalSettings writes it), by setting.
func (s *Server) effectiveSettings(ctx context.Context, g store.Goal) (map[string]string, error) {
	vals, err := s.goalSettings(ctx, g)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(vals))
	for _, sv := range vals {
		out[sv.Setting] = sv.Value
	}
	return out, nil
}

func (s *Server) goalSettings(ctx context.Context, g store.Goal) ([]store.SettingValue, error) {
	d, err := store.GetMachineDefaults(ctx, s.st.DB())
	if err != nil {
		return nil, err
	}
	pol, err := s.st.GetPermissionPolicy(ctx, g.ID)
	if err != nil {
		return nil, err
	}
	return store.GoalSettings(g, d, pol), nil
}

// readSettings words every setting of g for the page.
func (s *Server) readSettings(ctx context.Context, g store.Goal, v *view) error {
	vals, err := s.goalSettings(ctx, g)
	if err != nil {
		return err
	}
	for _, sv := range vals {
		v.Settings = append(v.Settings, settingView{
			Setting: sv.Setting, Name: change.FieldName(s.opts.Templates, v.Lang, sv.Setting),
			Value: s.settingWords(v.Lang, sv.Setting, sv.Value), Default: s.settingWords(v.Lang, sv.Setting, sv.Default),
			Input: sv.Value,
			Own:   sv.Source == store.SourceOverride,
			// The permission wait is the permission policy's, which goal.set does not change.
			Reset: sv.Source == store.SourceOverride && sv.Setting != store.SettingPermissionTimeout,
		})
	}
	return nil
}

// settingWords says a setting's value as people read it: a schedule in words, on and off, a
// language by its name, a threshold of 0 as off.
func (s *Server) settingWords(lang, setting, value string) string {
	switch setting {
	case store.SettingHeartbeatSpec, store.SettingReportSpec:
		return templates.Schedule(lang, value)
	case store.SettingProgressCard, store.SettingQuietDigests:
		return s.pages.Word(lang, "onoff_"+value)
	case store.SettingBreakerFailures, store.SettingStallTurns:
		if value == "0" {
			return s.pages.Word(lang, "off")
		}
	case store.SettingLang:
		return s.pages.Word(lang, "lang_"+value)
	}
	if value == "" {
		return "—"
	}
	return value
}

// waive records an owner's waiver of a criterion (of a todo, or of the goal with no todo):
// it counts as met without evidence, with who and why; the store audits it.
func (s *Server) waive(ctx context.Context, w http.ResponseWriter, r *http.Request, ss *session) {
	g, ok := s.goalForm(w, r, ss)
	if !ok {
		return
	}
	var todoID int64
	frag := "contract"
	if v := r.PostFormValue("todo"); v != "" {
		id, ok := parseID(v)
		if !ok {
			s.showNotFound(w, r, ss)
			return
		}
		todoID, frag = id, "todo-"+strconv.FormatInt(id, 10)
	}
	if !s.allowed(w, r, ss, g, "waive", frag) {
		return
	}
	_, err := s.st.WaiveCriterion(ctx, store.WaiveParams{GoalID: g.ID, TodoID: todoID, Criterion: r.PostFormValue("criterion"),
		Reason: strings.TrimSpace(r.PostFormValue("reason")), Meta: ss.meta(r)})
	if errors.Is(err, store.ErrNotFound) && todoID != 0 {
		var se *store.Error
		if !errors.As(err, &se) || se.Field != "criterion" {
			s.showNotFound(w, r, ss) // no such todo on this goal
			return
		}
	}
	if err != nil {
		s.formError(w, r, ss, g.ID, err)
		return
	}
	back(w, r, "/web/goals/"+g.ID, "waived", "", frag)
}

// handOff hands a todo to another agent for an owner, with a note: what was done, what is
// next, open questions. The todo's claim moves to the receiver, whose next should-run
// carries the handoff as its continuation until it acknowledges it.
func (s *Server) handOff(ctx context.Context, w http.ResponseWriter, r *http.Request, ss *session) {
	g, ok := s.goalForm(w, r, ss)
	if !ok {
		return
	}
	id, ok := parseID(r.PathValue("todo"))
	if !ok {
		s.showNotFound(w, r, ss)
		return
	}
	frag := "todo-" + strconv.FormatInt(id, 10)
	if !s.allowed(w, r, ss, g, "handoff", frag) {
		return
	}
	f := r.PostForm
	_, err := s.st.HandOff(ctx, store.HandoffParams{GoalID: g.ID, TodoID: id, To: f.Get("to"), Kind: f.Get("handoff_kind"),
		Done: strings.TrimSpace(f.Get("done")), Next: strings.TrimSpace(f.Get("next")),
		Questions: strings.TrimSpace(f.Get("questions")), Meta: ss.meta(r)})
	var se *store.Error
	switch {
	case err == nil:
		back(w, r, "/web/goals/"+g.ID, "handed_off", "", frag)
	case errors.As(err, &se) && se.Kind == store.ErrNotFound && se.Field == "todo_id":
		s.showNotFound(w, r, ss)
	case errors.As(err, &se) && se.Reason == store.ReasonMissingCapability:
		// Not the person's role: the receiver lacks what the todo requires.
		back(w, r, "/web/goals/"+g.ID, "handoff_capability", "", frag)
	default:
		s.formError(w, r, ss, g.ID, err)
	}
}
