package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"loopx/store"
	"loopx/store/storetest"
)

// A runner secret sealed under one key and read by a server holding another is named by
// `loopx doctor`; `loopx secrets rotate-key` with both keys seals it under the new one, and
// doctor is content again.
func TestDoctorNamesUnreadableSecretAndRotationFixesIt(t *testing.T) {
	t.Parallel()
	dbURL := storetest.NewDatabase(t)
	oldKey, newKey := store.FormatSecretKey(store.NewSecretKey()), store.FormatSecretKey(store.NewSecretKey())
	env := map[string]string{"DATABASE_URL": dbURL, "LOOPX_ADMIN_TOKEN": e2eAdminToken, "LOOPX_HOME": t.TempDir(),
		"LOOPX_SECRET_KEY": oldKey, "LOOPX_SCHEDULER": "off", "LOOPX_DEMO": "off"}
	s := startServe(t, env)
	s.ok(t, e2eAdminToken, "goal", "create", "--goal-id", "g", "--title", "G", "--owner", "ou_o")
	s.ok(t, e2eAdminToken, "agent", "register", "--goal-id", "g", "--agent-id", "hook", "--runner", "webhook",
		"--runner-config", `{"url":"https://hooks.example/wake","secret":"whsec-0123456789abcdef"}`)
	doc := s.cli(t, e2eAdminToken, "doctor", "--format", "json")
	require.Contains(t, doc.stdout, "every runner secret opens", doc.stderr)
	s.stop(t)

	env["LOOPX_SECRET_KEY"] = newKey
	s = startServe(t, env)
	doc = s.cli(t, e2eAdminToken, "doctor", "--format", "json")
	require.Equal(t, 1, doc.code, "doctor fails: %s %s", doc.stdout, doc.stderr)
	var out struct {
		Checks []check `json:"checks"`
	}
	require.NoError(t, json.Unmarshal([]byte(doc.stdout), &out), doc.stdout)
	var sec check
	for _, c := range out.Checks {
		if c.Name == "secrets" {
			sec = c
		}
	}
	require.False(t, sec.OK)
	require.Contains(t, sec.Detail, "g/hook secret", "the secret is named")
	require.Contains(t, sec.Detail, "unreadable")
	require.NotContains(t, doc.stdout, "whsec-0123456789abcdef")
	s.stop(t)

	// Rotation: the new key primary, the old one previous; the secret is sealed again.
	rot := s.cliEnv(t, map[string]string{"DATABASE_URL": dbURL, "LOOPX_HOME": env["LOOPX_HOME"],
		"LOOPX_SECRET_KEY": newKey, "LOOPX_SECRET_KEY_PREVIOUS": oldKey}, "secrets", "rotate-key", "--format", "json")
	require.Equal(t, 0, rot.code, "%s %s", rot.stdout, rot.stderr)
	require.Contains(t, rot.stdout, `"resealed":1`)
	s = startServe(t, env)
	doc = s.cli(t, e2eAdminToken, "doctor", "--format", "json")
	require.Contains(t, doc.stdout, "every runner secret opens", "%s %s", doc.stdout, doc.stderr)
}

// An --idempotency-key the server would refuse is a usage error (exit 2) before anything is
// sent, never "server unreachable" (exit 3).
func TestBadIdempotencyKeyFlagIsUsageError(t *testing.T) {
	t.Parallel()
	s := &serveProc{url: "http://" + freeAddr(t)} // nothing listens: the flag is refused first
	for _, k := range []string{"k\x01k", "k\xffk", strings.Repeat("k", 201)} {
		r := s.cli(t, e2eAdminToken, "todo", "add", "--goal-id", "g", "--text", "x", "--idempotency-key", k)
		require.Equal(t, exitUsage, r.code, "%q: %s", k, r.stderr)
		require.Contains(t, r.stderr, "--idempotency-key")
	}
}

// cliEnv runs the real binary with env (and nothing of the server's URL or token).
func (s *serveProc) cliEnv(t *testing.T, env map[string]string, args ...string) cliResult {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), loopxBinary(t), args...)
	cmd.Env = baseEnv()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
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
