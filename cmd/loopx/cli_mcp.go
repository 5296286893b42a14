package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"loopx/mcp"
	"loopx/server"
)

func (a *app) mcpCommand() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve LoopX's turn tools to an agent host over MCP (stdio)",
		Long: `Serve the Model Context Protocol on stdin/stdout for an agent host (Claude Code, Codex,
Cursor, OpenCode, Gemini CLI, Qwen Code, Copilot CLI; Pi through its extension): the tools
should_run, todo_*, evidence_add, gate_ask, gate_list, inbox_*, refresh_state, spend_slot and
goal_status, the resources loopx://goal and loopx://state, and the prompt "turn". loopx hosts
install writes the host's entry for it. The token must be an agent's: the admin token is
refused (every tool says so).

It is a client of the LoopX HTTP API and works as one agent on one goal:
  goal, agent  LOOPX_GOAL_ID and LOOPX_AGENT_ID, else the project's connection (.loopx/ in
               --project or the current folder or a parent; loopx connect writes it)
  server       LOOPX_URL, else the connection's, else the loopx serve running with this
               LOOPX_HOME (wherever it listens), else http://` + server.DefaultListen + `
  token        LOOPX_TOKEN, else the agent's token loopx connect stored in the user's
               config directory
Without a connection it still starts (a host can list the tools) and every tool answers
what to do. Logs go to stderr (LOG_LEVEL, default warn); stdout is the protocol.`,
		Example: `  loopx mcp
  loopx mcp --project /path/to/repo
  LOOPX_URL=https://loopx.example LOOPX_TOKEN=lxa_... LOOPX_GOAL_ID=demo LOOPX_AGENT_ID=codex loopx mcp`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := a.useProjectDir(dir); err != nil {
				return err
			}
			var level slog.Level
			if err := level.UnmarshalText([]byte(cmp.Or(a.getenv("LOG_LEVEL"), "warn"))); err != nil {
				return usageError{fmt.Errorf("LOG_LEVEL: %q is not debug, info, warn or error", a.getenv("LOG_LEVEL"))}
			}
			opts := mcp.Options{Version: version, Logger: server.NewLogger(a.stderr, "text", level).With("component", "mcp"), LocalFiles: true}
			a.agentConnection(&opts)
			srv, err := mcp.New(opts)
			if err != nil {
				return err
			}
			err = srv.Run(c.Context(), &sdk.IOTransport{Reader: io.NopCloser(a.stdin), Writer: nopWriteCloser{a.stdout}})
			if err == nil || errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) {
				return nil // the host closed the session or stopped us
			}
			return err
		},
	}
	cmd.Flags().StringVar(&dir, "project", "", "the project folder whose .loopx/ connection to use (default: the current folder or a parent)")
	return cmd
}

// agentConnection fills the goal, agent and client the MCP server works as, or says in
// opts.Unconnected what is missing and what the user should do.
func (a *app) agentConnection(opts *mcp.Options) {
	goal, agent := a.getenv("LOOPX_GOAL_ID"), a.getenv("LOOPX_AGENT_ID")
	where, _ := a.workDir()
	root, conn, found, err := a.connection()
	if err != nil {
		opts.Unconnected = err.Error() + ". Ask the user to fix or remove that file and run `loopx connect` in the project's root folder."
		return
	}
	if found {
		goal, agent = cmp.Or(goal, conn.GoalID), cmp.Or(agent, conn.AgentID)
		where = root
	}
	if goal == "" || agent == "" {
		opts.Unconnected = fmt.Sprintf("no LoopX connection was found from %s (no .loopx/connection.json there or above, no LOOPX_GOAL_ID / LOOPX_AGENT_ID). "+
			"Ask the user to run `loopx connect` in the project's root folder, then reload the host.", where)
		return
	}
	cfg := a.settings()
	if cfg.serverErr != nil {
		opts.Unconnected = cfg.serverErr.Error()
		return
	}
	base := cfg.Server
	token, err := cfg.agentToken(goal, agent)
	if err != nil {
		opts.Unconnected = err.Error()
		return
	}
	if token == "" {
		opts.Unconnected = fmt.Sprintf("this machine holds no token for agent %q on goal %q at %s (LOOPX_TOKEN is not set, and %s has none). "+
			"Ask the user to run `loopx connect` in %s (it stores the token there) or to set LOOPX_TOKEN, then reload the host.",
			agent, goal, base, cfg.credentials.Path(), where)
		return
	}
	c, err := a.clientFor(base, token)
	if err != nil {
		opts.Unconnected = err.Error()
		return
	}
	opts.API, opts.GoalID, opts.AgentID = c, goal, agent
}

// nopWriteCloser leaves closing stdout to the process.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
