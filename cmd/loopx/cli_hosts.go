package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"loopx/hosts"
	"loopx/hosts/project"
)

func (a *app) hostsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "hosts",
		Short: "Install LoopX into an agent host: its MCP server entry and the /loopx turn command",
		Long: `Write, for one agent host (Claude Code, Codex, Cursor, OpenCode, Gemini CLI, Qwen Code,
GitHub Copilot CLI, Pi), the entry that runs "loopx mcp" (Pi: an extension that runs it) and
the host's own turn command (/loopx; the $loopx skill in Codex), whose steps open a LoopX turn
on the task with should_run and end it with evidence, refresh_state and spend_slot. For
Claude Code and Codex it also adds the permission hook (loopx hook permission): the host's
permission prompts become cards the goal's owners answer in Lark.

Shared files are merged, never overwritten; a second install changes nothing; --dry-run
prints the diff instead; uninstall removes exactly what the install added (recorded in the
user's config directory). No token is written anywhere: loopx mcp reads the agent's token
that loopx connect stored. docs/hosts.md lists every file per host.`,
		Example: `  loopx hosts install --host claude-code
  loopx hosts install --host codex --dry-run
  loopx hosts status
  loopx hosts uninstall --host claude-code`,
	}
	var host, scope, dir, command string
	var dryRun bool
	common := func(c *cobra.Command, withHost bool) {
		c.Flags().StringVar(&dir, "project", "", "the project's root folder (default: the connected project, else the current folder)")
		if withHost {
			c.Flags().StringVar(&host, "host", "", strings.Join(hosts.Hosts(), ", "))
			_ = c.MarkFlagRequired("host")
			c.Flags().StringVar(&scope, "scope", "", "project (the project's files) or user (your home; every project). Default: project; user for codex and qwen")
			c.Flags().BoolVar(&dryRun, "dry-run", false, "print the diff of what would change and change nothing")
		}
	}

	install := &cobra.Command{
		Use:   "install",
		Short: "Write the host's loopx MCP entry and its /loopx command",
		Example: `  loopx hosts install --host claude-code
  loopx hosts install --host codex --scope project --dry-run
  loopx hosts install --host opencode --command loopx   # rely on PATH instead of this binary's path`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			p, m, err := a.hostParams(host, scope, dir, command)
			if err != nil {
				return err
			}
			plan, err := hosts.Install(p, m)
			if err != nil {
				return hostErr(err)
			}
			return a.finishHosts(plan, m, dryRun, "install", nextSteps(p))
		},
	}
	common(install, true)
	install.Flags().StringVar(&command, "command", "", "the loopx binary the host runs (default: this binary's absolute path)")

	uninstall := &cobra.Command{
		Use:     "uninstall",
		Short:   "Remove exactly what loopx hosts install added for the host",
		Example: `  loopx hosts uninstall --host claude-code --dry-run`,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			p, m, err := a.hostParams(host, scope, dir, "-")
			if err != nil {
				return err
			}
			plan, err := hosts.Uninstall(p.Host, p.Scope, p.Project, m)
			if err != nil {
				return hostErr(err)
			}
			return a.finishHosts(plan, m, dryRun, "uninstall", "")
		},
	}
	common(uninstall, true)

	status := &cobra.Command{
		Use:     "status",
		Short:   "Show which hosts have LoopX installed for this project, and where",
		Example: `  loopx hosts status --format json`,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			p, m, err := a.hostParams(hosts.ClaudeCode, "", dir, "-")
			if err != nil {
				return err
			}
			list := hosts.Status(m, p.Project)
			_, conn, found, _ := a.connection()
			if a.format == "json" {
				out := map[string]any{"project": p.Project, "installs": list, "manifest": m.Path(), "connected": found}
				if found {
					out["connection"] = conn
				}
				writeJSONTo(a.stdout, out)
				return nil
			}
			printHostsStatus(a.stdout, p.Project, list, found, conn)
			return nil
		},
	}
	common(status, false)
	cmd.AddCommand(install, uninstall, status)
	return cmd
}

// hostParams resolves the project folder, the user's folders and the server command.
func (a *app) hostParams(host, scope, dir, command string) (hosts.Params, *hosts.Manifest, error) {
	if err := a.useProjectDir(dir); err != nil {
		return hosts.Params{}, nil, err
	}
	root, _, found, err := a.connection()
	if err != nil {
		return hosts.Params{}, nil, err
	}
	if !found {
		if root, err = a.workDir(); err != nil {
			return hosts.Params{}, nil, err
		}
	}
	cfg, err := project.ConfigDir(a.getenv)
	if err != nil {
		return hosts.Params{}, nil, usageError{err}
	}
	p := hosts.Params{Host: host, Scope: scope, Project: root, Home: a.getenv("HOME"),
		XDGConfigHome: a.getenv("XDG_CONFIG_HOME"), CodexHome: a.getenv("CODEX_HOME"), CopilotHome: a.getenv("COPILOT_HOME")}
	if p.Scope == "" {
		p.Scope = hosts.DefaultScope(host)
	}
	if def := filepath.Join(p.Home, ".config", "loopx"); cfg != def {
		p.LoopxConfigDir = cfg
	}
	switch command {
	case "-": // not needed
		p.Command = []string{"loopx", "mcp"}
	case "":
		exe, err := os.Executable()
		if err != nil {
			return p, nil, fmt.Errorf("find this binary (pass --command): %w", err)
		}
		p.Command = []string{exe, "mcp"}
		p.SharedCommand = []string{"loopx", "mcp"} // files a project commits name no machine's path
	default:
		if strings.ContainsRune(command, os.PathSeparator) {
			if command, err = filepath.Abs(command); err != nil {
				return p, nil, usageError{fmt.Errorf("--command: %w", err)}
			}
		}
		p.Command = []string{command, "mcp"}
	}
	m, err := hosts.LoadManifest(cfg)
	if err != nil {
		return p, nil, err
	}
	return p, m, nil
}

// hostErr: a conflict with the user's files is the state refusing (exit 1); a bad flag is
// usage (exit 2).
func hostErr(err error) error {
	var ce *hosts.ConflictError
	if errors.As(err, &ce) {
		return err
	}
	return usageError{err}
}

func (a *app) finishHosts(plan *hosts.Plan, m *hosts.Manifest, dryRun bool, verb, next string) error {
	if !dryRun && !plan.Empty() {
		if err := plan.Apply(); err != nil {
			return err
		}
	}
	type change struct {
		Path   string `json:"path"`
		Action string `json:"action"`
	}
	var changes []change
	for _, c := range plan.Changes {
		action := "update"
		switch {
		case c.Old == nil:
			action = "create"
		case c.New == nil:
			action = "remove"
		}
		changes = append(changes, change{Path: c.Path, Action: action})
	}
	if a.format == "json" {
		out := map[string]any{"host": plan.Host, "scope": plan.Scope, "verb": verb, "dry_run": dryRun,
			"changes": changes, "kept": plan.Kept, "manifest": m.Path()}
		if dryRun {
			out["diff"] = plan.Diff()
		}
		writeJSONTo(a.stdout, out)
		return nil
	}
	w := a.stdout
	if dryRun {
		if plan.Empty() {
			fmt.Fprintf(w, "%s %s (%s scope): nothing would change\n", verb, plan.Host, plan.Scope)
			return nil
		}
		fmt.Fprint(w, plan.Diff())
		return nil
	}
	switch {
	case plan.Empty() && verb == "install":
		fmt.Fprintf(w, "%s (%s scope) is installed; nothing changed.\n", plan.Host, plan.Scope)
	case plan.Empty():
		fmt.Fprintf(w, "nothing recorded as installed for %s (%s scope) here; nothing changed.\n", plan.Host, plan.Scope)
	default:
		fmt.Fprintf(w, "%s %s (%s scope):\n", verb, plan.Host, plan.Scope)
		for _, c := range changes {
			fmt.Fprintf(w, "  %-7s %s\n", c.Action, c.Path)
		}
		fmt.Fprintf(w, "  recorded in %s\n", m.Path())
	}
	for _, k := range plan.Kept {
		fmt.Fprintf(w, "  kept    %s\n", k)
	}
	if next != "" {
		fmt.Fprintln(w, next)
	}
	return nil
}

// nextSteps tells the user how to start a turn in the host just installed.
func nextSteps(p hosts.Params) string {
	var s string
	switch p.Host {
	case hosts.ClaudeCode:
		s = "Next: start claude in the project (claude mcp list shows loopx connected); /loopx <task> runs one turn, /loop /loopx keeps going at LoopX's pace."
		if p.Scope == hosts.ScopeProject {
			s += "\nThe server entry is yours alone (~/.claude.json, this project); keep .claude/settings.local.json out of git."
		}
	case hosts.Codex:
		s = "Next: codex mcp list shows loopx; in the project, type $loopx <task> for a turn."
		if p.Scope == hosts.ScopeProject {
			s += "\nCodex reads .codex/config.toml only in a trusted project: trust it once (codex exec --trust, or [projects.\"" + p.Project + "\"] trust_level = \"trusted\" in ~/.codex/config.toml)."
		}
	case hosts.Cursor:
		s = "Next: open the project in Cursor, turn the loopx server on in Settings > MCP (Tools & MCP), then /loopx <task> in the agent chat."
	case hosts.OpenCode:
		s = "Next: opencode mcp list shows loopx connected; /loopx <task> runs a turn."
	case hosts.Gemini:
		s = "Next: gemini mcp list shows loopx connected once you trust this folder (gemini asks at its first start); /loopx <task> runs a turn."
	case hosts.Qwen:
		s = "Next: qwen mcp list shows loopx connected; /loopx <task> runs a turn."
		if p.Scope == hosts.ScopeProject {
			s += " Qwen Code holds a project's servers until you approve them: qwen mcp approve loopx."
		}
	case hosts.Copilot:
		s = "Next: copilot mcp list shows loopx, copilot skill list shows the loopx skill; /loopx <task> runs a turn."
		if p.Scope == hosts.ScopeProject {
			s += " Copilot reads .github/mcp.json once you trust this folder (copilot asks at its first start)."
		}
	case hosts.Pi:
		s = "Next: start pi in the project: the loopx extension serves the tools (loopx_should_run, ...); /loopx <task> runs a turn."
	}
	if p.Scope == hosts.ScopeProject && p.Host != hosts.ClaudeCode && len(p.SharedCommand) > 0 && p.SharedCommand[0] == "loopx" {
		if _, err := exec.LookPath("loopx"); err != nil {
			s += "\nThe project's files run `loopx mcp` from PATH (they are usually committed, so they name no path of this machine), and loopx is not on PATH here: put it there, or pass --command with its path."
		}
	}
	if _, err := project.Load(p.Project); err != nil {
		s += "\nThis folder is not connected yet: run loopx connect here, or loopx mcp has no goal to work on."
	}
	return s
}

func printHostsStatus(w io.Writer, root string, list []hosts.Installed, connected bool, conn project.Connection) {
	if connected {
		fmt.Fprintf(w, "project %s: connected to goal %s as agent %s at %s\n", root, conn.GoalID, conn.AgentID, conn.ServerURL)
	} else {
		fmt.Fprintf(w, "project %s: not connected (run loopx connect)\n", root)
	}
	installed := map[string]bool{}
	for _, in := range list {
		installed[in.Host] = true
		state := "installed"
		if len(in.Missing)+len(in.Changed) > 0 {
			state = "changed since the install"
		}
		fmt.Fprintf(w, "%-12s %-8s %s, runs %s\n", in.Host, in.Scope, state, strings.Join(in.Command, " "))
		for _, f := range in.Files {
			fmt.Fprintf(w, "    %s\n", f)
		}
		for _, m := range in.Missing {
			fmt.Fprintf(w, "    missing: %s\n", m)
		}
		for _, c := range in.Changed {
			fmt.Fprintf(w, "    changed: %s\n", c)
		}
	}
	for _, h := range hosts.Hosts() {
		if !installed[h] {
			fmt.Fprintf(w, "%-12s -        not installed (loopx hosts install --host %s)\n", h, h)
		}
	}
}
