package server

import (
	"context"
	"fmt"

	"loopx/mcp"
)

// wireMCP serves the MCP server over Streamable HTTP at /mcp for hosts that run elsewhere:
// authenticated by an agent's bearer token, its tools call the /v1 API in this process.
// Its sessions are closed when serve stops.
func wireMCP(_ context.Context, d *deps) ([]component, error) {
	h, err := mcp.Handler(mcp.HandlerOptions{API: d.mux, Templates: d.templates, Version: d.cfg.Build.Version,
		Logger: d.logger.With("component", "mcp"), Registry: d.registry})
	if err != nil {
		return nil, fmt.Errorf("create mcp handler: %w", err)
	}
	d.mux.Handle("/mcp", h)
	return []component{{name: "mcp-sessions", run: func(ctx context.Context) error {
		<-ctx.Done()
		h.Close()
		return nil
	}}}, nil
}
