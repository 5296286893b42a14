package server

import (
	"testing"

	"github.com/stretchr/testify/require"

	"loopx/store"
)

// A release build says its version, commit and date as make release gave them.
func TestBuildOfARelease(t *testing.T) {
	t.Parallel()
	b := NewBuild("v0.2.0", "0123456789abcdef0123456789abcdef01234567", "2026-12-04T17:43:13Z")
	require.Equal(t, "v0.2.0", b.Version)
	require.False(t, b.Modified, "a release's commit is what it was built from")
	require.Equal(t, store.LatestMigration(), b.Schema)
	require.Regexp(t, `^v0\.2\.0 \(commit 0123456789ab, 2026-12-04T17:43:13Z, go1\.[0-9.]+ [a-z0-9]+/[a-z0-9]+, schema [0-9]+\)$`, b.String())
}
