package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDoctorFollowsTheProjectConnection: in a connected project, doctor checks the server the
// connection names (on a port other than the default) with the agent's stored token, and
// every check passes against a healthy server.
func TestDoctorFollowsTheProjectConnection(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	project, s := connectedProjectOn(t, home)
	r := loopxIn(t, project, home, "doctor", "--format", "json")
	require.Equal(t, 0, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	out := r.json(t)
	require.Equal(t, true, out["ok"])
	var server string
	for _, c := range out["checks"].([]any) {
		c := c.(map[string]any)
		require.Equal(t, true, c["ok"], "%v", c)
		if c["name"] == "server" {
			server = c["detail"].(string)
		}
	}
	require.Contains(t, server, s.url+"/healthz answered 200 (address from server_url in ")
}
