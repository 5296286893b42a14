package main

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestInspectorStrictPassesOverStdioAndHTTP: the MCP Inspector's CLI lists the tools of
// `loopx mcp` (stdio, in a connected project) and of /mcp (an agent's token) with --strict,
// which exits non-zero on any schema a host could not read (a bare `true`, ...).
func TestInspectorStrictPassesOverStdioAndHTTP(t *testing.T) {
	t.Parallel()
	inspector := hostCLI(t, "mcp-inspector", "@modelcontextprotocol/inspector")
	home := t.TempDir()
	project, s := connectedProjectOn(t, home)
	env := append(hostEnv(home), "MCP_CATALOG_PATH="+filepath.Join(home, "catalog.json"))

	out := runHost(t, project, env, inspector, "--cli", "--method", "tools/list", "--strict", loopxWrapper(t), "mcp")
	require.Contains(t, out, `"should_run"`)
	require.Contains(t, out, `"todo_handoff"`, "the contract's tools pass too")
	// --header takes every argument after it: the URL goes first.
	out = runHost(t, project, env, inspector, "--cli", s.url+"/mcp", "--method", "tools/list", "--strict", "--transport", "http",
		"--header", "Authorization: Bearer "+storedToken(t, home))
	require.Contains(t, out, `"spend_slot"`)
}
