package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loopx/bot/sandbox"
	"loopx/store/storetest"
)

// permissionWorld is a loopx serve with its Lark sandbox, a goal bound to a group chat, and a
// project connected to it.
type permissionWorld struct {
	s       *serveProc
	ctl     *sandbox.Client
	room    string
	home    string
	project string
}

func newPermissionWorld(t *testing.T, goal string) *permissionWorld {
	t.Helper()
	sandboxURL := "http://" + freeAddr(t)
	s := startServe(t, map[string]string{
		"DATABASE_URL": storetest.NewDatabase(t), "LOOPX_ADMIN_TOKEN": e2eAdminToken, "LOOPX_HOME": t.TempDir(),
		"LOOPX_SANDBOX_ADDR": strings.TrimPrefix(sandboxURL, "http://"), "LOOPX_DEMO": "off", "LOOPX_SCHEDULER": "off",
		"LOOPX_SANDBOX_STATE": "off",
	})
	s.ok(t, e2eAdminToken, "goal", "create", "--goal-id", goal, "--owner", "ou_owner")
	ctl, err := sandbox.NewClient(sandboxURL, "")
	require.NoError(t, err)
	w := &permissionWorld{s: s, ctl: ctl, room: "oc_" + strings.ReplaceAll(goal, "-", "_"), home: t.TempDir(), project: t.TempDir()}
	_, err = ctl.Post(t.Context(), sandbox.PostRequest{ChatID: w.room, ChatType: sandbox.ChatGroup, OpenID: "ou_owner", Text: "/bind #" + goal, MentionBot: true})
	require.NoError(t, err)
	r := s.cliIn(t, w.project, e2eAdminToken, []string{"HOME=" + w.home}, "connect", "--goal-id", goal, "--agent-id", "agent")
	require.Equal(t, 0, r.code, r.stderr)
	return w
}

// card waits for the bot's permission card in the room whose text names what.
func (w *permissionWorld) card(t *testing.T, what string) sandbox.MessageView {
	t.Helper()
	var found sandbox.MessageView
	require.Eventually(t, func() bool {
		page, err := w.ctl.Messages(t.Context(), w.room, 0, 0, 0)
		if err != nil {
			return false
		}
		for _, m := range page.Messages {
			if m.SenderType == "app" && m.Card != nil && strings.HasPrefix(m.Card.Title, "Permission needed") && strings.Contains(cardText(m), what) {
				found = m
			}
		}
		return found.MessageID != ""
	}, 2*time.Minute, 100*time.Millisecond, "a permission card for %s", what)
	return found
}

// button is the 1-based index of the card's button labelled label.
func button(t *testing.T, m sandbox.MessageView, label string) int {
	t.Helper()
	for i, b := range m.Card.Buttons {
		if b.Text == label {
			return i + 1
		}
	}
	t.Fatalf("no button %q on the card: %+v", label, m.Card.Buttons)
	return 0
}

// cardNow is the card's text as the room shows it now.
func (w *permissionWorld) cardNow(t *testing.T, id string) string {
	t.Helper()
	page, err := w.ctl.Messages(t.Context(), w.room, 0, 0, 0)
	require.NoError(t, err)
	for _, m := range page.Messages {
		if m.MessageID == id && m.Card != nil {
			return cardText(m)
		}
	}
	return ""
}

// bashScript asks Claude Code to run each command with its Bash tool, one after the other,
// then ends.
func bashScript(commands ...string) func(c *conversation) modelStep {
	return func(c *conversation) modelStep {
		if n := len(c.calls); n < len(commands) {
			return modelStep{tool: "Bash", args: map[string]any{"command": commands[n], "description": "step " + commands[n]}}
		}
		return modelStep{text: "done"}
	}
}

// TestClaudeCodePermissionPromptsAreLarkCards: real Claude Code, scripted to run shell
// commands that need permission, asks through `loopx hook permission`: each request is a
// card in the goal's chat. A stranger's click is refused, the owner's Allow lets the command
// run, Deny stops it, and with no answer the hook denies at the goal's limit.
func TestClaudeCodePermissionPromptsAreLarkCards(t *testing.T) {
	t.Parallel()
	claude := hostCLI(t, "claude", "@anthropic-ai/claude-code")
	w := newPermissionWorld(t, "perm")
	r := w.s.cli(t, e2eAdminToken, "permissions", "set", "--goal-id", "perm", "--timeout", "15s")
	require.Equal(t, 0, r.code, r.stderr)
	r = loopxIn(t, w.project, w.home, "hosts", "install", "--host", "claude-code", "--command", loopxWrapper(t))
	require.Equal(t, 0, r.code, r.stderr)

	m := newFakeModel(t, bashScript("touch allowed.txt", "touch denied.txt", "touch unanswered.txt"))
	env := append(hostEnv(w.home), "ANTHROPIC_BASE_URL="+m.srv.URL, "ANTHROPIC_API_KEY=scripted", "MCP_CONNECTION_NONBLOCKING=0")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, claude, "-p", "tidy the build folder", "--output-format", "stream-json", "--verbose")
	cmd.Dir, cmd.Env = w.project, env
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	// 1. A stranger's click is refused; the owner allows once: the command runs.
	c := w.card(t, "touch allowed.txt")
	text := cardText(c)
	require.Contains(t, text, "Agent agent asks to run Bash")
	require.Contains(t, text, w.project)
	res, err := w.ctl.Click(ctx, sandbox.ClickRequest{MessageID: c.MessageID, Button: button(t, c, "Allow once"), OpenID: "ou_stranger"})
	require.NoError(t, err)
	require.Equal(t, "error", res.Toast.Type, "a stranger may not answer")
	require.NoFileExists(t, filepath.Join(w.project, "allowed.txt"))
	res, err = w.ctl.Click(ctx, sandbox.ClickRequest{MessageID: c.MessageID, Button: button(t, c, "Allow once"), OpenID: "ou_owner"})
	require.NoError(t, err)
	require.Equal(t, "success", res.Toast.Type, "%+v", res)
	require.Eventually(t, func() bool { _, err := os.Stat(filepath.Join(w.project, "allowed.txt")); return err == nil },
		time.Minute, 100*time.Millisecond, "the allowed command ran")

	// 2. The owner denies: the command does not run, and the model is told.
	c = w.card(t, "touch denied.txt")
	res, err = w.ctl.Click(ctx, sandbox.ClickRequest{MessageID: c.MessageID, Button: button(t, c, "Deny"), OpenID: "ou_owner"})
	require.NoError(t, err)
	require.Equal(t, "success", res.Toast.Type, "%+v", res)

	// 3. Nobody answers: denied at the goal's limit (15 s), and the card says so. Meanwhile
	// chat /gates lists the open request.
	c = w.card(t, "touch unanswered.txt")
	_, err = w.ctl.Post(ctx, sandbox.PostRequest{ChatID: w.room, OpenID: "ou_owner", Text: "/gates #perm", MentionBot: true})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		page, err := w.ctl.Messages(ctx, w.room, 0, 0, 0)
		if err != nil {
			return false
		}
		for _, m := range page.Messages {
			if m.SenderType == "app" && m.Card == nil && strings.Contains(m.Text, "asks to run Bash: touch unanswered.txt") {
				return true
			}
		}
		return false
	}, 30*time.Second, 100*time.Millisecond, "/gates lists the open permission request")
	select {
	case err := <-done:
		require.NoError(t, err, "claude:\n%s", tail(out.String(), 2000))
	case <-ctx.Done():
		t.Fatalf("claude did not finish:\n%s", tail(out.String(), 2000))
	}
	require.NoFileExists(t, filepath.Join(w.project, "denied.txt"))
	require.NoFileExists(t, filepath.Join(w.project, "unanswered.txt"))
	reqs := m.Requests()
	last := reqs[len(reqs)-1]
	require.Contains(t, last, "denied Bash (permission request g2)", "the model read the owner's Deny")
	require.Contains(t, last, "within 15s, so it is denied", "the model read why the unanswered one was denied")
	require.Eventually(t, func() bool { return strings.Contains(w.cardNow(t, c.MessageID), "nobody answered in time") },
		30*time.Second, 100*time.Millisecond, "the unanswered card says it was denied")

	// The gates, as /gates and the workspace list them: closed, with their answers.
	gates := w.s.ok(t, e2eAdminToken, "gate", "list", "--goal-id", "perm")["gates"].([]any)
	require.Len(t, gates, 3)
	status := map[string]string{}
	for _, g := range gates {
		g := g.(map[string]any)
		status[g["question"].(string)] = g["status"].(string)
	}
	require.Contains(t, status, "Agent agent asks to run Bash: touch allowed.txt — step touch allowed.txt (in "+w.project+")")
}

// escalatedScript asks Codex to run each command outside its sandbox (which needs an
// approval), one after the other, then ends.
func escalatedScript(commands ...string) func(c *conversation) modelStep {
	return func(c *conversation) modelStep {
		if n := len(c.calls); n < len(commands) {
			return modelStep{tool: "exec_command", args: map[string]any{"cmd": commands[n],
				"sandbox_permissions": "require_escalated", "justification": "step " + commands[n]}}
		}
		return modelStep{text: "done"}
	}
}

// TestCodexPermissionPromptsAreLarkCards: the same through Codex's PermissionRequest hook: a
// command the model wants to run outside the sandbox asks for approval, and the approval is
// the owner's click. Codex runs a hook the user trusted (the test passes
// --dangerously-bypass-hook-trust instead of trusting it in the TUI), and codex exec asks
// hooks only with --approve-for-me (otherwise it never asks).
func TestCodexPermissionPromptsAreLarkCards(t *testing.T) {
	t.Parallel()
	codex := hostCLI(t, "codex", "@openai/codex")
	w := newPermissionWorld(t, "perm-codex")
	r := w.s.cli(t, e2eAdminToken, "permissions", "set", "--goal-id", "perm-codex", "--timeout", "15s")
	require.Equal(t, 0, r.code, r.stderr)
	m := newFakeModel(t, escalatedScript("touch allowed.txt", "touch denied.txt", "touch unanswered.txt"))
	codexHome := filepath.Join(w.home, ".codex")
	require.NoError(t, os.MkdirAll(codexHome, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(codexHome, "config.toml"),
		[]byte("sandbox_mode = \"read-only\"\n"+codexFakeProvider(m.srv.URL)), 0o600))
	r = loopxIn(t, w.project, w.home, "hosts", "install", "--host", "codex", "--command", loopxWrapper(t))
	require.Equal(t, 0, r.code, r.stderr)

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	// codex exec answers approvals itself unless --approve-for-me routes them through review,
	// where the PermissionRequest hook decides first.
	cmd := exec.CommandContext(ctx, codex, "exec", "--skip-git-repo-check", "--dangerously-bypass-hook-trust", "--approve-for-me", "tidy the build folder")
	cmd.Dir, cmd.Env = w.project, append(hostEnv(w.home), "FAKE_KEY=scripted")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	c := w.card(t, "touch allowed.txt")
	require.Contains(t, cardText(c), "host: codex")
	res, err := w.ctl.Click(ctx, sandbox.ClickRequest{MessageID: c.MessageID, Button: button(t, c, "Allow once"), OpenID: "ou_stranger"})
	require.NoError(t, err)
	require.Equal(t, "error", res.Toast.Type, "a stranger may not answer")
	res, err = w.ctl.Click(ctx, sandbox.ClickRequest{MessageID: c.MessageID, Button: button(t, c, "Allow once"), OpenID: "ou_owner"})
	require.NoError(t, err)
	require.Equal(t, "success", res.Toast.Type, "%+v", res)
	require.Eventually(t, func() bool { _, err := os.Stat(filepath.Join(w.project, "allowed.txt")); return err == nil },
		time.Minute, 100*time.Millisecond, "the allowed command ran:\n%s", tail(out.String(), 2000))

	c = w.card(t, "touch denied.txt")
	res, err = w.ctl.Click(ctx, sandbox.ClickRequest{MessageID: c.MessageID, Button: button(t, c, "Deny"), OpenID: "ou_owner"})
	require.NoError(t, err)
	require.Equal(t, "success", res.Toast.Type, "%+v", res)

	c = w.card(t, "touch unanswered.txt")
	select {
	case err := <-done:
		require.NoError(t, err, "codex:\n%s", tail(out.String(), 2000))
	case <-ctx.Done():
		t.Fatalf("codex did not finish:\n%s", tail(out.String(), 2000))
	}
	require.NoFileExists(t, filepath.Join(w.project, "denied.txt"))
	require.NoFileExists(t, filepath.Join(w.project, "unanswered.txt"))
	require.Eventually(t, func() bool { return strings.Contains(w.cardNow(t, c.MessageID), "nobody answered in time") },
		30*time.Second, 100*time.Millisecond, "the unanswered card says it was denied")
	t.Logf("codex output:\n%s", tail(out.String(), 1500))
}

// writeFilesScript asks Claude Code to write each file with its Write tool, one after the other,
// then ends.
func writeFilesScript(paths ...string) func(c *conversation) modelStep {
	return func(c *conversation) modelStep {
		if n := len(c.calls); n < len(paths) {
			return modelStep{tool: "Write", args: map[string]any{"file_path": paths[n], "content": "written by the agent\n"}}
		}
		return modelStep{text: "done"}
	}
}

// TestClaudeCodePermissionKeepsToTheScope: real Claude Code writes files through its Write
// tool in a project whose goal's scope protects secrets/** and lists src/** as editable. The
// protected file is denied by `loopx hook permission` without a card, and the model is told
// why; the file outside the editable paths is asked of the owners, the card saying so, and
// the owner's Allow lets it be written.
func TestClaudeCodePermissionKeepsToTheScope(t *testing.T) {
	t.Parallel()
	claude := hostCLI(t, "claude", "@anthropic-ai/claude-code")
	w := newPermissionWorld(t, "perm-scope")
	for _, args := range [][]string{
		{"goal", "set", "--goal-id", "perm-scope", "--scope-editable", "src/**", "--scope-protected", "secrets/**"},
		{"permissions", "set", "--goal-id", "perm-scope", "--timeout", "2m"},
	} {
		r := w.s.cli(t, e2eAdminToken, args...)
		require.Equal(t, 0, r.code, r.stderr)
	}
	r := loopxIn(t, w.project, w.home, "hosts", "install", "--host", "claude-code", "--command", loopxWrapper(t))
	require.Equal(t, 0, r.code, r.stderr)
	secret, notes := filepath.Join(w.project, "secrets", "key.txt"), filepath.Join(w.project, "docs", "notes.md")
	m := newFakeModel(t, writeFilesScript(secret, notes))
	env := append(hostEnv(w.home), "ANTHROPIC_BASE_URL="+m.srv.URL, "ANTHROPIC_API_KEY=scripted", "MCP_CONNECTION_NONBLOCKING=0")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, claude, "-p", "write the notes", "--output-format", "stream-json", "--verbose")
	cmd.Dir, cmd.Env = w.project, env
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	c := w.card(t, "docs/notes.md")
	require.Contains(t, cardText(c), "Outside the goal's scope (not in its editable paths): docs/notes.md")
	res, err := w.ctl.Click(ctx, sandbox.ClickRequest{MessageID: c.MessageID, Button: button(t, c, "Allow once"), OpenID: "ou_owner"})
	require.NoError(t, err)
	require.Equal(t, "success", res.Toast.Type, "%+v", res)
	select {
	case err := <-done:
		require.NoError(t, err, "claude:\n%s", tail(out.String(), 2000))
	case <-ctx.Done():
		t.Fatalf("claude did not finish:\n%s", tail(out.String(), 2000))
	}
	require.NoFileExists(t, secret)
	require.FileExists(t, notes)
	reqs := m.Requests()
	require.Contains(t, reqs[len(reqs)-1], "scope protects secrets/key.txt, so LoopX denies writing there without asking its owners",
		"the model read why the protected file was denied")
	gates := w.s.ok(t, e2eAdminToken, "gate", "list", "--goal-id", "perm-scope")["gates"].([]any)
	require.Len(t, gates, 1, "the protected file asked nobody")
}
