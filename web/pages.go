package web

import (
	"cmp"
	"context"

	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"loopx/cards"
	"loopx/change"
	"loopx/store"
	"loopx/templates"
)

// homeLimit caps each list of the home page; its counts stay exact. homeDone caps its done
// goals.
const (
	homeLimit = 50
	homeDone  = 10
)

func (s *Server) home(ctx context.Context, r *http.Request, ss *session, v *view) (string, int, error) {
	h, err := store.ReadHome(ctx, s.st.DB(), ss.person(s.admins), v.Now, homeLimit)
	if err != nil {
		return "", 0, err
	}
	for _, list := range [][]store.HomeGate{h.Gates, h.Stalled} {
		for i := range list {
			list[i].Question, _ = cards.GateWords(s.opts.Cards.Templates(), v.Lang, list[i].Gate)
		}
	}
	v.Home, v.Live, v.Title = h, "*", s.pages.Word(v.Lang, "needs_you")
	// Done goals: the newest few, with their number; the goals list has them all.
	if v.DoneGoals, err = store.ListGoalRows(ctx, s.st.DB(), ss.person(s.admins),
		store.GoalListParams{Status: store.GoalDone, Sort: store.GoalSortRecent, Limit: homeDone}, v.Now); err != nil {
		return "", 0, err
	}
	if err := s.addProposals(v, h.Proposals); err != nil {
		return "", 0, err
	}
	return "home", http.StatusOK, nil
}

// goalAs reads a goal as the session's person; a goal they may not see is ErrNotFound.
func (s *Server) goalAs(ctx context.Context, ss *session, id string) (store.GoalAs, error) {
	if !store.ValidID(id) {
		return store.GoalAs{}, store.ErrNotFound
	}
	g, err := store.GetGoalAs(ctx, s.st.DB(), id, ss.person(s.admins))
	if err != nil {
		return store.GoalAs{}, err
	}
	if !g.Role.AtLeast(store.RoleMember) {
		return store.GoalAs{}, store.ErrNotFound
	}
	return g, nil
}

func (s *Server) goal(ctx context.Context, r *http.Request, ss *session, v *view) (string, int, error) {
	g, err := s.goalAs(ctx, ss, r.PathValue("goal"))
	if errors.Is(err, store.ErrNotFound) {
		return s.notFound(v)
	}
	if err != nil {
		return "", 0, err
	}
	if ss.Lang == "" {
		v.Lang = cmp.Or(g.Lang, v.Lang)
	}
	page, err := store.ReadGoalPage(ctx, s.st.DB(), g.Goal, v.Now)
	if err != nil {
		return "", 0, err
	}
	for i := range page.Gates {
		// The stall guard's question is LoopX's own: the page says it in the page's language.
		page.Gates[i].Question, _ = cards.GateWords(s.opts.Cards.Templates(), v.Lang, page.Gates[i])
	}
	v.Goal, v.Role, v.Page, v.Live = g.Goal, string(g.Role), page, g.ID
	// ?handoff=<todo> opens that todo's handoff form: one form on the page, not one a todo.
	v.HandoffTodo, _ = parseID(r.URL.Query().Get("handoff"))
	v.Title = "#" + g.ID
	need := Needs()
	v.CanChange = g.Role.AtLeast(need["move"])
	v.CanAnswer = g.Role.AtLeast(need["approve"])
	v.CanAct = g.Role.AtLeast(need["todo"]) && g.Role.AtLeast(need["message"])
	for _, a := range page.Agents {
		av := agentView{Agent: a}
		for i, t := range page.Turns {
			if t.AgentID == a.ID && t.State == store.TurnLive {
				av.Live = &page.Turns[i]
			}
		}
		for _, it := range page.Inbox {
			if it.AgentID == a.ID {
				av.Inbox = append(av.Inbox, it)
			}
		}
		v.Agents = append(v.Agents, av)
	}
	if err := s.readContract(ctx, g.Goal, page, v); err != nil {
		return "", 0, err
	}
	if err := s.addProposals(v, page.Proposals); err != nil {
		return "", 0, err
	}
	return "goal", http.StatusOK, nil
}

// addProposals renders proposals into the page's list, in the page's language.
func (s *Server) addProposals(v *view, ps []store.Proposal) error {
	for _, p := range ps {
		pv, err := s.proposals.View(v.Lang, p, v.Now)
		if err != nil {
			return err
		}
		v.Proposals = append(v.Proposals, pv)
	}
	return nil
}

func parseID(s string) (int64, bool) {
	n, err := strconv.ParseInt(strings.TrimPrefix(strings.ToLower(s), "p"), 10, 64)
	return n, err == nil && n > 0
}

func (s *Server) proposal(ctx context.Context, r *http.Request, ss *session, v *view) (string, int, error) {
	id, ok := parseID(r.PathValue("proposal"))
	if !ok {
		return s.notFound(v)
	}
	p, g, err := change.Get(ctx, s.st.DB(), ss.person(s.admins), id)
	if errors.Is(err, store.ErrNotFound) {
		return s.notFound(v)
	}
	if err != nil {
		return "", 0, err
	}
	if ss.Lang == "" {
		v.Lang = cmp.Or(g.Lang, v.Lang)
	}
	if v.Proposal, err = s.proposals.View(v.Lang, p, v.Now); err != nil {
		return "", 0, err
	}
	v.Live, v.Title = g.ID, v.Proposal.Short
	v.CanConfirm = g.Role.AtLeast(p.Need)
	v.IsDefaults = p.Kind == store.ProposalDefaultsSet
	if p.Kind == store.ProposalGoalReplan && v.Proposal.Open && v.CanConfirm {
		v.ReplanFrom = p.ID
	}
	return "proposal", http.StatusOK, nil
}

// meta is the kernel metadata of a form: the session's person acting from the web, keyed by
// the form's idempotency key (a double submit replays the first answer).
func (ss *session) meta(r *http.Request) store.Meta {
	key := r.PostFormValue("key")
	if len(key) > 100 {
		key = key[:100]
	}
	return store.Meta{Actor: ss.actor(), Surface: "web", IdempotencyKey: key}
}

// propose turns the goal page's forms into a change request and shows its preview.
func (s *Server) propose(ctx context.Context, w http.ResponseWriter, r *http.Request, ss *session) {
	g, err := s.goalAs(ctx, ss, r.PathValue("goal"))
	if errors.Is(err, store.ErrNotFound) {
		s.showNotFound(w, r, ss)
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	current, err := s.effectiveSettings(ctx, g.Goal)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	req, err := changeRequest(r, g.Goal, current)
	if err == nil {
		var p store.Proposal
		p, err = s.opts.Changes.Propose(ctx, ss.person(s.admins), ss.meta(r), req)
		if err == nil {
			s.replaced(ctx, r, ss, g.ID, p.ID)
			back(w, r, "/web/proposals/"+strconv.FormatInt(p.ID, 10), "", "", "")
			return
		}
	}
	s.formError(w, r, ss, g.ID, err)
}

// formError shows the goal page again with why the form was refused, answered with the
// status of the error's kind; one the person may not make says so on the page it came from.
func (s *Server) formError(w http.ResponseWriter, r *http.Request, ss *session, goalID string, err error) {
	if errors.Is(err, store.ErrForbidden) {
		back(w, r, "/web/goals/"+goalID, "not_allowed", "owners", "")
		return
	}
	var se *store.Error
	if !errors.As(err, &se) {
		s.fail(w, r, err)
		return
	}
	v := s.baseView(r, ss, cmp.Or(ss.Lang, s.opts.DefaultLang))
	name, _, gerr := s.goal(r.Context(), r, ss, v)
	if gerr != nil {
		s.fail(w, r, gerr)
		return
	}
	v.Flash, v.FlashKind = s.invalid(v.Lang, se), "warn"
	s.render(w, pageStatus(err), name, v)
}

func (s *Server) showNotFound(w http.ResponseWriter, r *http.Request, ss *session) {
	v := s.baseView(r, ss, cmp.Or(ss.Lang, s.opts.DefaultLang))
	name, status, _ := s.notFound(v)
	s.render(w, status, name, v)
}

// changeRequest reads a change form of the goal page (its kind, and for goal.set and agent.set
// its part) into a change request; a number that is not one is an error naming its field.
// The settings form carries every setting, and only those whose value differs from the
// goal's effective one (current, by setting) join the change: a setting that follows the
// machine default keeps following it unless the owner changed its value.
func changeRequest(r *http.Request, g store.Goal, current map[string]string) (change.Request, error) {
	f := r.PostForm
	req := change.Request{GoalID: g.ID, Kind: f.Get("kind")}
	switch req.Kind {
	case store.ProposalGoalPause, store.ProposalGoalResume:
		return req, nil
	case store.ProposalGoalDone, store.ProposalGoalReopen:
		req.Reason = strings.TrimSpace(f.Get("reason"))
		return req, nil
	case store.ProposalGoalReplan:
		return replanRequest(f, req)
	case store.ProposalAgentSet:
		req.AgentID = f.Get("agent_id")
		if f.Get("part") == "grants" {
			caps := trimmed(f["capability"])
			req.Agent.Capabilities = &caps
			return req, nil
		}
		if m := f.Get("work_mode"); m != "" {
			req.Agent.WorkMode = &m
		}
		def := f.Get("is_default") == "true"
		req.Agent.IsDefault = &def
		return req, nil
	case store.ProposalGoalSet:
	default:
		return req, store.Errorf(store.ErrInvalid, "kind", "%q is not a change this page makes", req.Kind)
	}
	c := &req.Goal
	switch part := f.Get("part"); part {
	case "scope":
		ed, pr, notes := lines(f.Get("scope_editable")), lines(f.Get("scope_protected")), strings.TrimSpace(f.Get("scope_notes"))
		c.ScopeEditable, c.ScopeProtected, c.ScopeNotes = &ed, &pr, &notes
	case "capabilities":
		caps := names(f.Get("capabilities"))
		c.Capabilities = &caps
	case "criterion_add":
		c.AddCriteria = []store.Criterion{store.ParseCriterion(f.Get("criterion"))}
	case "criterion_remove":
		c.RemoveCriteria = []string{f.Get("criterion")}
	case "default":
		c.Defaults = []string{f.Get("setting")}
	case "", "settings":
		return req, settingsChange(f, c, current)
	default:
		return req, store.Errorf(store.ErrInvalid, "part", "%q is not a part of the goal this page changes", part)
	}
	return req, nil
}

// settingsChange reads the settings form into c: each setting given a value other than its
// effective one (current), the owners and members.
func settingsChange(f url.Values, c *change.GoalChange, current map[string]string) error {
	if err := readSettings(f,
		[]numField{{store.SettingAllowedSlots, &c.AllowedSlots}, {store.SettingWindowHours, &c.WindowHours},
			{store.SettingStallTurns, &c.StallTurns}, {store.SettingReminderEscalate, &c.ReminderEscalateAfter}},
		[]textField{{store.SettingHeartbeatSpec, &c.HeartbeatSpec}, {store.SettingHeartbeatTZ, &c.HeartbeatTZ},
			{store.SettingReportSpec, &c.ReportSpec}, {store.SettingReportTZ, &c.ReportTZ}, {store.SettingLang, &c.Lang},
			{store.SettingBreakerFailures, &c.BreakerFailures}, {store.SettingProgressCard, &c.ProgressCard},
			{store.SettingQuietDigests, &c.QuietDigests}, {store.SettingReminderMinutes, &c.ReminderMinutes}},
		func(name, v string) bool { return !sameSetting(name, v, current[name]) }); err != nil {
		return err
	}
	people := func(name string, dst **[]string) {
		if f.Has(name) {
			list := names(f.Get(name))
			*dst = &list
		}
	}
	people("owners", &c.Owners)
	people("members", &c.Members)
	return nil
}

// numField and textField name a settings form's field and where its value goes.
type numField struct {
	name string
	dst  **int
}

type textField struct {
	name string
	dst  **string
}

// readSettings fills, from a settings form (a goal's or the machine defaults'), the fields
// it gives: whole numbers, and texts (an empty text only turns a schedule off; for any
// other field it changes nothing). changed says whether a value given is a change (the
// goal's form leaves out what equals the goal's value).
func readSettings(f url.Values, nums []numField, texts []textField, changed func(name, v string) bool) error {
	for _, n := range nums {
		v := strings.TrimSpace(f.Get(n.name))
		if !f.Has(n.name) || v == "" {
			continue
		}
		num, err := strconv.Atoi(v)
		if err != nil {
			return store.Errorf(store.ErrInvalid, n.name, "%q is not a whole number", v)
		}
		if changed(n.name, strconv.Itoa(num)) {
			*n.dst = &num
		}
	}
	for _, n := range texts {
		if !f.Has(n.name) {
			continue
		}
		v := strings.TrimSpace(f.Get(n.name))
		if v == "" && n.name != store.SettingHeartbeatSpec && n.name != store.SettingReportSpec {
			continue
		}
		if changed(n.name, v) {
			*n.dst = &v
		}
	}
	return nil
}

// sameSetting tells whether v, as typed, is the setting's effective value cur: "off" is a
// breaker of 0, a reminder ladder may be typed with spaces.
func sameSetting(setting, v, cur string) bool {
	switch setting {
	case store.SettingBreakerFailures:
		if strings.EqualFold(v, "off") {
			v = "0"
		}
	case store.SettingReminderMinutes:
		if l, err := change.ParseLadder(v); err == nil {
			v = store.Ladder(l)
		}
	}
	return v == cur
}

// replanRequest reads the replan form: the new objective, why, and the todos to cancel and
// reopen (checkboxes carrying their ids).
func replanRequest(f url.Values, req change.Request) (change.Request, error) {
	ids := func(field string, vals []string) ([]int64, error) {
		var out []int64
		for _, v := range vals {
			id, ok := parseID(v)
			if !ok {
				return nil, store.Errorf(store.ErrInvalid, field, "%q is not a todo", v)
			}
			out = append(out, id)
		}
		return out, nil
	}
	cancel, err := ids("cancel_todos", f["cancel"])
	if err != nil {
		return req, err
	}
	reopen, err := ids("reopen_todos", f["reopen"])
	if err != nil {
		return req, err
	}
	req.Reason = strings.TrimSpace(f.Get("reason"))
	req.Replan = &change.ReplanChange{Objective: strings.TrimSpace(f.Get("objective")), Cancel: cancel, Reopen: reopen}
	return req, nil
}

// lines are the non-empty lines of a text area, trimmed.
func lines(s string) []string {
	return trimmed(strings.Split(s, "\n"))
}

// names are the names a field lists, separated by commas (either width), spaces or lines.
func names(s string) []string {
	return trimmed(strings.FieldsFunc(s, func(r rune) bool {
		return r == ',' || r == ' ' || r == '\n' || r == '\r' || r == '\t' || r == '，' || r == '、'
	}))
}

// trimmed are the non-empty values of vs, trimmed; never nil, so an empty list is a list.
func trimmed(vs []string) []string {
	out := []string{}
	for _, v := range vs {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

func (s *Server) confirm(ctx context.Context, w http.ResponseWriter, r *http.Request, ss *session) {
	s.settle(ctx, w, r, ss, s.opts.Changes.Confirm)
}

func (s *Server) cancel(ctx context.Context, w http.ResponseWriter, r *http.Request, ss *session) {
	s.settle(ctx, w, r, ss, s.opts.Changes.Cancel)
}

func (s *Server) settle(ctx context.Context, w http.ResponseWriter, r *http.Request, ss *session,
	op func(context.Context, store.Person, store.Meta, int64) (change.Result, error)) {
	id, ok := parseID(r.PathValue("proposal"))
	if !ok {
		s.showNotFound(w, r, ss)
		return
	}
	p, _, err := change.Get(ctx, s.st.DB(), ss.person(s.admins), id)
	if errors.Is(err, store.ErrNotFound) {
		s.showNotFound(w, r, ss)
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	path := "/web/proposals/" + strconv.FormatInt(p.ID, 10)
	res, err := op(ctx, ss.person(s.admins), ss.meta(r), p.ID)
	if errors.Is(err, store.ErrForbidden) {
		need := "owners"
		if p.Need == store.RoleAdmin {
			need = "admins"
		}
		back(w, r, path, "not_allowed", need, "")
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	switch {
	case res.Unchanged:
		back(w, r, path, "settled", res.Proposal.State, "")
	case res.Fresh != nil:
		back(w, r, "/web/proposals/"+strconv.FormatInt(res.Fresh.ID, 10), "stale", "", "")
	default:
		back(w, r, path, res.Proposal.State, "", "")
	}
}

// answerGate answers a gate from the goal page: the same operation as a chat card click,
// so the Lark card is updated the same way.
func (s *Server) answerGate(ctx context.Context, w http.ResponseWriter, r *http.Request, ss *session) {
	g, err := s.goalAs(ctx, ss, r.PathValue("goal"))
	gateID, ok := parseID(r.PathValue("gate"))
	if errors.Is(err, store.ErrNotFound) || !ok {
		s.showNotFound(w, r, ss)
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	who := ss.person(s.admins)
	answer := r.PostFormValue("answer")
	out, err := s.st.AnswerGate(ctx, store.AnswerGateParams{
		GoalID: g.ID, GateID: gateID, Answer: answer, AnsweredBy: ss.actor(), Comment: strings.TrimSpace(r.PostFormValue("comment")),
		ByAdmin: who.Admin, Notice: s.opts.Cards.Gates.Update, Meta: ss.meta(r),
	})
	frag := "gate-" + strconv.FormatInt(gateID, 10)
	var se *store.Error
	switch {
	case err == nil:
		back(w, r, "/web/goals/"+g.ID, "answered", out.Status, frag)
	case errors.Is(err, store.ErrForbidden):
		back(w, r, "/web/goals/"+g.ID, "not_allowed", "owners", frag)
	case errors.As(err, &se):
		s.formError(w, r, ss, g.ID, err)
	default:
		s.fail(w, r, err)
	}
}

// setLang keeps the person's language choice in the session.
func (s *Server) setLang(ctx context.Context, w http.ResponseWriter, r *http.Request, ss *session) {
	lang := r.PostFormValue("lang")
	if !templates.IsLang(lang) {
		lang = ""
	}
	if err := store.SetSessionLang(ctx, s.st.DB(), ss.id, lang); err != nil {
		s.fail(w, r, err)
		return
	}
	to := r.PostFormValue("back")
	if !strings.HasPrefix(to, "/web/") || strings.HasPrefix(to, "//") || strings.ContainsAny(to, "\\\r\n") {
		to = "/web/"
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// invalid says why a form was refused: the field in the page's words, then (in English) the
// store's reason; a Chinese page names the field in Chinese and asks to check it, so no
// English reaches a Chinese screen.
func (s *Server) invalid(lang string, se *store.Error) string {
	label := s.pages.Word(lang, "fieldname_"+se.Field)
	if label == "fieldname_"+se.Field {
		label = change.FieldName(s.opts.Templates, lang, se.Field)
	}
	return s.pages.Word(lang, "flash_invalid", label, se.Msg)
}
