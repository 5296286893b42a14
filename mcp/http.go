package mcp

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"loopx/api"
	"loopx/api/client"
	"loopx/store"
	"loopx/templates"
)

// Session bounds of Handler, when HandlerOptions leaves them zero.
const (
	// DefaultSessionTimeout closes a session idle that long. A host that comes back later is
	// answered 404 for its session and opens a new one, as the protocol says it must; what a
	// session remembers of its turn the server can tell it again (should_run).
	DefaultSessionTimeout = 10 * time.Minute
	// DefaultMaxSessionsPerAgent bounds the sessions one agent (with any of its tokens, turn
	// tokens included) holds open: a host needs one per running instance.
	DefaultMaxSessionsPerAgent = 8
	// DefaultMaxSessions bounds the sessions of the whole process.
	DefaultMaxSessions = 1000
)

// HandlerOptions configures Handler.
type HandlerOptions struct {
	// API serves /v1 in this process (the serve mux). Each session's client calls it with the
	// session's bearer token, through the same authentication and receipts as the network.
	API http.Handler
	// Templates renders the turn prompt; nil means the embedded set (parsed once, shared by
	// every session).
	Templates *templates.Set
	Version   string
	Logger    *slog.Logger
	// Registry receives the session metrics (loopx_mcp_sessions and the refusals and
	// evictions). Nil: not registered.
	Registry prometheus.Registerer
	// SessionTimeout closes a session idle that long; 0 means DefaultSessionTimeout.
	SessionTimeout time.Duration
	// MaxSessionsPerAgent and MaxSessions bound open sessions; 0 means the defaults. At a
	// bound, the oldest idle session (of the agent, or of the process) is closed to make
	// room; when none is idle, the new session is refused with a message that says so.
	MaxSessionsPerAgent int
	MaxSessions         int
	// Now is the clock of idleness; nil is time.Now.
	Now func() time.Time
}

// HTTPHandler serves the MCP server over Streamable HTTP (mount it at /mcp). Every request
// needs an agent's bearer token (an agent token or a turn token): the session works as that
// agent on its goal, and a session stays bound to the agent that opened it. The admin token
// and unknown tokens are refused with 401 and a message saying which token to use.
//
// Sessions share everything but their turn (templates, tool schemas), and are bounded per
// agent and in total (see HandlerOptions). Close closes every session; it is safe to call
// once the listener stopped taking requests.
type HTTPHandler struct {
	next     http.Handler
	sessions *sessions
}

// Handler builds the MCP handler.
func Handler(opts HandlerOptions) (*HTTPHandler, error) {
	opts.Logger = cmp.Or(opts.Logger, slog.New(slog.DiscardHandler))
	opts.SessionTimeout = cmp.Or(opts.SessionTimeout, DefaultSessionTimeout)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	shared, err := NewShared(opts.Templates)
	if err != nil {
		return nil, err
	}
	reg := newSessions(cmp.Or(opts.MaxSessionsPerAgent, DefaultMaxSessionsPerAgent),
		cmp.Or(opts.MaxSessions, DefaultMaxSessions), opts.Now, opts.Logger)
	if opts.Registry != nil {
		for _, c := range reg.collectors() {
			if err := opts.Registry.Register(c); err != nil {
				return nil, fmt.Errorf("register mcp metrics: %w", err)
			}
		}
	}
	verify := func(ctx context.Context, token string, r *http.Request) (*auth.TokenInfo, error) {
		c, err := inProcessClient(opts.API, r, token)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", auth.ErrInvalidToken, err)
		}
		var who api.Whoami
		if err := c.DoJSON(ctx, client.Request{Method: http.MethodGet, Path: "/v1/whoami"}, &who); err != nil {
			var ae *api.Error
			if errors.As(err, &ae) && ae.Code == api.CodeUnauthenticated {
				return nil, fmt.Errorf("%w: %s", auth.ErrInvalidToken, ae.Message)
			}
			return nil, errors.New("check the token: the server failed; see its log")
		}
		if who.Admin {
			return nil, fmt.Errorf("%w: /mcp works as one agent: use that agent's token (loopx connect or loopx agent register prints one), not the admin token", auth.ErrInvalidToken)
		}
		return &auth.TokenInfo{
			UserID:     store.AgentActor(who.GoalID, who.AgentID),
			Expiration: time.Now().Add(time.Hour),
			Extra:      map[string]any{"goal_id": who.GoalID, "agent_id": who.AgentID},
		}, nil
	}
	events := sdk.NewMemoryEventStore(nil)
	events.SetMaxBytes(eventStoreBytes)
	streamable := sdk.NewStreamableHTTPHandler(func(r *http.Request) *sdk.Server {
		ti := auth.TokenInfoFromContext(r.Context())
		e, _ := r.Context().Value(entryKey{}).(*sessionEntry)
		if ti == nil || e == nil {
			return nil
		}
		goal, _ := ti.Extra["goal_id"].(string)
		agent, _ := ti.Extra["agent_id"].(string)
		token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		c, err := inProcessClient(opts.API, r, strings.TrimSpace(token))
		if err != nil {
			return nil
		}
		srv, err := New(Options{API: c, GoalID: goal, AgentID: agent, Shared: shared,
			Version: opts.Version, Logger: opts.Logger, SessionID: func() string { return e.id }})
		if err != nil {
			opts.Logger.Error("start mcp session", "err", err)
			return nil
		}
		reg.setServer(e, srv)
		return srv
	}, &sdk.StreamableHTTPOptions{SessionTimeout: opts.SessionTimeout, Logger: opts.Logger, EventStore: events})
	// Protocol 2026-07-28 (as stdio speaks it) has no sessions: each request gets a server of
	// its own, which knows the turn as the server does (the agent's live turn is the caller's).
	stateless := sdk.NewStreamableHTTPHandler(func(r *http.Request) *sdk.Server {
		ti := auth.TokenInfoFromContext(r.Context())
		if ti == nil {
			return nil
		}
		goal, _ := ti.Extra["goal_id"].(string)
		agent, _ := ti.Extra["agent_id"].(string)
		token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		c, err := inProcessClient(opts.API, r, strings.TrimSpace(token))
		if err != nil {
			return nil
		}
		srv, err := New(Options{API: c, GoalID: goal, AgentID: agent, Shared: shared, Version: opts.Version, Logger: opts.Logger, Stateless: true})
		if err != nil {
			opts.Logger.Error("start mcp server", "err", err)
			return nil
		}
		return srv
	}, &sdk.StreamableHTTPOptions{Stateless: true, Logger: opts.Logger})
	tracked := reg.track(streamable)
	route := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Protocol-Version") >= statelessVersion {
			stateless.ServeHTTP(w, r)
			return
		}
		tracked.ServeHTTP(w, r)
	})
	return &HTTPHandler{next: challenge(auth.RequireBearerToken(verify, nil)(route)), sessions: reg}, nil
}

// statelessVersion is the first protocol version without sessions: the SDK serves it only
// from a stateless handler.
const statelessVersion = "2026-07-28"

// SSE resumption: the SDK opens every stream with a priming event carrying an id (it needs
// an event store for that); sseRetry adds the delay a client waits before it reconnects
// with Last-Event-ID.
const (
	eventStoreBytes = 16 << 20 // every session's unsent or resumable events together
	sseRetryMillis  = "2000"
)

// challenge answers every 401 with WWW-Authenticate: Bearer (RFC 6750), which the SDK's
// bearer check leaves out when no OAuth metadata is configured.
func challenge(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&sseWriter{ResponseWriter: w}, r)
	})
}

// sseWriter sets the 401 challenge and adds a retry field to the SSE priming event.
type sseWriter struct {
	http.ResponseWriter
	primed bool
}

func (w *sseWriter) WriteHeader(status int) {
	if status == http.StatusUnauthorized && w.Header().Get("WWW-Authenticate") == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="loopx"`)
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *sseWriter) Write(b []byte) (int, error) {
	if !w.primed && bytes.HasPrefix(b, []byte("event: prime\n")) {
		w.primed = true
		if i := bytes.Index(b, []byte("\ndata: ")); i >= 0 {
			out := append(append(append([]byte{}, b[:i+1]...), "retry: "+sseRetryMillis+"\n"...), b[i+1:]...)
			if _, err := w.ResponseWriter.Write(out); err != nil {
				return 0, err
			}
			return len(b), nil
		}
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController flush the stream.
func (w *sseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// ServeHTTP serves one MCP request.
func (h *HTTPHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.next.ServeHTTP(w, r) }

// Sessions is the number of open sessions.
func (h *HTTPHandler) Sessions() int { return h.sessions.open() }

// Close closes every session and waits for their watchers to end.
func (h *HTTPHandler) Close() { h.sessions.closeAll() }

// inProcessClient calls api in this process as token; its base URL names the host the
// request reached, for the server's instructions.
func inProcessClient(h http.Handler, r *http.Request, token string) (*client.Client, error) {
	host := r.Host
	if host == "" {
		host = "localhost"
	}
	return client.New(client.Options{BaseURL: "http://" + host, Token: token,
		HTTPClient: &http.Client{Transport: client.InProcess(h), Timeout: time.Minute}})
}

// sessionIDHeader is the Streamable HTTP transport's session header.
const sessionIDHeader = "Mcp-Session-Id"

type entryKey struct{}

// sessions counts and bounds the open sessions. The SDK's handler owns the sessions; this
// keeps, for each, the agent it works as and when it was last used, so a new session can be
// refused or an idle one closed to make room. An entry leaves when its session closes (a
// watcher goroutine per session waits for that).
type sessions struct {
	perAgent, total int
	now             func() time.Time
	log             *slog.Logger

	mu   sync.Mutex
	byID map[string]*sessionEntry
	wg   sync.WaitGroup

	gauge            prometheus.GaugeFunc
	refused, evicted *prometheus.CounterVec
}

type sessionEntry struct {
	id, agent string
	srv       *sdk.Server // set by getServer while the new session's request is served
	used      time.Time
	active    int  // requests in flight
	closing   bool // evicted: no longer counted
}

func newSessions(perAgent, total int, now func() time.Time, log *slog.Logger) *sessions {
	s := &sessions{perAgent: perAgent, total: total, now: now, log: log, byID: map[string]*sessionEntry{}}
	s.gauge = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "loopx_mcp_sessions", Help: "Open MCP sessions on /mcp."},
		func() float64 { return float64(s.open()) })
	s.refused = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "loopx_mcp_sessions_refused_total",
		Help: "New MCP sessions refused at a bound, by bound (agent, total)."}, []string{"bound"})
	s.evicted = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "loopx_mcp_sessions_evicted_total",
		Help: "Idle MCP sessions closed to make room, by bound (agent, total)."}, []string{"bound"})
	return s
}

func (s *sessions) collectors() []prometheus.Collector {
	return []prometheus.Collector{s.gauge, s.refused, s.evicted}
}

func (s *sessions) open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, e := range s.byID {
		if !e.closing {
			n++
		}
	}
	return n
}

// track wraps the SDK handler: a request naming a session marks it used (and busy while it
// runs); a POST naming none opens a session, within the bounds.
func (s *sessions) track(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id := r.Header.Get(sessionIDHeader); id != "" {
			done := s.use(id)
			defer done()
			next.ServeHTTP(w, r)
			return
		}
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		ti := auth.TokenInfoFromContext(r.Context())
		if ti == nil {
			next.ServeHTTP(w, r)
			return
		}
		e, status, msg := s.reserve(ti.UserID)
		if e == nil {
			if status == http.StatusServiceUnavailable {
				w.Header().Set("Retry-After", "30")
			}
			writeRPCError(w, status, msg)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), entryKey{}, e)))
		s.opened(e)
	})
}

// use marks session id used and busy until the returned func runs.
func (s *sessions) use(id string) func() {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.byID[id]
	if e == nil {
		return func() {}
	}
	e.active++
	e.used = s.now()
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		e.active--
		e.used = s.now()
	}
}

// reserve makes room for a new session of agent: at a bound it closes the oldest idle session
// (the agent's own first); when every session in the way is busy it answers the status and
// message to refuse with.
func (s *sessions) reserve(agent string) (*sessionEntry, int, string) {
	s.mu.Lock()
	var mine, all []*sessionEntry
	for _, e := range s.byID {
		if e.closing {
			continue
		}
		all = append(all, e)
		if e.agent == agent {
			mine = append(mine, e)
		}
	}
	var evict *sessionEntry
	bound := ""
	switch {
	case len(mine) >= s.perAgent:
		bound = "agent"
		if evict = oldestIdle(mine); evict == nil {
			s.mu.Unlock()
			s.refused.WithLabelValues(bound).Inc()
			return nil, http.StatusTooManyRequests, fmt.Sprintf("this agent already has %d MCP sessions open on this server, "+
				"all busy; the server keeps at most %d per agent. Close a session you no longer use (end the other host "+
				"instance), or retry when one is idle", len(mine), s.perAgent)
		}
	case len(all) >= s.total:
		bound = "total"
		if evict = oldestIdle(all); evict == nil {
			s.mu.Unlock()
			s.refused.WithLabelValues(bound).Inc()
			return nil, http.StatusServiceUnavailable, fmt.Sprintf("the server has %d MCP sessions open, all busy "+
				"(its bound); retry in a minute", len(all))
		}
	}
	var evictSrv *sdk.Server
	if evict != nil {
		evict.closing, evictSrv = true, evict.srv
	}
	e := &sessionEntry{id: randomHex(16), agent: agent, used: s.now()}
	s.byID[e.id] = e
	s.mu.Unlock()
	if evict != nil {
		s.evicted.WithLabelValues(bound).Inc()
		s.log.Info("closed an idle mcp session to make room", "agent", evict.agent, "idle_since", evict.used, "bound", bound)
		closeServer(evictSrv)
	}
	return e, 0, ""
}

func oldestIdle(es []*sessionEntry) *sessionEntry {
	idle := slices.DeleteFunc(slices.Clone(es), func(e *sessionEntry) bool { return e.active > 0 || e.srv == nil })
	if len(idle) == 0 {
		return nil
	}
	return slices.MinFunc(idle, func(a, b *sessionEntry) int { return a.used.Compare(b.used) })
}

func (s *sessions) setServer(e *sessionEntry, srv *sdk.Server) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e.srv = srv
}

// opened runs after the request that opened e: if the SDK made a session of it, a watcher
// removes the entry when the session closes (idle timeout, DELETE, eviction, Close);
// otherwise the entry goes now.
func (s *sessions) opened(e *sessionEntry) {
	s.mu.Lock()
	srv := e.srv
	s.mu.Unlock()
	var ss *sdk.ServerSession
	if srv != nil {
		for x := range srv.Sessions() {
			ss = x
		}
	}
	if ss == nil {
		s.remove(e)
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		_ = ss.Wait()
		s.remove(e)
	}()
}

func (s *sessions) remove(e *sessionEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byID[e.id] == e {
		delete(s.byID, e.id)
	}
}

func closeServer(srv *sdk.Server) {
	if srv == nil {
		return
	}
	for ss := range srv.Sessions() {
		_ = ss.Close()
	}
}

func (s *sessions) closeAll() {
	s.mu.Lock()
	srvs := make([]*sdk.Server, 0, len(s.byID))
	for _, e := range s.byID {
		e.closing = true
		srvs = append(srvs, e.srv)
	}
	s.mu.Unlock()
	for _, srv := range srvs {
		closeServer(srv)
	}
	s.wg.Wait()
}

// writeRPCError answers a request the MCP server never saw with a JSON-RPC error the host
// shows: code -32000 (server error), never 0.
func writeRPCError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": codeServerError, "message": msg}})
	_, _ = w.Write(b)
}
