package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"loopx/api"
	"loopx/api/client"
	"loopx/mcp"
	"loopx/store"
)

func (a *app) hookCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "hook",
		Short:   "Commands an agent host runs as its hooks (loopx hosts install adds them)",
		Example: `  loopx hook permission --host claude-code < request.json`,
	}
	var host string
	var hostTimeout time.Duration
	perm := &cobra.Command{
		Use:   "permission",
		Short: "Answer a host's permission prompt from Lark: ask the goal's owners with a card, wait, answer the host",
		Long: `Run as the host's permission hook (Claude Code's and Codex's PermissionRequest): read the
hook's JSON on stdin (the tool and its arguments), ask the owners of the project's goal with a
permission card (Allow once, Allow for this turn, Deny) unless the goal's rules allow or deny
the tool outright, wait for an answer up to the goal's limit (default 10 minutes), and print
the host's decision JSON. Nobody answered: deny, with a message that says so.

In a folder that is not connected to LoopX, or when the server cannot be reached, it decides
nothing (prints nothing, exits 0): the host asks as it always does.`,
		Example: `  loopx hook permission --host claude-code < request.json`,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return a.permissionHook(c.Context(), host, hostTimeout)
		},
	}
	perm.Flags().StringVar(&host, "host", "claude-code", "the host that runs the hook: claude-code or codex")
	perm.Flags().DurationVar(&hostTimeout, "host-timeout", time.Hour, "how long the host lets the hook run (its hook timeout); the hook answers before it")
	cmd.AddCommand(perm)
	return cmd
}

// hookInput is what Claude Code and Codex send a PermissionRequest hook (the members both
// share, and Codex's turn id).
type hookInput struct {
	HookEventName string          `json:"hook_event_name"`
	SessionID     string          `json:"session_id"`
	TurnID        string          `json:"turn_id"`
	Cwd           string          `json:"cwd"`
	ToolName      string          `json:"tool_name"`
	ToolInput     json.RawMessage `json:"tool_input"`
}

// hookDecision is the hook's answer, in the shape both hosts read.
type hookDecision struct {
	HookSpecificOutput struct {
		HookEventName string `json:"hookEventName"`
		Decision      struct {
			Behavior string `json:"behavior"`
			Message  string `json:"message,omitempty"`
			// UpdatedPermissions (Claude Code only; Codex refuses it) keeps an "allow for this
			// turn" for the rest of the session.
			UpdatedPermissions []any `json:"updatedPermissions,omitempty"`
		} `json:"decision"`
	} `json:"hookSpecificOutput"`
}

func (a *app) permissionHook(ctx context.Context, host string, hostTimeout time.Duration) error {
	if host != "claude-code" && host != "codex" {
		return usageError{fmt.Errorf("--host: %q is not claude-code or codex", host)}
	}
	raw, err := io.ReadAll(io.LimitReader(a.stdin, 4<<20))
	if err != nil {
		return fmt.Errorf("read the hook's input: %w", err)
	}
	var in hookInput
	if err := json.Unmarshal(raw, &in); err != nil || in.ToolName == "" {
		return usageError{fmt.Errorf("the hook's input on stdin is not a permission request (JSON with tool_name): %v", err)}
	}
	start := time.Now()
	if in.Cwd != "" {
		_ = a.useProjectDir(in.Cwd)
	}
	var opts mcp.Options
	a.agentConnection(&opts)
	if opts.API == nil {
		// Not a LoopX project (or no token here): the host asks as usual.
		fmt.Fprintf(a.stderr, "loopx hook permission: not deciding (%s)\n", opts.Unconnected)
		return nil
	}
	c := opts.API.(*client.Client)
	goal, agent := opts.GoalID, opts.AgentID
	req := store.PermissionRequest{Host: host, Tool: in.ToolName, Summary: summarize(in.ToolName, in.ToolInput),
		Folder: in.Cwd, Turn: hookTurn(ctx, c, goal, agent, in)}
	if paths := writtenPaths(in.ToolName, in.ToolInput); len(paths) > 0 {
		// The server checks them against the goal's scope, whose patterns are relative to
		// the project folder (the connection's; the host's folder without one).
		root, _, found, _ := a.connection()
		if !found {
			root = cmpDir(in.Cwd, a.dir)
		}
		req.Paths = projectPaths(root, in.Cwd, paths)
	}
	var ans store.PermissionAnswer
	err = c.DoJSON(ctx, client.Request{Method: http.MethodPost, Path: client.GoalPath(goal, "permissions"),
		Body: api.PermissionBody{AgentID: agent, PermissionRequest: req}, IdempotencyKey: a.key()}, &ans)
	if err != nil {
		fmt.Fprintf(a.stderr, "loopx hook permission: not deciding: %v\n", err)
		return nil
	}
	switch ans.Decision {
	case store.PermitAllow:
		return a.writeHookDecision(store.PermitAllow, "", host, in.ToolName, false)
	case store.PermitDeny:
		if ans.Reason == "scope_protected" {
			return a.writeHookDecision(store.PermitDeny, fmt.Sprintf("The goal %q's scope protects %s, so LoopX denies writing there without asking its owners. "+
				"Do not change those files another way (another tool, a shell command); leave them as they are and tell the user if the work needs them changed "+
				"(an owner can change the scope).", goal, strings.Join(ans.Protected, ", ")), host, in.ToolName, false)
		}
		return a.writeHookDecision(store.PermitDeny, fmt.Sprintf("The goal %q's rules deny %s without asking; do not try it another way. Tell the user if the work needs it.", goal, in.ToolName), host, in.ToolName, false)
	}
	g := *ans.Gate
	deadline := *ans.ExpiresAt
	if hostLimit := start.Add(hostTimeout - 30*time.Second); hostLimit.Before(deadline) {
		deadline = hostLimit
	}
	fmt.Fprintf(a.stderr, "loopx hook permission: asked the owners of goal %s (gate g%d); waiting until %s\n", goal, g.ID, deadline.UTC().Format(time.RFC3339))
	for g.Status == store.GateOpen && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
		var cur store.Gate
		if err := c.DoJSON(ctx, client.Request{Method: http.MethodGet, Path: client.GoalPath(goal, "gates", strconv.FormatInt(g.ID, 10))}, &cur); err == nil {
			g = cur
		}
	}
	if g.Status == store.GateOpen {
		// Nobody answered: close the gate as denied (the card says so) and deny.
		var closed store.Gate
		if err := c.DoJSON(ctx, client.Request{Method: http.MethodPost, Path: client.GoalPath(goal, "gates", strconv.FormatInt(g.ID, 10), "expire"),
			Body: map[string]any{}, IdempotencyKey: a.key() + "-expire"}, &closed); err == nil {
			g = closed
		}
		waited := deadline.Sub(start).Round(time.Second)
		return a.writeHookDecision(store.PermitDeny, fmt.Sprintf("No owner of goal %q answered permission request g%d (%s) within %s, so it is denied. "+
			"Do not try it another way: tell the user it waits for an owner, or ask with gate_ask.", goal, g.ID, in.ToolName, waited), host, in.ToolName, false)
	}
	if store.PermissionDecision(g) == store.PermitAllow {
		return a.writeHookDecision(store.PermitAllow, "", host, in.ToolName, g.Answer == store.PermissionAllowTurn)
	}
	who := "An owner"
	if g.AnsweredBy != "" {
		who = "The owner " + g.AnsweredBy
	}
	msg := fmt.Sprintf("%s of goal %q denied %s (permission request g%d)", who, goal, in.ToolName, g.ID)
	if g.Comment != "" {
		msg += fmt.Sprintf(": %q", g.Comment)
	}
	return a.writeHookDecision(store.PermitDeny, msg+". Do not try it another way; go on without it or tell the user.", host, in.ToolName, false)
}

func (a *app) writeHookDecision(behavior, message, host, tool string, forTurn bool) error {
	var d hookDecision
	d.HookSpecificOutput.HookEventName = "PermissionRequest"
	d.HookSpecificOutput.Decision.Behavior = behavior
	d.HookSpecificOutput.Decision.Message = message
	if forTurn && host == "claude-code" {
		d.HookSpecificOutput.Decision.UpdatedPermissions = []any{map[string]any{
			"type": "addRules", "rules": []any{map[string]any{"toolName": tool}}, "behavior": "allow", "destination": "session"}}
	}
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(a.stdout, string(b))
	return err
}

// hookTurn names the turn an "allow for this turn" covers: the agent's live LoopX turn, else
// the host's turn (Codex) or session.
func hookTurn(ctx context.Context, c *client.Client, goal, agent string, in hookInput) string {
	var latest struct {
		Turns []store.RunTurn `json:"turns"`
	}
	err := c.DoJSON(ctx, client.Request{Method: http.MethodGet, Path: client.GoalPath(goal, "turns"),
		Query: url.Values{"agent_id": {agent}, "limit": {"1"}, "state": {store.TurnLive}}}, &latest)
	if err == nil && len(latest.Turns) > 0 && latest.Turns[0].LeaseExpiresAt.After(time.Now()) {
		return latest.Turns[0].InstanceID
	}
	switch {
	case in.TurnID != "":
		return "turn:" + clipTo(in.TurnID, 150)
	case in.SessionID != "":
		return "session:" + clipTo(in.SessionID, 150)
	}
	return ""
}

// summarize says what a tool call does in a line people read on a phone: a shell command,
// a file path, else its arguments as compact JSON, cut to 500 characters.
func summarize(tool string, input json.RawMessage) string {
	var m map[string]any
	if json.Unmarshal(input, &m) != nil {
		return clipTo(strings.TrimSpace(string(input)), 500)
	}
	str := func(k string) string { s, _ := m[k].(string); return s }
	var s string
	switch {
	case str("command") != "":
		s = str("command")
		if d := str("description"); d != "" {
			s += " — " + d
		}
	case str("file_path") != "":
		s = str("file_path")
	case str("url") != "":
		s = str("url")
	default:
		b, _ := json.Marshal(m)
		s = string(b)
	}
	return clipTo(s, 500)
}

func clipTo(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// permissionsCommand shows and sets a goal's rules for permission requests.
func (a *app) permissionsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "permissions",
		Short: "A goal's rules for the hosts' permission prompts: the time limit, tools allowed or denied without asking",
		Example: `  loopx permissions show --goal-id demo
  loopx permissions set --goal-id demo --timeout 5m --deny WebFetch`,
	}
	var goal string
	show := &cobra.Command{
		Use:     "show",
		Short:   "Show the goal's permission rules",
		Example: `  loopx permissions show --goal-id demo`,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return a.call(c, http.MethodGet, goalPath(goal, "permission-policy"), nil, nil, nil)
		},
	}
	show.Flags().StringVar(&goal, "goal-id", "", "goal id")
	var timeout time.Duration
	var timeoutDefault bool
	var allow, deny []string
	set := &cobra.Command{
		Use:   "set",
		Short: "Set the goal's permission rules (admin): what is not given stays as it is",
		Long: `Set how long a permission card waits for an owner before the request is denied (10s to
24h; --timeout-default follows the machine default, 10m unless an admin changed it), and the
tools run or denied without asking (a name as the host gives it,
such as Bash or mcp__github__create_issue, or a prefix ending in *). A deny rule wins.
--allow "" (or --deny "") empties the list.`,
		Example: `  loopx permissions set --goal-id demo --timeout 5m --allow Read --allow "mcp__github__get_*" --deny WebFetch`,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			var b api.PolicyBody
			if c.Flags().Changed("timeout") {
				secs := api.Setting(strconv.Itoa(int(timeout / time.Second)))
				b.TimeoutSeconds = &secs
			}
			if timeoutDefault {
				if b.TimeoutSeconds != nil {
					return usageErr(errors.New("give --timeout or --timeout-default, not both"))
				}
				def := api.Setting("default")
				b.TimeoutSeconds = &def
			}
			list := func(v []string) *[]string {
				out := []string{}
				for _, s := range v {
					if s != "" {
						out = append(out, s)
					}
				}
				return &out
			}
			if c.Flags().Changed("allow") {
				b.AllowTools = list(allow)
			}
			if c.Flags().Changed("deny") {
				b.DenyTools = list(deny)
			}
			return a.call(c, http.MethodPut, goalPath(goal, "permission-policy"), nil, b, nil)
		},
	}
	set.Flags().StringVar(&goal, "goal-id", "", "goal id")
	set.Flags().DurationVar(&timeout, "timeout", 0, "how long a card waits for an owner (10s to 24h)")
	set.Flags().BoolVar(&timeoutDefault, "timeout-default", false, "follow the machine default wait again")
	set.Flags().StringArrayVar(&allow, "allow", nil, "a tool run without asking; repeat")
	set.Flags().StringArrayVar(&deny, "deny", nil, "a tool denied without asking; repeat")
	cmd.AddCommand(show, set)
	return cmd
}
