package store_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"loopx/store/storetest"
)

// schemaHeader opens store/schema.sql.
const schemaHeader = `-- The schema of LoopX's database after every migration in store/migrations, as pg_dump
-- prints it (comments and session settings left out). Generated: do not edit; change a
-- migration and run make schema. A test checks it against a freshly migrated database.
`

// TestSchemaFileMatchesAFreshMigration keeps store/schema.sql, the schema a reader sees in one
// place, equal to what the migrations build. LOOPX_UPDATE_SCHEMA=1 (make schema) rewrites it.
func TestSchemaFileMatchesAFreshMigration(t *testing.T) {
	t.Parallel()
	got := schemaHeader + dumpSchema(t, storetest.NewDatabase(t))
	if os.Getenv("LOOPX_UPDATE_SCHEMA") != "" {
		require.NoError(t, os.WriteFile("schema.sql", []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile("schema.sql")
	require.NoError(t, err, "store/schema.sql is missing: run make schema")
	require.Equal(t, string(want), got, "store/schema.sql is not the schema the migrations build: run make schema")
}

var dumpNoise = regexp.MustCompile(`(?m)^(--.*|SET .*|SELECT pg_catalog\.set_config.*|\\(un)?restrict .*)\n`)

// dumpSchema prints the schema of the database at url with the machine's pg_dump.
func dumpSchema(t *testing.T, url string) string {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), pgDump(t), "--schema-only", "--no-owner", "--no-privileges",
		"--no-comments", "--dbname", url).Output()
	var stderr []byte
	if ee, ok := err.(*exec.ExitError); ok {
		stderr = ee.Stderr
	}
	require.NoError(t, err, "pg_dump: %s", stderr)
	out = dumpNoise.ReplaceAll(out, nil)
	for bytes.Contains(out, []byte("\n\n\n")) {
		out = bytes.ReplaceAll(out, []byte("\n\n\n"), []byte("\n\n"))
	}
	return strings.TrimSpace(string(out)) + "\n"
}

// pgDump finds pg_dump: on PATH (make test puts the server's binaries there), else the
// newest Debian PostgreSQL's.
func pgDump(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("pg_dump"); err == nil {
		return p
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_dump")
	require.NotEmpty(t, dirs, "no pg_dump on this machine (Debian's postgresql-client has it)")
	sort.Strings(dirs)
	return dirs[len(dirs)-1]
}
