package hosts

import (
	"fmt"
	"strings"
)

// Marker is the line every file and block an install writes carries: uninstall removes
// only what carries it, and install never overwrites a file without it.
const Marker = "loopx hosts install: managed by loopx; `loopx hosts uninstall` removes it"

// CommandName is the name of the turn command or skill in every host: /loopx, $loopx.
const CommandName = "loopx"

// toolNames are the MCP server's tools, for permission lists.
var toolNames = []string{"should_run", "todo_list", "todo_add", "todo_claim", "todo_update", "todo_finish",
	"evidence_add", "gate_ask", "gate_list", "inbox_drain", "inbox_ack", "inbox_reply", "refresh_state",
	"spend_slot", "goal_status"}

const description = "Run one LoopX-governed turn on this project's goal (should_run first, then one bounded slice of the selected todo, evidence, refresh_state and spend_slot)."

// yamlString writes s as a double-quoted YAML scalar.
func yamlString(s string) string {
	b, _ := marshal(s) // a JSON string is a valid double-quoted YAML scalar
	return string(b)
}

// turnSteps are the steps of one turn, the same for every host. task says where the user's
// task comes from in this host.
func turnSteps(task string) string {
	return `# One LoopX turn

This project's work is governed by LoopX through the ` + "`loopx`" + ` MCP server. Run exactly one turn:

1. Call ` + "`should_run`" + `. If ` + "`should_run`" + ` is false, tell the user its ` + "`next_step`" + ` in one line and stop:
   do not work around a skip and do not spend.
2. If ` + "`inbox.pending`" + ` is more than 0: ` + "`inbox_drain`" + `, answer each message with ` + "`inbox_reply`" + `,
   then ` + "`inbox_ack`" + ` them. People come first.
3. The user's task: ` + task + ` If no todo covers it yet, add it with ` + "`todo_add`" + `
   (` + "`claim: true`" + `) and call ` + "`should_run`" + ` again.
4. ` + "`todo_claim`" + ` the ` + "`selected_todo`" + ` and do one bounded slice of it, nothing else.
5. Need an owner's decision (deploy, spend money, delete data, change the scope)? Call ` + "`gate_ask`" + `
   and do not do it until an owner answers; ` + "`should_run`" + ` lists the answer in ` + "`recent_gates`" + `.
6. Record what you produced with ` + "`evidence_add`" + ` (a link, the command that checks it, or a note),
   and ` + "`todo_finish`" + ` the todo when it is done.
7. Call ` + "`refresh_state`" + ` with ` + "`next_action`" + `: what the next turn should do first.
8. Call ` + "`spend_slot`" + ` once, after the work is validated. Never on a skip.

Every tool error says what to do next; follow it. Retrying a failed call is safe.
`
}

// claudeSkill is .claude/skills/loopx/SKILL.md: /loopx <task>, and /loop /loopx as the
// native loop paced by scheduler_hint.
func claudeSkill() string {
	allowed := make([]string, len(toolNames))
	for i, t := range toolNames {
		allowed[i] = "mcp__loopx__" + t
	}
	return `---
name: ` + CommandName + `
description: ` + yamlString(description+" Use at the start of every turn of a loop on this project.") + `
argument-hint: "[task]"
allowed-tools: ` + strings.Join(allowed, ", ") + `
---
<!-- ` + Marker + ` -->
` + turnSteps(`"$ARGUMENTS" (empty: work on what `+"`should_run`"+` selects).`) + `
## Looping

` + "`/loop /loopx`" + ` (no interval) keeps going at the pace LoopX sets: after each turn, schedule the
next wake-up ` + "`scheduler_hint.interval_minutes`" + ` minutes later (3 to 10 while there is work, 30 to
120 while waiting for an owner), and stop the loop when ` + "`scheduler_hint.action`" + ` is
` + "`stop_until_explicit_resume`" + `. A fixed ` + "`/loop 10m /loopx`" + ` works too: a skip costs nothing.
`
}

// codexSkill is the Codex skill: $loopx, and heartbeat automations paced by scheduler_hint.
func codexSkill() string {
	return `---
name: ` + CommandName + `
description: ` + yamlString(description) + `
---
<!-- ` + Marker + ` -->
` + turnSteps("what the user wrote with `$loopx` (nothing: work on what `should_run` selects).") + `
## Looping

Codex has no built-in timer. Type ` + "`$loopx`" + ` for each turn, or let a heartbeat automation of the
Codex app run ` + "`$loopx`" + `: set its interval to ` + "`scheduler_hint.interval_minutes`" + ` (3 to 10 minutes
while there is work, 30 to 120 while waiting for an owner) and pause it when
` + "`scheduler_hint.action`" + ` is ` + "`stop_until_explicit_resume`" + `.
`
}

// cursorCommand is .cursor/commands/loopx.md: plain Markdown, Cursor reads no frontmatter.
func cursorCommand() string {
	return `<!-- ` + Marker + ` -->
` + turnSteps("what the user wrote after `/loopx` (nothing: work on what `should_run` selects).") + `
Cursor has no built-in loop: run ` + "`/loopx`" + ` again for the next turn, after
` + "`scheduler_hint.interval_minutes`" + ` minutes.
`
}

// cursorRule is .cursor/rules/loopx.mdc, applied to every agent request.
func cursorRule() string {
	return `---
description: "LoopX governs the agent turns of this project"
alwaysApply: true
---
<!-- ` + Marker + ` -->
This project's work is governed by LoopX through the ` + "`loopx`" + ` MCP server. Start every agent turn
with its ` + "`should_run`" + ` tool and work only when it answers should_run=true; end the turn with
` + "`evidence_add`" + `, ` + "`refresh_state`" + ` and ` + "`spend_slot`" + `. The ` + "`/loopx`" + ` command has the steps.
`
}

// openCodeCommand is .opencode/commands/loopx.md: /loopx <task>.
func openCodeCommand() string {
	return `---
description: ` + yamlString(description) + `
---
<!-- ` + Marker + ` -->
` + turnSteps(`"$ARGUMENTS" (empty: work on what `+"`should_run`"+` selects).`) + `
OpenCode has no built-in loop: run ` + "`/loopx`" + ` again for the next turn, after
` + "`scheduler_hint.interval_minutes`" + ` minutes.
`
}

// agentsBlock is the AGENTS.md section Codex (and other hosts) read in every session.
func agentsBlock() string {
	return `## LoopX

This project's work is governed by LoopX through the ` + "`loopx`" + ` MCP server. Start every turn with
its ` + "`should_run`" + ` tool and work only when it answers should_run=true; end the turn with
` + "`evidence_add`" + `, ` + "`refresh_state`" + ` and ` + "`spend_slot`" + `. The ` + "`loopx`" + ` skill (` + "`$loopx`" + `) has the steps.
`
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
	return b.String()
}
