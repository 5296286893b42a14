package server

import (
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
)

// profileComponent serves Go's profiles on lis for benchmarks (LOOPX_TEST_PPROF): CPU
// (/debug/pprof/profile?seconds=N), allocations (/debug/pprof/allocs?seconds=N for a delta)
// and the rest of net/http/pprof. It has its own mux, so the product's listener never routes
// to it, and it exists only when the setting names a loopback address.
func profileComponent(lis net.Listener, logger *slog.Logger) component {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	c := httpComponent(lis, mux, logger)
	c.name = "profiles"
	return c
}
