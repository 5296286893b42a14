package api

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"loopx/cards"
	"loopx/change"
	"loopx/inbox"
	"loopx/quota"
	"loopx/store"
	"loopx/templates"
)

// Options configures a Server.
type Options struct {
	Store *store.Store
	Quota *quota.Service
	// AdminToken is the bearer token with every permission. Required, at least 16 bytes.
	AdminToken string
	Logger     *slog.Logger
	// Registry receives the API's metrics. Nil: metrics are not registered.
	Registry prometheus.Registerer
	// MaxBodyBytes limits request bodies; 0 means 256 KiB.
	MaxBodyBytes int64
	// Now is the clock for read-only decisions (quota status); nil means the store's clock.
	Now func() time.Time
	// Inbox serves the inbox endpoints (inbox.go): the process's one inbox, so bounds and the
	// ack timeout agree with the chat's. Required.
	Inbox *inbox.Inbox
	// Cards renders the cards of gates asked, answered and cancelled through the API, inside
	// the operation's transaction, like the chat's: the process's one set. Required.
	Cards *cards.Set
	// Templates words effects (the same words as chat). Required.
	Templates *templates.Set
	// Changes is the change kernel behind the proposal endpoints and the admin token's direct
	// changes: the process's one kernel. Required.
	Changes *change.Kernel
}

// Server serves the /v1 API.
type Server struct {
	st        *store.Store
	quota     *quota.Service
	admin     []byte
	logger    *slog.Logger
	maxBody   int64
	now       func() time.Time
	mux       *http.ServeMux
	ib        *inbox.Inbox
	cards     cards.GateCards
	turnCards cards.TurnCards
	lang      string // when neither chat nor goal sets one
	changes   *change.Kernel
	tpl       *templates.Set
	requests  *prometheus.CounterVec
	latency   *prometheus.HistogramVec
}

// New builds a Server and its routes.
func New(opts Options) (*Server, error) {
	if opts.Store == nil || opts.Quota == nil || opts.Inbox == nil || opts.Cards == nil || opts.Templates == nil || opts.Changes == nil {
		return nil, errors.New("new api server: Store, Quota, Inbox, Cards, Templates and Changes are required")
	}
	if len(opts.AdminToken) < 16 {
		return nil, errors.New("new api server: the admin token must be at least 16 characters")
	}
	s := &Server{
		st:        opts.Store,
		quota:     opts.Quota,
		admin:     []byte(opts.AdminToken),
		logger:    opts.Logger,
		maxBody:   opts.MaxBodyBytes,
		now:       opts.Now,
		ib:        opts.Inbox,
		cards:     opts.Cards.Gates,
		turnCards: opts.Cards.Turns(),
		lang:      opts.Cards.DefaultLang(),
		tpl:       opts.Templates,
		changes:   opts.Changes,
		mux:       http.NewServeMux(),
	}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	if s.maxBody == 0 {
		s.maxBody = 256 << 10
	}
	if s.now == nil {
		s.now = s.st.Now
	}
	s.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "loopx_api_requests_total", Help: "API requests by route and status.",
	}, []string{"route", "status"})
	s.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "loopx_api_request_seconds", Help: "API request latency by route.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
	}, []string{"route"})
	if opts.Registry != nil {
		for _, c := range []prometheus.Collector{s.requests, s.latency} {
			if err := opts.Registry.Register(c); err != nil {
				return nil, fmt.Errorf("register api metrics: %w", err)
			}
		}
	}
	s.routes()
	return s, nil
}

// ServeHTTP serves the API; mount it at /v1/ on the process's mux.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// principal is who a request authenticated as.
type principal struct {
	admin   bool
	goalID  string // agent tokens: the goal and agent the token was issued for
	agentID string
}

func (p principal) actor() string {
	if p.admin {
		return store.ActorAdmin
	}
	return store.AgentActor(p.goalID, p.agentID)
}

// hideLog empties t's log tail unless p is the admin or the agent that ran the turn: what an
// agent printed may hold what it was given (its secrets are redacted, but its work is its
// own), and a peer agent's token has no business reading it.
func (p principal) hideLog(t *store.Turn) {
	if !p.admin && t.AgentID != p.agentID {
		t.LogTail = ""
	}
}

// request is what a handler gets: the caller and the parsed request.
type request struct {
	*http.Request
	who principal
	key string // Idempotency-Key; "" on reads
}

func (r *request) meta() store.Meta {
	return store.Meta{Actor: r.who.actor(), Surface: "api", IdempotencyKey: r.key}
}

// handlerFunc answers with a status and a value to encode, or an error.
type handlerFunc func(ctx context.Context, r *request) (int, any, error)

// handle registers pattern with authentication, idempotency-key checking, metrics and error
// mapping around h.
func (s *Server) handle(pattern string, h handlerFunc) { s.handleLimit(pattern, h, s.maxBody) }

// handleUpload registers a route whose body may carry a file (base64 in JSON): its body may
// be as large as the largest file the store takes, encoded.
func (s *Server) handleUpload(pattern string, h handlerFunc) {
	s.handleLimit(pattern, h, max(s.maxBody, s.st.MaxFileBytes()*4/3+s.maxBody))
}

func (s *Server) handleLimit(pattern string, h handlerFunc, maxBody int64) {
	mutating := strings.HasPrefix(pattern, "POST ") || strings.HasPrefix(pattern, "PATCH ") ||
		strings.HasPrefix(pattern, "PUT ") || strings.HasPrefix(pattern, "DELETE ")
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, hr *http.Request) {
		start := time.Now()
		status := s.serve(w, hr, h, mutating, maxBody)
		s.requests.WithLabelValues(pattern, strconv.Itoa(status)).Inc()
		s.latency.WithLabelValues(pattern).Observe(time.Since(start).Seconds())
	})
}

func (s *Server) serve(w http.ResponseWriter, hr *http.Request, h handlerFunc, mutating bool, maxBody int64) int {
	ctx := hr.Context()
	who, aerr := s.authenticate(ctx, hr)
	if aerr != nil {
		writeError(w, aerr)
		return aerr.Status
	}
	r := &request{Request: hr, who: who}
	if aerr := s.checkPathIDs(r); aerr != nil {
		writeError(w, aerr)
		return aerr.Status
	}
	if mutating {
		r.key = strings.TrimSpace(hr.Header.Get("Idempotency-Key"))
		if r.key == "" {
			e := badRequest("Idempotency-Key", "every mutating call needs an Idempotency-Key header (any unique string up to 200 characters; reuse it only to retry the same request)")
			writeError(w, e)
			return e.Status
		}
		if e := checkIdempotencyKey(r.key); e != nil {
			writeError(w, e)
			return e.Status
		}
	}
	hr.Body = http.MaxBytesReader(w, hr.Body, maxBody)
	status, v, err := h(ctx, r)
	if err != nil {
		e := fromErr(err)
		if e.Status >= 500 {
			s.logger.ErrorContext(ctx, "api request failed", "method", hr.Method, "path", hr.URL.Path, "err", err)
		}
		writeError(w, e)
		return e.Status
	}
	if d, ok := v.(*download); ok {
		d.write(ctx, w, s.logger)
		return status
	}
	writeJSON(w, status, v)
	return status
}

// checkIdempotencyKey refuses a key the receipt table cannot hold or a person cannot read
// back: longer than 200 bytes, not UTF-8, or with control characters.
func checkIdempotencyKey(k string) *Error {
	switch {
	case len(k) > 200:
		return badRequest("Idempotency-Key", "is %d characters; at most 200", len(k))
	case !utf8.ValidString(k):
		return badRequest("Idempotency-Key", "is not UTF-8 text; use printable characters (a UUID, or any unique string)")
	case strings.IndexFunc(k, unicode.IsControl) >= 0:
		return badRequest("Idempotency-Key", "contains a control character; use printable characters (a UUID, or any unique string)")
	}
	return nil
}

// authenticate resolves the bearer token. The admin token is compared in constant time; an
// agent token is looked up by its hash in the store.
func (s *Server) authenticate(ctx context.Context, r *http.Request) (principal, *Error) {
	h := r.Header.Get("Authorization")
	token, ok := strings.CutPrefix(h, "Bearer ")
	token = strings.TrimSpace(token)
	if !ok || token == "" {
		return principal{}, newError(CodeUnauthenticated, "", "missing bearer token: send Authorization: Bearer <token> (LOOPX_TOKEN for the CLI)")
	}
	if subtle.ConstantTimeCompare([]byte(token), s.admin) == 1 {
		return principal{admin: true}, nil
	}
	a, err := s.st.AgentByToken(ctx, token)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return principal{}, newError(CodeUnauthenticated, "", "unknown token: use the admin token or an agent token from `loopx agent register` / `rotate-token`")
		}
		s.logger.ErrorContext(ctx, "look up agent token", "err", err)
		return principal{}, fromErr(err)
	}
	return principal{goalID: a.GoalID, agentID: a.ID}, nil
}

// checkPathIDs validates the goal and agent ids in the path and, for agent tokens, that the
// goal is the token's own.
func (s *Server) checkPathIDs(r *request) *Error {
	for _, name := range []string{"goal", "agent"} {
		v := r.PathValue(name)
		if v != "" && !store.ValidID(v) {
			return badRequest(name+"_id", "%q is not a valid id: use 1-63 characters a-z 0-9 . _ -, starting with a letter or digit", v)
		}
	}
	if g := r.PathValue("goal"); g != "" && !r.who.admin && g != r.who.goalID {
		return s.refuse(r, "access goal", g, store.ReasonTokenScope, fmt.Sprintf("this agent token belongs to goal %q", r.who.goalID))
	}
	return nil
}

// refuse audits a refusal and returns the 403 to send, with reason (a store.Reason constant,
// or ""). The audit write uses a context that a disconnecting client cannot cancel: a
// refusal must be recorded.
func (s *Server) refuse(r *request, action, goalID, reason, msg string) *Error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 5*time.Second)
	defer cancel()
	if err := s.st.AuditRefusal(ctx, store.Meta{Actor: r.who.actor(), Surface: "api"}, store.RefusalParams{
		Action: action, GoalID: goalID, Target: r.Method + " " + r.URL.Path, Reason: msg,
	}); err != nil {
		s.logger.ErrorContext(ctx, "audit refusal", "err", err)
	}
	return forbidden(reason, msg)
}

// requireAdmin refuses agent tokens.
func (s *Server) requireAdmin(r *request, action string) error {
	if r.who.admin {
		return nil
	}
	return s.refuse(r, action, r.PathValue("goal"), "", action+" needs the admin token")
}

// actingAgent returns the agent id a request acts as: the given one (validated) or, for an
// agent token, its own. An agent token naming another agent is refused.
func (s *Server) actingAgent(r *request, action, given string, required bool) (string, error) {
	if given == "" && !r.who.admin {
		given = r.who.agentID
	}
	if given == "" {
		if required {
			return "", invalid("agent_id", "is required: name the agent (--agent-id)")
		}
		return "", nil
	}
	if !store.ValidID(given) {
		return "", invalid("agent_id", "%q is not a valid id: use 1-63 characters a-z 0-9 . _ -, starting with a letter or digit", given)
	}
	if !r.who.admin && given != r.who.agentID {
		return "", s.refuse(r, action, r.PathValue("goal"), store.ReasonTokenScope, fmt.Sprintf("this token belongs to agent %q and cannot act as %q", r.who.agentID, given))
	}
	return given, nil
}

// decode reads a JSON body into v. Unknown fields and trailing data are rejected, and so
// are a Content-Type other than JSON and the NUL character (text cannot hold it).
func decode(r *request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return badRequest("Content-Type", "%q is not application/json; send the body as JSON with Content-Type: application/json", clipHeader(ct))
		}
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return newError(CodeTooLarge, "body", fmt.Sprintf("request body over %d bytes", mbe.Limit))
		}
		return badRequest("body", "read request body: %v", err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	if bytes.Contains(body, []byte(`\u0000`)) {
		return badRequest("body", `contains the NUL character (\u0000), which text cannot hold`)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			return badRequest(ute.Field, "has the wrong type: want %s", ute.Type)
		}
		if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return badRequest(strings.Trim(f, `"`), "unknown field")
		}
		return badRequest("body", "invalid JSON: %v", err)
	}
	if dec.More() {
		return badRequest("body", "unexpected data after the JSON object")
	}
	return nil
}

// pathInt parses a numeric path value such as a todo or gate id.
func pathInt(r *request, name, field string) (int64, error) {
	v := r.PathValue(name)
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0, badRequest(field, "%q is not a valid id: want a positive integer", v)
	}
	return n, nil
}

// queryInt parses an optional numeric query parameter.
func queryInt(r *request, name string) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, badRequest(name, "%q is not a non-negative integer", v)
	}
	return n, nil
}

func clipHeader(v string) string {
	if len(v) > 60 {
		return v[:60] + "…"
	}
	return v
}
