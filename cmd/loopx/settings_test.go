package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loopx/bot/sandbox"
	"loopx/hosts/project"
	"loopx/server"
)

// goneProcess is a process id above Linux's largest (pid_max is at most 2^22): never alive.
const goneProcess = 1 << 30

// settingsIn resolves the client settings of a command run in dir with vars.
func settingsIn(dir string, vars map[string]string) *clientSettings {
	return (&app{getenv: env(vars), dir: dir}).settings()
}

// doctorEnvFor is the doctor's view of vars, run outside any project.
func doctorEnvFor(t *testing.T, vars map[string]string) doctorEnv {
	t.Helper()
	return doctorEnv{getenv: env(vars), client: settingsIn(t.TempDir(), vars)}
}

// Each source of the server, the token and the sandbox, from the strongest down.
func TestClientSettingsResolutionOrder(t *testing.T) {
	t.Parallel()
	home, cfgDir, outside := t.TempDir(), t.TempDir(), t.TempDir()
	vars := map[string]string{"LOOPX_HOME": home, "LOOPX_CONFIG_DIR": cfgDir}
	with := func(extra map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range vars {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}

	// Nothing recorded: the default addresses, as this machine's serve.
	s := settingsIn(outside, vars)
	require.NoError(t, s.serverErr)
	require.Equal(t, "http://"+server.DefaultListen, s.Server)
	require.Equal(t, "the default", s.ServerFrom)
	require.True(t, s.Local)
	require.Equal(t, sandbox.DefaultSandboxURL, s.Sandbox)

	// serve recorded where it listens: the record beats the defaults, and the admin token it
	// keeps goes to it.
	admin, err := server.AdminToken(server.Config{Home: home})
	require.NoError(t, err)
	rec := server.Serving{PID: os.Getpid(), URL: "http://127.0.0.1:18377", SandboxURL: "http://127.0.0.1:18378", Since: time.Now()}
	require.NoError(t, server.WriteServing(home, rec))
	s = settingsIn(outside, vars)
	require.Equal(t, rec.URL, s.Server)
	require.Equal(t, "loopx serve's record "+server.ServingPath(home), s.ServerFrom)
	require.True(t, s.Local)
	require.Equal(t, admin, s.Token)
	require.Equal(t, server.AdminTokenPath(home), s.TokenFrom)
	require.Equal(t, rec.SandboxURL, s.Sandbox)

	// LOOPX_TOKEN and LOOPX_SANDBOX_URL beat the home's.
	s = settingsIn(outside, with(map[string]string{"LOOPX_TOKEN": "explicit-token", "LOOPX_SANDBOX_URL": "http://127.0.0.1:9"}))
	require.Equal(t, "explicit-token", s.Token)
	require.Equal(t, "LOOPX_TOKEN", s.TokenFrom)
	require.Equal(t, "http://127.0.0.1:9", s.Sandbox)

	// LOOPX_URL beats the record; naming the recorded server (or the default address) it is
	// still this machine's serve, naming another it never gets the local admin token.
	for u, local := range map[string]bool{rec.URL + "/": true, "http://" + server.DefaultListen: true, "http://elsewhere:7377": false} {
		s = settingsIn(outside, with(map[string]string{"LOOPX_URL": u}))
		require.NoError(t, s.serverErr)
		require.Equal(t, "LOOPX_URL", s.ServerFrom)
		require.Equal(t, local, s.Local, u)
		if local {
			require.Equal(t, admin, s.Token, u)
		} else {
			require.Empty(t, s.Token)
			require.ErrorContains(t, s.tokenErr, "goes only to this machine's loopx serve, not to http://elsewhere:7377")
		}
	}

	// A connected project beats the record; another server's connection uses the agent's
	// stored token, never the local admin token.
	proj := t.TempDir()
	_, err = project.Save(proj, project.Connection{ServerURL: "http://team.example:7377", GoalID: "g", AgentID: "a"})
	require.NoError(t, err)
	_, err = project.NewCredentials(cfgDir).SaveToken("http://team.example:7377", "g", "a", "lxa_stored")
	require.NoError(t, err)
	sub := filepath.Join(proj, "src")
	require.NoError(t, os.Mkdir(sub, 0o755))
	s = settingsIn(sub, vars)
	require.Equal(t, "http://team.example:7377", s.Server)
	require.Equal(t, "server_url in "+project.Path(proj), s.ServerFrom)
	require.False(t, s.Local)
	require.Equal(t, "lxa_stored", s.Token)
	require.Equal(t, filepath.Join(cfgDir, "credentials.json"), s.TokenFrom)
	require.Equal(t, rec.SandboxURL, s.Sandbox, "the sandbox is still the local serve's")
	// ... and LOOPX_URL beats the connection.
	s = settingsIn(sub, with(map[string]string{"LOOPX_URL": rec.URL}))
	require.Equal(t, rec.URL, s.Server)
	require.Equal(t, admin, s.Token)

	// A record whose process is gone is ignored.
	rec.PID = goneProcess
	require.NoError(t, server.WriteServing(home, rec))
	s = settingsIn(outside, vars)
	require.Equal(t, "http://"+server.DefaultListen, s.Server)
	require.Equal(t, sandbox.DefaultSandboxURL, s.Sandbox)

	// A record that does not parse is named, where it would be used; LOOPX_URL and
	// LOOPX_SANDBOX_URL do without it.
	require.NoError(t, os.WriteFile(server.ServingPath(home), []byte("{half"), 0o600))
	s = settingsIn(outside, vars)
	require.ErrorContains(t, s.serverErr, server.ServingPath(home))
	require.ErrorContains(t, s.sandboxErr, server.ServingPath(home))
	s = settingsIn(outside, with(map[string]string{"LOOPX_URL": rec.URL, "LOOPX_SANDBOX_URL": "http://127.0.0.1:9"}))
	require.NoError(t, s.serverErr)
	require.NoError(t, s.sandboxErr)
	require.False(t, s.Local, "no live record names it")

	// A malformed LOOPX_URL or connection URL is named with its source.
	s = settingsIn(outside, with(map[string]string{"LOOPX_URL": "ftp://x"}))
	require.ErrorContains(t, s.serverErr, `LOOPX_URL: "ftp://x" is not an http(s) URL`)
}

// With no token anywhere, the error names the files it looked in and what to do, and the
// command exits 2 before calling anything.
func TestMissingTokenNamesTheFiles(t *testing.T) {
	t.Parallel()
	home, cfgDir := t.TempDir(), t.TempDir()
	vars := map[string]string{"LOOPX_HOME": home, "LOOPX_CONFIG_DIR": cfgDir}

	code, _, stderr := runInProcess(t, vars, "goal", "list")
	require.Equal(t, exitUsage, code, stderr)
	require.Contains(t, stderr, "LOOPX_TOKEN: not set, and no token for http://"+server.DefaultListen+" was found: "+
		server.AdminTokenPath(home)+" does not exist (loopx serve keeps the admin token there when LOOPX_ADMIN_TOKEN is unset)")
	require.Contains(t, stderr, "Set LOOPX_TOKEN to the admin token or an agent token")

	// In a project connected to another server, the credentials file is the one looked in.
	proj := t.TempDir()
	_, err := project.Save(proj, project.Connection{ServerURL: "http://team.example:7377", GoalID: "g", AgentID: "a"})
	require.NoError(t, err)
	a := &app{getenv: env(vars), dir: proj}
	_, err = a.newClient()
	require.ErrorContains(t, err, filepath.Join(cfgDir, "credentials.json")+` holds no token of agent "a" on goal "g" there`)
	require.ErrorContains(t, err, "the admin token under LOOPX_HOME goes only to this machine's loopx serve, not to http://team.example:7377")
}
