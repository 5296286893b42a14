package hosts_test

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"loopx/hosts"
)

const loopxBin = "/opt/loopx/bin/loopx"

type bundle struct {
	home, project, cfg string
	m                  *hosts.Manifest
}

func setup(t *testing.T) *bundle {
	t.Helper()
	root := t.TempDir()
	b := &bundle{home: filepath.Join(root, "home"), project: filepath.Join(root, "proj"), cfg: filepath.Join(root, "home", ".config", "loopx")}
	require.NoError(t, os.MkdirAll(b.home, 0o755))
	require.NoError(t, os.MkdirAll(b.project, 0o755))
	b.reload(t)
	return b
}

func (b *bundle) reload(t *testing.T) {
	t.Helper()
	m, err := hosts.LoadManifest(b.cfg)
	require.NoError(t, err)
	b.m = m
}

func (b *bundle) params(host, scope string) hosts.Params {
	return hosts.Params{Host: host, Scope: scope, Project: b.project, Home: b.home, Command: []string{loopxBin, "mcp"},
		SharedCommand: []string{"loopx", "mcp"}}
}

func (b *bundle) install(t *testing.T, host, scope string) *hosts.Plan {
	t.Helper()
	plan, err := hosts.Install(b.params(host, scope), b.m)
	require.NoError(t, err)
	require.NoError(t, plan.Apply())
	b.reload(t)
	return plan
}

func (b *bundle) uninstall(t *testing.T, host, scope string) *hosts.Plan {
	t.Helper()
	plan, err := hosts.Uninstall(host, scope, b.project, b.m)
	require.NoError(t, err)
	require.NoError(t, plan.Apply())
	b.reload(t)
	return plan
}

func readJSON(t *testing.T, path string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m), "%s", raw)
	return m
}

func dig(t *testing.T, v any, keys ...string) any {
	t.Helper()
	for _, k := range keys {
		m, ok := v.(map[string]any)
		require.True(t, ok, "%v is not an object at %q", v, k)
		v = m[k]
	}
	return v
}

// frontmatter splits a Markdown file into its YAML frontmatter (parsed) and body.
func frontmatter(t *testing.T, path string) (map[string]any, string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	s := string(raw)
	require.True(t, strings.HasPrefix(s, "---\n"), "%s starts with --- frontmatter", path)
	head, body, ok := strings.Cut(strings.TrimPrefix(s, "---\n"), "\n---\n")
	require.True(t, ok, "%s closes its frontmatter", path)
	var fm map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(head), &fm), "%s frontmatter is YAML", path)
	return fm, body
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func requireSubset(t *testing.T, got, allowed []string, what string) {
	t.Helper()
	for _, k := range got {
		require.Contains(t, allowed, k, "%s: %q is not a documented key", what, k)
	}
}

// TestClaudeCodeFiles: the local-scope entry Claude Code reads from ~/.claude.json, the
// permission, and the skill whose directory names the /loopx command.
func TestClaudeCodeFiles(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.install(t, hosts.ClaudeCode, hosts.ScopeProject)
	real, err := filepath.EvalSymlinks(b.project)
	require.NoError(t, err)
	entry := dig(t, readJSON(t, filepath.Join(b.home, ".claude.json")), "projects", real, "mcpServers", "loopx")
	require.Equal(t, map[string]any{"type": "stdio", "command": loopxBin, "args": []any{"mcp"}, "env": map[string]any{}}, entry)
	st, err := os.Stat(filepath.Join(b.home, ".claude.json"))
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o600), st.Mode().Perm(), "~/.claude.json is personal")
	allow := dig(t, readJSON(t, filepath.Join(b.project, ".claude", "settings.local.json")), "permissions", "allow")
	require.Equal(t, []any{"mcp__loopx"}, allow)
	fm, body := frontmatter(t, filepath.Join(b.project, ".claude", "skills", "loopx", "SKILL.md"))
	require.Equal(t, "loopx", fm["name"], "the slash name is the directory's; name matches it")
	require.NotEmpty(t, fm["description"])
	require.Contains(t, fm["allowed-tools"], "mcp__loopx__should_run")
	require.Contains(t, body, "$ARGUMENTS")
	require.Contains(t, body, "/loop /loopx")
	require.Contains(t, body, "scheduler_hint.interval_minutes")
	for _, step := range []string{"should_run", "evidence_add", "refresh_state", "spend_slot"} {
		require.Contains(t, body, step)
	}

	b.install(t, hosts.ClaudeCode, hosts.ScopeUser)
	entry = dig(t, readJSON(t, filepath.Join(b.home, ".claude.json")), "mcpServers", "loopx")
	require.Equal(t, loopxBin, dig(t, entry, "command"))
	require.FileExists(t, filepath.Join(b.home, ".claude", "skills", "loopx", "SKILL.md"))
	require.Equal(t, []any{"mcp__loopx"}, dig(t, readJSON(t, filepath.Join(b.home, ".claude", "settings.json")), "permissions", "allow"))
}

// TestCodexFiles: a [mcp_servers.loopx] table Codex accepts, and the skill ($loopx).
func TestCodexFiles(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := b.params(hosts.Codex, "")
	p.Command = []string{`C:\Program Files\loopx\loopx.exe`, "mcp"} // a literal string keeps the backslashes
	p.LoopxConfigDir = "/srv/cfg/loopx"
	plan, err := hosts.Install(p, b.m)
	require.NoError(t, err)
	require.NoError(t, plan.Apply())
	var cfg struct {
		MCPServers map[string]struct {
			Command           string            `toml:"command"`
			Args              []string          `toml:"args"`
			Env               map[string]string `toml:"env"`
			StartupTimeoutSec float64           `toml:"startup_timeout_sec"`
			ToolTimeoutSec    float64           `toml:"tool_timeout_sec"`
		} `toml:"mcp_servers"`
		Hooks map[string][]struct {
			Hooks []struct {
				Type    string `toml:"type"`
				Command string `toml:"command"`
				Timeout int    `toml:"timeout"`
			} `toml:"hooks"`
		} `toml:"hooks"`
	}
	md, err := toml.DecodeFile(filepath.Join(b.home, ".codex", "config.toml"), &cfg)
	require.NoError(t, err)
	require.Empty(t, md.Undecoded(), "only keys Codex documents")
	s := cfg.MCPServers["loopx"]
	require.Equal(t, `C:\Program Files\loopx\loopx.exe`, s.Command)
	require.Equal(t, []string{"mcp"}, s.Args)
	require.Equal(t, map[string]string{"LOOPX_CONFIG_DIR": "/srv/cfg/loopx"}, s.Env, "Codex passes no LOOPX_ or XDG_ variable to the server")
	require.GreaterOrEqual(t, s.StartupTimeoutSec, 20.0)
	require.Len(t, cfg.Hooks["PermissionRequest"], 1, "Codex's permission hook")
	hook := cfg.Hooks["PermissionRequest"][0].Hooks[0]
	require.Equal(t, "command", hook.Type)
	require.Equal(t, `'C:\Program Files\loopx\loopx.exe' hook permission --host codex --host-timeout 1h0m0s`, hook.Command)
	require.Equal(t, 3600, hook.Timeout)
	fm, body := frontmatter(t, filepath.Join(b.home, ".codex", "skills", "loopx", "SKILL.md"))
	require.Equal(t, "loopx", fm["name"])
	require.NotEmpty(t, fm["description"], "Codex requires name and description")
	require.Contains(t, body, "heartbeat automation")

	b.reload(t)
	b.install(t, hosts.Codex, hosts.ScopeProject)
	_, err = toml.DecodeFile(filepath.Join(b.project, ".codex", "config.toml"), &cfg)
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(b.project, ".agents", "skills", "loopx", "SKILL.md"))
	agents, err := os.ReadFile(filepath.Join(b.project, "AGENTS.md"))
	require.NoError(t, err)
	require.Contains(t, string(agents), "$loopx <task>")
	requireNoGate(t, string(agents))
}

// TestCursorFiles checks the files against Cursor's documented formats: mcp.json
// (mcpServers with command/args), a rule (.mdc: YAML frontmatter with description and a
// boolean alwaysApply) and a command (plain Markdown).
func TestCursorFiles(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.install(t, hosts.Cursor, hosts.ScopeProject)
	doc := readJSON(t, filepath.Join(b.project, ".cursor", "mcp.json"))
	require.Equal(t, []string{"mcpServers"}, keys(doc))
	entry := dig(t, doc, "mcpServers", "loopx").(map[string]any)
	requireSubset(t, keys(entry), []string{"type", "command", "args", "env", "envFile", "url", "headers"}, "cursor mcp server")
	require.Equal(t, "loopx", entry["command"], "a file the project commits names no path of this machine")
	require.Equal(t, []any{"mcp", "--project", "${workspaceFolder}"}, entry["args"])

	fm, body := frontmatter(t, filepath.Join(b.project, ".cursor", "rules", "loopx.mdc"))
	requireSubset(t, keys(fm), []string{"description", "globs", "alwaysApply"}, "cursor rule frontmatter")
	require.Equal(t, true, fm["alwaysApply"], "a boolean: the string \"true\" is not true")
	require.IsType(t, "", fm["description"])
	require.Contains(t, body, "/loopx <task>")
	requireNoGate(t, body)

	cmd, err := os.ReadFile(filepath.Join(b.project, ".cursor", "commands", "loopx.md"))
	require.NoError(t, err)
	require.False(t, strings.HasPrefix(string(cmd), "---"), "Cursor does not read frontmatter in commands")
	require.Contains(t, string(cmd), "should_run")

	b.install(t, hosts.Cursor, hosts.ScopeUser)
	user := dig(t, readJSON(t, filepath.Join(b.home, ".cursor", "mcp.json")), "mcpServers", "loopx", "command").(string)
	require.Equal(t, loopxBin, user)
	require.True(t, filepath.IsAbs(user), "the user's own file: an absolute path, as Cursor may not have the shell's PATH")
	require.FileExists(t, filepath.Join(b.home, ".cursor", "commands", "loopx.md"))
}

// TestOpenCodeFiles checks the files against OpenCode's documented formats: opencode.json
// (only known top-level keys; mcp.loopx with type "local", command as an array of strings,
// enabled) and a command file (frontmatter description; $ARGUMENTS in the template).
func TestOpenCodeFiles(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.install(t, hosts.OpenCode, hosts.ScopeProject)
	doc := readJSON(t, filepath.Join(b.project, "opencode.json"))
	requireSubset(t, keys(doc), []string{"$schema", "mcp", "command", "agent", "instructions", "model", "provider", "tools", "permission", "theme"}, "opencode.json")
	require.Equal(t, "https://opencode.ai/config.json", doc["$schema"])
	entry := dig(t, doc, "mcp", "loopx").(map[string]any)
	requireSubset(t, keys(entry), []string{"type", "command", "environment", "enabled", "timeout", "cwd"}, "opencode local server")
	require.Equal(t, "local", entry["type"], "type is required")
	require.Equal(t, []any{"loopx", "mcp"}, entry["command"], "command is an array of strings, never one string; no machine's path in a committed file")
	require.Equal(t, true, entry["enabled"])

	fm, body := frontmatter(t, filepath.Join(b.project, ".opencode", "commands", "loopx.md"))
	requireSubset(t, keys(fm), []string{"description", "agent", "model", "subtask", "variant"}, "opencode command frontmatter")
	require.NotEmpty(t, fm["description"])
	require.Contains(t, body, "$ARGUMENTS")

	b.install(t, hosts.OpenCode, hosts.ScopeUser)
	require.Equal(t, "local", dig(t, readJSON(t, filepath.Join(b.home, ".config", "opencode", "opencode.json")), "mcp", "loopx", "type"))
	require.FileExists(t, filepath.Join(b.home, ".config", "opencode", "commands", "loopx.md"))
}

// user content in every shared file, in the layout the hosts themselves write (two-space
// JSON), so a round trip can be compared byte for byte.
var userFiles = map[string]string{
	"home/.claude.json": `{
  "numStartups": 4,
  "projects": {
    "/elsewhere": {
      "allowedTools": []
    }
  },
  "mcpServers": {
    "github": {
      "type": "stdio",
      "command": "gh-mcp",
      "args": [],
      "env": {}
    }
  }
}
`,
	"proj/.claude/settings.local.json": `{
  "permissions": {
    "allow": [
      "Bash(ls:*)",
      "mcp__loopx"
    ]
  },
  "model": "opus"
}
`,
	"home/.codex/config.toml": `# mine
model = "o3"

[mcp_servers.docs]
command = "docs-mcp"
`,
	"proj/AGENTS.md": "# Agents\n\nRun `make test` before you push.\n",
	"proj/opencode.json": `{
  "$schema": "https://opencode.ai/config.json",
  "model": "anthropic/claude-sonnet-4",
  "mcp": {
    "docs": {
      "type": "remote",
      "url": "https://docs.example/mcp"
    }
  }
}
`,
	"proj/.cursor/mcp.json": `{
    "mcpServers": {
        "docs": {
            "url": "https://docs.example/mcp"
        }
    }
}
`,
}

func (b *bundle) path(rel string) string {
	root := filepath.Dir(b.home)
	return filepath.Join(root, rel)
}

func (b *bundle) writeUserFiles(t *testing.T) {
	t.Helper()
	for rel, content := range userFiles {
		require.NoError(t, os.MkdirAll(filepath.Dir(b.path(rel)), 0o755))
		require.NoError(t, os.WriteFile(b.path(rel), []byte(content), 0o644))
	}
}

// snapshot maps every file under the test's root to its content.
func (b *bundle) snapshot(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	root := filepath.Dir(b.home)
	require.NoError(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if strings.HasPrefix(rel, filepath.Join("home", ".config")) {
			return nil // the manifest and its folders
		}
		if d.IsDir() {
			out[rel+"/"] = ""
			return nil
		}
		c, err := os.ReadFile(p)
		out[rel] = string(c)
		return err
	}))
	return out
}

// TestInstallMergesIsIdempotentAndUninstallRemovesExactlyIt installs every host into files
// that hold the user's own content: the content stays, a second install changes nothing,
// and uninstall gives back the files as they were, byte for byte, with what the user had
// before (the mcp__loopx permission) kept.
func TestInstallMergesIsIdempotentAndUninstallRemovesExactlyIt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.writeUserFiles(t)
	before := b.snapshot(t)
	installs := []struct{ host, scope string }{
		{hosts.ClaudeCode, hosts.ScopeProject}, {hosts.Codex, hosts.ScopeUser}, {hosts.Codex, hosts.ScopeProject},
		{hosts.Cursor, hosts.ScopeProject}, {hosts.OpenCode, hosts.ScopeProject},
	}
	for _, in := range installs {
		b.install(t, in.host, in.scope)
	}
	claude := readJSON(t, b.path("home/.claude.json"))
	require.EqualValues(t, 4, claude["numStartups"])
	require.Equal(t, "gh-mcp", dig(t, claude, "mcpServers", "github", "command"))
	require.NotNil(t, dig(t, claude, "projects", "/elsewhere"))
	settings := readJSON(t, b.path("proj/.claude/settings.local.json"))
	require.Equal(t, []any{"Bash(ls:*)", "mcp__loopx"}, dig(t, settings, "permissions", "allow"), "no duplicate")
	require.Equal(t, "opus", settings["model"])
	hook := dig(t, settings, "hooks", "PermissionRequest").([]any)
	require.Len(t, hook, 1, "the permission hook, once")
	require.Equal(t, loopxBin+" hook permission --host claude-code --host-timeout 1h0m0s", dig(t, hook[0], "hooks").([]any)[0].(map[string]any)["command"])
	var codex map[string]any
	_, err := toml.DecodeFile(b.path("home/.codex/config.toml"), &codex)
	require.NoError(t, err)
	require.Equal(t, "o3", codex["model"])
	require.Contains(t, dig(t, codex, "mcp_servers"), "docs")
	require.Contains(t, dig(t, codex, "mcp_servers"), "loopx")
	agents, err := os.ReadFile(b.path("proj/AGENTS.md"))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(agents), userFiles["proj/AGENTS.md"]), "the user's text first, unchanged:\n%s", agents)
	oc := readJSON(t, b.path("proj/opencode.json"))
	require.Equal(t, "anthropic/claude-sonnet-4", oc["model"])
	require.Equal(t, "remote", dig(t, oc, "mcp", "docs", "type"))
	cursor, err := os.ReadFile(b.path("proj/.cursor/mcp.json"))
	require.NoError(t, err)
	require.Contains(t, string(cursor), "\n        \"loopx\": {", "the file's four-space indentation is kept")

	installed := b.snapshot(t)
	for _, in := range installs {
		plan, err := hosts.Install(b.params(in.host, in.scope), b.m)
		require.NoError(t, err)
		require.True(t, plan.Empty(), "%s %s: a second install changes nothing:\n%s", in.host, in.scope, plan.Diff())
	}
	require.Equal(t, installed, b.snapshot(t))

	status := hosts.Status(b.m, b.project)
	require.Len(t, status, len(installs))
	for _, s := range status {
		require.Empty(t, s.Missing, "%s %s", s.Host, s.Scope)
	}

	for _, in := range installs {
		b.uninstall(t, in.host, in.scope)
	}
	require.Equal(t, before, b.snapshot(t), "uninstall gives back exactly the files there were")
	require.Empty(t, hosts.Status(b.m, b.project))
}

func TestDryRunPrintsTheDiffAndWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.writeUserFiles(t)
	before := b.snapshot(t)
	plan, err := hosts.Install(b.params(hosts.Codex, hosts.ScopeUser), b.m)
	require.NoError(t, err)
	diff := plan.Diff()
	cfg := b.path("home/.codex/config.toml")
	require.Contains(t, diff, "--- "+cfg+"\n+++ "+cfg+"\n")
	require.Contains(t, diff, "@@ -3,3 +3,17 @@\n \n [mcp_servers.docs]\n command = \"docs-mcp\"\n+\n+# BEGIN loopx")
	require.Contains(t, diff, "+[mcp_servers.loopx]\n")
	require.Contains(t, diff, "--- /dev/null\n+++ "+b.path("home/.codex/skills/loopx/SKILL.md"))
	require.Equal(t, before, b.snapshot(t), "planning writes nothing")
	_, err = os.Stat(b.m.Path())
	require.ErrorIs(t, err, fs.ErrNotExist, "nor the manifest")
}

func TestConflictsAreRefusedAndWriteNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, host, file, content, want string
	}{
		{"claude entry of the same name", hosts.ClaudeCode, "home/.claude.json",
			`{"projects": {"PROJ": {"mcpServers": {"loopx": {"command": "/old/loopx"}}}}}`, "already has projects."},
		{"a skill the user wrote", hosts.ClaudeCode, "proj/.claude/skills/loopx/SKILL.md", "---\nname: loopx\n---\nmine\n", "was not written by loopx"},
		{"codex table of the same name", hosts.Codex, "home/.codex/config.toml", "[mcp_servers.loopx]\ncommand = \"x\"\n", "already defines [mcp_servers.loopx]"},
		{"codex config that does not parse", hosts.Codex, "home/.codex/config.toml", "model = \n", "does not parse"},
		{"JSON with comments", hosts.Cursor, "proj/.cursor/mcp.json", "{\n  // mine\n  \"mcpServers\": {}\n}\n", "not plain JSON"},
		{"a list where an object is", hosts.OpenCode, "proj/opencode.json", `{"mcp": []}`, "is not an object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			real, err := filepath.EvalSymlinks(b.project)
			require.NoError(t, err)
			content := strings.ReplaceAll(tc.content, "PROJ", real)
			require.NoError(t, os.MkdirAll(filepath.Dir(b.path(tc.file)), 0o755))
			require.NoError(t, os.WriteFile(b.path(tc.file), []byte(content), 0o644))
			before := b.snapshot(t)
			_, err = hosts.Install(b.params(tc.host, ""), b.m)
			var ce *hosts.ConflictError
			require.True(t, errors.As(err, &ce), "%v", err)
			require.Contains(t, err.Error(), tc.want)
			require.Equal(t, before, b.snapshot(t))
		})
	}
}

func TestUninstallKeepsWhatTheUserChangedAndReinstallUpdatesOurEntry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.install(t, hosts.ClaudeCode, hosts.ScopeProject)
	skill := filepath.Join(b.project, ".claude", "skills", "loopx", "SKILL.md")
	raw, err := os.ReadFile(skill)
	require.NoError(t, err)
	edited := string(raw) + "\nAlso run the linter.\n"
	require.NoError(t, os.WriteFile(skill, []byte(edited), 0o644))
	status := hosts.Status(b.m, b.project)
	require.Len(t, status, 1)
	require.Equal(t, []string{skill}, status[0].Changed, "changed, not missing")
	require.Empty(t, status[0].Missing)

	// A new binary path: the entry the install wrote is updated, not refused.
	p := b.params(hosts.ClaudeCode, hosts.ScopeProject)
	p.Command = []string{"/usr/local/bin/loopx", "mcp"}
	plan, err := hosts.Install(p, b.m)
	require.NoError(t, err)
	require.Len(t, plan.Changes, 3, "the entry, the permission hook (the new path, replacing the old) and the skill (back to ours)")
	require.NoError(t, plan.Apply())
	b.reload(t)
	real, _ := filepath.EvalSymlinks(b.project)
	require.Equal(t, "/usr/local/bin/loopx", dig(t, readJSON(t, filepath.Join(b.home, ".claude.json")), "projects", real, "mcpServers", "loopx", "command"))

	require.NoError(t, os.WriteFile(skill, []byte(edited), 0o644))
	plan = b.uninstall(t, hosts.ClaudeCode, hosts.ScopeProject)
	require.Equal(t, []string{skill + " (changed since the install)"}, plan.Kept)
	require.FileExists(t, skill)
	_, err = os.Stat(filepath.Join(b.home, ".claude.json"))
	require.ErrorIs(t, err, fs.ErrNotExist, "the install created ~/.claude.json and it is empty again")
}

// TestUninstallKeepsAnEditedBlockAndSaysSo: a Codex table the user edited is kept, and the
// uninstall says where to remove it by hand; status calls it changed, a removed one missing.
func TestUninstallKeepsAnEditedBlockAndSaysSo(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.install(t, hosts.Codex, hosts.ScopeUser)
	cfg := filepath.Join(b.home, ".codex", "config.toml")
	raw, err := os.ReadFile(cfg)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(raw), "# BEGIN loopx\n"), "a short begin line: %q", raw)
	edited := strings.Replace(string(raw), "tool_timeout_sec = 120", "tool_timeout_sec = 600", 1)
	require.NoError(t, os.WriteFile(cfg, []byte(edited), 0o600))
	require.Equal(t, []string{cfg + " (the loopx block)"}, hosts.Status(b.m, b.project)[0].Changed)

	plan := b.uninstall(t, hosts.Codex, hosts.ScopeUser)
	require.Len(t, plan.Kept, 1)
	require.Contains(t, plan.Kept[0], "edited since the install: remove it by hand")
	after, err := os.ReadFile(cfg)
	require.NoError(t, err)
	require.Equal(t, edited, string(after))
}

// TestJSONCRefusalPrintsTheEntry: a file with comments is refused with what to add by hand.
func TestJSONCRefusalPrintsTheEntry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	path := filepath.Join(b.project, ".cursor", "mcp.json")
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte("// mine\n{\"mcpServers\": {}}\n"), 0o644))
	_, err := hosts.Install(b.params(hosts.Cursor, hosts.ScopeProject), b.m)
	var ce *hosts.ConflictError
	require.True(t, errors.As(err, &ce), "%v", err)
	require.Contains(t, err.Error(), "Add this by hand")
	require.Contains(t, err.Error(), "set mcpServers > loopx: {")
	require.Contains(t, err.Error(), `"command": "loopx"`)
}

// requireNoGate: an always-on text (read in every session, for every request) describes the
// tools and never asks for a LoopX turn, should_run or a stop in an ordinary request.
func requireNoGate(t *testing.T, text string) {
	t.Helper()
	for _, re := range gatePhrases {
		require.NotRegexp(t, re, text)
	}
}

var gatePhrases = []*regexp.Regexp{
	regexp.MustCompile(`(?i)should_run`), regexp.MustCompile(`(?i)spend_slot`),
	regexp.MustCompile(`(?i)start every`), regexp.MustCompile(`(?i)work only when`),
	regexp.MustCompile(`(?i)\bstop\b`), regexp.MustCompile(`(?i)governs`),
}

// TestNewHostsFiles: Gemini CLI and Qwen Code get an mcpServers entry and a TOML command
// with {{args}}; Copilot CLI an mcp-config entry (type local, every tool) and a skill; Pi an
// extension that runs the command and a prompt template. Each texts' steps are the loop
// contract's.
func TestNewHostsFiles(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, host := range []string{hosts.Gemini, hosts.Qwen} {
		b.install(t, host, hosts.ScopeProject)
		dir := filepath.Join(b.project, "."+host)
		entry := dig(t, readJSON(t, filepath.Join(dir, "settings.json")), "mcpServers", "loopx").(map[string]any)
		require.Equal(t, "loopx", entry["command"], "a committed file names no path of this machine")
		require.Equal(t, []any{"mcp"}, entry["args"])
		var cmd struct{ Description, Prompt string }
		md, err := toml.DecodeFile(filepath.Join(dir, "commands", "loopx.toml"), &cmd)
		require.NoError(t, err)
		require.Empty(t, md.Undecoded(), "only prompt and description")
		require.Contains(t, cmd.Prompt, "The user's task: {{args}}")
		require.Contains(t, cmd.Prompt, "`should_run`")
		require.NotEmpty(t, cmd.Description)
	}
	b.install(t, hosts.Copilot, hosts.ScopeUser)
	entry := dig(t, readJSON(t, filepath.Join(b.home, ".copilot", "mcp-config.json")), "mcpServers", "loopx").(map[string]any)
	require.Equal(t, map[string]any{"type": "local", "command": loopxBin, "args": []any{"mcp"}, "tools": []any{"*"}}, entry)
	fm, body := frontmatter(t, filepath.Join(b.home, ".copilot", "skills", "loopx", "SKILL.md"))
	require.Equal(t, "loopx", fm["name"])
	require.Contains(t, body, "Run exactly one LoopX turn")

	b.install(t, hosts.Pi, hosts.ScopeUser)
	ext, err := os.ReadFile(filepath.Join(b.home, ".pi", "agent", "extensions", "loopx.ts"))
	require.NoError(t, err)
	require.Contains(t, string(ext), `const COMMAND: string[] = ["`+loopxBin+`","mcp"];`)
	require.True(t, strings.HasPrefix(string(ext), "// LoopX for Pi"), "the marker is not what a reader meets first")
	fm, body = frontmatter(t, filepath.Join(b.home, ".pi", "agent", "prompts", "loopx.md"))
	require.NotEmpty(t, fm["description"])
	require.Contains(t, body, `The user's task: "$ARGUMENTS"`)
	require.Contains(t, body, "loopx_should_run")
}

// TestCommittedFilesNameNoMachinePathAndTheMarkerComesLast installs every host at both
// scopes: no file under the project names this machine's binary (they are usually
// committed), except Claude Code's settings.local.json, which is personal; and no file an
// install writes starts with the marker line, which a model would otherwise read first; every
// file that is not JSON carries it.
func TestCommittedFilesNameNoMachinePathAndTheMarkerComesLast(t *testing.T) {
	t.Parallel()
	for _, host := range hosts.Hosts() {
		t.Run(host, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			var written []string
			for _, scope := range []string{hosts.ScopeProject, hosts.ScopeUser} {
				for _, c := range b.install(t, host, scope).Changes {
					written = append(written, c.Path)
				}
			}
			require.NotEmpty(t, written)
			personal := filepath.Join(b.project, ".claude", "settings.local.json")
			n := 0
			require.NoError(t, filepath.WalkDir(b.project, func(p string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() || p == personal {
					return err
				}
				raw, err := os.ReadFile(p)
				require.NoError(t, err)
				require.NotContains(t, string(raw), loopxBin, "%s is usually committed: no path of this machine", p)
				n++
				return nil
			}))
			require.NotZero(t, n, "the project scope writes into the project")
			for _, p := range written {
				raw, err := os.ReadFile(p)
				require.NoError(t, err)
				first, _, _ := strings.Cut(string(raw), "\n")
				require.NotContains(t, first, hosts.Marker, "%s: the marker is not what a reader meets first", p)
				if filepath.Ext(p) != ".json" { // JSON files are merged member by member, unmarked
					require.Contains(t, string(raw), hosts.Marker, "%s carries the marker", p)
				}
			}
		})
	}
}

// TestStatusSaysMissingOnlyForWhatIsGone: a file the user deleted is missing, one the user
// edited is changed, never missing.
func TestStatusSaysMissingOnlyForWhatIsGone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.install(t, hosts.Codex, hosts.ScopeUser)
	skill := filepath.Join(b.home, ".codex", "skills", "loopx", "SKILL.md")
	cfg := filepath.Join(b.home, ".codex", "config.toml")
	require.NoError(t, os.WriteFile(skill, []byte("mine now\n"), 0o644))
	s := hosts.Status(b.m, b.project)[0]
	require.Equal(t, []string{skill}, s.Changed)
	require.Empty(t, s.Missing)

	require.NoError(t, os.Remove(skill))
	require.NoError(t, os.WriteFile(cfg, []byte("model = \"o3\"\n"), 0o600))
	s = hosts.Status(b.m, b.project)[0]
	require.ElementsMatch(t, []string{skill, cfg + " (the loopx block)"}, s.Missing)
	require.Empty(t, s.Changed)
}
