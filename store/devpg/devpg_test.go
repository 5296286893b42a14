package devpg_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"loopx/store/devpg"
)

// tempDir returns a directory the postgres system user can reach when the test runs as root
// (t.TempDir is 0700).
func tempDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	for p := d; p != filepath.Dir(p) && p != os.TempDir(); p = filepath.Dir(p) {
		require.NoError(t, os.Chmod(p, 0o755))
	}
	return d
}

func TestStartConnectStopReuse(t *testing.T) {
	t.Parallel()
	if _, err := devpg.BinDir(); errors.Is(err, devpg.ErrNoBinaries) {
		t.Skip("no PostgreSQL server binaries on this machine")
	}
	ctx := t.Context()
	dir := filepath.Join(tempDir(t), "home")

	c, err := devpg.Start(ctx, devpg.Options{Dir: dir})
	require.NoError(t, err)
	conn, err := pgx.Connect(ctx, c.URL())
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "CREATE TABLE kept (v int); INSERT INTO kept VALUES (42)")
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))
	require.NoError(t, c.Stop())
	require.NoError(t, c.Stop(), "a second Stop is a no-op")
	_, err = pgx.Connect(ctx, c.URL())
	require.Error(t, err, "the server is gone after Stop")

	// The data directory is reused: the row written by the first run is there.
	c2, err := devpg.Start(ctx, devpg.Options{Dir: dir})
	require.NoError(t, err)
	defer func() { require.NoError(t, c2.Stop()) }()
	conn, err = pgx.Connect(ctx, c2.URL())
	require.NoError(t, err)
	defer conn.Close(ctx)
	var v int
	require.NoError(t, conn.QueryRow(ctx, "SELECT v FROM kept").Scan(&v))
	require.Equal(t, 42, v)
}

func TestStopsOnContextCancel(t *testing.T) {
	t.Parallel()
	if _, err := devpg.BinDir(); errors.Is(err, devpg.ErrNoBinaries) {
		t.Skip("no PostgreSQL server binaries on this machine")
	}
	ctx, cancel := context.WithCancel(t.Context())
	c, err := devpg.Start(ctx, devpg.Options{Dir: filepath.Join(tempDir(t), "home")})
	require.NoError(t, err)
	cancel()
	select {
	case <-c.Done():
	case <-time.After(time.Minute): // a fast shutdown takes a second; the rest is room for a busy machine
		t.Fatal("postgres still running a minute after the context was cancelled")
	}
	require.NoError(t, c.Stop())
}

// As root, a cluster home the postgres user cannot reach (under /root, say) keeps its cluster
// in the fallback directory: Locate says where before anything starts, the home holds a file
// naming it, and deleting the home starts over (the old cluster is set aside, not reused).
func TestClusterOfAClosedHomeIsFoundAndStartsOver(t *testing.T) {
	t.Parallel()
	if _, err := devpg.BinDir(); errors.Is(err, devpg.ErrNoBinaries) {
		t.Skip("no PostgreSQL server binaries on this machine")
	}
	if os.Geteuid() != 0 {
		t.Skip("only a root process moves the cluster out of a home closed to the postgres user")
	}
	ctx := t.Context()
	closed := t.TempDir() // 0700, owned by root: closed to the postgres user, like /root
	home := filepath.Join(closed, "loopx")
	opts := devpg.Options{Dir: filepath.Join(home, "pg"), Fallback: tempDir(t)}

	where, moved, err := devpg.Locate(opts)
	require.NoError(t, err)
	require.True(t, moved)
	require.Equal(t, opts.Fallback, filepath.Dir(where))
	_, err = os.Stat(home)
	require.ErrorIs(t, err, os.ErrNotExist, "Locate creates nothing")

	c, err := devpg.Start(ctx, opts)
	require.NoError(t, err)
	require.Equal(t, where, c.Dir())
	b, err := os.ReadFile(filepath.Join(opts.Dir, devpg.LocationFile))
	require.NoError(t, err)
	require.Equal(t, where+"\n", string(b), "the home names where its cluster is")
	exec := func(c *devpg.Cluster, sql string) error {
		conn, err := pgx.Connect(ctx, c.URL())
		require.NoError(t, err)
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql)
		return err
	}
	require.NoError(t, exec(c, "CREATE TABLE kept (v int)"))
	require.NoError(t, c.Stop())

	c, err = devpg.Start(ctx, opts)
	require.NoError(t, err)
	require.NoError(t, exec(c, "SELECT * FROM kept"), "a restart reuses the cluster")
	require.NoError(t, c.Stop())

	// rm -rf the home: the next start has a new, empty cluster; the old one is set aside.
	require.NoError(t, os.RemoveAll(home))
	c, err = devpg.Start(ctx, opts)
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Stop()) }()
	require.Error(t, exec(c, "SELECT * FROM kept"), "a deleted home gets a fresh database")
	aside, err := filepath.Glob(where + ".orphaned-*")
	require.NoError(t, err)
	require.Len(t, aside, 1)
	_, err = os.Stat(filepath.Join(aside[0], "data", "PG_VERSION"))
	require.NoError(t, err, "the old cluster is kept aside, not destroyed")
}
