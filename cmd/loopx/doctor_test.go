package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDoctorUnreachableExits3 runs doctor against a port nobody listens on: exit 3 with or
// without a token (before, a missing token was reported first, as a usage error).
func TestDoctorUnreachableExits3(t *testing.T) {
	t.Parallel()
	home := t.TempDir() // no admin-token file in it
	for _, env := range []map[string]string{
		{"LOOPX_URL": "http://127.0.0.1:1", "LOOPX_HOME": home},
		{"LOOPX_URL": "http://127.0.0.1:1", "LOOPX_HOME": home, "LOOPX_TOKEN": "some-token-0123456789"},
	} {
		var out, errOut bytes.Buffer
		code := run(t.Context(), []string{"doctor"}, func(k string) string { return env[k] }, strings.NewReader(""), &out, &errOut)
		require.Equal(t, exitUnreachable, code, "token %q: %s", env["LOOPX_TOKEN"], errOut.String())
		require.Contains(t, errOut.String(), "reach loopx server at http://127.0.0.1:1")
	}
	var out, errOut bytes.Buffer
	code := run(t.Context(), []string{"doctor"}, func(k string) string { return map[string]string{"LOOPX_URL": "ftp://x"}[k] }, strings.NewReader(""), &out, &errOut)
	require.Equal(t, exitUsage, code, "a malformed LOOPX_URL is still a usage error")
}
