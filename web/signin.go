package web

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"loopx/store"
)

// SignInLink issues a one-time sign-in link for a Lark person inside the caller's
// transaction (db): the chat's /web and the gate card's button call it.
func (s *Server) SignInLink(ctx context.Context, db store.DB, openID string) (string, error) {
	token, err := store.CreateSignIn(ctx, db, openID, s.opts.Now())
	if err != nil {
		return "", err
	}
	return SignInURL(s.opts.BaseURL, token), nil
}

// SignInURL is the address of a sign-in link: the workspace at base, the token to spend.
func SignInURL(base, token string) string {
	return strings.TrimRight(base, "/") + "/web/signin?t=" + url.QueryEscape(token)
}

// signInPage shows the link's page: a button spends the token, so a link preview that
// fetches the URL does not.
func (s *Server) signInPage(w http.ResponseWriter, r *http.Request) {
	v := s.baseView(r, nil, s.opts.DefaultLang)
	s.flash(r, v)
	v.Token = r.URL.Query().Get("t")
	if len(v.Token) > 128 {
		v.Token = ""
	}
	v.Title = s.pages.Word(v.Lang, "sign_in")
	s.render(w, http.StatusOK, "signin", v)
}

// signInGate checks a sign-in POST before its token is looked at: it must come from a page of
// this workspace (another site could otherwise sign a victim in as the attacker), and its
// source must not have spent its attempts. It answers and returns false when it refuses.
func (s *Server) signInGate(w http.ResponseWriter, r *http.Request) bool {
	v := s.baseView(r, nil, s.opts.DefaultLang)
	v.Title = s.pages.Word(v.Lang, "sign_in")
	switch {
	case !sameOrigin(r):
		v.Heading, v.Message = s.pages.Word(v.Lang, "link_bad_heading"), s.pages.Word(v.Lang, "csrf_bad")
		s.render(w, http.StatusForbidden, "notice", v)
		return false
	case !s.signins.allow(source(r)):
		w.Header().Set("Retry-After", strconv.Itoa(int(signInEvery/time.Second)))
		v.Heading, v.Message = s.pages.Word(v.Lang, "signin_too_many_heading"), s.pages.Word(v.Lang, "signin_too_many")
		s.render(w, http.StatusTooManyRequests, "notice", v)
		return false
	}
	return true
}

// auditRefusedSignIn writes the audit of a refused sign-in, in bulk (signInGuard).
func (s *Server) auditRefusedSignIn(r *http.Request, action, reason string) {
	src := source(r)
	first, earlier := s.signins.refused(src)
	audit := func(reason string, detail map[string]any) {
		if err := s.st.AuditRefusal(r.Context(), store.Meta{Actor: "web", Surface: "web"}, store.RefusalParams{
			Action: action, Target: r.Method + " " + r.URL.Path, Reason: reason, Detail: detail,
		}); err != nil {
			s.log.ErrorContext(r.Context(), "audit refused sign-in", "err", err)
		}
	}
	if earlier > 0 {
		audit("more refused sign-ins in the last minute", map[string]any{"source": src, "count": earlier})
	}
	if first {
		audit(reason, map[string]any{"source": src})
	}
}

func (s *Server) signIn(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	if !s.signInGate(w, r) {
		return
	}
	token := r.PostFormValue("t")
	now := s.opts.Now()
	openID, err := store.UseSignIn(r.Context(), s.st.DB(), token, now)
	if errors.Is(err, store.ErrNotFound) || len(token) > 128 {
		s.auditRefusedSignIn(r, "web.signin", "unknown, used or expired sign-in link")
		v := s.baseView(r, nil, s.opts.DefaultLang)
		v.Heading, v.Message = s.pages.Word(v.Lang, "link_bad_heading"), s.pages.Word(v.Lang, "signin_how")
		v.Title = v.Heading
		s.render(w, http.StatusUnauthorized, "notice", v)
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.startSession(w, r, store.WebSession{OpenID: openID})
}

func (s *Server) signInAdmin(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	if !s.signInGate(w, r) {
		return
	}
	tok := r.PostFormValue("token")
	if s.opts.AdminToken == "" || !store.EqualSecret(tok, s.opts.AdminToken) {
		s.auditRefusedSignIn(r, "web.signin.admin", "wrong admin token")
		v := s.baseView(r, nil, s.opts.DefaultLang)
		v.Flash, v.FlashKind = s.pages.Word(v.Lang, "bad_admin_token"), "warn"
		v.Title = s.pages.Word(v.Lang, "sign_in")
		s.render(w, http.StatusUnauthorized, "signin", v)
		return
	}
	s.startSession(w, r, store.WebSession{Admin: true})
}

func (s *Server) startSession(w http.ResponseWriter, r *http.Request, ws store.WebSession) {
	now := s.opts.Now()
	id, _, err := store.CreateSession(r.Context(), s.st.DB(), ws, now, now.Add(s.opts.SessionTTL))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	actor := ws.OpenID
	if actor == "" {
		actor = store.ActorAdmin
	}
	if err := store.InsertAudit(r.Context(), s.st.DB(), store.Audit{Actor: actor, Surface: "web", Action: "web.signin", Allowed: true}); err != nil {
		s.log.ErrorContext(r.Context(), "audit sign-in", "err", err)
	}
	s.setCookie(w, r, id, now.Add(s.opts.SessionTTL))
	http.Redirect(w, r, "/web/", http.StatusSeeOther)
}

func (s *Server) signOut(ctx context.Context, w http.ResponseWriter, r *http.Request, ss *session) {
	if err := store.DeleteSession(ctx, s.st.DB(), ss.id); err != nil {
		s.fail(w, r, err)
		return
	}
	s.setCookie(w, r, "", s.opts.Now())
	back(w, r, "/web/signin", "signed_out", "", "")
}
