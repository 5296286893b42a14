package web

import (
	"cmp"
	"context"

	"errors"
	"net/http"
	"strconv"
	"strings"

	"loopx/change"
	"loopx/store"
	"loopx/templates"
)

// homeLimit caps each list of the home page; its counts stay exact.
const homeLimit = 50

func (s *Server) home(ctx context.Context, r *http.Request, ss *session, v *view) (string, int, error) {
	h, err := store.ReadHome(ctx, s.st.DB(), ss.person(s.admins), v.Now, homeLimit)
	if err != nil {
		return "", 0, err
	}
	v.Home, v.Live, v.Title = h, "*", s.pages.Word(v.Lang, "needs_you")
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
	v.Goal, v.Role, v.Page, v.Live = g.Goal, string(g.Role), page, g.ID
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
	req, err := changeRequest(r, g.Goal)
	if err == nil {
		var p store.Proposal
		p, err = s.opts.Changes.Propose(ctx, ss.person(s.admins), ss.meta(r), req)
		if err == nil {
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

// changeRequest reads a change form. Goal settings come as the whole form (the kernel keeps
// only what differs); a number that is not one is an error naming its field.
func changeRequest(r *http.Request, g store.Goal) (change.Request, error) {
	f := r.PostForm
	req := change.Request{GoalID: g.ID, Kind: f.Get("kind")}
	switch req.Kind {
	case store.ProposalGoalPause, store.ProposalGoalResume:
		return req, nil
	case store.ProposalAgentSet:
		req.AgentID = f.Get("agent_id")
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
	num := func(name string, dst **int) error {
		v := strings.TrimSpace(f.Get(name))
		if !f.Has(name) || v == "" {
			return nil
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return store.Errorf(store.ErrInvalid, name, "%q is not a whole number", v)
		}
		*dst = &n
		return nil
	}
	str := func(name string, dst **string) {
		if f.Has(name) {
			v := strings.TrimSpace(f.Get(name))
			*dst = &v
		}
	}
	people := func(name string, dst **[]string) {
		if !f.Has(name) {
			return
		}
		list := strings.FieldsFunc(f.Get(name), func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '，' })
		if list == nil {
			list = []string{}
		}
		*dst = &list
	}
	c := &req.Goal
	for _, n := range []struct {
		name string
		dst  **int
	}{{"allowed_slots", &c.AllowedSlots}, {"window_hours", &c.WindowHours}, {"stall_turns", &c.StallTurns}} {
		if err := num(n.name, n.dst); err != nil {
			return req, err
		}
	}
	str("heartbeat_spec", &c.HeartbeatSpec)
	str("heartbeat_tz", &c.HeartbeatTZ)
	str("report_spec", &c.ReportSpec)
	str("report_tz", &c.ReportTZ)
	people("owners", &c.Owners)
	people("members", &c.Members)
	return req, nil
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
