package web

import (
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Refused sign-ins are bounded per source (the client's address as this server sees it):
// each may be refused signInBurst times, then once more every signInEvery; past that it is
// answered 429 without its token being checked. And they are audited in bulk: the first refusal of a
// source in a window writes a row, the others of that window are counted and written as one
// row when the window has passed, so a flood of wrong tokens cannot grow the audit table
// (kept for a year) by more than two rows a source a window.
const (
	signInBurst   = 10
	signInEvery   = 6 * time.Second // 10 a minute
	signInWindow  = time.Minute
	maxSignInSeen = 10000 // sources remembered; the oldest are forgotten first
)

// signInGuard holds the sign-in attempts of each source. Safe for concurrent use.
type signInGuard struct {
	now func() time.Time

	mu  sync.Mutex
	src map[string]*signInSource
}

type signInSource struct {
	limiter *rate.Limiter
	window  time.Time // start of the audit window
	audited bool      // the window's first refusal was audited
	more    int       // refusals of the window not audited yet
	seen    time.Time
}

func newSignInGuard(now func() time.Time) *signInGuard {
	return &signInGuard{now: now, src: map[string]*signInSource{}}
}

// source is the client's address: the host of the connection's remote address.
func source(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

func (g *signInGuard) get(src string, now time.Time) *signInSource {
	s := g.src[src]
	if s == nil {
		if len(g.src) >= maxSignInSeen {
			g.forgetOldest()
		}
		s = &signInSource{limiter: rate.NewLimiter(rate.Every(signInEvery), signInBurst), window: now}
		g.src[src] = s
	}
	s.seen = now
	return s
}

func (g *signInGuard) forgetOldest() {
	var oldest string
	var at time.Time
	for k, s := range g.src {
		if oldest == "" || s.seen.Before(at) {
			oldest, at = k, s.seen
		}
	}
	delete(g.src, oldest)
}

// allow reports whether src may try to sign in now: it has refusals left. Sign-ins that
// succeed spend nothing, so a team behind one address is not held back by its own use.
func (g *signInGuard) allow(src string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	return g.get(src, now).limiter.TokensAt(now) >= 1
}

// refused records a refused sign-in of src and says what to audit: first is true for the
// window's first refusal; earlier > 0 asks for one row summing the refusals a window that has
// passed held beyond its first.
func (g *signInGuard) refused(src string) (first bool, earlier int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	s := g.get(src, now)
	s.limiter.AllowN(now, 1) // a refusal spends one of the source's attempts
	if now.Sub(s.window) >= signInWindow {
		earlier = s.more
		s.window, s.audited, s.more = now, false, 0
	}
	if !s.audited {
		s.audited = true
		return true, earlier
	}
	s.more++
	return false, earlier
}
