package server

import (
	"context"

	"loopx/mcp"
)

// wireMCP serves the MCP server over Streamable HTTP at /mcp for hosts that run elsewhere:
// authenticated by an agent's bearer token, its tools call the /v1 API in this process.
func wireMCP(_ context.Context, d *deps) ([]component, error) {
	d.mux.Handle("/mcp", mcp.Handler(mcp.HandlerOptions{API: d.mux, Templates: d.templates, Version: d.cfg.Version,
		Logger: d.logger.With("component", "mcp")}))
	return nil, nil
}
