package sandbox

import (
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Lark's OAuth sign-in (the open platform's authen API), emulated: the authorize page a person
// signs in on, the code exchange (oidc/access_token, with the app's token) and user_info (with
// the person's token). The page lets whoever holds it pick the person to sign in as, which is
// what a sandbox is for; the redirect it returns to must be an http(s) URL, as Lark's
// redirect allow-list would require.

// Routes of the emulated OAuth.
const (
	RouteOAuthToken Route = "authen.oidc_access_token"
	RouteUserInfo   Route = "authen.user_info"
)

// oauthCodeTTL is how long an authorization code can be exchanged (once), as Lark's 5 minutes.
const oauthCodeTTL = 5 * time.Minute

type oauthCode struct {
	openID  string
	expires time.Time
}

func (s *Sandbox) oauthRoutes(mux *http.ServeMux, lark func(pattern string, route Route, auth bool, h func(*http.Request, []byte) answer)) {
	mux.HandleFunc("GET /open-apis/authen/v1/authorize", s.authorizePage)
	mux.HandleFunc("POST /open-apis/authen/v1/authorize", s.authorize)
	// A browser on the authorize page asks for an icon; it has none.
	mux.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	lark("POST /open-apis/authen/v1/oidc/access_token", RouteOAuthToken, true, s.oidcToken)
	lark("GET /open-apis/authen/v1/user_info", RouteUserInfo, true, s.userInfo)
}

// redirectOK accepts the http(s) address a sign-in returns to.
func redirectOK(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// authorizePage is the page Lark shows before it returns to the app: who signs in, and a
// button. It names the app and where the person will be sent.
func (s *Sandbox) authorizePage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("app_id") != s.opts.AppID || !redirectOK(q.Get("redirect_uri")) {
		http.Error(w, "sandbox: unknown app_id or a redirect_uri that is not an http(s) address", http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	esc := html.EscapeString
	fmt.Fprintf(w, `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Sign in with Lark (sandbox)</title></head><body>
<main><h1>Sign in to %s with Lark</h1>
<p>The Lark sandbox signs you in as the person below and returns you to %s.</p>
<form method="post" action="/open-apis/authen/v1/authorize">
<input type="hidden" name="app_id" value="%s"><input type="hidden" name="redirect_uri" value="%s"><input type="hidden" name="state" value="%s">
<label for="open_id">Lark open_id</label> <input id="open_id" name="open_id" value="%s" required>
<button type="submit" id="authorize">Authorize</button>
</form></main></body></html>`,
		esc(s.opts.BotName), esc(q.Get("redirect_uri")), esc(q.Get("app_id")), esc(q.Get("redirect_uri")), esc(q.Get("state")),
		esc(s.opts.DemoUserOpenID))
}

// authorize issues a one-time code for the chosen person and returns to the app.
func (s *Sandbox) authorize(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "sandbox: the form could not be read", http.StatusBadRequest)
		return
	}
	openID := strings.TrimSpace(r.PostFormValue("open_id"))
	redirect := r.PostFormValue("redirect_uri")
	if r.PostFormValue("app_id") != s.opts.AppID || !redirectOK(redirect) || !strings.HasPrefix(openID, "ou_") || len(openID) > 64 {
		http.Error(w, "sandbox: unknown app_id, a bad redirect_uri, or an open_id that does not start with ou_", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	code := s.nextIDLocked("oauth-code-")
	s.codes[code] = oauthCode{openID: openID, expires: s.now().Add(oauthCodeTTL)}
	s.mu.Unlock()
	u, _ := url.Parse(redirect)
	q := u.Query()
	q.Set("code", code)
	q.Set("state", r.PostFormValue("state"))
	u.RawQuery = q.Encode()
	http.Redirect(w, r, u.String(), http.StatusFound)
}

// oidcToken exchanges a code (once, within its TTL) for the person's access token.
func (s *Sandbox) oidcToken(r *http.Request, body []byte) answer {
	var req struct {
		GrantType string `json:"grant_type"`
		Code      string `json:"code"`
	}
	if err := json.Unmarshal(body, &req); err != nil || req.GrantType != "authorization_code" || req.Code == "" {
		return larkErr(http.StatusBadRequest, CodeBadRequest, "body must be {grant_type: authorization_code, code}")
	}
	if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer a-") {
		return larkErr(http.StatusBadRequest, CodeTokenInvalid, "the code exchange takes the app's access token")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.codes[req.Code]
	delete(s.codes, req.Code)
	if !ok || !s.now().Before(c.expires) {
		return larkErr(http.StatusBadRequest, CodeOAuthCodeInvalid, "the code is unknown, used or expired")
	}
	tok := s.nextIDLocked("u-sbx")
	s.tokens[tok] = tokenInfo{expires: s.now().Add(s.opts.TokenTTL)}
	s.users[tok] = c.openID
	return answer{status: http.StatusOK, body: map[string]any{"code": 0, "msg": "success", "data": map[string]any{
		"access_token": tok, "token_type": "Bearer", "expires_in": int(s.opts.TokenTTL / time.Second),
		"refresh_token": "ur-" + tok, "refresh_expires_in": 2592000, "scope": "",
	}}}
}

// userInfo answers who the person's token belongs to.
func (s *Sandbox) userInfo(r *http.Request, body []byte) answer {
	tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	s.mu.Lock()
	openID, ok := s.users[tok]
	s.mu.Unlock()
	if !ok {
		return larkErr(http.StatusBadRequest, CodeTokenInvalid, "user_info takes a person's access token")
	}
	return answer{status: http.StatusOK, body: map[string]any{"code": 0, "msg": "success", "data": map[string]any{
		"open_id": openID, "name": openID, "en_name": openID, "tenant_key": s.opts.TenantKey,
	}}}
}
