package main

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"

	"loopx/server"
	"loopx/store"
	"loopx/store/storetest"
)

// A loopx older than its database refuses to serve or migrate it, with a message naming both
// schema versions, the release that migrated it and the ways back; and the database is left
// as it was.
func TestServeAndMigrateRefuseADatabaseOfALaterRelease(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := storetest.NewDatabase(t)
	pool, err := store.Open(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	future := store.LatestMigration() + 7
	for _, q := range []string{
		fmt.Sprintf(`INSERT INTO goose_db_version (version_id, is_applied) VALUES (%d, true)`, future),
		fmt.Sprintf(`INSERT INTO release_seen (version, schema_version) VALUES ('v9.1.0', %d)`, future),
	} {
		_, err := pool.Exec(ctx, q)
		require.NoError(t, err)
	}
	for _, args := range [][]string{{"serve"}, {"migrate"}} {
		cmd := exec.CommandContext(ctx, loopxBinary(t), args...)
		cmd.Env = append(baseEnv(), "DATABASE_URL="+url, "LOOPX_HOME="+t.TempDir(), "LOOPX_LISTEN="+freeAddr(t),
			"LOOPX_ADMIN_TOKEN="+e2eAdminToken)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, "loopx %s on a newer database must fail: %s", args[0], out)
		require.Equal(t, exitRefused, ee.ExitCode(), "%s", out)
		for _, want := range []string{
			fmt.Sprintf("is older than its database (schema version %d, migrated by loopx v9.1.0)", future),
			fmt.Sprintf("schema version %d)", store.LatestMigration()),
			"restore the backup taken before the upgrade",
			fmt.Sprintf("`loopx migrate down %d`", future),
			"run loopx v9.1.0 or later",
		} {
			require.Contains(t, string(out), want, "loopx %s", args[0])
		}
	}
	var seen int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM release_seen`).Scan(&seen))
	require.Equal(t, 1, seen, "the refusing binary recorded nothing")
}

// `loopx version` says the version, and the schema this binary knows.
func TestVersionSaysTheSchemaItKnows(t *testing.T) {
	t.Parallel()
	var stdout, stderr syncBuffer
	require.Equal(t, exitOK, run(t.Context(), []string{"version", "--format", "json"}, func(string) string { return "" }, nil, &stdout, &stderr), stderr.String())
	var b server.Build
	require.NoError(t, json.Unmarshal([]byte(stdout.String()), &b))
	require.Equal(t, "dev", b.Version, "a test binary is no release")
	require.Equal(t, store.LatestMigration(), b.Schema)
	require.NotEmpty(t, b.Go)

	stdout = syncBuffer{}
	require.Equal(t, exitOK, run(t.Context(), []string{"version"}, func(string) string { return "" }, nil, &stdout, &stderr))
	require.Regexp(t, fmt.Sprintf(`^loopx dev \(.*go1\.[0-9.]+ [a-z0-9]+/[a-z0-9]+, schema %d\)\n$`, store.LatestMigration()), stdout.String())
}
