package web

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"

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

func (s *Server) signIn(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	token := r.PostFormValue("t")
	now := s.opts.Now()
	openID, err := store.UseSignIn(r.Context(), s.st.DB(), token, now)
	if errors.Is(err, store.ErrNotFound) || len(token) > 128 {
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
	tok := r.PostFormValue("token")
	if s.opts.AdminToken == "" || !store.EqualSecret(tok, s.opts.AdminToken) {
		if err := s.st.AuditRefusal(r.Context(), store.Meta{Actor: "web", Surface: "web"}, store.RefusalParams{
			Action: "web.signin.admin", Target: "POST /web/signin/admin", Reason: "wrong admin token",
		}); err != nil {
			s.log.ErrorContext(r.Context(), "audit refused sign-in", "err", err)
		}
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
