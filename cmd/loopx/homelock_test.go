package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLockHomeNamesTheHolder(t *testing.T) {
	t.Parallel()
	home := filepath.Join(t.TempDir(), "home")
	cfg := Config{Home: home, Listen: "127.0.0.1:7399"}
	unlock, err := lockHome(cfg, "serve")
	require.NoError(t, err)

	_, err = lockHome(cfg, "serve")
	var busy *homeBusyError
	require.ErrorAs(t, err, &busy)
	require.Equal(t, os.Getpid(), busy.holder.PID)
	require.Contains(t, err.Error(), "another LoopX (loopx serve, pid "+strconv.Itoa(os.Getpid())+", listening on 127.0.0.1:7399) is running on LOOPX_HOME "+home)
	_, err = lockHome(cfg, "migrate")
	require.ErrorAs(t, err, &busy, "migrate would start the same cluster")

	// With a database of its own, a process does not need the home: replicas share it.
	shared := cfg
	shared.DatabaseURL = "postgres://db/loopx"
	noop, err := lockHome(shared, "serve")
	require.NoError(t, err)
	noop()

	unlock()
	unlock2, err := lockHome(cfg, "migrate")
	require.NoError(t, err, "released")
	b, err := os.ReadFile(filepath.Join(home, homeLockFile))
	require.NoError(t, err)
	require.Contains(t, string(b), `"command":"migrate"`)
	require.NotContains(t, string(b), "listen", "migrate has no listener")
	unlock2()
	st, err := os.Stat(filepath.Join(home, homeLockFile))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
}

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
