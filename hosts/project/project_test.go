package project_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"loopx/hosts/project"
)

func TestFindWalksUpAndSaveWritesOnlyChanges(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	sub := filepath.Join(root, "a", "b")
	require.NoError(t, os.MkdirAll(sub, 0o755))
	_, _, err := project.Find(sub)
	require.ErrorIs(t, err, project.ErrNotConnected)

	c := project.Connection{ServerURL: "http://127.0.0.1:7377", GoalID: "g", AgentID: "a"}
	changed, err := project.Save(root, c)
	require.NoError(t, err)
	require.True(t, changed)
	changed, err = project.Save(root, c)
	require.NoError(t, err)
	require.False(t, changed, "the same connection is not written again")
	got, conn, err := project.Find(sub)
	require.NoError(t, err)
	require.Equal(t, root, got)
	require.Equal(t, c, conn)

	// A folder named .loopx without a connection (a server's LOOPX_HOME) is not a project.
	home := filepath.Join(sub, ".loopx")
	require.NoError(t, os.Mkdir(home, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(home, "admin-token"), []byte("x"), 0o600))
	got, _, err = project.Find(sub)
	require.NoError(t, err)
	require.Equal(t, root, got)

	require.NoError(t, os.WriteFile(project.Path(root), []byte(`{"server_url": "x", "goal_id": "g", "agent_id": "a", "token": "secret"}`), 0o644))
	_, _, err = project.Find(sub)
	require.ErrorContains(t, err, `unknown field "token"`, "a connection never holds a token")
}

func TestCredentialsAreOwnerOnly(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "loopx")
	c := project.NewCredentials(dir)
	tok, err := c.Token("http://h:1", "g", "a")
	require.NoError(t, err)
	require.Empty(t, tok)
	changed, err := c.SaveToken("HTTP://H:1/", "g", "a", "lxa_one")
	require.NoError(t, err)
	require.True(t, changed)
	tok, err = c.Token("http://h:1", "g", "a")
	require.NoError(t, err)
	require.Equal(t, "lxa_one", tok, "URLs compare normalized")
	changed, err = c.SaveToken("http://h:1", "g", "a", "lxa_one")
	require.NoError(t, err)
	require.False(t, changed)
	require.NoError(t, os.Chmod(c.Path(), 0o644))
	_, err = c.SaveToken("http://h:1", "g", "b", "lxa_two")
	require.NoError(t, err)
	st, err := os.Stat(c.Path())
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o600), st.Mode().Perm(), "a token file is never readable by others")
	st, err = os.Stat(dir)
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o700), st.Mode().Perm())
	tok, err = c.Token("http://h:1", "g", "a")
	require.NoError(t, err)
	require.Equal(t, "lxa_one", tok)
}

func TestConfigDirSlugAndGitignore(t *testing.T) {
	t.Parallel()
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	d, err := project.ConfigDir(env(map[string]string{"HOME": "/home/u"}))
	require.NoError(t, err)
	require.Equal(t, "/home/u/.config/loopx", d)
	d, err = project.ConfigDir(env(map[string]string{"HOME": "/home/u", "XDG_CONFIG_HOME": "/x"}))
	require.NoError(t, err)
	require.Equal(t, "/x/loopx", d)
	d, err = project.ConfigDir(env(map[string]string{"HOME": "/home/u", "LOOPX_CONFIG_DIR": "/c"}))
	require.NoError(t, err)
	require.Equal(t, "/c", d)
	_, err = project.ConfigDir(env(nil))
	require.Error(t, err)

	for in, want := range map[string]string{"My App": "my-app", "_x": "x", "Été 2026": "t--2026", "": "project", "a.b_c-d": "a.b_c-d"} {
		require.Equal(t, want, project.Slug(in), in)
	}

	root := t.TempDir()
	require.Equal(t, ".loopx/", project.GitignoreHint(root))
	require.NoError(t, os.WriteFile(filepath.Join(root, ".gitignore"), []byte("bin/\n/.loopx/\n"), 0o644))
	require.Empty(t, project.GitignoreHint(root))
}
