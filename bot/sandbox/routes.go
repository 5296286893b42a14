package sandbox

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Route names one emulated endpoint, for FailNext and the request log.
type Route string

// The emulated routes.
const (
	RouteTenantToken    Route = "tenant_access_token"
	RouteAppToken       Route = "app_access_token"
	RouteCreate         Route = "message.create"
	RouteList           Route = "message.list"
	RouteReply          Route = "message.reply"
	RoutePatch          Route = "message.patch"
	RouteUpdate         Route = "message.update"
	RouteGet            Route = "message.get"
	RouteDelete         Route = "message.delete"
	RouteReactionCreate Route = "reaction.create"
	RouteReactionDelete Route = "reaction.delete"
	RouteReactionList   Route = "reaction.list"
	RouteCardUpdate     Route = "card.update"
	RouteBotInfo        Route = "bot.info"
	RouteWSEndpoint     Route = "ws.endpoint"
	RouteUnmatched      Route = "unmatched"
)

// Fail is one injected failure. With HTTP and Code both zero only Delay applies and the
// request is then served normally. With Code 99991400 and no headers, the rate-limit headers
// are added as Lark sends them.
type Fail struct {
	HTTP    int               // status; default 400 when only Code is set
	Code    int               // Lark code in the JSON body
	Msg     string            // Lark msg in the JSON body
	Headers map[string]string // extra response headers
	Delay   time.Duration     // wait before answering (bounded by the request's context)
}

// maxRequestLog bounds the request log; Unmatched is kept whole.
const maxRequestLog = 20000

// maxKeptBody bounds the body kept per logged request, so a long burst stays small.
const maxKeptBody = 4 << 10

// Request is one recorded call to an emulated route. Bodies of token calls are not kept (they
// carry the app secret).
type Request struct {
	At     time.Time
	Method string
	Path   string // path and query
	Route  Route
	Status int
	Code   int    // Lark code of the answer, -1 when not JSON
	Body   string // the first 4 KiB
}

// Lark codes the sandbox answers with.
const (
	CodeRateLimited      = 99991400
	CodeTokenMissing     = 99991661
	CodeTokenInvalid     = 99991663
	CodeBadRequest       = 230001
	CodeBotNotInChat     = 230002
	CodeMessageRecalled  = 230011
	CodeContentTooLong   = 230025
	CodeAppIDInvalid     = 10003
	CodeAppSecretInvalid = 10014
	CodeOAuthCodeInvalid = 20003 // authen: the authorization code is invalid
)

type tokenInfo struct {
	expires time.Time
	revoked bool
}

func (s *Sandbox) handler() http.Handler {
	mux := http.NewServeMux()
	lark := func(pattern string, route Route, auth bool, h func(*http.Request, []byte) answer) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			s.serveLark(w, r, route, auth, h)
		})
	}
	lark("POST /open-apis/auth/v3/tenant_access_token/internal", RouteTenantToken, false, s.tenantToken)
	lark("POST /open-apis/auth/v3/app_access_token/internal", RouteAppToken, false, s.appToken)
	lark("POST /open-apis/im/v1/messages", RouteCreate, true, s.createMessage)
	lark("GET /open-apis/im/v1/messages", RouteList, true, s.listMessages)
	lark("POST /open-apis/im/v1/messages/{message_id}/reply", RouteReply, true, s.replyMessage)
	lark("PATCH /open-apis/im/v1/messages/{message_id}", RoutePatch, true, s.patchMessage)
	lark("PUT /open-apis/im/v1/messages/{message_id}", RouteUpdate, true, s.updateMessage)
	lark("GET /open-apis/im/v1/messages/{message_id}", RouteGet, true, s.getMessage)
	lark("DELETE /open-apis/im/v1/messages/{message_id}", RouteDelete, true, s.deleteMessage)
	lark("POST /open-apis/im/v1/messages/{message_id}/reactions", RouteReactionCreate, true, s.createReaction)
	lark("DELETE /open-apis/im/v1/messages/{message_id}/reactions/{reaction_id}", RouteReactionDelete, true, s.deleteReaction)
	lark("GET /open-apis/im/v1/messages/{message_id}/reactions", RouteReactionList, true, s.listReactions)
	lark("POST /open-apis/interactive/v1/card/update", RouteCardUpdate, true, s.cardUpdate)
	lark("GET /open-apis/bot/v3/info", RouteBotInfo, true, s.botInfo)
	lark("POST /callback/ws/endpoint", RouteWSEndpoint, false, s.wsEndpoint)
	s.oauthRoutes(mux, lark)
	mux.HandleFunc("GET /ws", s.wsUpgrade)
	s.controlRoutes(mux)

	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern == "" {
			body, _ := readBody(r)
			a := larkErr(http.StatusNotFound, 404, "sandbox: no route for %s %s", r.Method, r.URL.Path)
			s.record(r, RouteUnmatched, a, string(body))
			s.log.Warn("sandbox: unmatched request", "method", r.Method, "path", r.URL.Path)
			writeJSON(w, a.status, nil, a.body)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// serveLark runs one emulated route: injected faults first (they stand for the gateway), then
// the Bearer check, then the route.
func (s *Sandbox) serveLark(w http.ResponseWriter, r *http.Request, route Route, auth bool, h func(*http.Request, []byte) answer) {
	body, err := readBody(r)
	if err != nil {
		a := larkErr(http.StatusBadRequest, CodeBadRequest, "read body: %v", err)
		writeJSON(w, a.status, nil, a.body)
		return
	}
	kept := string(body[:min(len(body), maxKeptBody)])
	if route == RouteTenantToken || route == RouteAppToken || route == RouteWSEndpoint {
		kept = "" // carries the app secret
	}
	a, injected := s.injected(r.Context(), route)
	if !injected && auth {
		a, injected = s.checkBearer(r)
	}
	if !injected {
		a = h(r, body)
	}
	s.record(r, route, a, kept)
	writeJSON(w, a.status, a.headers, a.body)
}

func (s *Sandbox) record(r *http.Request, route Route, a answer, body string) {
	code := -1
	if m, ok := a.body.(map[string]any); ok {
		if c, ok := m["code"].(int); ok {
			code = c
		}
	}
	req := Request{At: s.now(), Method: r.Method, Path: r.URL.RequestURI(), Route: route, Status: a.status, Code: code, Body: body}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.requests) >= maxRequestLog {
		// Keep the newest half: a long-running sandbox (loopx serve) must not grow without end.
		s.requests = append(s.requests[:0], s.requests[len(s.requests)-maxRequestLog/2:]...)
	}
	s.requests = append(s.requests, req)
	if route == RouteUnmatched {
		s.unmatched = append(s.unmatched, req)
	}
}

// FailNext makes the next n calls to route fail with f (or only be delayed by f.Delay).
// Calls queue: FailNext(r, 2, a) then FailNext(r, 1, b) fails with a, a, b.
func (s *Sandbox) FailNext(route Route, n int, f Fail) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.faults[route] = append(s.faults[route], f)
	}
}

func (s *Sandbox) injected(ctx context.Context, route Route) (answer, bool) {
	s.mu.Lock()
	q := s.faults[route]
	if len(q) == 0 {
		s.mu.Unlock()
		return answer{}, false
	}
	f := q[0]
	s.faults[route] = q[1:]
	s.mu.Unlock()

	if f.Delay > 0 {
		t := time.NewTimer(f.Delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	if f.HTTP == 0 && f.Code == 0 {
		return answer{}, false
	}
	status := f.HTTP
	if status == 0 {
		status = http.StatusBadRequest
	}
	msg := f.Msg
	if msg == "" {
		msg = "sandbox: injected failure"
	}
	headers := map[string]string{}
	if f.Code == CodeRateLimited && len(f.Headers) == 0 {
		headers["x-ogw-ratelimit-limit"] = "5"
		headers["x-ogw-ratelimit-reset"] = "1"
	}
	for k, v := range f.Headers {
		headers[k] = v
	}
	return answer{status: status, body: map[string]any{"code": f.Code, "msg": msg}, headers: headers}, true
}

// Requests returns a copy of the request log (the newest calls when it grew very long).
func (s *Sandbox) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Unmatched returns the calls that matched no emulated route (answered 404). A test should
// expect none: a new SDK call must never silently reach a missing endpoint.
func (s *Sandbox) Unmatched() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.unmatched...)
}

// TokenIssues counts the access tokens issued so far (tenant and app).
func (s *Sandbox) TokenIssues() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.issues
}

// Revoke invalidates every token issued so far: calls bearing one answer 99991663 until the
// client fetches a new token.
func (s *Sandbox) Revoke() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, t := range s.tokens {
		t.revoked = true
		s.tokens[k] = t
	}
}

func (s *Sandbox) checkBearer(r *http.Request) (answer, bool) {
	h := r.Header.Get("Authorization")
	tok, found := strings.CutPrefix(h, "Bearer ")
	if !found || tok == "" {
		return larkErr(http.StatusBadRequest, CodeTokenMissing, "Missing access token for authorization. Please make a request with token attached."), true
	}
	s.mu.Lock()
	t, known := s.tokens[tok]
	s.mu.Unlock()
	if !known || t.revoked || !s.now().Before(t.expires) {
		return larkErr(http.StatusBadRequest, CodeTokenInvalid, "Invalid access token for authorization. Please make a request with token attached."), true
	}
	return answer{}, false
}

func (s *Sandbox) tenantToken(r *http.Request, body []byte) answer {
	return s.issueToken(body, "tenant_access_token", "t-")
}

func (s *Sandbox) appToken(r *http.Request, body []byte) answer {
	return s.issueToken(body, "app_access_token", "a-")
}

func (s *Sandbox) issueToken(body []byte, field, prefix string) answer {
	var req struct {
		AppID     string `json:"app_id"`
		AppSecret string `json:"app_secret"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return larkErr(http.StatusBadRequest, CodeBadRequest, "body is not JSON {app_id, app_secret}: %v", err)
	}
	if req.AppID != s.opts.AppID {
		return larkErr(http.StatusOK, CodeAppIDInvalid, "app_id %q is not the sandbox app", req.AppID)
	}
	if req.AppSecret != s.opts.AppSecret {
		return larkErr(http.StatusOK, CodeAppSecretInvalid, "app_secret invalid for app_id %q", req.AppID)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	tok := s.nextIDLocked(prefix + "sbx")
	s.tokens[tok] = tokenInfo{expires: s.now().Add(s.opts.TokenTTL)}
	s.issues++
	return answer{status: http.StatusOK, body: map[string]any{
		"code": 0, "msg": "ok", field: tok, "expire": int(s.opts.TokenTTL / time.Second),
	}}
}

func (s *Sandbox) botInfo(r *http.Request, body []byte) answer {
	return answer{status: http.StatusOK, body: map[string]any{"code": 0, "msg": "ok", "bot": map[string]any{
		"open_id": s.opts.BotOpenID, "app_name": s.opts.BotName, "activate_status": 2,
		"avatar_url": "", "ip_white_list": []string{},
	}}}
}

func msString(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }
