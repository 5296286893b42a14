package web

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"loopx/store"
)

// Needs is the role each action of the page needs, the same as chat's for the same act
// (router's command table): members add todos and message agents; owners move todos on the
// board and answer gates; protected changes go through the change kernel, which decides. The
// server package's tests check the two tables agree.
func Needs() map[string]store.Role {
	return map[string]store.Role{
		"todo":    store.RoleMember, // chat /todo
		"message": store.RoleMember, // a chat message to an agent, /queue, /steer
		"move":    store.RoleOwner,  // release, re-prioritise, cancel or move a todo
		"approve": store.RoleOwner,  // chat /approve and /reject, the gate card's buttons
		"stop":    store.RoleOwner,  // chat /stop #goal/agent
		"run":     store.RoleOwner,  // chat /run #goal/agent
		"pause":   store.RoleOwner,  // chat /pause #goal/agent
		"resume":  store.RoleOwner,  // chat /resume #goal/agent, the breaker card's button
		"waive":   store.RoleOwner,  // a criterion counts as met without evidence: owners decide
		"handoff": store.RoleOwner,  // hand a todo to another agent: its claim moves, like a move
	}
}

// allowed checks the session's role for action on g; a refusal is audited like chat's and
// sent back to the page it came from, saying who may.
func (s *Server) allowed(w http.ResponseWriter, r *http.Request, ss *session, g store.GoalAs, action, frag string) bool {
	need := Needs()[action]
	if g.Role.AtLeast(need) {
		return true
	}
	if err := s.st.AuditRefusal(r.Context(), ss.meta(r), store.RefusalParams{
		Action: "web." + action, GoalID: g.ID, Target: r.Method + " " + r.URL.Path,
		Reason: "not " + string(need), Detail: map[string]any{"role": string(g.Role)},
	}); err != nil {
		s.fail(w, r, err)
		return false
	}
	who := "owners"
	if need == store.RoleMember {
		who = "members"
	}
	back(w, r, "/web/goals/"+g.ID, "not_allowed", who, frag)
	return false
}

// goalForm reads the goal a form acts on; it answers (404 or failure) and returns false when
// there is none the person may see.
func (s *Server) goalForm(w http.ResponseWriter, r *http.Request, ss *session) (store.GoalAs, bool) {
	g, err := s.goalAs(r.Context(), ss, r.PathValue("goal"))
	if errors.Is(err, store.ErrNotFound) {
		s.showNotFound(w, r, ss)
		return g, false
	}
	if err != nil {
		s.fail(w, r, err)
		return g, false
	}
	return g, true
}

// addTodo adds a todo from the goal page, as chat's /todo does.
func (s *Server) addTodo(ctx context.Context, w http.ResponseWriter, r *http.Request, ss *session) {
	g, ok := s.goalForm(w, r, ss)
	if !ok || !s.allowed(w, r, ss, g, "todo", "todos") {
		return
	}
	p := store.AddTodoParams{GoalID: g.ID, Text: strings.TrimSpace(r.PostFormValue("text")), Meta: ss.meta(r)}
	// Acceptance criteria one a line ("id: text" chooses the id), and the capabilities an
	// agent needs to claim it (each one the goal grants: the store checks).
	for _, line := range lines(r.PostFormValue("criteria")) {
		p.Criteria = append(p.Criteria, store.ParseCriterion(line))
	}
	if req := trimmed(r.PostForm["requires"]); len(req) > 0 {
		p.Requires = req
	}
	if r.PostFormValue("for") == "people" {
		p.Role = "user"
	}
	if v := r.PostFormValue("priority"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			s.formError(w, r, ss, g.ID, store.Errorf(store.ErrInvalid, "priority", "%q is not a priority from 0 to 4", v))
			return
		}
		p.Priority = &n
	}
	td, err := s.st.AddTodo(ctx, p)
	if err != nil {
		s.formError(w, r, ss, g.ID, err)
		return
	}
	back(w, r, "/web/goals/"+g.ID, "todo_added", "", "todo-"+strconv.FormatInt(td.ID, 10))
}

// moveTodo changes one todo from the board: move it to another column, re-prioritise it,
// release its claim or cancel it. The form carries the version it was read at, so a todo
// that changed meanwhile is not overwritten.
func (s *Server) moveTodo(ctx context.Context, w http.ResponseWriter, r *http.Request, ss *session) {
	g, ok := s.goalForm(w, r, ss)
	id, idOK := parseID(r.PathValue("todo"))
	if !ok {
		return
	}
	if !idOK {
		s.showNotFound(w, r, ss)
		return
	}
	frag := "todo-" + strconv.FormatInt(id, 10)
	if !s.allowed(w, r, ss, g, "move", frag) {
		return
	}
	version, err := strconv.ParseInt(r.PostFormValue("version"), 10, 64)
	if err != nil {
		version = 0 // the store names the missing version
	}
	p := store.UpdateTodoParams{GoalID: g.ID, TodoID: id, Version: version, Meta: ss.meta(r)}
	// One field says the move: a column (open, blocked, done, cancelled), "release", or a
	// priority p0..p4; the board's buttons and its drag and drop send the same.
	switch to := r.PostFormValue("to"); {
	case to == store.TodoOpen || to == store.TodoBlocked || to == store.TodoDone || to == store.TodoCancelled:
		p.Status = &to
	case to == "release":
		p.ClearClaim = true
	case len(to) == 2 && to[0] == 'p' && to[1] >= '0' && to[1] <= '4':
		n := int(to[1] - '0')
		p.Priority = &n
	default:
		s.formError(w, r, ss, g.ID, store.Errorf(store.ErrInvalid, "to", "%q is not a move the board makes", to))
		return
	}
	if _, err := s.st.UpdateTodo(ctx, p); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			s.showNotFound(w, r, ss)
			return
		}
		if errors.Is(err, store.ErrConflict) {
			back(w, r, "/web/goals/"+g.ID, "todo_changed", "", frag)
			return
		}
		var se *store.Error
		if errors.As(err, &se) && se.Reason == store.ReasonCriteriaUnmet {
			// The page names the criteria still unmet, in words, and opens their waivers.
			back(w, r, "/web/goals/"+g.ID, "criteria_unmet", strconv.FormatInt(id, 10), frag)
			return
		}
		s.formError(w, r, ss, g.ID, err)
		return
	}
	back(w, r, "/web/goals/"+g.ID, "todo_moved", "", frag)
}

// message puts a person's message into an agent's inbox from the goal page: the same modes
// and rules as chat (inbox; queue for the next turn; steer only into a live turn, never
// downgraded). The form's idempotency key is the item's source, so a double submit is one
// item.
func (s *Server) message(ctx context.Context, w http.ResponseWriter, r *http.Request, ss *session) {
	g, ok := s.goalForm(w, r, ss)
	if !ok {
		return
	}
	agentID := r.PathValue("agent")
	frag := "agent-" + agentID
	if !s.allowed(w, r, ss, g, "message", frag) {
		return
	}
	if _, err := s.st.GetAgent(ctx, g.ID, agentID); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			s.showNotFound(w, r, ss)
			return
		}
		s.fail(w, r, err)
		return
	}
	mode := r.PostFormValue("mode")
	if mode == "" {
		mode = store.ModeInbox
	}
	text := strings.TrimSpace(r.PostFormValue("text"))
	if err := s.opts.Inbox.CheckText(text); err != nil {
		s.formError(w, r, ss, g.ID, err)
		return
	}
	key := ss.meta(r).IdempotencyKey
	if key == "" {
		key = newKey()
	}
	req := struct {
		GoalID, AgentID, Mode, Text string
	}{g.ID, agentID, mode, text}
	_, err := store.Do(ctx, s.st, "web.message", ss.meta(r), req,
		func(tx *store.Tx, now time.Time) (int64, store.Audit, error) {
			var turnID int64
			if mode == store.ModeSteer {
				live, err := store.GetLiveTurn(ctx, tx, g.ID, agentID, now)
				if errors.Is(err, store.ErrNotFound) {
					// Refused, never downgraded to the inbox; Do audits the refusal.
					return 0, store.Audit{}, store.Errorf(store.ErrRefused, "mode", "%s/%s has no live turn to steer", g.ID, agentID)
				}
				if err != nil {
					return 0, store.Audit{}, err
				}
				turnID = live.ID
			}
			it, _, err := s.opts.Inbox.Enqueue(ctx, tx, store.InboxInsert{
				GoalID: g.ID, AgentID: agentID, Mode: mode, Text: text, Sender: ss.actor(),
				SourceMessage: "web:" + ss.actor() + ":" + key, TurnID: turnID,
			})
			if err != nil {
				return 0, store.Audit{}, err
			}
			d, _ := json.Marshal(map[string]any{"agent_id": agentID, "mode": mode})
			return it.ID, store.Audit{GoalID: g.ID, Target: store.InboxTarget(it.ID), Detail: d}, nil
		})
	switch {
	case errors.Is(err, store.ErrRefused) && mode == store.ModeSteer:
		back(w, r, "/web/goals/"+g.ID, "steer_no_turn", "", frag)
	case errors.Is(err, store.ErrFull):
		back(w, r, "/web/goals/"+g.ID, "inbox_full", "", frag)
	case err != nil:
		s.formError(w, r, ss, g.ID, err)
	default:
		back(w, r, "/web/goals/"+g.ID, "message_sent", mode, frag)
	}
}
