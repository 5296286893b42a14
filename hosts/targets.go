package hosts

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Host names.
const (
	ClaudeCode = "claude-code"
	Codex      = "codex"
	Cursor     = "cursor"
	OpenCode   = "opencode"
	Gemini     = "gemini" // Gemini CLI
	Qwen       = "qwen"   // Qwen Code
	Copilot    = "copilot"
	Pi         = "pi"
)

// Hosts lists the hosts an install knows, in the order status shows them.
func Hosts() []string {
	return []string{ClaudeCode, Codex, Cursor, OpenCode, Gemini, Qwen, Copilot, Pi}
}

// Scopes.
const (
	ScopeProject = "project" // files in the project (the host's project configuration)
	ScopeUser    = "user"    // files in the user's home (every project of that user)
)

// ServerName is the MCP server's name in every host's configuration.
const ServerName = "loopx"

// DefaultScope is where a host's entry goes when --scope is not given: the project, except
// for Codex, which reads a project's .codex/config.toml only once the project is trusted, and
// Qwen Code, which holds a project's servers until the user approves them (qwen mcp approve).
func DefaultScope(host string) string {
	if host == Codex || host == Qwen {
		return ScopeUser
	}
	return ScopeProject
}

// Params say what to install where.
type Params struct {
	Host  string
	Scope string // "" = DefaultScope(Host)
	// Project is the project's root folder (absolute).
	Project string
	// Home is the user's home; XDGConfigHome ("" = Home/.config), CodexHome ("" =
	// Home/.codex) and CopilotHome ("" = Home/.copilot) are the hosts' own overrides.
	Home, XDGConfigHome, CodexHome, CopilotHome string
	// Command is the MCP server's argv: the loopx binary (absolute, so a host started from a
	// GUI without the shell's PATH finds it) and "mcp".
	Command []string
	// SharedCommand is the argv for files a project usually commits (Cursor's and OpenCode's
	// project config, a project's .codex/config.toml): no machine's path, "loopx" on PATH,
	// unless the user gave --command. Empty: Command.
	SharedCommand []string
	// LoopxConfigDir is where loopx keeps tokens when that is not Home/.config/loopx; hosts
	// that filter the server's environment (Codex) are told it.
	LoopxConfigDir string
}

func (p Params) scope() string {
	if p.Scope == "" {
		return DefaultScope(p.Host)
	}
	return p.Scope
}

func (p Params) check() error {
	if !slices.Contains(Hosts(), p.Host) {
		return fmt.Errorf("--host: %q is not one of %s", p.Host, strings.Join(Hosts(), ", "))
	}
	if s := p.scope(); s != ScopeProject && s != ScopeUser {
		return fmt.Errorf("--scope: %q is not project or user", s)
	}
	if p.Home == "" {
		return fmt.Errorf("no home folder: set HOME")
	}
	if !filepath.IsAbs(p.Project) {
		return fmt.Errorf("project folder %q is not an absolute path", p.Project)
	}
	if len(p.Command) == 0 || p.Command[0] == "" {
		return fmt.Errorf("no command for the MCP server")
	}
	return nil
}

// File kinds.
const (
	kindJSON     = "json"     // merged member by member
	kindTOML     = "toml"     // one marked block
	kindMarkdown = "markdown" // one marked block
	kindOwned    = "owned"    // the whole file is ours
)

// fileSpec is what one host wants in one file.
type fileSpec struct {
	path  string
	kind  string
	items []Item
	mode  os.FileMode // of a file created
}

// Item kinds.
const (
	itemSet    = "json_set"    // an object member with a value
	itemAppend = "json_append" // a string in an array
	itemBlock  = "block"       // a marked block of text
	itemFile   = "file"        // a whole file
)

// Item is one thing an install puts in a file.
type Item struct {
	Kind string   `json:"kind"`
	Keys []string `json:"keys,omitempty"` // json: the members leading to the value or array
	// Value is json_set's value, or json_append's string, as JSON.
	Value []byte `json:"value,omitempty"`
	// Text is a block's or a file's content.
	Text string `json:"text,omitempty"`
	// OnlyNew: set only in a file the install creates (opencode.json's $schema).
	OnlyNew bool `json:"only_new,omitempty"`
	// Mine: the install added it (false: it was there before, and stays on uninstall).
	Mine bool `json:"mine"`
	// Created counts the objects along Keys (all but the last), from the innermost, that the
	// install created;
	// CreatedList: json_append created the list.
	Created     int  `json:"created,omitempty"`
	CreatedList bool `json:"created_list,omitempty"`
}

func set(keys []string, v any) Item {
	b, _ := marshal(v)
	return Item{Kind: itemSet, Keys: keys, Value: b}
}

func appendStr(keys []string, s string) Item {
	b, _ := marshal(s)
	return Item{Kind: itemAppend, Keys: keys, Value: b}
}

func appendVal(keys []string, v any) Item {
	b, _ := marshal(v)
	return Item{Kind: itemAppend, Keys: keys, Value: b}
}

// PermissionHookTimeout is how long a host lets `loopx hook permission` wait for an owner
// (its hook timeout); the hook answers before it. A goal whose limit is longer is cut to it.
const PermissionHookTimeout = time.Hour

// permissionHook is the host's command line for the permission hook.
func permissionHook(cmd []string, host string) string {
	return shellQuote(cmd[0]) + " hook permission --host " + host + " --host-timeout " + PermissionHookTimeout.String()
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+:@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// claudeHooks is the settings' hooks entry for Claude Code's PermissionRequest event
// (https://code.claude.com/docs/en/hooks): every tool, our command, our timeout in seconds.
func claudeHooks(cmd []string) Item {
	return appendVal([]string{"hooks", "PermissionRequest"}, map[string]any{
		"matcher": "*",
		"hooks": []any{map[string]any{"type": "command", "command": permissionHook(cmd, ClaudeCode),
			"timeout": int(PermissionHookTimeout / time.Second)}},
	})
}

// specs lists the files of one host and scope.
func specs(p Params) []fileSpec {
	cmd := p.Command
	shared := p.SharedCommand
	if len(shared) == 0 {
		shared = cmd
	}
	if p.scope() == ScopeProject && p.Host != ClaudeCode {
		cmd = shared // Claude's project entry lives in the user's own ~/.claude.json
	}
	xdg := p.XDGConfigHome
	if xdg == "" {
		xdg = filepath.Join(p.Home, ".config")
	}
	codexHome := p.CodexHome
	if codexHome == "" {
		codexHome = filepath.Join(p.Home, ".codex")
	}
	owned := func(path, text string) fileSpec {
		return fileSpec{path: path, kind: kindOwned, mode: 0o644, items: []Item{{Kind: itemFile, Text: text}}}
	}
	proj := p.scope() == ScopeProject
	switch p.Host {
	case ClaudeCode:
		// https://code.claude.com/docs/en/mcp (scopes), /settings (permissions), /skills.
		// Project scope is Claude's "local" scope: the entry is personal to this project and
		// lives in ~/.claude.json, so the repository holds no machine path and Claude asks
		// no approval (a .mcp.json server waits for one, which a repository cannot give).
		entry := stdioEntry{Type: "stdio", Command: cmd[0], Args: cmd[1:], Env: map[string]string{}}
		if proj {
			return []fileSpec{
				{path: filepath.Join(p.Home, ".claude.json"), kind: kindJSON, mode: 0o600,
					items: []Item{set([]string{"projects", p.claudeProject(), "mcpServers", ServerName}, entry)}},
				{path: filepath.Join(p.Project, ".claude", "settings.local.json"), kind: kindJSON, mode: 0o644,
					items: []Item{appendStr([]string{"permissions", "allow"}, "mcp__"+ServerName), claudeHooks(cmd)}},
				owned(filepath.Join(p.Project, ".claude", "skills", CommandName, "SKILL.md"), claudeSkill()),
			}
		}
		return []fileSpec{
			{path: filepath.Join(p.Home, ".claude.json"), kind: kindJSON, mode: 0o600,
				items: []Item{set([]string{"mcpServers", ServerName}, entry)}},
			{path: filepath.Join(p.Home, ".claude", "settings.json"), kind: kindJSON, mode: 0o644,
				items: []Item{appendStr([]string{"permissions", "allow"}, "mcp__"+ServerName), claudeHooks(cmd)}},
			owned(filepath.Join(p.Home, ".claude", "skills", CommandName, "SKILL.md"), claudeSkill()),
		}
	case Codex:
		// https://developers.openai.com/codex/config-basic, /codex/skills,
		// /codex/guides/agents-md.
		block := Item{Kind: itemBlock, Text: codexBlock(cmd, p.LoopxConfigDir)}
		if proj {
			return []fileSpec{
				{path: filepath.Join(p.Project, ".codex", "config.toml"), kind: kindTOML, mode: 0o644, items: []Item{block}},
				owned(filepath.Join(p.Project, ".agents", "skills", CommandName, "SKILL.md"), codexSkill()),
				{path: filepath.Join(p.Project, "AGENTS.md"), kind: kindMarkdown, mode: 0o644,
					items: []Item{{Kind: itemBlock, Text: agentsBlock()}}},
			}
		}
		return []fileSpec{
			{path: filepath.Join(codexHome, "config.toml"), kind: kindTOML, mode: 0o600, items: []Item{block}},
			owned(filepath.Join(codexHome, "skills", CommandName, "SKILL.md"), codexSkill()),
		}
	case Cursor:
		// https://cursor.com/docs/context/mcp, /docs/context/rules, /docs/agent/chat/commands.
		// The server's folder is not documented for stdio servers: pass the workspace.
		args := append(append([]string{}, cmd[1:]...), "--project", "${workspaceFolder}")
		entry := cursorEntry{Command: cmd[0], Args: args}
		if proj {
			return []fileSpec{
				{path: filepath.Join(p.Project, ".cursor", "mcp.json"), kind: kindJSON, mode: 0o644,
					items: []Item{set([]string{"mcpServers", ServerName}, entry)}},
				owned(filepath.Join(p.Project, ".cursor", "rules", CommandName+".mdc"), cursorRule()),
				owned(filepath.Join(p.Project, ".cursor", "commands", CommandName+".md"), cursorCommand()),
			}
		}
		return []fileSpec{
			{path: filepath.Join(p.Home, ".cursor", "mcp.json"), kind: kindJSON, mode: 0o644,
				items: []Item{set([]string{"mcpServers", ServerName}, entry)}},
			owned(filepath.Join(p.Home, ".cursor", "commands", CommandName+".md"), cursorCommand()),
		}
	case Gemini, Qwen:
		// Gemini CLI: https://geminicli.com/docs/tools/mcp-server/ and /docs/cli/custom-commands/;
		// Qwen Code reads the same files under .qwen (https://qwenlm.github.io/qwen-code-docs/).
		dir := filepath.Join(p.Home, "."+p.Host)
		if proj {
			dir = filepath.Join(p.Project, "."+p.Host)
		}
		return []fileSpec{
			{path: filepath.Join(dir, "settings.json"), kind: kindJSON, mode: 0o644,
				items: []Item{set([]string{"mcpServers", ServerName}, geminiEntry{Command: cmd[0], Args: cmd[1:], Trust: true})}},
			owned(filepath.Join(dir, "commands", CommandName+".toml"), geminiCommand()),
		}
	case Copilot:
		// https://docs.github.com/en/copilot/how-tos/copilot-cli (copilot mcp --help, copilot
		// skill --help): user servers in ~/.copilot/mcp-config.json, workspace ones in
		// .github/mcp.json; skills in ~/.copilot/skills or .github/skills.
		home := p.CopilotHome
		if home == "" {
			home = filepath.Join(p.Home, ".copilot")
		}
		entry := copilotEntry{Type: "local", Command: cmd[0], Args: cmd[1:], Tools: []string{"*"}}
		if proj {
			return []fileSpec{
				{path: filepath.Join(p.Project, ".github", "mcp.json"), kind: kindJSON, mode: 0o644,
					items: []Item{set([]string{"mcpServers", ServerName}, entry)}},
				owned(filepath.Join(p.Project, ".github", "skills", CommandName, "SKILL.md"), copilotSkill()),
			}
		}
		return []fileSpec{
			{path: filepath.Join(home, "mcp-config.json"), kind: kindJSON, mode: 0o600,
				items: []Item{set([]string{"mcpServers", ServerName}, entry)}},
			owned(filepath.Join(home, "skills", CommandName, "SKILL.md"), copilotSkill()),
		}
	case Pi:
		// Pi has no MCP client by design: an extension (docs/extensions.md of the package)
		// is one for loopx mcp, and a prompt template (docs/prompt-templates.md) is /loopx.
		dir := filepath.Join(p.Home, ".pi", "agent")
		if proj {
			dir = filepath.Join(p.Project, ".pi")
		}
		return []fileSpec{
			owned(filepath.Join(dir, "extensions", CommandName+".ts"), piExtension(cmd)),
			owned(filepath.Join(dir, "prompts", CommandName+".md"), piPrompt()),
		}
	case OpenCode:
		// https://opencode.ai/docs/mcp-servers/, /docs/config/, /docs/commands/.
		entry := openCodeEntry{Type: "local", Command: cmd, Enabled: true}
		dir := p.Project
		cmdDir := filepath.Join(p.Project, ".opencode", "commands")
		if !proj {
			dir = filepath.Join(xdg, "opencode")
			cmdDir = filepath.Join(dir, "commands")
		}
		return []fileSpec{
			{path: openCodeConfig(dir), kind: kindJSON, mode: 0o644, items: []Item{
				{Kind: itemSet, Keys: []string{"$schema"}, Value: []byte(`"https://opencode.ai/config.json"`), OnlyNew: true},
				set([]string{"mcp", ServerName}, entry),
			}},
			owned(filepath.Join(cmdDir, CommandName+".md"), openCodeCommand()),
		}
	}
	return nil
}

// Server entries, with their members in the order the hosts' documentation shows them.
type stdioEntry struct {
	Type    string            `json:"type"`
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env"`
}

type cursorEntry struct {
	Command string   `json:"command"`
	Args    []string `json:"args"`
}

type geminiEntry struct {
	Command string   `json:"command"`
	Args    []string `json:"args"`
	// Trust: the loopx tools run without a confirmation each (like Claude Code's allow rule).
	Trust bool `json:"trust"`
}

type copilotEntry struct {
	Type    string   `json:"type"`
	Command string   `json:"command"`
	Args    []string `json:"args"`
	Tools   []string `json:"tools"`
}

type openCodeEntry struct {
	Type    string   `json:"type"`
	Command []string `json:"command"`
	Enabled bool     `json:"enabled"`
}

// claudeProject is the key Claude Code files the project under: its real path.
func (p Params) claudeProject() string {
	if real, err := filepath.EvalSymlinks(p.Project); err == nil {
		return real
	}
	return p.Project
}

// openCodeConfig is the folder's opencode.json, or its opencode.jsonc when only that exists.
func openCodeConfig(dir string) string {
	json, jsonc := filepath.Join(dir, "opencode.json"), filepath.Join(dir, "opencode.jsonc")
	if _, err := os.Stat(json); err != nil {
		if _, err := os.Stat(jsonc); err == nil {
			return jsonc
		}
	}
	return json
}
