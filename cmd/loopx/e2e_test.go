package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"loopx/server"
	"loopx/store"
	"loopx/store/devpg"
	"loopx/store/storetest"
)

// The tests below run loopx as separate processes. The test binary is the loopx binary: with
// LOOPX_E2E_MAIN=1 in its environment, TestMain runs the command line instead of the tests,
// through the same run() as main. That spares a second link of the whole program.
func loopxBinary(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	return exe
}

func TestMain(m *testing.M) {
	if os.Getenv("LOOPX_E2E_MAIN") == "1" {
		os.Exit(run(context.Background(), os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr))
	}
	dir, err := os.MkdirTemp("", "loopx-serve-home-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	serveHome = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// serveHome is the LOOPX_HOME of the servers these tests start without one of their own,
// shared like a user's ~/.loopx but never the user's: a test server must not record itself
// where the user's own clients look for their server.
var serveHome string

const e2eAdminToken = "e2e-admin-token-0123456789abcdef"

// freeAddr returns a loopback address whose port is free, for a process the test starts
// next. The port is drawn at random from below the kernel's ephemeral range: a port there is
// never handed to an outgoing connection or to a listener on port 0, so on a busy machine
// (two suites at once, thousands of connections) nothing else takes it in the seconds before
// the process binds it, as happened with a port the kernel had handed out.
func freeAddr(t *testing.T) string {
	t.Helper()
	lo := 32768 // Linux's default first ephemeral port
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				lo = n
			}
		}
	}
	if lo > 12000 {
		for range 100 {
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(10000+mrand.IntN(lo-10000)))
			if err == nil {
				defer l.Close()
				return l.Addr().String()
			}
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

type serveProc struct {
	url  string
	cmd  *exec.Cmd
	logs *syncBuffer
	done chan error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startServe starts `loopx serve` with env and returns once it is ready. Cleanup stops it
// with SIGTERM and checks that it exits cleanly, within the shutdown grace plus room for a
// busy machine (see stop).
func startServe(t *testing.T, env map[string]string) *serveProc {
	t.Helper()
	s := launchServe(t, env)
	s.waitReady(t)
	return s
}

// launchServe starts `loopx serve` on env's LOOPX_LISTEN (default a free port) and LOOPX_HOME
// (default serveHome).
func launchServe(t *testing.T, env map[string]string) *serveProc {
	t.Helper()
	addr := env["LOOPX_LISTEN"]
	if addr == "" {
		addr = freeAddr(t)
	}
	cmd := exec.Command(loopxBinary(t), "serve")
	cmd.Env = append(baseEnv(), "LOOPX_LISTEN="+addr, "LOG_LEVEL=debug", "LOOPX_HOME="+serveHome)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	s := &serveProc{url: "http://" + addr, cmd: cmd, logs: &syncBuffer{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = s.logs, s.logs
	require.NoError(t, cmd.Start())
	go func() { s.done <- cmd.Wait() }()
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("LOOPX_TEST_SERVE_LOG") != "" {
			t.Logf("loopx serve log:\n%s", s.logs.String())
		}
		s.stop(t)
	})
	return s
}

func (s *serveProc) waitReady(t *testing.T) {
	t.Helper()
	// The deadline bounds a serve that never comes up; on a busy machine the start takes seconds.
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		select {
		case err := <-s.done:
			s.done <- err
			t.Fatalf("loopx serve exited during start: %v\n%s", err, s.logs.String())
		default:
		}
		resp, err := http.Get(s.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("loopx serve not ready after 2 minutes:\n%s", s.logs.String())
}

// stopRoom is what a busy machine may add to serve's own shutdown grace before the exit is
// seen here: serve bounds its waiting by server.ShutdownGrace, and the rest is scheduling.
// A serve that ignores the grace (a hang) still fails.
const stopRoom = 25 * time.Second

// stop sends SIGTERM and requires a clean exit within the shutdown grace (plus stopRoom).
func (s *serveProc) stop(t *testing.T) {
	if s.cmd.ProcessState != nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		s.done <- err
		require.NoError(t, err, "loopx serve exit after SIGTERM:\n%s", s.logs.String())
	case <-time.After(server.ShutdownGrace + stopRoom):
		_ = s.cmd.Process.Kill()
		t.Errorf("loopx serve did not stop within %s of SIGTERM", server.ShutdownGrace+stopRoom)
	}
}

func baseEnv() []string {
	return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "LOOPX_E2E_MAIN=1"}
}

type cliResult struct {
	code           int
	stdout, stderr string
}

func (r cliResult) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &m), "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	return m
}

// cli runs the real binary against s with token.
func (s *serveProc) cli(t *testing.T, token string, args ...string) cliResult {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), loopxBinary(t), args...)
	cmd.Env = append(baseEnv(), "LOOPX_URL="+s.url, "LOOPX_TOKEN="+token)
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

func (s *serveProc) ok(t *testing.T, token string, args ...string) map[string]any {
	t.Helper()
	r := s.cli(t, token, append(args, "--format", "json")...)
	require.Equal(t, 0, r.code, "loopx %s\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.stdout, r.stderr)
	return r.json(t)
}

// TestEndToEndTurn drives one whole agent turn through the CLI against a real server:
// should-run -> claim -> evidence -> refresh-state -> spend -> should-run again.
func TestEndToEndTurn(t *testing.T) {
	t.Parallel()
	s := startServe(t, map[string]string{"DATABASE_URL": storetest.NewDatabase(t), "LOOPX_ADMIN_TOKEN": e2eAdminToken})
	admin := e2eAdminToken

	s.ok(t, admin, "goal", "create", "--goal-id", "demo", "--title", "Demo", "--owner", "ou_owner", "--allowed-slots", "3")
	reg := s.ok(t, admin, "agent", "register", "--goal-id", "demo", "--agent-id", "codex")
	agentTok := reg["token"].(string)
	require.NotEmpty(t, agentTok)
	todo := s.ok(t, admin, "todo", "add", "--goal-id", "demo", "--text", "write the parser", "--priority", "P1")
	todoID := fmt.Sprint(int64(todo["todo_id"].(float64)))

	d := s.ok(t, agentTok, "quota", "should-run", "--goal-id", "demo", "--agent-id", "codex", "--turn-instance-id", "turn-1", "--begin-turn")
	require.Equal(t, "run", d["decision"], "%v", d)
	require.Equal(t, true, d["should_run"])
	require.Equal(t, todoID, fmt.Sprint(int64(d["selected_todo"].(map[string]any)["todo_id"].(float64))))
	require.NotNil(t, d["heartbeat_receipt"])
	for _, k := range []string{"ok", "mode", "goal_id", "agent_id", "state", "reason", "effective_action", "inbox", "quota", "gates", "scheduler_hint"} {
		require.Contains(t, d, k)
	}
	// The same turn id replays the same answer.
	again := s.cli(t, agentTok, "quota", "should-run", "--goal-id", "demo", "--agent-id", "codex", "--turn-instance-id", "turn-1", "--begin-turn", "--format", "json")
	require.Equal(t, 0, again.code, again.stderr)
	require.JSONEq(t, mustJSON(t, d), again.stdout)
	// A second should-run while the turn is live: busy.
	busy := s.ok(t, agentTok, "quota", "should-run", "--goal-id", "demo", "--agent-id", "codex")
	require.Equal(t, "skip", busy["decision"])
	require.Equal(t, "busy", busy["state"])

	claim := s.ok(t, agentTok, "todo", "claim", "--goal-id", "demo", "--todo-id", todoID, "--agent-id", "codex")
	require.Equal(t, "codex", claim["claimed_by"])
	ev := s.ok(t, agentTok, "evidence", "add", "--goal-id", "demo", "--agent-id", "codex", "--todo-id", todoID, "--summary", "parser passes 40 tests", "--kind", "command", "--ref", "go test ./parser")
	require.NotZero(t, ev["evidence_id"])
	s.ok(t, agentTok, "refresh-state", "--goal-id", "demo", "--agent-id", "codex", "--turn-instance-id", "turn-1", "--next-action", "add error messages")
	spend := s.ok(t, agentTok, "quota", "spend-slot", "--goal-id", "demo", "--agent-id", "codex", "--turn-instance-id", "turn-1", "--todo-id", todoID)
	require.EqualValues(t, 1, spend["spent_slots"], "%v", spend)
	// A retry of the spend (a new invocation, a new idempotency key) debits nothing more.
	spend2 := s.ok(t, agentTok, "quota", "spend-slot", "--goal-id", "demo", "--agent-id", "codex", "--turn-instance-id", "turn-1", "--todo-id", todoID)
	require.Equal(t, spend["quota_event"], spend2["quota_event"])
	// A spend for a turn that never ran is refused by the state: exit 1.
	r := s.cli(t, agentTok, "quota", "spend-slot", "--goal-id", "demo", "--agent-id", "codex", "--turn-instance-id", "turn-unknown")
	require.Equal(t, exitRefused, r.code, "stdout %s stderr %s", r.stdout, r.stderr)

	next := s.ok(t, agentTok, "quota", "should-run", "--goal-id", "demo", "--agent-id", "codex", "--turn-instance-id", "turn-2")
	q := next["quota"].(map[string]any)
	require.EqualValues(t, 1, q["spent_slots"])
	require.EqualValues(t, 3, q["allowed_slots"])
	require.Equal(t, "run", next["decision"], "the todo is still open: %v", next)
	require.Equal(t, "add error messages", next["next_action"])

	// Text output is for people.
	txt := s.cli(t, agentTok, "quota", "status", "--goal-id", "demo", "--agent-id", "codex")
	require.Equal(t, 0, txt.code, txt.stderr)
	require.Contains(t, txt.stdout, "quota: 1 of 3 turns used")

	t.Run("bad input exits 2 naming the field and writes nothing", func(t *testing.T) {
		ctx := t.Context()
		pool, err := store.Open(ctx, dbURLOf(t, s))
		require.NoError(t, err)
		defer pool.Close()
		var before int
		require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM goal) + (SELECT count(*) FROM todo) + (SELECT count(*) FROM gate) + (SELECT count(*) FROM evidence)`).Scan(&before))
		long := strings.Repeat("x", 12001)
		for _, tc := range []struct {
			args  []string
			field string
		}{
			{[]string{"goal", "create", "--goal-id", "Bad_ID"}, "goal_id"},
			{[]string{"goal", "create", "--goal-id", "ok", "--allowed-slots", "-1"}, "allowed_slots"},
			{[]string{"goal", "create", "--goal-id", "ok", "--heartbeat", "every day"}, "heartbeat_spec"},
			{[]string{"goal", "create", "--goal-id", "ok", "--heartbeat", "0 9 * * *", "--heartbeat-tz", "Mars/Olympus"}, "heartbeat_tz"},
			{[]string{"todo", "add", "--goal-id", "nope", "--text", "x"}, "goal_id"},
			{[]string{"todo", "add", "--goal-id", "demo", "--text", long}, "text"},
			{[]string{"gate", "ask", "--goal-id", "demo", "--agent-id", "codex", "--question", long}, "question"},
			{[]string{"quota", "should-run", "--goal-id", "demo", "--agent-id", "Not Valid"}, "agent_id"},
		} {
			r := s.cli(t, admin, tc.args...)
			require.Equal(t, exitUsage, r.code, "loopx %s: stdout %s stderr %s", strings.Join(tc.args, " "), r.stdout, r.stderr)
			require.Contains(t, r.stderr, tc.field+":", "the message names the field")
		}
		var after int
		require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM goal) + (SELECT count(*) FROM todo) + (SELECT count(*) FROM gate) + (SELECT count(*) FROM evidence)`).Scan(&after))
		require.Equal(t, before, after)

		// Usage errors: a missing required flag, an unknown command.
		require.Equal(t, exitUsage, s.cli(t, admin, "todo", "add", "--goal-id", "demo").code)
		require.Equal(t, exitUsage, s.cli(t, admin, "goal", "explode").code)
		// JSON mode prints the error body on stdout for programs.
		r := s.cli(t, admin, "todo", "add", "--goal-id", "nope", "--text", "x", "--format", "json")
		require.Equal(t, exitUsage, r.code)
		require.Equal(t, "not_found", r.json(t)["error"].(map[string]any)["code"])
	})

	t.Run("security through the CLI", func(t *testing.T) {
		r := s.cli(t, "", "goal", "list")
		require.Equal(t, exitUsage, r.code, "no token: %s", r.stderr)
		r = s.cli(t, "wrong-token-wrong-token", "goal", "list")
		require.Equal(t, exitUsage, r.code)
		require.Contains(t, r.stderr, "unauthenticated")
		r = s.cli(t, agentTok, "quota", "should-run", "--goal-id", "demo", "--agent-id", "someone-else")
		require.Equal(t, exitRefused, r.code)
		require.Contains(t, r.stderr, "forbidden")
	})

	t.Run("a retry with --idempotency-key replays; another request under it is refused", func(t *testing.T) {
		first := s.ok(t, admin, "todo", "add", "--goal-id", "demo", "--text", "retry me", "--idempotency-key", "host-retry-1")
		again := s.ok(t, admin, "todo", "add", "--goal-id", "demo", "--text", "retry me", "--idempotency-key", "host-retry-1")
		require.Equal(t, first, again)
		r := s.cli(t, admin, "todo", "add", "--goal-id", "demo", "--text", "something else", "--idempotency-key", "host-retry-1")
		require.Equal(t, exitRefused, r.code, r.stderr)
		require.Contains(t, r.stderr, "idempotency_key")
	})

	t.Run("health and metrics", func(t *testing.T) {
		for path, want := range map[string]string{
			"/healthz": `"status":"ok"`,
			"/readyz":  `"database":"ok"`,
			"/metrics": `loopx_api_requests_total{route="POST /v1/goals/{goal}/should-run",status="200"}`,
		} {
			resp, err := http.Get(s.url + path)
			require.NoError(t, err)
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, resp.StatusCode, path)
			require.Contains(t, string(body), want, path)
		}
		// With no Lark app configured the server runs the sandbox; readiness includes its link.
		resp, err := http.Get(s.url + "/readyz")
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Contains(t, string(body), `"checks":{"lark":"ok"}`)
	})

	t.Run("doctor", func(t *testing.T) {
		r := s.cli(t, admin, "doctor", "--format", "json")
		require.Equal(t, 0, r.code, "%s %s", r.stdout, r.stderr)
		require.Equal(t, true, r.json(t)["ok"])
		// Reachable without a token: the token check fails (exit 1), the others still run.
		r = s.cli(t, "", "doctor")
		require.Equal(t, exitRefused, r.code, "%s %s", r.stdout, r.stderr)
		require.Contains(t, r.stdout, "ok   server")
		require.Contains(t, r.stdout, "FAIL token       LOOPX_TOKEN: not set")
	})
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

func dbURLOf(t *testing.T, s *serveProc) string {
	t.Helper()
	for _, kv := range s.cmd.Env {
		if v, ok := strings.CutPrefix(kv, "DATABASE_URL="); ok {
			return v
		}
	}
	t.Fatal("server has no DATABASE_URL")
	return ""
}

// TestTwoServesMigrateOnce starts two servers at once on an empty database: both come up
// and each migration ran once.
func TestTwoServesMigrateOnce(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	admin := storetest.ServerURL()
	name := "loopx_e2e_" + strings.ToLower(rand.Text()[:10])
	conn, err := pgx.Connect(ctx, admin)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "CREATE DATABASE "+name)
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, admin); err == nil {
			_, _ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
			_ = c.Close(ctx)
		}
	})
	dbURL := withDB(t, admin, name)

	env := map[string]string{"DATABASE_URL": dbURL, "LOOPX_ADMIN_TOKEN": e2eAdminToken}
	a, b := launchServe(t, env), launchServe(t, env)
	a.waitReady(t)
	b.waitReady(t)

	pool, err := store.Open(ctx, dbURL)
	require.NoError(t, err)
	defer pool.Close()
	var rows, distinct int
	require.NoError(t, pool.QueryRow(ctx,
		`SELECT count(*), count(DISTINCT version_id) FROM goose_db_version WHERE version_id > 0`).Scan(&rows, &distinct))
	files, err := fs.Glob(store.MigrationFS(), "*.sql")
	require.NoError(t, err)
	require.Equal(t, len(files), distinct, "every migration applied")
	require.Equal(t, distinct, rows, "each migration applied exactly once")
	// Both answer the API.
	for _, s := range []*serveProc{a, b} {
		r := s.cli(t, e2eAdminToken, "goal", "list", "--format", "json")
		require.Equal(t, 0, r.code, r.stderr)
	}
}

func withDB(t *testing.T, admin, name string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(admin)
	require.NoError(t, err)
	return fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", cfg.User, cfg.Host, cfg.Port, name)
}

// TestServeWithoutDatabaseURL runs serve the way `make run` does: no DATABASE_URL, so a
// private cluster under LOOPX_HOME, and a generated admin token kept there with mode 0600.
func TestServeWithoutDatabaseURL(t *testing.T) {
	t.Parallel()
	if _, err := devpg.BinDir(); errors.Is(err, devpg.ErrNoBinaries) {
		t.Skip("no PostgreSQL server binaries on this machine")
	}
	// A home the postgres system user can enter (when the test runs as root); serve would
	// otherwise keep the cluster under /var/lib/loopx.
	home := filepath.Join(reachableTempDir(t), "home")
	require.NoError(t, os.Mkdir(home, 0o755))
	s := startServe(t, map[string]string{"LOOPX_HOME": home})

	st, err := os.Stat(server.AdminTokenPath(home))
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o600), st.Mode().Perm())
	token, err := server.ReadAdminToken(home)
	require.NoError(t, err)
	require.Len(t, token, 64)

	r := s.cli(t, token, "goal", "create", "--goal-id", "local")
	require.Equal(t, 0, r.code, r.stderr)

	// A second serve (or migrate) on the same home says who holds it, instead of PostgreSQL's
	// "postmaster.pid already exists", and leaves the first one running.
	holder := fmt.Sprintf("another LoopX (loopx serve, pid %d, listening on %s) is running on LOOPX_HOME %s",
		s.cmd.Process.Pid, strings.TrimPrefix(s.url, "http://"), home)
	for _, args := range [][]string{{"serve"}, {"migrate"}} {
		second := exec.CommandContext(t.Context(), loopxBinary(t), args...)
		second.Env = append(baseEnv(), "LOOPX_HOME="+home, "LOOPX_LISTEN="+freeAddr(t))
		out, err := second.CombinedOutput()
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, "loopx %s on a busy home must fail: %s", args[0], out)
		require.Equal(t, exitRefused, ee.ExitCode(), "%s", out)
		require.Contains(t, string(out), holder)
		require.NotContains(t, string(out), "postmaster.pid")
	}
	require.Equal(t, 0, s.cli(t, token, "goal", "show", "--goal-id", "local").code, "the first server still serves")
	s.stop(t)

	// The data survives a restart, and the token is the same.
	s2 := startServe(t, map[string]string{"LOOPX_HOME": home})
	token2, err := server.ReadAdminToken(home)
	require.NoError(t, err)
	require.Equal(t, token, token2)
	m := s2.ok(t, token, "goal", "show", "--goal-id", "local")
	require.Equal(t, "local", m["id"])
}

// reachableTempDir is a temp dir the postgres system user can enter when tests run as root.
func reachableTempDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	for p := d; p != filepath.Dir(p) && p != os.TempDir(); p = filepath.Dir(p) {
		require.NoError(t, os.Chmod(p, 0o755))
	}
	return d
}
