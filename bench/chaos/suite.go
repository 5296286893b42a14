package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"loopx/bot/sandbox"
	"loopx/store"
)

const (
	adminToken   = "chaos-admin-token-0123456789abcdef"
	verifyToken  = "chaos-verification-token"
	encryptKey   = "chaos-encrypt-key"
	ownerID      = "ou_chaos_owner"
	goalID       = "chaos"
	agentID      = "a1"
	replicaCount = 3
)

// larkLadder is Lark's redelivery ladder for an event not acknowledged within 3 s.
var larkLadder = []time.Duration{15 * time.Second, 5 * time.Minute, time.Hour, 6 * time.Hour}

// suite holds what every scenario shares: the cluster, the sandbox, the replicas.
type suite struct {
	o         options
	bin, dir  string
	log       *slog.Logger
	pg        *pgCluster
	sb        *sandbox.Sandbox
	lb        *balancer
	secretKey string
	dbName    string
	st        *store.Store // a direct pool for the checks
	closeDB   func()
	others    map[string]*store.Store // direct pools on the scenarios' own databases (storeOf)
	closers   []func()
	replicas  []*replica
	hc        *http.Client
	transport string // what the replicas run now: ws or http
}

func newSuite(ctx context.Context, o options, bin, dir string, logger *slog.Logger) (*suite, error) {
	s := &suite{o: o, bin: bin, dir: dir, log: logger, dbName: "loopx",
		secretKey: store.FormatSecretKey(store.NewSecretKey()), hc: &http.Client{Timeout: 30 * time.Second}}
	pgDir := filepath.Join(dir, "pg")
	if err := os.MkdirAll(pgDir, 0o755); err != nil {
		return nil, err
	}
	pg, err := newPGCluster(ctx, pgDir)
	if err != nil {
		return nil, err
	}
	s.pg = pg
	if err := createDatabase(ctx, pg.URL("postgres"), s.dbName); err != nil {
		s.close()
		return nil, err
	}
	ladder := make([]time.Duration, len(larkLadder))
	for i, d := range larkLadder {
		ladder[i] = time.Duration(float64(d) / o.ladderScale)
	}
	sb, err := sandbox.New(sandbox.Options{VerificationToken: verifyToken, EncryptKey: encryptKey,
		RetryIntervals: ladder, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		s.close()
		return nil, err
	}
	sb.Start(context.WithoutCancel(ctx))
	s.sb = sb
	s.lb = newBalancer()
	if err := s.lb.start(); err != nil {
		s.close()
		return nil, err
	}
	for i := range replicaCount {
		r, err := s.newReplica(fmt.Sprintf("r%d", i+1), pg.URL(s.dbName), nil)
		if err != nil {
			s.close()
			return nil, err
		}
		s.replicas = append(s.replicas, r)
	}
	pool, err := store.Open(ctx, pg.URL(s.dbName))
	if err != nil {
		s.close()
		return nil, err
	}
	s.closeDB = pool.Close
	s.st = store.New(pool, store.Options{})
	return s, nil
}

func (s *suite) ladderText() []string {
	var out []string
	for i, d := range larkLadder {
		out = append(out, fmt.Sprintf("%s scaled to %s", d, time.Duration(float64(d)/s.o.ladderScale)))
		_ = i
	}
	return out
}

func (s *suite) close() {
	for _, r := range s.replicas {
		if r.alive() {
			_, _ = r.term(10 * time.Second)
		}
	}
	if s.closeDB != nil {
		s.closeDB()
	}
	for _, c := range s.closers {
		c()
	}
	if s.lb != nil {
		s.lb.close()
	}
	if s.sb != nil {
		s.sb.Close()
	}
	if s.pg != nil {
		_ = s.pg.stop()
	}
}

// newReplica prepares (does not start) a `loopx serve` on dbURL; extra env overrides.
func (s *suite) newReplica(name, dbURL string, extra map[string]string) (*replica, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	home := filepath.Join(s.dir, "home-"+name)
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, err
	}
	env := map[string]string{
		"PATH": os.Getenv("PATH"), "HOME": home, "LOOPX_HOME": home,
		"LOOPX_LISTEN": fmt.Sprintf("127.0.0.1:%d", port), "DATABASE_URL": dbURL,
		"LOOPX_ADMIN_TOKEN": adminToken, "LOOPX_SECRET_KEY": s.secretKey, "LOOPX_REPLICA": name,
		"LOOPX_SCHEDULER": "off", "LOOPX_DEMO": "off", "LOOPX_INBOX_MAX_PENDING": "100000",
		"LARK_APP_ID": s.sb.AppID(), "LARK_APP_SECRET": s.sb.AppSecret(), "LARK_BASE_URL": s.sb.URL(),
		"LARK_VERIFICATION_TOKEN": verifyToken, "LARK_ENCRYPT_KEY": encryptKey,
		"LARK_BOT_OPEN_ID": s.sb.BotOpenID(), "LARK_TRANSPORT": "ws", "LOG_LEVEL": "warn", "LOG_FORMAT": "json",
		// Lark's per-minute budgets, time-scaled like the redelivery ladder: at 1,000 a
		// minute the chat scenario's 11,000 receipts alone would take 11 minutes. The
		// per-second limits stay real, and the sandbox counts them.
		"LOOPX_TEST_LARK_MINUTE": "10s",
	}
	for k, v := range extra {
		env[k] = v
	}
	var list []string
	for k, v := range env {
		list = append(list, k+"="+v)
	}
	return &replica{name: name, url: fmt.Sprintf("http://127.0.0.1:%d", port), env: list, bin: s.bin, logDir: s.dir}, nil
}

// setTransport (re)starts every replica on transport (ws or http) and points the sandbox at
// it: HTTP callbacks through the balancer, or the long connection.
func (s *suite) setTransport(ctx context.Context, transport string) error {
	for i, r := range s.replicas {
		if r.alive() {
			if _, err := r.term(15 * time.Second); err != nil {
				return err
			}
		}
		env := r.env[:0:0]
		for _, kv := range r.env {
			if len(kv) > 15 && kv[:15] == "LARK_TRANSPORT=" {
				continue
			}
			env = append(env, kv)
		}
		s.replicas[i].env = append(env, "LARK_TRANSPORT="+transport)
	}
	if transport == "http" {
		if err := s.sb.SetCallbackURLs(s.lb.url+"/lark/events", s.lb.url+"/lark/cards"); err != nil {
			return err
		}
	} else if err := s.sb.SetCallbackURLs("", ""); err != nil {
		return err
	}
	for _, r := range s.replicas {
		if err := r.start(); err != nil {
			return err
		}
	}
	for _, r := range s.replicas {
		if _, err := r.waitReady(ctx, 60*time.Second); err != nil {
			return err
		}
	}
	s.lb.set(s.replicas)
	if transport == "ws" {
		deadline := time.Now().Add(20 * time.Second)
		for len(s.sb.WSConnections()) < len(s.replicas) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}

// storeOf is a direct pool on database name of the suite's cluster, opened once.
func (s *suite) storeOf(ctx context.Context, name string) (*store.Store, error) {
	if st, ok := s.others[name]; ok {
		return st, nil
	}
	pool, err := store.Open(ctx, s.pg.URL(name))
	if err != nil {
		return nil, err
	}
	if s.others == nil {
		s.others = map[string]*store.Store{}
	}
	s.closers = append(s.closers, pool.Close)
	s.others[name] = store.New(pool, store.Options{})
	return s.others[name], nil
}

// api calls the /v1 API of replica r (or the first live one) and returns status and body.
func (s *suite) api(ctx context.Context, base, method, path, token, key string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}

// mustAPI calls the API and requires want.
func (s *suite) mustAPI(ctx context.Context, method, path, token string, body any, want int) (map[string]any, error) {
	status, out, err := s.api(ctx, s.replicas[0].url, method, path, token, fmt.Sprintf("setup-%d", time.Now().UnixNano()), body)
	if err != nil {
		return nil, err
	}
	if status != want {
		return nil, fmt.Errorf("%s %s: %d %s", method, path, status, out)
	}
	var m map[string]any
	_ = json.Unmarshal(out, &m)
	return m, nil
}

// count runs a count query on the direct pool.
func (s *suite) count(ctx context.Context, sql string, args ...any) (int, error) {
	var n int
	err := s.st.DB().QueryRow(ctx, sql, args...).Scan(&n)
	return n, err
}

// waitDelivered waits until every delivery is acknowledged or gave up (its ladder spent).
func waitDelivered(ctx context.Context, ds []*sandbox.Delivery) (acked, failed int) {
	for _, d := range ds {
		r, err := d.Wait(ctx)
		if err == nil && r.Acked {
			acked++
		} else {
			failed++
		}
	}
	return acked, failed
}

// waitOutboxDrained waits until no outbox row is pending or being sent (or limit passes).
func (s *suite) waitOutboxDrained(ctx context.Context, limit time.Duration) (time.Duration, error) {
	return waitDrainedOf(ctx, s.st, limit)
}

// waitDrainedOf is waitOutboxDrained on the database of st.
func waitDrainedOf(ctx context.Context, st *store.Store, limit time.Duration) (time.Duration, error) {
	count := func(ctx context.Context, sql string) (n int, err error) {
		return n, st.DB().QueryRow(ctx, sql).Scan(&n)
	}
	start := time.Now()
	for time.Since(start) < limit {
		n, err := count(ctx, `SELECT count(*) FROM outbox WHERE state NOT IN ('sent', 'failed')`)
		if err == nil && n == 0 {
			return time.Since(start), nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	n, _ := count(ctx, `SELECT count(*) FROM outbox WHERE state NOT IN ('sent', 'failed')`)
	return time.Since(start), fmt.Errorf("%d outbox rows still unsent after %s", n, limit)
}

// withEventID is an event payload under another event id: Lark redelivering a message under
// a new event.
func withEventID(payload []byte, id string) []byte {
	var m map[string]any
	if json.Unmarshal(payload, &m) != nil {
		return payload
	}
	if h, ok := m["header"].(map[string]any); ok {
		h["event_id"] = id
	}
	b, _ := json.Marshal(m)
	return b
}

func createDatabase(ctx context.Context, adminURL, name string) error {
	pool, err := store.Open(ctx, adminURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	_, err = pool.Exec(ctx, "CREATE DATABASE "+name)
	return err
}

// pgReady reports whether url answers a query.
func pgReady(ctx context.Context, url string) bool {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	pool, err := store.Open(ctx, url)
	if err != nil {
		return false
	}
	pool.Close()
	return true
}

// balancer is the load balancer before the replicas' HTTP callbacks: round robin over the
// live ones; a replica that does not answer makes it try the next, and with none it answers
// 502 (Lark then redelivers on its ladder).
type balancer struct {
	ln   net.Listener
	srv  *http.Server
	url  string
	mu   sync.Mutex
	reps []*replica
	next atomic.Uint64
}

func newBalancer() *balancer { return &balancer{} }

func (b *balancer) start() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	b.ln, b.url = ln, "http://"+ln.Addr().String()
	b.srv = &http.Server{Handler: http.HandlerFunc(b.serve), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = b.srv.Serve(ln) }()
	return nil
}

func (b *balancer) set(rs []*replica) {
	b.mu.Lock()
	b.reps = append([]*replica(nil), rs...)
	b.mu.Unlock()
}

func (b *balancer) close() {
	if b.srv != nil {
		_ = b.srv.Close()
	}
}

func (b *balancer) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 2<<20))
	if err != nil {
		http.Error(w, "read", http.StatusBadRequest)
		return
	}
	b.mu.Lock()
	reps := b.reps
	b.mu.Unlock()
	n := uint64(len(reps))
	for i := uint64(0); i < n; i++ {
		rep := reps[(b.next.Add(1))%n]
		if !rep.alive() {
			continue
		}
		u, _ := url.Parse(rep.url)
		var failed bool
		proxy := &httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(u); pr.Out.Host = u.Host },
			ErrorHandler: func(http.ResponseWriter, *http.Request, error) {
				failed = true
			},
		}
		rec := &capture{header: http.Header{}}
		req := r.Clone(r.Context())
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.ContentLength = int64(len(body))
		proxy.ServeHTTP(rec, req)
		if failed {
			continue
		}
		for k, v := range rec.header {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.status)
		_, _ = w.Write(rec.body.Bytes())
		return
	}
	http.Error(w, "no replica answered", http.StatusBadGateway)
}

// capture is a ResponseWriter that keeps the answer, so a failed try can go to another
// replica before anything was written to the client.
type capture struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (c *capture) Header() http.Header { return c.header }
func (c *capture) Write(p []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	return c.body.Write(p)
}
func (c *capture) WriteHeader(status int) { c.status = status }
