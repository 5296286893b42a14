package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Defaults applied by New when the matching Options field is zero.
const (
	DefaultAddr           = "127.0.0.1:0"
	DefaultAppSecret      = "sandbox-secret"
	DefaultBotOpenID      = "ou_sandbox_bot"
	DefaultBotName        = "LoopX"
	DefaultDemoUserOpenID = "ou_demo_owner"
	DefaultChatID         = "oc_demo"
	DefaultTenantKey      = "tenant_sandbox"
	DefaultTokenTTL       = 2 * time.Hour
	DefaultChatRateLimit  = 5
	DefaultAppRateLimit   = 50
	DefaultAckBudget      = 3 * time.Second
)

// DefaultRetryIntervals is Lark's redelivery ladder (15 s, 5 min, 1 h, 6 h) scaled down so a
// test sees all four redeliveries within about four seconds.
func DefaultRetryIntervals() []time.Duration {
	return []time.Duration{50 * time.Millisecond, 200 * time.Millisecond, time.Second, 3 * time.Second}
}

// Options configure a Sandbox. The zero value is usable: every empty field gets its default.
type Options struct {
	// Addr is the listen address; it must be a loopback address. Default "127.0.0.1:0".
	Addr string
	// AppID is the only app id the token and WS endpoints accept. The default is unique per
	// Sandbox ("cli_sbx_<random>") because the SDK caches tokens per app id in a process-global
	// cache: two sandboxes in one test binary must not share an app id.
	AppID     string
	AppSecret string
	// VerificationToken goes into every event's header.token. EncryptKey, when set, signs
	// (X-Lark-Signature) and encrypts HTTP event pushes as Lark does.
	VerificationToken string
	EncryptKey        string
	// BotOpenID and BotName describe the bot (GET /open-apis/bot/v3/info, mentions).
	BotOpenID string
	BotName   string
	// DemoUserOpenID is the user `loopx chat` types as by default; DefaultChatID is a group chat
	// created at start with the bot in it.
	DemoUserOpenID string
	DefaultChatID  string
	TenantKey      string
	// TokenTTL is the lifetime of issued access tokens ("expire" in the answer). The SDK
	// refetches at TTL−3 min, so a TTL ≤ 3 min makes it fetch before every call.
	TokenTTL time.Duration
	// ChatRateLimit is the number of sends (create + reply) one chat accepts per clock second;
	// AppRateLimit the number the app may send per second over all chats. 0 means the Lark
	// default (5 and 50); a negative value disables that limit.
	ChatRateLimit int
	AppRateLimit  int
	// RetryIntervals is the redelivery ladder of event pushes; nil means DefaultRetryIntervals,
	// an empty non-nil slice means no redelivery.
	RetryIntervals []time.Duration
	// AckBudget is how long a push may wait for its answer (HTTP) or ack (WS) before it counts
	// as failed. Default 3 s, as Lark.
	AckBudget time.Duration
	// EventURL, when set, makes events go over HTTP (POSTed there); otherwise they go over the
	// WebSocket long connection. Card callbacks go to CardURL, else to EventURL, else over
	// WS: Lark configures callbacks apart from events. Both can be changed with
	// SetCallbackURLs.
	EventURL string
	CardURL  string
	// GroupMessages delivers every group message to the bot, as the scope
	// im:message.group_msg does; by default only messages that mention the bot are delivered.
	GroupMessages bool
	// WS is the ClientConfig sent with the WS endpoint and every pong; nil means
	// DefaultWSConfig.
	WS *WSConfig
	// ControlToken, when set, is required as "Authorization: Bearer <token>" on the /sandbox/
	// control API.
	ControlToken string
	// Now is the clock (token expiry, uuid dedupe, rate windows, timestamps). Default time.Now.
	Now func() time.Time
	// Logger receives the sandbox's own log; default discards. Secrets are never logged.
	Logger *slog.Logger
	// StateDir, when set, keeps the chat model (chats, messages, cards, reactions, threads)
	// in this directory so that a new Sandbox on it starts where the last one stopped: New
	// reads it, every change is written as it happens, Close syncs it. The directory is
	// locked while a Sandbox has it. Tokens, click tokens, faults and counters are not kept.
	StateDir string
}

// WSConfig is the ClientConfig the WS endpoint hands to the SDK. All values are in seconds and
// applied by the SDK as sent; a zero PingInterval makes the SDK ping in a tight loop.
type WSConfig struct {
	ReconnectCount    int
	ReconnectInterval int
	ReconnectNonce    int
	PingInterval      int
}

// DefaultWSConfig reconnects at once and then every second without limit, and pings every
// 30 s.
func DefaultWSConfig() WSConfig {
	return WSConfig{ReconnectCount: -1, ReconnectInterval: 1, ReconnectNonce: 0, PingInterval: 30}
}

// Sandbox is an in-process emulation of the Lark open platform on a loopback listener. All
// methods are safe for concurrent use.
type Sandbox struct {
	opts  Options
	log   *slog.Logger
	now   func() time.Time
	nonce string
	ln    net.Listener
	srv   *http.Server
	base  string

	// bg is cancelled by Close; it bounds every goroutine the sandbox starts (wg).
	bg        context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	lifeMu    sync.Mutex
	closed    bool
	serveErr  error
	startOnce sync.Once
	closeOnce sync.Once

	httpc *http.Client

	mu        sync.Mutex
	counter   int64
	rev       int64
	changed   chan struct{}
	tokens    map[string]tokenInfo
	codes     map[string]oauthCode // OAuth authorization codes not yet exchanged
	users     map[string]string    // a person's access token → their open_id
	issues    int
	chats     map[string]*chat
	chatOrder []string
	messages  map[string]*Message
	uuids     map[string]uuidEntry
	clicks    map[string]*clickToken
	faults    map[Route][]Fail
	appRate   rateStat
	patches   map[string]*rateStat // per message id
	requests  []Request
	unmatched []Request
	eventURL  string
	cardURL   string
	ws        wsState
	state     *stateStore // nil without Options.StateDir
}

// New validates opts, applies defaults and binds the listener, so URL is known at once.
// Serving starts with Start.
func New(opts Options) (*Sandbox, error) {
	if err := fillOptions(&opts); err != nil {
		return nil, fmt.Errorf("new sandbox: %w", err)
	}
	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("new sandbox: listen on Addr %q: %w", opts.Addr, err)
	}
	bg, cancel := context.WithCancel(context.Background())
	s := &Sandbox{
		opts:    opts,
		log:     opts.Logger,
		now:     opts.Now,
		nonce:   randomHex(3),
		ln:      ln,
		base:    "http://" + ln.Addr().String(),
		bg:      bg,
		cancel:  cancel,
		httpc:   &http.Client{Timeout: opts.AckBudget},
		changed: make(chan struct{}),
		tokens:  map[string]tokenInfo{}, codes: map[string]oauthCode{}, users: map[string]string{},
		chats:    map[string]*chat{},
		messages: map[string]*Message{},
		uuids:    map[string]uuidEntry{},
		clicks:   map[string]*clickToken{},
		patches:  map[string]*rateStat{},
		faults:   map[Route][]Fail{},
		eventURL: opts.EventURL,
		cardURL:  opts.CardURL,
		ws:       newWSState(),
	}
	if opts.StateDir != "" {
		if err := s.openState(opts.StateDir); err != nil {
			cancel()
			_ = ln.Close()
			return nil, fmt.Errorf("new sandbox: %w", err)
		}
	}
	s.addChatLocked(opts.DefaultChatID, ChatGroup, "LoopX sandbox")
	s.srv = &http.Server{Handler: s.handler(), ReadHeaderTimeout: 10 * time.Second}
	return s, nil
}

func fillOptions(o *Options) error {
	if o.Addr == "" {
		o.Addr = DefaultAddr
	}
	host, _, err := net.SplitHostPort(o.Addr)
	if err != nil {
		return fmt.Errorf("Addr %q is not host:port: %w", o.Addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("Addr %q: the sandbox impersonates users and must listen on a loopback address such as 127.0.0.1", o.Addr)
	}
	if o.AppID == "" {
		o.AppID = "cli_sbx_" + randomHex(6)
	}
	defaults := []struct {
		field *string
		value string
	}{
		{&o.AppSecret, DefaultAppSecret}, {&o.BotOpenID, DefaultBotOpenID}, {&o.BotName, DefaultBotName},
		{&o.DemoUserOpenID, DefaultDemoUserOpenID}, {&o.DefaultChatID, DefaultChatID}, {&o.TenantKey, DefaultTenantKey},
	}
	for _, d := range defaults {
		if *d.field == "" {
			*d.field = d.value
		}
	}
	switch {
	case o.TokenTTL < 0:
		return fmt.Errorf("TokenTTL %v must not be negative", o.TokenTTL)
	case o.TokenTTL == 0:
		o.TokenTTL = DefaultTokenTTL
	case o.TokenTTL < time.Second:
		return fmt.Errorf("TokenTTL %v: Lark answers expire in whole seconds, use at least 1s", o.TokenTTL)
	}
	if o.ChatRateLimit == 0 {
		o.ChatRateLimit = DefaultChatRateLimit
	}
	if o.AppRateLimit == 0 {
		o.AppRateLimit = DefaultAppRateLimit
	}
	if o.RetryIntervals == nil {
		o.RetryIntervals = DefaultRetryIntervals()
	}
	for i, d := range o.RetryIntervals {
		if d < 0 {
			return fmt.Errorf("RetryIntervals[%d] %v must not be negative", i, d)
		}
	}
	o.RetryIntervals = append([]time.Duration(nil), o.RetryIntervals...)
	switch {
	case o.AckBudget < 0:
		return fmt.Errorf("AckBudget %v must not be negative", o.AckBudget)
	case o.AckBudget == 0:
		o.AckBudget = DefaultAckBudget
	}
	if o.WS == nil {
		c := DefaultWSConfig()
		o.WS = &c
	} else if o.WS.PingInterval <= 0 {
		return fmt.Errorf("WS.PingInterval %d must be at least 1 second: the SDK pings in a tight loop on 0", o.WS.PingInterval)
	} else {
		c := *o.WS
		o.WS = &c
	}
	for name, u := range map[string]string{"EventURL": o.EventURL, "CardURL": o.CardURL} {
		if err := checkCallbackURL(u); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

func checkCallbackURL(u string) error {
	if u == "" {
		return nil
	}
	if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		return fmt.Errorf("%q must be an http:// or https:// URL", u)
	}
	return nil
}

// Start serves until ctx is done or Close is called. It returns at once.
func (s *Sandbox) Start(ctx context.Context) {
	s.startOnce.Do(func() {
		s.spawn(func() {
			if err := s.srv.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.log.Error("sandbox server stopped", "err", err)
				s.lifeMu.Lock()
				s.serveErr = err
				s.lifeMu.Unlock()
				s.shutdown() // it never waits for this goroutine
			}
		})
		s.spawn(func() {
			select {
			case <-ctx.Done():
				s.shutdown()
			case <-s.bg.Done():
			}
		})
		s.log.Info("lark sandbox listening", "url", s.base, "app_id", s.opts.AppID)
	})
}

// Run serves until ctx is done, then closes the sandbox. It returns an error only when
// serving failed.
func (s *Sandbox) Run(ctx context.Context) error {
	s.Start(ctx)
	select {
	case <-ctx.Done():
	case <-s.bg.Done():
	}
	s.Close()
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	if s.serveErr != nil {
		return fmt.Errorf("serve lark sandbox: %w", s.serveErr)
	}
	return nil
}

// Close stops serving, drops WebSocket connections, abandons pending deliveries and waits for
// every goroutine the sandbox started.
func (s *Sandbox) Close() {
	s.shutdown()
	s.wg.Wait()
	s.closeState()
}

func (s *Sandbox) shutdown() {
	s.closeOnce.Do(func() {
		s.lifeMu.Lock()
		s.closed = true
		s.lifeMu.Unlock()
		s.cancel()
		s.DropConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := s.srv.Shutdown(ctx); err != nil {
			s.log.Warn("sandbox shutdown", "err", err)
			_ = s.srv.Close()
		}
		_ = s.ln.Close()
	})
}

// spawn runs f in a goroutine the sandbox owns (Close waits for it); it reports false, and
// does not run f, once the sandbox is closed.
func (s *Sandbox) spawn(f func()) bool {
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	if s.closed {
		return false
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f()
	}()
	return true
}

// URL is the base URL for lark.WithOpenBaseUrl and larkws.WithDomain, e.g.
// "http://127.0.0.1:41234".
func (s *Sandbox) URL() string { return s.base }

// AppID is the app id the sandbox accepts.
func (s *Sandbox) AppID() string { return s.opts.AppID }

// AppSecret is the app secret the sandbox accepts.
func (s *Sandbox) AppSecret() string { return s.opts.AppSecret }

// BotOpenID is the bot's open_id.
func (s *Sandbox) BotOpenID() string { return s.opts.BotOpenID }

// DemoUserOpenID is the default user of `loopx chat`.
func (s *Sandbox) DemoUserOpenID() string { return s.opts.DemoUserOpenID }

// DefaultChatID is the group chat that exists from the start.
func (s *Sandbox) DefaultChatID() string { return s.opts.DefaultChatID }

// SetCallbackURLs switches the active transports: events go to eventURL over HTTP, or over
// WS when it is empty; card callbacks go to cardURL, else eventURL, else over WS.
func (s *Sandbox) SetCallbackURLs(eventURL, cardURL string) error {
	for name, u := range map[string]string{"eventURL": eventURL, "cardURL": cardURL} {
		if err := checkCallbackURL(u); err != nil {
			return fmt.Errorf("set callback urls: %s: %w", name, err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.eventURL, s.cardURL = eventURL, cardURL
	return nil
}

// nextID returns a new id with the given prefix, unique within this sandbox and, through the
// random nonce, very likely across sandboxes.
func (s *Sandbox) nextIDLocked(prefix string) string {
	s.counter++
	return prefix + s.nonce + "_" + strconv.FormatInt(s.counter, 10)
}

// bumpLocked records a change visible through the control API and wakes long polls.
func (s *Sandbox) bumpLocked() int64 {
	s.rev++
	close(s.changed)
	s.changed = make(chan struct{})
	return s.rev
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// answer is what a route handler returns; the wrapper writes it as JSON and records it.
type answer struct {
	status  int
	body    any
	headers map[string]string
}

func ok(data any) answer {
	return answer{status: http.StatusOK, body: map[string]any{"code": 0, "msg": "success", "data": data}}
}

func larkErr(status, code int, format string, args ...any) answer {
	return answer{status: status, body: map[string]any{"code": code, "msg": fmt.Sprintf(format, args...)}}
}

func writeJSON(w http.ResponseWriter, status int, headers map[string]string, body any) {
	for k, v := range headers {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

func readBody(r *http.Request) ([]byte, error) {
	return io.ReadAll(io.LimitReader(r.Body, 4<<20))
}
