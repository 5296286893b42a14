package web

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"loopx/store"
)

// SignInLink issues a one-time sign-in link inside the caller's transaction (db): the chat's
// /web and the gate card's button call it, with the chat's language and the page to land on.
func (s *Server) SignInLink(ctx context.Context, db store.DB, p store.SignInParams) (string, error) {
	token, err := store.CreateSignIn(ctx, db, p, s.opts.Now())
	if err != nil {
		return "", err
	}
	return SignInURL(s.opts.BaseURL, token), nil
}

// SignInURL is the address of a sign-in link: the workspace at base, the token to spend.
func SignInURL(base, token string) string {
	return strings.TrimRight(base, "/") + "/web/signin?t=" + url.QueryEscape(token)
}

// LarkSignIn signs people in with Lark (the open platform's OAuth); package bot implements it
// over the SDK's authen API and the server wires it in.
type LarkSignIn interface {
	// AuthorizeURL is Lark's page asking the person to sign in; it returns them to
	// redirectURI with a code and the state.
	AuthorizeURL(redirectURI, state string) string
	// PersonFromCode exchanges the code for the open_id of the person who signed in.
	PersonFromCode(ctx context.Context, code string) (string, error)
}

// signInPage shows the link's page: a button spends the token, so a link preview that
// fetches the URL does not. A link that is used or expired says so at once, before any click,
// in the language of the chat that sent it.
func (s *Server) signInPage(w http.ResponseWriter, r *http.Request) {
	v := s.baseView(r, nil, s.opts.DefaultLang)
	s.flash(r, v)
	v.Token = r.URL.Query().Get("t")
	if len(v.Token) > 128 {
		v.Token = ""
	}
	v.Lark = s.opts.Lark != nil
	v.Next = "/web/"
	v.Title = s.pages.Word(v.Lang, "sign_in")
	if v.Token == "" {
		s.render(w, http.StatusOK, "signin", v)
		return
	}
	state, lang, err := store.PeekSignIn(r.Context(), s.st.DB(), v.Token, s.opts.Now())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if lang != "" {
		v.Lang = lang
		v.Title = s.pages.Word(v.Lang, "sign_in")
	}
	if state != store.SignInUsable {
		v.Token = ""
		v.Heading, v.Message = s.pages.Word(v.Lang, "link_"+state+"_heading"), s.pages.Word(v.Lang, "link_"+state)
		v.Title = v.Heading
		status := http.StatusGone
		if state == store.SignInUnknown {
			status = http.StatusNotFound
		}
		s.render(w, status, "signin", v)
		return
	}
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
	si, err := store.UseSignIn(r.Context(), s.st.DB(), token, now)
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
	s.startSession(w, r, store.WebSession{OpenID: si.OpenID, Admin: si.Admin, Lang: si.Lang}, si.Next)
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
	s.startSession(w, r, store.WebSession{Admin: true}, "")
}

// startSession signs the browser in and sends it to next (a page of the workspace; "" = home).
// A person who chose a language in chat gets it, unless the link carried its chat's.
func (s *Server) startSession(w http.ResponseWriter, r *http.Request, ws store.WebSession, next string) {
	now := s.opts.Now()
	if ws.Lang == "" && ws.OpenID != "" {
		lang, err := store.PersonLang(r.Context(), s.st.DB(), ws.OpenID)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		ws.Lang = lang
	}
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
	if next == "" || !store.SafeNext(next) {
		next = "/web/"
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (s *Server) signOut(ctx context.Context, w http.ResponseWriter, r *http.Request, ss *session) {
	if err := store.DeleteSession(ctx, s.st.DB(), ss.id); err != nil {
		s.fail(w, r, err)
		return
	}
	s.setCookie(w, r, "", s.opts.Now())
	back(w, r, "/web/signin", "signed_out", "", "")
}

// oauthCookie holds a Lark sign-in in progress: its state (compared with what Lark returns,
// so another site cannot sign a browser in as someone else) and the page to land on.
const oauthCookie = "loopx_oauth"

// larkSignIn sends the browser to Lark's sign-in page (GET /web/signin/lark?next=...): the
// workspace link in the bot's menu points here, so people sign in with no token.
func (s *Server) larkSignIn(w http.ResponseWriter, r *http.Request) {
	if s.opts.Lark == nil {
		s.unknownPage(w, r)
		return
	}
	next := r.URL.Query().Get("next")
	if !store.SafeNext(next) {
		next = ""
	}
	state := rand.Text()
	http.SetCookie(w, &http.Cookie{
		Name: oauthCookie, Value: state + "|" + url.QueryEscape(next), Path: "/web/signin/lark", MaxAge: 600,
		HttpOnly: true, Secure: r.TLS != nil || s.opts.SecureCookies, SameSite: http.SameSiteLaxMode, // Lark's redirect back is a cross-site navigation
	})
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, s.opts.Lark.AuthorizeURL(s.opts.BaseURL+"/web/signin/lark/callback", state), http.StatusFound)
}

// larkCallback is where Lark returns the browser: the state must be the one this browser was
// sent with; the code is exchanged for the person, who is then signed in. Refusals are
// bounded and audited like a wrong link's.
func (s *Server) larkCallback(w http.ResponseWriter, r *http.Request) {
	v := s.baseView(r, nil, s.opts.DefaultLang)
	v.Title = s.pages.Word(v.Lang, "sign_in")
	if s.opts.Lark == nil {
		s.unknownPage(w, r)
		return
	}
	if !s.signins.allow(source(r)) {
		w.Header().Set("Retry-After", strconv.Itoa(int(signInEvery/time.Second)))
		v.Heading, v.Message = s.pages.Word(v.Lang, "signin_too_many_heading"), s.pages.Word(v.Lang, "signin_too_many")
		s.render(w, http.StatusTooManyRequests, "notice", v)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: oauthCookie, Value: "", Path: "/web/signin/lark", MaxAge: -1, HttpOnly: true,
		Secure: r.TLS != nil || s.opts.SecureCookies, SameSite: http.SameSiteLaxMode})
	refuse := func(reason string) {
		s.auditRefusedSignIn(r, "web.signin.lark", reason)
		v.Heading, v.Message = s.pages.Word(v.Lang, "lark_signin_failed_heading"), s.pages.Word(v.Lang, "lark_signin_failed")
		v.Title, v.Lark, v.Next = v.Heading, true, "/web/"
		s.render(w, http.StatusUnauthorized, "signin", v)
	}
	c, err := r.Cookie(oauthCookie)
	q := r.URL.Query()
	state, nextEsc, _ := strings.Cut(func() string {
		if err != nil {
			return ""
		}
		return c.Value
	}(), "|")
	if state == "" || !store.EqualSecret(state, q.Get("state")) {
		refuse("the Lark sign-in's state does not match this browser's")
		return
	}
	code := q.Get("code")
	if code == "" || len(code) > 512 {
		refuse("Lark returned no sign-in code")
		return
	}
	openID, err := s.opts.Lark.PersonFromCode(r.Context(), code)
	if err != nil {
		s.log.WarnContext(r.Context(), "lark sign-in failed", "err", err)
		refuse("Lark did not accept the sign-in code")
		return
	}
	next, _ := url.QueryUnescape(nextEsc)
	s.startSession(w, r, store.WebSession{OpenID: openID}, next)
}

// issueLink answers POST /web/signin/links for the admin token (Authorization: Bearer): a
// fresh one-time link that signs the admin in, or the person named by {"open_id": ...}.
// `loopx dashboard` calls it on the serving machine, which keeps the admin token.
func (s *Server) issueLink(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !s.signins.allow(source(r)) {
		// Wrong tokens spend the source's attempts like wrong links do.
		w.Header().Set("Retry-After", strconv.Itoa(int(signInEvery/time.Second)))
		w.WriteHeader(http.StatusTooManyRequests)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "too many refused sign-ins from this address; wait a minute"})
		return
	}
	if s.opts.AdminToken == "" || !store.EqualSecret(tok, s.opts.AdminToken) {
		s.auditRefusedSignIn(r, "web.signin.link", "wrong admin token")
		w.WriteHeader(http.StatusUnauthorized)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "the admin token is required to issue a sign-in link"})
		return
	}
	var body struct {
		OpenID string `json:"open_id"`
		Next   string `json:"next"`
		Lang   string `json:"lang"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil && !errors.Is(err, io.EOF) {
		{
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "the body is not JSON {open_id, next, lang}"})
			return
		}
	}
	link, err := s.SignInLink(r.Context(), s.st.DB(), store.SignInParams{OpenID: body.OpenID, Admin: body.OpenID == "", Lang: body.Lang, Next: body.Next})
	var se *store.Error
	if errors.As(err, &se) {
		w.WriteHeader(pageStatus(err))
		_ = json.NewEncoder(w).Encode(map[string]string{"error": se.Error()})
		return
	}
	if err != nil {
		s.log.ErrorContext(r.Context(), "issue sign-in link", "err", err)
		w.WriteHeader(pageStatus(err))
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "the link could not be issued"})
		return
	}
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]string{"url": link})
}
