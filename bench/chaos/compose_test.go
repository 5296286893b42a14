package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The replicas recipe passes the Compose schema and its own checks; a copy broken in each of
// the ways the checks look for is caught, each with a problem that names what is wrong.
func TestComposeRecipeIsChecked(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("..", "..", composeDir)
	services, vars, problems, err := checkCompose(dir)
	require.NoError(t, err)
	require.Empty(t, problems, "deploy/replicas as it is")
	require.Len(t, services, 3)
	require.Contains(t, vars, "POSTGRES_PASSWORD")
	for name, svc := range services {
		require.Equal(t, "http", svc.Environment["LARK_TRANSPORT"], name)
		require.Equal(t, name, svc.Environment["LOOPX_REPLICA"], name)
	}

	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		return string(b)
	}
	for _, c := range []struct {
		name, file, from, to, want string
	}{
		{"a key the schema does not know", "compose.yaml", "stop_grace_period: 15s", "stop_grace_perod: 15s", "unexpected additional properties"},
		{"a value of the wrong type", "compose.yaml", "retries: 30", "retries: [30]", "does not follow the Compose Specification"},
		{"a variable example.env lacks", "compose.yaml", "${POSTGRES_PASSWORD}@postgres:5432/loopx?sslmode=disable\", LOOPX_LISTEN: \"0.0.0.0:7377\", LARK_TRANSPORT: http, LOOPX_REPLICA: loopx-2}",
			"${DB_PASSWORD}@postgres:5432/loopx?sslmode=disable\", LOOPX_LISTEN: \"0.0.0.0:7377\", LARK_TRANSPORT: http, LOOPX_REPLICA: loopx-2}", "uses ${DB_PASSWORD}"},
		{"two replicas with one name", "compose.yaml", "LOOPX_REPLICA: loopx-3}", "LOOPX_REPLICA: loopx-1}", "each replica needs its own"},
		{"a replica nginx does not balance over", "nginx.conf", "    server loopx-3:7377 max_fails=1 fail_timeout=10s;\n", "", "nginx.conf balances over"},
		{"a dependency on no service", "compose.yaml", "depends_on: [loopx-1, loopx-2, loopx-3]", "depends_on: [loopx-1, loopx-2, loopx-4]", "depends on loopx-4, which is no service"},
	} {
		t.Run(c.name, func(t *testing.T) {
			// A copy of the recipe where the repository would be: its build context (../..)
			// holds deploy/Dockerfile.
			root := t.TempDir()
			broken := filepath.Join(root, composeDir)
			require.NoError(t, os.MkdirAll(broken, 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(root, "deploy", "Dockerfile"), []byte(read(filepath.Join("..", "Dockerfile"))), 0o644))
			for _, f := range []string{"compose.yaml", "nginx.conf", "example.env"} {
				text := read(f)
				if f == c.file {
					require.Contains(t, text, c.from)
					text = strings.Replace(text, c.from, c.to, 1)
				}
				require.NoError(t, os.WriteFile(filepath.Join(broken, f), []byte(text), 0o644))
			}
			_, _, problems, err := checkCompose(broken)
			require.NoError(t, err)
			require.Len(t, problems, 1, "only what was broken: %v", problems)
			require.Contains(t, problems[0], c.want)
		})
	}
}
