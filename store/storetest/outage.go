package storetest

import (
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Outage is a fresh migrated database reached through a TCP proxy the test can cut: every
// connection through it is closed at once and new ones are refused, as when PostgreSQL
// stops or the network between goes down.
type Outage struct {
	Pool *pgxpool.Pool // reaches the database through the proxy (connect timeout 2 s)

	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	down  bool
}

// NewOutage creates the database and the proxy; both go away with the test.
func NewOutage(t testing.TB) *Outage {
	t.Helper()
	u, err := url.Parse(NewDatabase(t))
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	o := &Outage{ln: ln}
	target := u.Host
	t.Cleanup(func() { ln.Close(); o.Cut() })
	go o.serve(target)
	u.Host = ln.Addr().String()
	q := u.Query()
	q.Set("connect_timeout", "2")
	u.RawQuery = q.Encode()
	cfg, err := pgxpool.ParseConfig(u.String())
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	cfg.HealthCheckPeriod = time.Hour // the test decides when the database goes away
	if o.Pool, err = pgxpool.NewWithConfig(t.Context(), cfg); err != nil {
		t.Fatalf("storetest: %v", err)
	}
	t.Cleanup(o.Pool.Close)
	return o
}

func (o *Outage) serve(target string) {
	for {
		c, err := o.ln.Accept()
		if err != nil {
			return
		}
		o.mu.Lock()
		down := o.down
		o.mu.Unlock()
		if down {
			c.Close()
			continue
		}
		s, err := net.Dial("tcp", target)
		if err != nil {
			c.Close()
			continue
		}
		o.mu.Lock()
		o.conns = append(o.conns, c, s)
		o.mu.Unlock()
		go func() { _, _ = io.Copy(s, c); s.Close() }()
		go func() { _, _ = io.Copy(c, s); c.Close() }()
	}
}

// Cut closes every connection to the database and refuses new ones.
func (o *Outage) Cut() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.down = true
	for _, c := range o.conns {
		c.Close()
	}
	o.conns = nil
}
