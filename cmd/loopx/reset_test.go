package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"loopx/server"
	"loopx/store/devpg"
)

// resetCLI runs `loopx reset` as a real process on home, answering the prompt with answer.
func resetCLI(t *testing.T, home, answer string, args ...string) cliResult {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), loopxBinary(t), append([]string{"reset"}, args...)...)
	cmd.Env = append(baseEnv(), "LOOPX_HOME="+home)
	cmd.Stdin = strings.NewReader(answer)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return cliResult{code: code, stdout: out.String(), stderr: errb.String()}
}

// The private cluster is where serve and doctor say it is, and `loopx reset --sandbox` (after
// asking) deletes it together with the sandbox's chats: the next serve starts over.
func TestResetSandboxStartsOver(t *testing.T) {
	t.Parallel()
	if _, err := devpg.BinDir(); errors.Is(err, devpg.ErrNoBinaries) {
		t.Skip("no PostgreSQL server binaries on this machine")
	}
	home := filepath.Join(reachableTempDir(t), "home")
	require.NoError(t, os.Mkdir(home, 0o755))
	vars := map[string]string{"LOOPX_HOME": home, "LOOPX_DEMO": "off", "LOOPX_SANDBOX_ADDR": freeAddr(t)}
	s := startServe(t, vars)
	pg, sandboxDir := filepath.Join(home, "pg"), filepath.Join(home, "sandbox")

	// The first thing serve says is where its database is.
	first, _, _ := strings.Cut(s.logs.String(), "\n")
	require.Contains(t, first, `msg="private database" cluster_dir=`+pg)
	require.Contains(t, first, `start_over="loopx reset --sandbox"`)
	doctor := privateDatabaseCheck(t.Context(), doctorEnvFor(t, map[string]string{"LOOPX_HOME": home}))
	require.True(t, doctor.OK)
	require.Equal(t, "cluster at "+pg+"; loopx reset --sandbox starts over", doctor.Detail)

	token, err := server.ReadAdminToken(home)
	require.NoError(t, err)
	require.Equal(t, 0, s.cli(t, token, "goal", "create", "--goal-id", "kept").code)
	for _, d := range []string{pg, sandboxDir} {
		_, err := os.Stat(d)
		require.NoError(t, err)
	}

	r := resetCLI(t, home, "yes\n", "--sandbox")
	require.Equal(t, exitRefused, r.code, "a running serve holds the home: %s", r.stderr)
	require.Contains(t, r.stderr, "another LoopX (loopx serve")
	s.stop(t)

	require.Equal(t, exitUsage, resetCLI(t, home, "yes\n").code, "reset names what it resets")
	r = resetCLI(t, home, "no\n", "--sandbox")
	require.Equal(t, exitRefused, r.code)
	require.Contains(t, r.stderr, pg+"  (the private database)")
	require.Contains(t, r.stderr, sandboxDir+"  (the sandbox's chats, messages and cards)")
	require.Contains(t, r.stderr, "nothing was deleted")
	for _, d := range []string{pg, sandboxDir} {
		_, err := os.Stat(d)
		require.NoError(t, err, "not confirmed: %s is still there", d)
	}

	r = resetCLI(t, home, "yes\n", "--sandbox")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "deleted "+pg)
	require.Contains(t, r.stdout, "deleted "+sandboxDir)
	for _, d := range []string{pg, sandboxDir} {
		_, err := os.Stat(d)
		require.ErrorIs(t, err, os.ErrNotExist, d)
	}
	token2, err := server.ReadAdminToken(home)
	require.NoError(t, err)
	require.Equal(t, token, token2, "the admin token is kept")

	s2 := startServe(t, vars)
	r = s2.cli(t, token, "goal", "show", "--goal-id", "kept")
	require.Equal(t, exitUsage, r.code, "a fresh database: %s", r.stdout)
	require.Contains(t, r.stderr, "not_found")
}

// loopx doctor names the private database's place, also when it is outside LOOPX_HOME.
func TestDoctorSaysWhereThePrivateDatabaseIs(t *testing.T) {
	t.Parallel()
	c := privateDatabaseCheck(t.Context(), doctorEnvFor(t, map[string]string{"HOME": "/h", "DATABASE_URL": "postgres://db/loopx"}))
	require.Equal(t, "DATABASE_URL is set: the server uses that database, no private one", c.Detail)
	if os.Geteuid() != 0 {
		t.Skip("only a root process keeps the cluster outside a home closed to the postgres user")
	}
	home := filepath.Join(t.TempDir(), "home") // 0700: closed to the postgres user, like /root/.loopx
	c = privateDatabaseCheck(t.Context(), doctorEnvFor(t, map[string]string{"LOOPX_HOME": home}))
	want, moved, err := devpg.Locate(devpg.Options{Dir: filepath.Join(home, "pg")})
	require.NoError(t, err)
	require.True(t, moved)
	require.True(t, strings.HasPrefix(want, devpg.DefaultFallback+"/devpg-"), want)
	require.True(t, c.OK)
	require.Equal(t, "cluster at "+want+", outside LOOPX_HOME (the postgres user cannot reach "+home+"); loopx reset --sandbox starts over", c.Detail)
}
