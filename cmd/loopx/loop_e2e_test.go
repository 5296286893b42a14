package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"loopx/store/storetest"
	"loopx/templates"
)

// loopWorld is a real loopx serve with one connected project per state a /loopx turn can
// meet, for one user whose home is home.
type loopWorld struct {
	s        *serveProc
	db       *pgxpool.Pool
	home     string
	projects map[string]string // state -> project folder (its goal has the state's name)
}

// The states a /loopx <task> turn meets, each its own goal.
var loopStates = []string{"empty", "backlog", "gated", "spent", "handed"}

func newLoopWorld(t *testing.T) *loopWorld {
	t.Helper()
	dbURL := storetest.NewDatabase(t)
	s := startServe(t, map[string]string{"DATABASE_URL": dbURL, "LOOPX_ADMIN_TOKEN": e2eAdminToken, "LOOPX_SCHEDULER": "off"})
	db, err := pgxpool.New(t.Context(), dbURL)
	require.NoError(t, err)
	t.Cleanup(db.Close)
	w := &loopWorld{s: s, db: db, home: t.TempDir(), projects: map[string]string{}}
	root := t.TempDir()
	admin := func(args ...string) {
		t.Helper()
		r := s.cli(t, e2eAdminToken, args...)
		require.Equal(t, 0, r.code, "loopx %s: %s", strings.Join(args, " "), r.stderr)
	}
	for _, st := range loopStates {
		args := []string{"goal", "create", "--goal-id", st, "--owner", "ou_owner"}
		if st == "spent" {
			args = append(args, "--allowed-slots", "1")
		}
		admin(args...)
		dir := filepath.Join(root, st)
		require.NoError(t, os.Mkdir(dir, 0o755))
		r := s.cliIn(t, dir, e2eAdminToken, []string{"HOME=" + w.home}, "connect", "--goal-id", st, "--agent-id", "agent")
		require.Equal(t, 0, r.code, r.stderr)
		w.projects[st] = dir
	}
	// A backlog: older runnable todos, more urgent than the task will be.
	admin("todo", "add", "--goal-id", "backlog", "--text", "older urgent work", "--priority", "P0")
	admin("todo", "add", "--goal-id", "backlog", "--text", "older work", "--priority", "P1")
	// An open gate on the whole goal.
	admin("gate", "ask", "--goal-id", "gated", "--agent-id", "agent", "--question", "May we touch production?")
	// The goal's one slot is spent.
	admin("todo", "add", "--goal-id", "spent", "--text", "earlier work")
	admin("quota", "should-run", "--goal-id", "spent", "--agent-id", "agent", "--turn-instance-id", "earlier-1", "--begin-turn")
	admin("quota", "spend-slot", "--goal-id", "spent", "--agent-id", "agent", "--turn-instance-id", "earlier-1")
	// A todo an owner handed to the agent: a continuation it reads and acknowledges.
	handed := s.ok(t, e2eAdminToken, "todo", "add", "--goal-id", "handed", "--text", "the grammar")["todo_id"]
	admin("todo", "handoff", "--goal-id", "handed", "--todo-id", fmt.Sprint(handed), "--to", "agent", "--kind", "review",
		"--note", "the grammar is drafted", "--next", "review it")
	return w
}

// checkTurn checks, in SQL, the outcome of `/loopx <task>` on goal: on empty and backlog the
// turn, its evidence and its spent slot name the task's todo; on gated and spent no turn
// opened and the model was told why (the should_run answer it read says stop, and why).
func (w *loopWorld) checkTurn(t *testing.T, goal, task string, m *fakeModel) {
	t.Helper()
	ctx := t.Context()
	var todo int64
	require.NoError(t, w.db.QueryRow(ctx, `SELECT id FROM todo WHERE goal_id = $1 AND text = $2`, goal, task).Scan(&todo),
		"the model added the task as a todo")
	var turns, turnTodo, evTodo, spentTodo int64
	require.NoError(t, w.db.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM turn WHERE goal_id = $1 AND instance_id LIKE 'mcp-%'),
		       coalesce((SELECT todo_id FROM turn WHERE goal_id = $1 AND instance_id LIKE 'mcp-%' ORDER BY id DESC LIMIT 1), 0),
		       coalesce((SELECT e.todo_id FROM evidence e JOIN turn t ON t.id = e.turn_id WHERE t.goal_id = $1 AND t.instance_id LIKE 'mcp-%' LIMIT 1), 0),
		       coalesce((SELECT q.todo_id FROM quota_ledger q JOIN turn t ON t.id = q.turn_id
		                  WHERE t.goal_id = $1 AND t.instance_id LIKE 'mcp-%' AND q.kind = 'slot_spent' LIMIT 1), 0)`,
		goal).Scan(&turns, &turnTodo, &evTodo, &spentTodo))
	reqs := m.Requests()
	last := reqs[len(reqs)-1]
	switch goal {
	case "empty", "backlog", "handed":
		require.Equal(t, int64(1), turns, "one turn opened")
		require.Equal(t, []int64{todo, todo, todo}, []int64{turnTodo, evTodo, spentTodo},
			"the turn, its evidence and its spent slot name the task's todo %d", todo)
		if goal == "handed" {
			var acked int
			require.NoError(t, w.db.QueryRow(ctx, `SELECT count(*) FROM handoff WHERE goal_id = 'handed' AND acked_at IS NOT NULL`).Scan(&acked))
			require.Equal(t, 1, acked, "the model read the continuation and acknowledged it, as the steps say")
		}
	case "gated", "spent":
		require.Zero(t, turns, "no turn opened")
		require.Contains(t, last, `should_run\":false`, "the model read a skip")
		why := map[string]string{"gated": "Waiting for an owner to answer gate", "spent": "Skip (throttled)"}[goal]
		require.Contains(t, last, why, "the model was told why")
		require.Contains(t, last, "without spending")
	}
}

// requireSteps: the host gave the model the loop contract's steps for the task.
func requireSteps(t *testing.T, m *fakeModel, task string) {
	t.Helper()
	first := m.Requests()[0]
	for _, line := range []string{"Run exactly one LoopX turn", `"claim\": true`, "no turn was opened", "`acknowledge` with", task} {
		require.Contains(t, first, line, "the host's first request carries the /loopx steps")
	}
}

func runScripted(t *testing.T, dir string, env []string, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s %s:\n%s", filepath.Base(bin), strings.Join(args, " "), out)
	return string(out)
}

// TestClaudeCodeRunsTheLoopInEveryState: real Claude Code, driven by a scripted model, runs
// `/loopx <task>` in a connected project whose goal is empty, has a backlog, waits on an open
// gate, or has spent its quota.
func TestClaudeCodeRunsTheLoopInEveryState(t *testing.T) {
	t.Parallel()
	claude := hostCLI(t, "claude", "@anthropic-ai/claude-code")
	w := newLoopWorld(t)
	for _, st := range loopStates {
		t.Run(st, func(t *testing.T) {
			task := "write the " + st + " notes"
			m := newFakeModel(t, loopScript(task))
			r := loopxIn(t, w.projects[st], w.home, "hosts", "install", "--host", "claude-code")
			require.Equal(t, 0, r.code, r.stderr)
			env := append(hostEnv(w.home), "ANTHROPIC_BASE_URL="+m.srv.URL, "ANTHROPIC_API_KEY=scripted", "MCP_CONNECTION_NONBLOCKING=0")
			out := runScripted(t, w.projects[st], env, claude, "-p", "/loopx "+task, "--output-format", "stream-json", "--verbose")
			t.Logf("claude: %d requests; last output: %s", len(m.Requests()), tail(out, 400))
			requireSteps(t, m, task)
			w.checkTurn(t, st, task, m)
		})
	}
}

// TestCodexRunsTheLoopInEveryState: the same with real Codex and `$loopx <task>`.
func TestCodexRunsTheLoopInEveryState(t *testing.T) {
	t.Parallel()
	codex := hostCLI(t, "codex", "@openai/codex")
	w := newLoopWorld(t)
	bin := loopxWrapper(t)
	for _, st := range loopStates {
		t.Run(st, func(t *testing.T) {
			task := "write the " + st + " notes"
			m := newFakeModel(t, loopScript(task))
			codexHome := filepath.Join(t.TempDir(), "codex")
			require.NoError(t, os.MkdirAll(codexHome, 0o700))
			require.NoError(t, os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(codexFakeProvider(m.srv.URL)), 0o600))
			env := append(hostEnv(w.home), "CODEX_HOME="+codexHome, "FAKE_KEY=scripted")
			r := runBinary(t, w.projects[st], append(baseEnv(), "HOME="+w.home, "CODEX_HOME="+codexHome), "hosts", "install", "--host", "codex", "--command", bin)
			require.Equal(t, 0, r.code, r.stderr)
			out := runScripted(t, w.projects[st], env, codex, "exec", "--skip-git-repo-check", "$loopx "+task)
			t.Logf("codex: %d requests; last output: %s", len(m.Requests()), tail(out, 400))
			requireSteps(t, m, task)
			w.checkTurn(t, st, task, m)
		})
	}
}

// codexFakeProvider points Codex at the scripted model (it must come before any table the
// install appends).
func codexFakeProvider(url string) string {
	return `model_provider = "scripted"
model = "gpt-5"

[model_providers.scripted]
name = "scripted"
base_url = "` + url + `/v1"
wire_api = "responses"
env_key = "FAKE_KEY"
request_max_retries = 0
stream_max_retries = 0
`
}

// gating matches what an always-on text must never say: an instruction to call should_run,
// to gate work on LoopX, or to stop working.
var gating = []*regexp.Regexp{
	regexp.MustCompile(`(?i)(call|start|begin)[^.]{0,40}\bshould_run\b[^.]{0,20}\b(first|every|each)`),
	regexp.MustCompile(`(?i)\b(call|use|run|invoke)s?\b[^.\n]{0,40}\bshould_run\b`),
	regexp.MustCompile(`(?i)\bshould_run\b[^.\n]{0,30}\b(first|before)\b`),
	regexp.MustCompile(`(?i)start every (agent )?turn`),
	regexp.MustCompile(`(?i)work only when`),
	regexp.MustCompile(`(?i)\bgoverns\b`),
	regexp.MustCompile(`(?i)stop (working|now|here|this turn)`),
	regexp.MustCompile(`(?i)end (every|each|the) turn with`),
}

func requireNoGating(t *testing.T, reqs []string) {
	t.Helper()
	require.NotEmpty(t, reqs)
	for _, r := range reqs {
		for _, re := range gating {
			require.NotRegexp(t, re, r, "a request the host sent in an unconnected folder")
		}
	}
	require.Contains(t, reqs[0], "LoopX is not set up in this folder", "the server's instructions reached the model")
}

// TestUnconnectedFolderIsNotGated: after a user-scope install, Claude Code and Codex in a
// folder with no LoopX connection send the model no instruction to call should_run or stop.
func TestUnconnectedFolderIsNotGated(t *testing.T) {
	t.Parallel()
	claude := hostCLI(t, "claude", "@anthropic-ai/claude-code")
	codex := hostCLI(t, "codex", "@openai/codex")
	home := t.TempDir()
	folder := t.TempDir()
	answer := func(*conversation) modelStep { return modelStep{text: "Here is the refactor."} }

	r := loopxIn(t, folder, home, "hosts", "install", "--host", "claude-code", "--scope", "user")
	require.Equal(t, 0, r.code, r.stderr)
	m := newFakeModel(t, answer)
	env := append(hostEnv(home), "ANTHROPIC_BASE_URL="+m.srv.URL, "ANTHROPIC_API_KEY=scripted", "MCP_CONNECTION_NONBLOCKING=0")
	runScripted(t, folder, env, claude, "-p", "refactor utils.go", "--output-format", "stream-json", "--verbose")
	requireNoGating(t, m.Requests())

	m = newFakeModel(t, answer)
	codexHome := filepath.Join(home, ".codex")
	require.NoError(t, os.MkdirAll(codexHome, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(codexFakeProvider(m.srv.URL)), 0o600))
	r = loopxIn(t, folder, home, "hosts", "install", "--host", "codex", "--command", loopxWrapper(t))
	require.Equal(t, 0, r.code, r.stderr)
	runScripted(t, folder, append(hostEnv(home), "FAKE_KEY=scripted"), codex, "exec", "--skip-git-repo-check", "refactor utils.go")
	requireNoGating(t, m.Requests())
	// The texts the model reads when it does run a turn are the loop contract's.
	require.NotContains(t, templates.LoopTools(""), "should_run")
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
