package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// installIn runs `loopx hosts install --host host` in project for the user whose home is home,
// with the test binary (behind a wrapper: some hosts hand a stdio server only a few
// variables) as the loopx the host runs.
func installIn(t *testing.T, project, home, host string, extra ...string) {
	t.Helper()
	r := loopxIn(t, project, home, append([]string{"hosts", "install", "--host", host, "--command", loopxWrapper(t)}, extra...)...)
	require.Equal(t, 0, r.code, r.stderr)
	t.Logf("loopx hosts install --host %s:\n%s", host, r.stdout)
}

// statusScript calls the goal_status tool named name once, then ends.
func statusScript(name string) func(c *conversation) modelStep {
	return func(c *conversation) modelStep {
		if !c.called(name) {
			return modelStep{tool: name, args: map[string]any{}}
		}
		return modelStep{text: "status read"}
	}
}

// TestGeminiCLIConnectsToTheInstalledServer: the real Gemini CLI connects to `loopx mcp`
// (gemini mcp list runs the handshake), in a folder the user trusts.
func TestGeminiCLIConnectsToTheInstalledServer(t *testing.T) {
	t.Parallel()
	gemini := hostCLI(t, "gemini", "@google/gemini-cli")
	home := t.TempDir()
	project := connectedProject(t, home)
	installIn(t, project, home, "gemini")
	require.FileExists(t, filepath.Join(project, ".gemini", "commands", "loopx.toml"))
	out := runHost(t, project, append(hostEnv(home), "GEMINI_CLI_TRUST_WORKSPACE=true"), gemini, "mcp", "list")
	t.Logf("gemini mcp list:\n%s", out)
	require.Regexp(t, `✓ loopx: \S+ mcp \(stdio\) - Connected`, out)
}

// TestQwenCodeConnectsToTheInstalledServer: the real Qwen Code connects to `loopx mcp`
// (qwen mcp list runs the handshake): at the user scope (the default) at once, at the project
// scope once the user approved it with qwen's own command.
func TestQwenCodeConnectsToTheInstalledServer(t *testing.T) {
	t.Parallel()
	qwen := hostCLI(t, "qwen", "@qwen-code/qwen-code")
	home := t.TempDir()
	project := connectedProject(t, home)
	installIn(t, project, home, "qwen")
	require.FileExists(t, filepath.Join(home, ".qwen", "commands", "loopx.toml"))
	connected := `✓\S* loopx: \S+ mcp \(stdio\) - Connected`
	out := runHost(t, project, hostEnv(home), qwen, "mcp", "list")
	t.Logf("qwen mcp list:\n%s", out)
	require.Regexp(t, connected, stripANSI(out))

	r := loopxIn(t, project, home, "hosts", "uninstall", "--host", "qwen")
	require.Equal(t, 0, r.code, r.stderr)
	installIn(t, project, home, "qwen", "--scope", "project")
	require.Contains(t, stripANSI(runHost(t, project, hostEnv(home), qwen, "mcp", "list")), "Pending approval")
	runHost(t, project, hostEnv(home), qwen, "mcp", "approve", "loopx")
	require.Regexp(t, connected, stripANSI(runHost(t, project, hostEnv(home), qwen, "mcp", "list")))
}

// TestCopilotCLILoadsTheInstalledServer: the real Copilot CLI lists the server and the loopx
// skill, and a non-interactive run against a scripted model (its own custom-provider
// settings) offers the model the loopx tools and runs one for real.
func TestCopilotCLILoadsTheInstalledServer(t *testing.T) {
	t.Parallel()
	copilot := hostCLI(t, "copilot", "@github/copilot")
	home := t.TempDir()
	project := connectedProject(t, home)
	installIn(t, project, home, "copilot")
	// The workspace's .github/mcp.json and skills load in a folder the user trusts.
	env := append(hostEnv(home), "COPILOT_ALLOW_ALL=true", "COPILOT_AUTO_UPDATE=false")
	out := runHost(t, project, env, copilot, "mcp", "list")
	t.Logf("copilot mcp list:\n%s", out)
	require.Regexp(t, `(?s)Workspace servers:\s+loopx \(local\)`, out)
	out = runHost(t, project, env, copilot, "skill", "list")
	require.Regexp(t, `(?s)Project skills:\s+loopx - Run one LoopX turn`, out)

	m := newFakeModel(t, statusScript("loopx-goal_status"))
	env = append(env, "COPILOT_OFFLINE=true", "COPILOT_PROVIDER_BASE_URL="+m.srv.URL, "COPILOT_PROVIDER_TYPE=anthropic",
		"COPILOT_PROVIDER_API_KEY=scripted", "COPILOT_MODEL=claude-sonnet-4.5")
	runScripted(t, project, env, copilot, "-p", "how is the goal?", "-s")
	reqs := m.Requests()
	require.Contains(t, reqs[0], `"loopx-should_run"`, "the model is offered the loopx tools")
	require.Contains(t, reqs[len(reqs)-1], `needs_you`, "goal_status ran and answered")
}

// TestPiLoadsTheInstalledExtension: Pi has no MCP client; the installed extension runs
// `loopx mcp` and serves its tools. A non-interactive run against a scripted model (Pi's
// models.json) offers the model the loopx tools and runs one for real.
func TestPiLoadsTheInstalledExtension(t *testing.T) {
	t.Parallel()
	pi := hostCLI(t, "pi", "@mariozechner/pi-coding-agent")
	home := t.TempDir()
	project := connectedProject(t, home)
	installIn(t, project, home, "pi")
	require.FileExists(t, filepath.Join(project, ".pi", "prompts", "loopx.md"))

	m := newFakeModel(t, statusScript("loopx_goal_status"))
	require.NoError(t, os.MkdirAll(filepath.Join(home, ".pi", "agent"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(home, ".pi", "agent", "models.json"), []byte(`{"providers": {"scripted": {
		"baseUrl": "`+m.srv.URL+`", "api": "anthropic-messages", "apiKey": "scripted", "models": [{"id": "scripted-model"}]}}}`), 0o644))
	out := runScripted(t, project, hostEnv(home), pi, "-p", "how is the goal?", "--provider", "scripted", "--model", "scripted-model")
	t.Logf("pi: %s", tail(out, 300))
	reqs := m.Requests()
	require.Contains(t, reqs[0], `"loopx_should_run"`, "the model is offered the loopx tools")
	require.Contains(t, reqs[len(reqs)-1], `needs_you`, "goal_status ran and answered")
}

func stripANSI(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == 0x1b && i+1 < len(s) && s[i+1] == '[' {
			j := i + 2
			for j < len(s) && (s[j] < '@' || s[j] > '~') {
				j++
			}
			i = j
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
