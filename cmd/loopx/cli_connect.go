package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"loopx/hosts/project"
)

func (a *app) connectCommand() *cobra.Command {
	var p project.ConnectParams
	var dir string
	cmd := &cobra.Command{
		Use:   "connect",
		Short: "Connect this project folder to a goal and agent (creates them when missing)",
		Long: `Connect the project folder (the current one, or --project) to LoopX:

  1. find the goal (--goal-id; default: the folder's name) or create it;
  2. find the agent (--agent-id; default: agent) or register it (runner poll: the host's own
     loop drives it) and keep its token in the user's config directory (mode 0600);
  3. write .loopx/connection.json: server URL, goal and agent, never a secret.

On a terminal it asks for what the flags do not give. It reuses what exists and changes
nothing when everything is in place; it never moves a connected folder to another goal or
takes over an agent whose token this machine does not hold (--rotate-token issues a new one).
Creating needs the admin token (LOOPX_TOKEN, or the one a local loopx serve keeps); with an
agent token (LOOPX_TOKEN) it connects as that agent.

Every loopx command run in the folder then takes --goal-id and --agent-id from it, and
loopx mcp works as that agent.`,
		Example: `  loopx connect
  loopx connect --goal-id release --agent-id claude --owner ou_123 --title "Ship 1.4"
  loopx connect --project ~/src/app --format json`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := a.useProjectDir(dir); err != nil {
				return err
			}
			root, err := a.workDir()
			if err != nil {
				return err
			}
			client, err := a.newClient()
			if err != nil {
				return err
			}
			cfg := a.settings()
			if cfg.credentials == nil {
				return usageError{cfg.credsErr}
			}
			p.Root, p.Client, p.Credentials, p.ServerHome = root, client, cfg.credentials, cfg.home
			p.Key = func(step string) string { return a.key() + "-connect-" + step }
			if a.interactive() {
				in := bufio.NewReader(a.stdin)
				p.Ask = func(q, def string) (string, error) {
					if def != "" {
						fmt.Fprintf(a.stderr, "%s [%s]: ", q, def)
					} else {
						fmt.Fprintf(a.stderr, "%s: ", q)
					}
					line, err := in.ReadString('\n')
					if errors.Is(err, io.EOF) {
						err = nil
					}
					return strings.TrimSpace(line), err
				}
			}
			res, err := project.Connect(c.Context(), p)
			if err != nil {
				return err
			}
			if a.format == "json" {
				writeJSONTo(a.stdout, res)
				return nil
			}
			printConnect(a.stdout, res)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "project", "", "the project's root folder (default: the current folder)")
	f.StringVar(&p.GoalID, "goal-id", "", "goal to connect to (default: the folder's name)")
	f.StringVar(&p.AgentID, "agent-id", "", "agent this project's host works as (default: agent)")
	f.StringVar(&p.Title, "title", "", "title of a goal created now (default: the folder's name)")
	f.StringVar(&p.Objective, "objective", "", "objective of a goal created now")
	f.StringSliceVar(&p.Owners, "owner", nil, "Lark open_id of an owner of a goal created now (answers gates); repeat or comma-separate")
	f.BoolVar(&p.RotateToken, "rotate-token", false, "issue a new token for an existing agent this machine holds none for (the old one stops working)")
	return cmd
}

func printConnect(w io.Writer, r project.ConnectResult) {
	if !r.Changed() {
		fmt.Fprintf(w, "%s is connected to goal %s as agent %s at %s; nothing changed.\n", r.Root, r.GoalID, r.AgentID, r.ServerURL)
	} else {
		fmt.Fprintf(w, "Connected %s to goal %s as agent %s at %s.\n", r.Root, r.GoalID, r.AgentID, r.ServerURL)
	}
	if r.GoalCreated {
		fmt.Fprintf(w, "  goal %s: created\n", r.GoalID)
	}
	switch {
	case r.AgentRegistered:
		fmt.Fprintf(w, "  agent %s: registered (runner poll: the host's own loop drives it)\n", r.AgentID)
	case r.TokenRotated:
		fmt.Fprintf(w, "  agent %s: new token issued; the old one no longer works\n", r.AgentID)
	}
	if r.TokenStored {
		fmt.Fprintf(w, "  token: kept in %s (mode 0600), never in the project\n", r.CredentialsFile)
	}
	if r.ConnectionWritten {
		fmt.Fprintf(w, "  connection: %s (no secrets)\n", project.Path(r.Root))
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
	if r.GitignoreHint != "" {
		fmt.Fprintf(w, "Add this line to .gitignore: %s\n", r.GitignoreHint)
	}
	fmt.Fprintln(w, "Next: loopx hosts install --host claude-code (or codex, cursor, opencode, gemini, qwen, copilot, pi), then loopx status.")
}

func (a *app) statusCommand() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show this project's goal and agent on one screen: what needs you, the turn, quota, inbox",
		Long: `Show, for the project's connection (.loopx/ in the current folder or a parent): what needs
you (open gates, a stall, a paused goal, failed sends to Lark, missed heartbeats), the live
turn, the next heartbeat, quota left, the inbox, and the last turn with its evidence.
--goal-id and --agent-id show another goal or agent than the connection's.`,
		Example: `  loopx status
  loopx status --format json`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := a.useProjectDir(dir); err != nil {
				return err
			}
			root, conn, found, err := a.connection()
			if err != nil {
				return err
			}
			if g, _ := c.Flags().GetString("goal-id"); g != "" {
				conn.GoalID = g
			}
			if ag, _ := c.Flags().GetString("agent-id"); ag != "" {
				conn.AgentID = ag
			}
			if conn.GoalID == "" || conn.AgentID == "" {
				where, _ := a.workDir()
				return usageError{fmt.Errorf("%s is not connected to LoopX: run loopx connect in the project's root folder (or pass --goal-id and --agent-id)", where)}
			}
			client, err := a.newClient()
			if err != nil {
				return err
			}
			conn.ServerURL = client.BaseURL()
			st, err := project.ReadStatus(c.Context(), client, conn)
			if err != nil {
				return err
			}
			if !found {
				root = ""
			}
			if a.format == "json" {
				writeJSONTo(a.stdout, map[string]any{"project": root, "connection": conn, "status": st})
				return nil
			}
			project.RenderStatus(a.stdout, root, conn, st, time.Now())
			return nil
		},
	}
	cmd.Flags().String("goal-id", "", "goal (default: the project's connection)")
	cmd.Flags().String("agent-id", "", "agent (default: the project's connection)")
	cmd.Flags().StringVar(&dir, "project", "", "the project folder (default: the current folder or a parent)")
	return cmd
}

// useProjectDir makes dir (when given) the folder the command works in.
func (a *app) useProjectDir(dir string) error {
	// A host that does not expand ${workspaceFolder} passes it as it is: use the current
	// folder then.
	if dir == "" || strings.Contains(dir, "${") {
		return nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return usageError{fmt.Errorf("--project: %w", err)}
	}
	st, err := os.Stat(abs)
	if err != nil || !st.IsDir() {
		return usageError{fmt.Errorf("--project: %s is not a folder", abs)}
	}
	if a.dir != abs {
		// The connection, and the server and token it may give, are the new folder's.
		a.conn.read, a.resolved = false, nil
	}
	a.dir = abs
	return nil
}

// interactive reports whether a person can answer questions on stdin (a terminal; not
// /dev/null, a pipe or a file).
func (a *app) interactive() bool {
	f, ok := a.stdin.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
