package web

import (
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"

	"loopx/store"
)

// Running the work from the workspace: an owner stops an agent's live turn, fires its
// heartbeat now, pauses or resumes it (the chat's /stop, /run, /pause and /resume of one
// agent); members download the files of their goals.

// agentWork runs verb (stop, run, pause, resume) on the agent in the path, for an owner.
func (s *Server) agentWork(ctx context.Context, w http.ResponseWriter, r *http.Request, ss *session) {
	g, err := s.goalAs(ctx, ss, r.PathValue("goal"))
	agent, verb := r.PathValue("agent"), r.PathValue("verb")
	if errors.Is(err, store.ErrNotFound) || !store.ValidID(agent) {
		s.showNotFound(w, r, ss)
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	frag := "agent-" + agent
	if _, ok := Needs()[verb]; !ok {
		s.showNotFound(w, r, ss)
		return
	}
	if !s.allowed(w, r, ss, g, verb, frag) {
		return
	}
	meta := ss.meta(r)
	switch verb {
	case "stop":
		_, err = s.st.RequestStop(ctx, store.StopParams{GoalID: g.ID, AgentID: agent, Meta: meta})
	case "run":
		_, err = s.st.RequestRun(ctx, store.RunParams{GoalID: g.ID, AgentID: agent, Meta: meta})
	case "pause":
		_, err = s.st.HoldAgent(ctx, store.HoldParams{GoalID: g.ID, AgentID: agent, Meta: meta})
	case "resume":
		_, err = s.st.ResumeAgent(ctx, store.ResumeParams{GoalID: g.ID, AgentID: agent,
			Notice: s.opts.Cards.Turns().BreakerUpdate, Meta: meta})
	default:
		s.showNotFound(w, r, ss)
		return
	}
	var se *store.Error
	switch {
	case err == nil:
		back(w, r, "/web/goals/"+g.ID, "agent_"+verb, "", frag)
	case errors.As(err, &se) && se.Reason == store.ReasonNoLiveTurn:
		back(w, r, "/web/goals/"+g.ID, "agent_no_turn", "", frag)
	case errors.As(err, &se) && se.Reason == store.ReasonNotHeld:
		back(w, r, "/web/goals/"+g.ID, "agent_not_held", "", frag)
	case errors.As(err, &se):
		s.formError(w, r, ss, g.ID, err)
	default:
		s.fail(w, r, err)
	}
}

// file serves a file to a member (or owner) of its goal; to anyone else it does not exist.
func (s *Server) file(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ss, err := s.session(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if ss == nil {
		s.signInPrompt(w, r)
		return
	}
	id, err := strconv.ParseInt(r.PathValue("file"), 10, 64)
	if err != nil || id <= 0 {
		s.showNotFound(w, r, ss)
		return
	}
	a, err := s.st.GetAttachment(ctx, id)
	if err == nil {
		_, err = s.goalAs(ctx, ss, a.GoalID)
	}
	if errors.Is(err, store.ErrNotFound) {
		if a.ID != 0 {
			_ = s.st.AuditRefusal(ctx, store.Meta{Actor: ss.actor(), Surface: "web"}, store.RefusalParams{
				Action: "file.read", GoalID: a.GoalID, Target: store.AttachmentTarget(a.ID), Reason: "not a member of the goal"})
		}
		s.showNotFound(w, r, ss)
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	body, err := s.st.OpenAttachment(ctx, a)
	if errors.Is(err, store.ErrRefused) || errors.Is(err, store.ErrNotFound) {
		s.showNotFound(w, r, ss)
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer body.Close()
	h := w.Header()
	h.Set("Content-Type", a.Mime)
	h.Set("Content-Length", strconv.FormatInt(a.Size, 10))
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": a.Name}))
	h.Set("X-Loopx-Sha256", a.SHA256)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "private, no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = io.Copy(w, body)
}
