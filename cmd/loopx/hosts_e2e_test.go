package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loopx/store/storetest"
)

// hostCLI finds a host's CLI: in LOOPX_HOST_CLIS_BIN (where scripts/host-clis.sh installs
// them; .ci/run sets it), else on PATH. Without it the test is skipped, unless
// LOOPX_REQUIRE_HOST_CLIS=1 (CI), where a missing CLI fails.
func hostCLI(t *testing.T, name, pkg string) string {
	t.Helper()
	if dir := os.Getenv("LOOPX_HOST_CLIS_BIN"); dir != "" {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	msg := fmt.Sprintf("the %s CLI (npm %s) is not installed: run scripts/host-clis.sh and set LOOPX_HOST_CLIS_BIN to the folder it prints, as .ci/run does", name, pkg)
	if os.Getenv("LOOPX_REQUIRE_HOST_CLIS") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// hostEnv is a host's environment: a throw-away HOME, and what makes the test binary act as
// loopx when the host starts `<binary> mcp`. The CLIs' folder comes first on PATH: its node
// is Node 22, which some of them need.
func hostEnv(home string) []string {
	path := os.Getenv("PATH")
	if dir := os.Getenv("LOOPX_HOST_CLIS_BIN"); dir != "" {
		path = dir + string(os.PathListSeparator) + path
	}
	return []string{"HOME=" + home, "PATH=" + path, "LOOPX_E2E_MAIN=1", "TERM=dumb",
		"DISABLE_AUTOUPDATER=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "NO_COLOR=1"}
}

func runHost(t *testing.T, dir string, env []string, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s %s:\n%s", filepath.Base(bin), strings.Join(args, " "), out)
	return string(out)
}

// connectedProject returns a project folder connected to a real server (goal hosts, agent
// codex) for a user whose home is home.
func connectedProject(t *testing.T, home string) string {
	project, _ := connectedProjectOn(t, home)
	return project
}

func connectedProjectOn(t *testing.T, home string) (string, *serveProc) {
	t.Helper()
	s := startServe(t, map[string]string{"DATABASE_URL": storetest.NewDatabase(t), "LOOPX_ADMIN_TOKEN": e2eAdminToken, "LOOPX_SCHEDULER": "off"})
	project := filepath.Join(t.TempDir(), "hosts")
	require.NoError(t, os.Mkdir(project, 0o755))
	r := s.cliIn(t, project, e2eAdminToken, []string{"HOME=" + home}, "connect", "--agent-id", "codex")
	require.Equal(t, 0, r.code, r.stderr)
	return project, s
}

// storedToken reads the agent token loopx connect kept for the user whose home is home.
func storedToken(t *testing.T, home string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(home, ".config", "loopx", "credentials.json"))
	require.NoError(t, err)
	var doc struct {
		Tokens []struct {
			Token string `json:"token"`
		} `json:"tokens"`
	}
	require.NoError(t, json.Unmarshal(raw, &doc))
	require.Len(t, doc.Tokens, 1)
	return doc.Tokens[0].Token
}

// loopx runs the binary in dir for the user whose home is home.
func loopxIn(t *testing.T, dir, home string, args ...string) cliResult {
	t.Helper()
	return runBinary(t, dir, append(baseEnv(), "HOME="+home), args...)
}

// TestClaudeCodeConnectsToTheInstalledServer: the real Claude Code CLI, in a throw-away
// home, runs the MCP handshake with the `loopx mcp` that `loopx hosts install` configured,
// for the project scope and the user scope, and no longer lists it after uninstall.
func TestClaudeCodeConnectsToTheInstalledServer(t *testing.T) {
	t.Parallel()
	claude := hostCLI(t, "claude", "@anthropic-ai/claude-code")
	home := t.TempDir()
	project, s := connectedProjectOn(t, home)
	bin := loopxBinary(t)
	env := hostEnv(home)
	connected := "loopx: " + bin + " mcp - ✔ Connected"

	r := loopxIn(t, project, home, "hosts", "install", "--host", "claude-code")
	require.Equal(t, 0, r.code, r.stderr)
	require.NotContains(t, r.stdout, ".mcp.json", "the install names no file it does not write")
	require.NoFileExists(t, filepath.Join(project, ".mcp.json"))
	out := runHost(t, project, env, claude, "mcp", "list")
	require.Contains(t, out, connected, "claude mcp list in the project")
	t.Logf("claude mcp list:\n%s", out)

	r = loopxIn(t, project, home, "hosts", "install", "--host", "claude-code", "--scope", "user")
	require.Equal(t, 0, r.code, r.stderr)
	elsewhere := t.TempDir()
	require.Contains(t, runHost(t, elsewhere, env, claude, "mcp", "list"), connected, "the user scope reaches every folder")

	for _, scope := range []string{"project", "user"} {
		r = loopxIn(t, project, home, "hosts", "uninstall", "--host", "claude-code", "--scope", scope)
		require.Equal(t, 0, r.code, r.stderr)
	}
	out = runHost(t, project, env, claude, "mcp", "list")
	require.NotContains(t, out, "loopx:", "uninstalled")

	// A remote host: /mcp on loopx serve with the agent's token from the environment (the
	// file holds ${LOOPX_TOKEN}, not the token).
	runHost(t, project, env, claude, "mcp", "add", "--transport", "http", "loopx-remote", s.url+"/mcp",
		"--header", "Authorization: Bearer ${LOOPX_TOKEN}")
	out = runHost(t, project, append(env, "LOOPX_TOKEN="+storedToken(t, home)), claude, "mcp", "list")
	require.Contains(t, out, "loopx-remote: "+s.url+"/mcp (HTTP) - ✔ Connected")
	out = runHost(t, project, append(env, "LOOPX_TOKEN="+e2eAdminToken), claude, "mcp", "list")
	require.NotContains(t, out, "✔ Connected", "the admin token is refused on /mcp")
}

// TestCodexListsTheInstalledServer: the real Codex CLI lists the installed server (codex mcp
// list reads the config without starting it), and its app server runs the handshake with
// `loopx mcp` and lists the tools.
func TestCodexListsTheInstalledServer(t *testing.T) {
	t.Parallel()
	codex := hostCLI(t, "codex", "@openai/codex")
	home := t.TempDir()
	project := connectedProject(t, home)
	bin := loopxWrapper(t)
	env := hostEnv(home)
	// The user's own Codex settings, kept by the install.
	require.NoError(t, os.MkdirAll(filepath.Join(home, ".codex"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(home, ".codex", "config.toml"), []byte("# mine\n[mcp_servers.docs]\ncommand = \"docs-mcp\"\n"), 0o600))

	r := loopxIn(t, project, home, "hosts", "install", "--host", "codex", "--command", bin)
	require.Equal(t, 0, r.code, r.stderr)
	out := runHost(t, project, env, codex, "mcp", "list", "--json")
	var list []struct {
		Name      string `json:"name"`
		Enabled   bool   `json:"enabled"`
		Transport struct {
			Command string   `json:"command"`
			Args    []string `json:"args"`
		} `json:"transport"`
	}
	require.NoError(t, json.Unmarshal([]byte(jsonPart(out)), &list), out)
	names := map[string]int{}
	for i, s := range list {
		names[s.Name] = i
	}
	require.Contains(t, names, "docs", "the user's server is kept")
	require.Contains(t, names, "loopx")
	s := list[names["loopx"]]
	require.True(t, s.Enabled)
	require.Equal(t, bin, s.Transport.Command)
	require.Equal(t, []string{"mcp"}, s.Transport.Args)
	text := runHost(t, project, env, codex, "mcp", "list")
	require.Regexp(t, `(?m)^loopx\s+`+regexpQuote(bin)+`\s+mcp\s+.*enabled`, text)
	t.Logf("codex mcp list:\n%s", text)

	tools := codexServerTools(t, codex, project, env)
	require.Contains(t, tools, "loopx")
	for _, want := range []string{"should_run", "todo_claim", "evidence_add", "gate_ask", "refresh_state", "spend_slot"} {
		require.Contains(t, tools["loopx"], want)
	}

	r = loopxIn(t, project, home, "hosts", "uninstall", "--host", "codex")
	require.Equal(t, 0, r.code, r.stderr)
	require.NotContains(t, runHost(t, project, env, codex, "mcp", "list"), "loopx")
	cfg, err := os.ReadFile(filepath.Join(home, ".codex", "config.toml"))
	require.NoError(t, err)
	require.Equal(t, "# mine\n[mcp_servers.docs]\ncommand = \"docs-mcp\"\n", string(cfg), "uninstall gives the file back")
}

// loopxWrapper is a loopx for hosts that hand a stdio server only a few variables (HOME,
// PATH, ...), not LOOPX_E2E_MAIN: a script that makes the test binary act as loopx.
func loopxWrapper(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "loopx")
	require.NoError(t, os.WriteFile(bin, []byte("#!/bin/sh\nLOOPX_E2E_MAIN=1 exec '"+loopxBinary(t)+"' \"$@\"\n"), 0o755))
	return bin
}

// jsonPart skips anything Codex prints before its JSON (warnings about the throw-away home).
func jsonPart(s string) string {
	if i := strings.IndexAny(s, "[{"); i >= 0 {
		return s[i:]
	}
	return s
}

func regexpQuote(s string) string {
	r := strings.NewReplacer(`.`, `\.`, `+`, `\+`, `(`, `\(`, `)`, `\)`, `[`, `\[`, `]`, `\]`, `?`, `\?`, `*`, `\*`)
	return r.Replace(s)
}

// codexServerTools asks `codex app-server` for the MCP servers' status: Codex starts each
// stdio server and lists its tools (no model account needed).
func codexServerTools(t *testing.T, codex, dir string, env []string) map[string][]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, codex, "app-server")
	cmd.Dir, cmd.Env = dir, env
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	}()
	for _, msg := range []string{
		`{"id":1,"method":"initialize","params":{"clientInfo":{"name":"loopx-e2e","version":"0"}}}`,
		`{"method":"initialized"}`,
		`{"id":2,"method":"mcpServerStatus/list","params":{"detail":"toolsAndAuthOnly"}}`,
	} {
		_, err := io.WriteString(stdin, msg+"\n")
		require.NoError(t, err)
	}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var m struct {
			ID     int `json:"id"`
			Result struct {
				Data []struct {
					Name       string          `json:"name"`
					Tools      json.RawMessage `json:"tools"`
					ToolsError string          `json:"toolsError"`
				} `json:"data"`
			} `json:"result"`
			Error json.RawMessage `json:"error"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil || m.ID != 2 {
			continue
		}
		require.Empty(t, m.Error, "%s", sc.Bytes())
		out := map[string][]string{}
		for _, s := range m.Result.Data {
			var named map[string]json.RawMessage
			var list []struct {
				Name string `json:"name"`
			}
			switch {
			case json.Unmarshal(s.Tools, &named) == nil:
				for k := range named {
					out[s.Name] = append(out[s.Name], k)
				}
			case json.Unmarshal(s.Tools, &list) == nil:
				for _, tl := range list {
					out[s.Name] = append(out[s.Name], tl.Name)
				}
			}
			slices.Sort(out[s.Name])
			if s.Name == "loopx" {
				require.Empty(t, s.ToolsError, "codex started loopx mcp")
			}
		}
		return out
	}
	t.Fatalf("codex app-server gave no server status: %v", sc.Err())
	return nil
}

// TestOpenCodeConnectsToTheInstalledServer: the real OpenCode CLI connects to the installed
// server (opencode mcp list runs the handshake) and loads the /loopx command.
func TestOpenCodeConnectsToTheInstalledServer(t *testing.T) {
	t.Parallel()
	opencode := hostCLI(t, "opencode", "opencode-ai")
	home := t.TempDir()
	project := connectedProject(t, home)
	env := append(hostEnv(home), "XDG_CONFIG_HOME="+filepath.Join(home, ".config"), "XDG_DATA_HOME="+filepath.Join(home, ".local", "share"),
		"XDG_CACHE_HOME="+filepath.Join(home, ".cache"), "XDG_STATE_HOME="+filepath.Join(home, ".local", "state"))
	// opencode.json is usually committed: it runs `loopx` from PATH unless --command names it.
	r := loopxIn(t, project, home, "hosts", "install", "--host", "opencode", "--command", loopxBinary(t))
	require.Equal(t, 0, r.code, r.stderr)
	out := runHost(t, project, env, opencode, "mcp", "list")
	require.Regexp(t, `✓ loopx\S*\s+\S*connected`, out)
	t.Logf("opencode mcp list:\n%s", out)
	var cfg struct {
		Command map[string]struct {
			Template string `json:"template"`
		} `json:"command"`
	}
	out = runHost(t, project, env, opencode, "debug", "config")
	require.NoError(t, json.Unmarshal([]byte(jsonPart(out)), &cfg), out)
	require.Contains(t, cfg.Command, "loopx")
	require.Contains(t, cfg.Command["loopx"].Template, "should_run")
}

// TestCodexReadsTheProjectScopeOnceTrusted: a project-scope Codex install says how to trust
// the project, and what it says works with the real Codex: before, codex mcp list does not
// list loopx (Codex ignores an untrusted project's .codex/config.toml); after the
// `codex exec --trust` the install names, it does.
func TestCodexReadsTheProjectScopeOnceTrusted(t *testing.T) {
	t.Parallel()
	codex := hostCLI(t, "codex", "@openai/codex")
	home := t.TempDir()
	project := connectedProject(t, home)
	m := newFakeModel(t, func(*conversation) modelStep { return modelStep{text: "trusted"} })
	codexHome := filepath.Join(home, ".codex")
	require.NoError(t, os.MkdirAll(codexHome, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(codexFakeProvider(m.srv.URL)), 0o600))
	env := hostEnv(home)

	r := loopxIn(t, project, home, "hosts", "install", "--host", "codex", "--scope", "project", "--command", loopxWrapper(t))
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "trust it once (codex exec --trust, or [projects.")
	require.NotContains(t, r.stdout, "codex --trust", "codex has no top-level --trust")
	require.NotRegexp(t, `(?m)^loopx\s`, runHost(t, project, env, codex, "mcp", "list"), "an untrusted project's servers are not read")

	runScripted(t, project, append(env, "FAKE_KEY=scripted"), codex, "exec", "--trust", "--skip-git-repo-check", "hello")
	require.Regexp(t, `(?m)^loopx\s+\S+\s+mcp\s+.*enabled`, runHost(t, project, env, codex, "mcp", "list"), "trusted: the project's loopx is read")
}
