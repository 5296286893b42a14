package devpg

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFindBinDirPicksTheNewestVersionAndNamesThePackageWhenNone(t *testing.T) {
	t.Parallel()
	notOnPath := func(string) (string, error) { return "", errors.New("not found") }
	root := t.TempDir()
	pattern := filepath.Join(root, "*", "bin")

	_, err := findBinDir(notOnPath, pattern)
	require.ErrorIs(t, err, ErrNoBinaries)
	require.Contains(t, err.Error(), "postgresql", "the error names the Debian package")

	for _, v := range []string{"9.6", "15", "16"} {
		dir := filepath.Join(root, v, "bin")
		require.NoError(t, os.MkdirAll(dir, 0o755))
		for _, b := range []string{"initdb", "postgres"} {
			require.NoError(t, os.WriteFile(filepath.Join(dir, b), []byte("#!/bin/sh\n"), 0o755))
		}
	}
	// 17 is incomplete (no postgres): skipped.
	require.NoError(t, os.MkdirAll(filepath.Join(root, "17", "bin"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "17", "bin", "initdb"), []byte("#!/bin/sh\n"), 0o755))

	dir, err := findBinDir(notOnPath, pattern)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(root, "16", "bin"), dir)

	// PATH wins.
	onPath := func(name string) (string, error) { return "/opt/pg/bin/" + name, nil }
	dir, err = findBinDir(onPath, pattern)
	require.NoError(t, err)
	require.Equal(t, "/opt/pg/bin", dir)
}
