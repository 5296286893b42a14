package web

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"loopx/store"
)

// Run listens for changes (NOTIFY loopx_workspace) and tells every open page's event stream,
// until ctx ends. A lost connection is retried with a pause; pages keep working meanwhile
// (they are only not live).
func (s *Server) Run(ctx context.Context) error {
	for {
		err := s.st.Listen(ctx, store.WorkspaceChannel, func(string) { s.broadcast() })
		if ctx.Err() != nil {
			return nil
		}
		s.log.WarnContext(ctx, "workspace live updates paused; listening again", "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(2 * time.Second):
		}
	}
}

// broadcast wakes every subscriber; one that has not read the last wake keeps just one.
func (s *Server) broadcast() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.subs {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

func (s *Server) subscribe() (chan struct{}, func()) {
	c := make(chan struct{}, 1)
	s.mu.Lock()
	s.subs[c] = struct{}{}
	s.mu.Unlock()
	return c, func() {
		s.mu.Lock()
		delete(s.subs, c)
		s.mu.Unlock()
	}
}

// events is a page's server-sent event stream: "change" whenever something the workspace
// shows changed, a comment every 25 s to keep proxies from closing it.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	ss, err := s.session(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if ss == nil {
		http.Error(w, "sign in first", http.StatusUnauthorized)
		return
	}
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{}) // a stream outlives the server's write timeout
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	c, done := s.subscribe()
	defer done()
	if _, err := fmt.Fprint(w, "retry: 3000\n: live\n\n"); err != nil {
		return
	}
	if err := rc.Flush(); err != nil {
		return
	}
	keep := time.NewTicker(25 * time.Second)
	defer keep.Stop()
	for {
		var msg string
		select {
		case <-r.Context().Done():
			return
		case <-c:
			msg = "event: change\ndata: {}\n\n"
		case <-keep.C:
			msg = ": keep-alive\n\n"
		}
		if _, err := fmt.Fprint(w, msg); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
}
