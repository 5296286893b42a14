package hosts

import (
	_ "embed"
	"fmt"
	"strings"
	"time"

	"loopx/templates"
)

// Marker is the line every file and block an install writes carries: uninstall removes
// only what carries it, and install never overwrites a file without it.
const Marker = "loopx hosts install: managed by loopx; `loopx hosts uninstall` removes it"

// CommandName is the name of the turn command or skill in every host: /loopx, $loopx.
const CommandName = "loopx"

// toolNames are the MCP server's tools, for permission lists.
var toolNames = []string{"should_run", "todo_list", "todo_add", "todo_claim", "todo_update", "todo_finish",
	"evidence_add", "gate_ask", "gate_list", "inbox_drain", "inbox_ack", "inbox_reply", "refresh_state",
	"spend_slot", "goal_status", "todo_handoff", "acknowledge"}

// description is what a host lists for the command or skill in every session: it says what
// the command does and never asks for a LoopX turn by itself.
const description = "Run one LoopX turn on this project's goal for the task given (the user's /loopx <task>, or a heartbeat): the task becomes the turn's todo, its evidence and its spent slot."

// yamlString writes s as a double-quoted YAML scalar.
func yamlString(s string) string {
	b, _ := marshal(s) // a JSON string is a valid double-quoted YAML scalar
	return string(b)
}

// managed is the marker line, after the text a model reads first.
func managed() string { return "\n<!-- " + Marker + " -->\n" }

// claudeSkill is .claude/skills/loopx/SKILL.md: /loopx <task>, and /loop /loopx as the
// native loop paced by scheduler_hint.
func claudeSkill() string {
	allowed := make([]string, len(toolNames))
	for i, t := range toolNames {
		allowed[i] = "mcp__loopx__" + t
	}
	return `---
name: ` + CommandName + `
description: ` + yamlString(description) + `
argument-hint: "[task]"
allowed-tools: ` + strings.Join(allowed, ", ") + `
---
` + templates.LoopSteps(templates.LoopCall{Command: "/" + CommandName, Task: `"$ARGUMENTS"`}) + `
## Looping

` + "`/loop /loopx`" + ` (no interval) keeps going at the pace LoopX sets: after each turn, schedule the
next wake-up ` + "`scheduler_hint.interval_minutes`" + ` minutes later (3 to 10 while there is work, 30 to
120 while waiting for an owner), and stop the loop when ` + "`scheduler_hint.action`" + ` is
` + "`stop_until_explicit_resume`" + `. A fixed ` + "`/loop 10m /loopx`" + ` works too: a skip costs nothing.
` + managed()
}

// codexSkill is the Codex skill: $loopx, and heartbeat automations paced by scheduler_hint.
func codexSkill() string {
	return `---
name: ` + CommandName + `
description: ` + yamlString(description) + `
---
` + templates.LoopSteps(templates.LoopCall{Command: "$" + CommandName, Task: "what the user wrote after `$loopx`"}) + `
## Looping

Codex has no built-in timer. Type ` + "`$loopx`" + ` for each turn, or let a heartbeat automation of the
Codex app run ` + "`$loopx`" + `: set its interval to ` + "`scheduler_hint.interval_minutes`" + ` (3 to 10 minutes
while there is work, 30 to 120 while waiting for an owner) and pause it when
` + "`scheduler_hint.action`" + ` is ` + "`stop_until_explicit_resume`" + `.
` + managed()
}

// cursorCommand is .cursor/commands/loopx.md: plain Markdown, Cursor reads no frontmatter.
func cursorCommand() string {
	return templates.LoopSteps(templates.LoopCall{Command: "/" + CommandName, Task: "what the user wrote after `/loopx`"}) + `
Cursor has no built-in loop: run ` + "`/loopx`" + ` again for the next turn, after
` + "`scheduler_hint.interval_minutes`" + ` minutes.
` + managed()
}

// cursorRule is .cursor/rules/loopx.mdc, applied to every agent request: it describes the
// tools and never gates an ordinary request.
func cursorRule() string {
	return `---
description: "What the LoopX tools are for in this project"
alwaysApply: true
---
` + templates.LoopTools("/"+CommandName) + "\n" + managed()
}

// openCodeCommand is .opencode/commands/loopx.md: /loopx <task>.
func openCodeCommand() string {
	return `---
description: ` + yamlString(description) + `
---
` + templates.LoopSteps(templates.LoopCall{Command: "/" + CommandName, Task: `"$ARGUMENTS"`}) + `
OpenCode has no built-in loop: run ` + "`/loopx`" + ` again for the next turn, after
` + "`scheduler_hint.interval_minutes`" + ` minutes.
` + managed()
}

// geminiCommand is .gemini/commands/loopx.toml (and Qwen Code's .qwen/commands/loopx.toml):
// /loopx <task>, the task in {{args}}.
func geminiCommand() string {
	return "description = " + tomlQuote(description) + "\nprompt = '''\n" +
		templates.LoopSteps(templates.LoopCall{Command: "/" + CommandName, Task: "{{args}}"}) +
		"\nThere is no built-in loop: run `/loopx` again for the next turn, after `scheduler_hint.interval_minutes` minutes.\n'''\n" +
		"# " + Marker + "\n"
}

// copilotSkill is the Copilot CLI skill (/loopx).
func copilotSkill() string {
	return `---
name: ` + CommandName + `
description: ` + yamlString(description) + `
---
` + templates.LoopSteps(templates.LoopCall{Command: "/" + CommandName, Task: "what the user wrote after `/loopx`"}) + `
Copilot CLI has no built-in loop: run ` + "`/loopx`" + ` again for the next turn, after
` + "`scheduler_hint.interval_minutes`" + ` minutes.
` + managed()
}

// piPrompt is Pi's prompt template /loopx; the tools are the extension's loopx_<tool>.
func piPrompt() string {
	return `---
description: ` + yamlString(description) + `
argument-hint: "[task]"
---
` + templates.LoopSteps(templates.LoopCall{Command: "/" + CommandName, Task: `"$ARGUMENTS"`}) + `
In Pi the tools are named ` + "`loopx_<tool>`" + ` (` + "`loopx_should_run`" + `, ` + "`loopx_todo_add`" + `, ...): the loopx extension
serves them. Pi has no built-in loop: run ` + "`/loopx`" + ` again for the next turn, after
` + "`scheduler_hint.interval_minutes`" + ` minutes.
` + managed()
}

//go:embed pi_extension.ts
var piExtensionSource string

// piExtension is the Pi extension that runs cmd (loopx mcp) and serves its tools.
func piExtension(cmd []string) string {
	b, _ := marshal(cmd)
	return strings.Replace(piExtensionSource, "__LOOPX_COMMAND__", string(b), 1) + "// " + Marker + "\n"
}

// agentsBlock is the AGENTS.md section Codex (and other hosts) read in every session: what
// the tools are for, never a rule for ordinary requests.
func agentsBlock() string {
	return "## LoopX\n\n" + templates.LoopTools("$"+CommandName) + "\n"
}

// tomlQuote writes s as a TOML string: a literal string when it holds a backslash or a
// quote and no single quote (Windows paths), else a basic string.
func tomlQuote(s string) string {
	if strings.ContainsAny(s, `\"`) && !strings.ContainsAny(s, "'\n") {
		return "'" + s + "'"
	}
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\t", `\t`)
	return `"` + r.Replace(s) + `"`
}

// codexBlock is the [mcp_servers.loopx] table. Codex hands a stdio server only a few
// variables (HOME, PATH, ...), so a config directory other than the default is passed in env.
func codexBlock(argv []string, configDir string) string {
	args := make([]string, len(argv)-1)
	for i, a := range argv[1:] {
		args[i] = tomlQuote(a)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[mcp_servers.%s]\n", ServerName)
	fmt.Fprintf(&b, "command = %s\n", tomlQuote(argv[0]))
	fmt.Fprintf(&b, "args = [%s]\n", strings.Join(args, ", "))
	b.WriteString("startup_timeout_sec = 20\n")
	b.WriteString("tool_timeout_sec = 120\n")
	if configDir != "" {
		fmt.Fprintf(&b, "env = { LOOPX_CONFIG_DIR = %s }\n", tomlQuote(configDir))
	}
	// The permission hook (https://developers.openai.com/codex/hooks): Codex asks it before
	// an approval prompt. Codex runs a hook only once the user trusted it (/hooks).
	b.WriteString("\n[[hooks.PermissionRequest]]\n")
	b.WriteString("[[hooks.PermissionRequest.hooks]]\n")
	b.WriteString("type = \"command\"\n")
	fmt.Fprintf(&b, "command = %s\n", tomlQuote(permissionHook(argv, Codex)))
	fmt.Fprintf(&b, "timeout = %d\n", int(PermissionHookTimeout/time.Second))
	return b.String()
}
