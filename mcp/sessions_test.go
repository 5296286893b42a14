package mcp_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"loopx/mcp"
)

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"probe","version":"0"}}}`

// mcpPost sends one JSON-RPC message to /mcp as token (in session id when given) and returns
// the status, the session id answered and the body.
func mcpPost(t *testing.T, url, token, session, body string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), string(b)
}

func heapMiB() float64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapAlloc) / (1 << 20)
}

// One agent token opening sessions in a loop and never closing them (the probe reached 1.9 GB
// after 900) holds the heap flat: sessions share their templates and tool schemas, and past
// the bound per agent the oldest idle one is closed. When every session of the agent is busy,
// a new one is refused with a message that says why, and other agents keep working.
//
// Not parallel: the heap is measured, and the package's parallel tests start only after it.
func TestSessionsAreBoundedPerAgentAndShareTheirParts(t *testing.T) {
	b := setup(t)
	reg := prometheus.NewRegistry()
	h, err := mcp.Handler(mcp.HandlerOptions{API: b.api, Registry: reg})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Cleanup(h.Close)

	open := func(token string) string {
		t.Helper()
		status, id, body := mcpPost(t, srv.URL, token, "", initializeBody)
		require.Equal(t, http.StatusOK, status, body)
		require.NotEmpty(t, id)
		return id
	}
	for range 50 { // warm up: pools, caches, the first session's schemas
		open(b.token)
	}
	before := heapMiB()
	for range 2000 {
		open(b.token)
	}
	after := heapMiB()
	t.Logf("heap %.1f MiB before, %.1f MiB after 2,000 more sessions", before, after)
	require.Less(t, after-before, 16.0, "the heap grows with sessions (0.8 MiB each before sessions shared their parts)")
	require.LessOrEqual(t, h.Sessions(), mcp.DefaultMaxSessionsPerAgent)
	require.Equal(t, float64(mcp.DefaultMaxSessionsPerAgent), gaugeValue(t, reg, "loopx_mcp_sessions"))

	// Busy sessions are not closed to make room: with every session of the agent holding a
	// stream open, a new one is refused, saying so.
	ids := make([]string, 0, mcp.DefaultMaxSessionsPerAgent)
	for range mcp.DefaultMaxSessionsPerAgent {
		ids = append(ids, open(b.token))
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	for _, id := range ids {
		holdStream(ctx, t, srv.URL, b.token, id)
	}
	status, _, body := mcpPost(t, srv.URL, b.token, "", initializeBody)
	require.Equal(t, http.StatusTooManyRequests, status, body)
	require.Contains(t, body, `"code":-32000`)
	require.Contains(t, body, "at most 8 per agent")

	// Another agent is not held back by this one.
	id := open(b.other)
	status, _, body = mcpPost(t, srv.URL, b.other, id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	require.Less(t, status, 300, body)
	status, _, body = mcpPost(t, srv.URL, b.other, id, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"goal_status","arguments":{}}}`)
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, `"goal_id":"other"`)

	// Closing the streams makes the sessions idle again: a new session is taken.
	cancel()
	require.Eventually(t, func() bool {
		s, _, _ := mcpPost(t, srv.URL, b.token, "", initializeBody)
		return s == http.StatusOK
	}, 20*time.Second, 50*time.Millisecond)
}

// holdStream makes session id busy until ctx ends: the session is initialized and holds its
// GET stream open, as a host waiting for server messages does.
func holdStream(ctx context.Context, t *testing.T, url, token, id string) {
	t.Helper()
	status, _, body := mcpPost(t, url, token, id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	require.Less(t, status, 300, body)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Mcp-Session-Id", id)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	t.Cleanup(func() { resp.Body.Close() })
	go func() { _, _ = io.Copy(io.Discard, bufio.NewReader(resp.Body)) }()
}

// The process's bound holds across agents: at MaxSessions, a new session of another agent
// closes the oldest idle one (of any agent); when every open session is busy it is refused
// with 503, Retry-After and a message that says why. Refusals and evictions are counted by
// bound.
func TestSessionsAreBoundedInTotal(t *testing.T) {
	t.Parallel()
	b := setup(t)
	reg := prometheus.NewRegistry()
	h, err := mcp.Handler(mcp.HandlerOptions{API: b.api, Registry: reg, MaxSessions: 3})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Cleanup(h.Close)
	open := func(token string) string {
		t.Helper()
		status, id, body := mcpPost(t, srv.URL, token, "", initializeBody)
		require.Equal(t, http.StatusOK, status, body)
		require.NotEmpty(t, id)
		return id
	}

	// Idle sessions of one agent make room for another's.
	for range 3 {
		open(b.token)
	}
	open(b.other)
	require.Equal(t, 3, h.Sessions())
	require.Equal(t, 1.0, counterValue(t, reg, "loopx_mcp_sessions_evicted_total", "total"))

	// Every session busy: the next one is refused, saying so, and nothing is closed.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ids := []string{open(b.token), open(b.token), open(b.token)}
	for _, id := range ids {
		holdStream(ctx, t, srv.URL, b.token, id)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, strings.NewReader(initializeBody))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+b.other)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, string(body))
	require.NotEmpty(t, resp.Header.Get("Retry-After"))
	require.Contains(t, string(body), `"code":-32000`)
	require.Contains(t, string(body), "the server has 3 MCP sessions open, all busy")
	require.Equal(t, 1.0, counterValue(t, reg, "loopx_mcp_sessions_refused_total", "total"))
	require.Equal(t, 3, h.Sessions())

	// A stream that ends makes its session idle: the other agent is taken again.
	cancel()
	require.Eventually(t, func() bool {
		s, _, _ := mcpPost(t, srv.URL, b.other, "", initializeBody)
		return s == http.StatusOK
	}, 20*time.Second, 50*time.Millisecond)
	require.Equal(t, 3, h.Sessions())
}

// counterValue is the value of counter name with the label bound.
func counterValue(t *testing.T, reg *prometheus.Registry, name, bound string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "bound" && l.GetValue() == bound {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

func gaugeValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
