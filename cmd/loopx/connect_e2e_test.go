package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loopx/store"
	"loopx/store/storetest"
)

// TestConnectThenStatusInAnEmptyFolder is a new user's first minute: in an empty folder,
// `loopx connect` creates the goal and agent and links the folder; `loopx status`, in a new
// shell with nothing set, shows the connected project; a second connect changes nothing.
func TestConnectThenStatusInAnEmptyFolder(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dbURL := storetest.NewDatabase(t)
	s := startServe(t, map[string]string{"DATABASE_URL": dbURL, "LOOPX_ADMIN_TOKEN": e2eAdminToken, "LOOPX_SCHEDULER": "off"})
	pool, err := store.Open(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	count := func(sql string) int {
		var n int
		require.NoError(t, pool.QueryRow(ctx, sql).Scan(&n))
		return n
	}

	home := t.TempDir() // a new user's home: no config yet
	project := filepath.Join(t.TempDir(), "My App")
	require.NoError(t, os.Mkdir(project, 0o755))
	user := []string{"HOME=" + home}
	start := time.Now()

	r := s.cliIn(t, project, e2eAdminToken, user, "connect", "--owner", "ou_me")
	require.Equal(t, 0, r.code, "%s%s", r.stdout, r.stderr)
	require.Contains(t, r.stdout, "Connected "+project+" to goal my-app as agent agent")
	require.Contains(t, r.stdout, "Add this line to .gitignore: .loopx/")

	// A new shell: no LOOPX_URL, no LOOPX_TOKEN. The folder's connection and the stored
	// agent token are enough.
	status := shell(t, project, user, "status")
	require.Equal(t, 0, status.code, "%s%s", status.stdout, status.stderr)
	elapsed := time.Since(start)
	require.Less(t, elapsed, time.Minute)
	t.Logf("connect + status took %s", elapsed.Round(time.Millisecond))
	for _, want := range []string{"goal my-app (My App), agent agent, " + s.url, "project " + project + ": connected",
		"Needs you", "should-run  skip (idle)", "quota       24 of 24 turns left in 24 h", "inbox       0 waiting", "No turn yet"} {
		require.Contains(t, status.stdout, want)
	}
	js := shell(t, project, user, "status", "--format", "json").json(t)
	require.Equal(t, "my-app", dig(js, "status", "goal", "id"))
	require.Equal(t, project, js["project"])

	// The token is in the user's config folder, 0600, and nowhere in the project.
	creds := filepath.Join(home, ".config", "loopx", "credentials.json")
	st, err := os.Stat(creds)
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o600), st.Mode().Perm())
	dir, err := os.Stat(filepath.Dir(creds))
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o700), dir.Mode().Perm())
	raw, err := os.ReadFile(creds)
	require.NoError(t, err)
	require.Contains(t, string(raw), "lxa_")
	require.NoError(t, filepath.WalkDir(project, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		require.NotContains(t, string(b), "lxa_", "%s holds a token", p)
		require.NotContains(t, string(b), e2eAdminToken, "%s holds a token", p)
		return nil
	}))

	// Every command takes the goal and agent from the folder.
	q := shell(t, project, user, "quota", "status", "--format", "json").json(t)
	require.Equal(t, "my-app", q["goal_id"])
	require.Equal(t, "agent", q["agent_id"])
	added := s.cliIn(t, project, e2eAdminToken, user, "todo", "add", "--text", "write the parser", "--claim", "--format", "json")
	require.Equal(t, 0, added.code, added.stderr)
	require.Equal(t, "agent", added.json(t)["claimed_by"])

	// A second connect changes nothing: no write on the server, no file rewritten.
	connFile := filepath.Join(project, ".loopx", "connection.json")
	before := map[string]time.Time{}
	for _, p := range []string{connFile, creds} {
		st, err := os.Stat(p)
		require.NoError(t, err)
		before[p] = st.ModTime()
	}
	mutations := count(`SELECT count(*) FROM audit`)
	time.Sleep(20 * time.Millisecond) // a rewrite would show in the modification time
	again := s.cliIn(t, project, e2eAdminToken, user, "connect", "--format", "json")
	require.Equal(t, 0, again.code, again.stderr)
	res := again.json(t)
	for _, k := range []string{"goal_created", "agent_registered", "token_rotated", "token_stored", "connection_written"} {
		require.Equal(t, false, res[k], k)
	}
	require.Equal(t, mutations, count(`SELECT count(*) FROM audit`), "nothing was written on the server")
	for p, mt := range before {
		st, err := os.Stat(p)
		require.NoError(t, err)
		require.Equal(t, mt, st.ModTime(), "%s was not rewritten", p)
	}
	text := s.cliIn(t, project, e2eAdminToken, user, "connect")
	require.Contains(t, text.stdout, "nothing changed")

	t.Run("connect never moves a folder or takes over an agent", func(t *testing.T) {
		r := s.cliIn(t, project, e2eAdminToken, user, "connect", "--goal-id", "another")
		require.Equal(t, exitUsage, r.code)
		require.Contains(t, r.stderr, `connected to goal "my-app" as agent "agent"`)

		// Another machine (another home) connecting as the same agent has no token for it.
		other := t.TempDir()
		elsewhere := filepath.Join(t.TempDir(), "my-app")
		require.NoError(t, os.Mkdir(elsewhere, 0o755))
		r = s.cliIn(t, elsewhere, e2eAdminToken, []string{"HOME=" + other}, "connect")
		require.Equal(t, exitUsage, r.code, r.stdout)
		require.Contains(t, r.stderr, "--rotate-token")
		_, err := os.Stat(filepath.Join(elsewhere, ".loopx"))
		require.ErrorIs(t, err, fs.ErrNotExist, "nothing written")
		r = s.cliIn(t, elsewhere, e2eAdminToken, []string{"HOME=" + other}, "connect", "--rotate-token")
		require.Equal(t, 0, r.code, r.stderr)
		require.Contains(t, r.stdout, "new token issued")
		// The first machine's token no longer works, and status says what to do.
		old := shell(t, project, user, "status")
		require.Equal(t, exitUsage, old.code)
		require.Contains(t, old.stderr, "unknown token")
	})
}

// shell runs the binary in dir with only the base environment and env: what a person's new
// shell has (no LOOPX_URL, no LOOPX_TOKEN).
func shell(t *testing.T, dir string, env []string, args ...string) cliResult {
	t.Helper()
	return runBinary(t, dir, append(baseEnv(), env...), args...)
}
