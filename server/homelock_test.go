package server

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLockHomeNamesTheHolder(t *testing.T) {
	t.Parallel()
	home := filepath.Join(t.TempDir(), "home")
	cfg := Config{Home: home, Listen: "127.0.0.1:7399"}
	unlock, err := LockHome(cfg, "serve")
	require.NoError(t, err)

	_, err = LockHome(cfg, "serve")
	var busy *homeBusyError
	require.ErrorAs(t, err, &busy)
	require.Equal(t, os.Getpid(), busy.holder.PID)
	require.Contains(t, err.Error(), "another LoopX (loopx serve, pid "+strconv.Itoa(os.Getpid())+", listening on 127.0.0.1:7399) is running on LOOPX_HOME "+home)
	_, err = LockHome(cfg, "migrate")
	require.ErrorAs(t, err, &busy, "migrate would start the same cluster")

	// With a database of its own, a process does not need the home: replicas share it.
	shared := cfg
	shared.DatabaseURL = "postgres://db/loopx"
	noop, err := LockHome(shared, "serve")
	require.NoError(t, err)
	noop()

	unlock()
	unlock2, err := LockHome(cfg, "migrate")
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
