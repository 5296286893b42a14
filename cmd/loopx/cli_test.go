package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"loopx/server"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func runInProcess(t *testing.T, vars map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(t.Context(), args, env(vars), strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func TestUnreachableServerExits3(t *testing.T) {
	t.Parallel()
	code, _, stderr := runInProcess(t, map[string]string{"LOOPX_URL": "http://" + freeAddr(t), "LOOPX_TOKEN": "x"},
		"goal", "list")
	require.Equal(t, exitUnreachable, code, stderr)
	require.Contains(t, stderr, "is loopx serve running")
}

func TestUsageErrorsExit2(t *testing.T) {
	t.Parallel()
	vars := map[string]string{"LOOPX_URL": "http://127.0.0.1:1", "LOOPX_TOKEN": "x"}
	for _, args := range [][]string{
		{"todo", "claim", "--goal-id", "g"},               // missing --todo-id
		{"todo", "add", "--goal-id", "g", "--bogus", "1"}, // unknown flag
		{"nonsense"},
		{"todo", "add", "--goal-id", "g", "--text", "x", "--priority", "P9"},
		{"agent", "register", "--goal-id", "g", "--agent-id", "a", "--runner-config", "{not json"},
	} {
		code, _, stderr := runInProcess(t, vars, args...)
		require.Equal(t, exitUsage, code, "%v: %s", args, stderr)
		require.NotEmpty(t, stderr)
	}
	code, _, stderr := runInProcess(t, map[string]string{"LOOPX_URL": "ftp://x"}, "goal", "list")
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, "LOOPX_URL")
}

func TestClientReadsTheAdminTokenFromHomeOnlyForTheDefaultURL(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	tok, err := server.AdminToken(server.Config{Home: home})
	require.NoError(t, err)
	st, err := os.Stat(server.AdminTokenPath(home))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	again, err := server.AdminToken(server.Config{Home: home})
	require.NoError(t, err)
	require.Equal(t, tok, again, "generated once")

	a := &app{getenv: env(map[string]string{"LOOPX_HOME": home})}
	c, err := a.newClient()
	require.NoError(t, err)
	require.Equal(t, tok, c.Token())
	require.Equal(t, "http://"+server.DefaultListen, c.BaseURL())

	a = &app{getenv: env(map[string]string{"LOOPX_HOME": home, "LOOPX_URL": "http://elsewhere:7377"})}
	_, err = a.newClient()
	require.ErrorContains(t, err, "LOOPX_TOKEN", "another server never gets the local admin token")

	a = &app{getenv: env(map[string]string{"LOOPX_HOME": home, "LOOPX_TOKEN": "explicit"})}
	c, err = a.newClient()
	require.NoError(t, err)
	require.Equal(t, "explicit", c.Token())
}

func TestEveryCommandHasHelpWithAnExample(t *testing.T) {
	t.Parallel()
	root := (&app{getenv: env(nil)}).rootCommand()
	var walk func(c *cobra.Command)
	n := 0
	walk = func(c *cobra.Command) {
		if c.Name() != "help" && c.Name() != "completion" {
			n++
			require.NotEmpty(t, c.Short, "%s has no short help", c.CommandPath())
			require.NotEmpty(t, c.Example, "%s has no example", c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	require.Greater(t, n, 25)
	for _, want := range []string{"serve", "migrate", "version", "doctor", "goal", "agent", "todo", "gate", "evidence", "quota", "refresh-state"} {
		c, _, err := root.Find([]string{want})
		require.NoError(t, err)
		require.Equal(t, want, c.Name())
	}
}

// Every setting is read by LoadConfig, before anything starts; on/off settings take the
// documented words and refuse anything else, naming the variable (LOOPX_SCHEDULER=flase used
// to leave the scheduler on).
// Addresses and URLs are settings like the others: checked before anything starts (the
// private database included), each wrong one named.

// serve stops with exit 2 naming the variable, before it starts a database.
func TestServeStopsOnABadSettingBeforeStarting(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	code, _, stderr := runInProcess(t, map[string]string{"LOOPX_HOME": home, "LOOPX_LISTEN": "nowhere"}, "serve")
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, `LOOPX_LISTEN: "nowhere" is not a host:port address`)
	_, err := os.Stat(filepath.Join(home, "pg"))
	require.ErrorIs(t, err, os.ErrNotExist, "no database was started")
}
