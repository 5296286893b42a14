package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/spf13/cobra"

	"loopx/api"
)

func (a *app) agentCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Register agents on a goal and manage their tokens",
		Example: `  loopx agent register --goal-id demo --agent-id codex --runner exec --runner-config '{"command":"codex exec"}'
  loopx agent list --goal-id demo
  loopx agent rotate-token --goal-id demo --agent-id codex`,
	}
	var goal, agent string
	ids := func(c *cobra.Command, withAgent bool) {
		c.Flags().StringVar(&goal, "goal-id", "", "goal id")
		_ = c.MarkFlagRequired("goal-id")
		if withAgent {
			c.Flags().StringVar(&agent, "agent-id", "", "agent id ([a-z0-9][a-z0-9._-]{0,62})")
			_ = c.MarkFlagRequired("agent-id")
		}
	}
	// The token is shown once: say so next to it.
	printToken := func(w io.Writer, raw json.RawMessage) error {
		var r struct {
			GoalID  string `json:"goal_id"`
			AgentID string `json:"agent_id"`
			Runner  string `json:"runner"`
			Token   string `json:"token"`
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			return fmt.Errorf("decode answer: %w", err)
		}
		fmt.Fprintf(w, "agent %s/%s (runner %s)\n", r.GoalID, r.AgentID, r.Runner)
		if r.Token == "" {
			fmt.Fprintln(w, "token: not shown (this was a replay of an earlier call; rotate-token issues a new one)")
			return nil
		}
		fmt.Fprintf(w, "token: %s\n(shown once: store it now, e.g. as LOOPX_TOKEN for this agent's host)\n", r.Token)
		return nil
	}

	var b api.AgentBody
	var runnerConfig string
	register := &cobra.Command{
		Use:   "register",
		Short: "Register an agent on a goal and print its token once",
		Example: `  loopx agent register --goal-id demo --agent-id codex
  loopx agent register --goal-id demo --agent-id claude --runner webhook \
    --runner-config '{"url":"https://host/wake"}' --default`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			b.AgentID = agent
			if runnerConfig != "" {
				if !json.Valid([]byte(runnerConfig)) {
					return usageError{fmt.Errorf("--runner-config: not valid JSON")}
				}
				b.RunnerConfig = json.RawMessage(runnerConfig)
			}
			return a.call(c, http.MethodPost, goalPath(goal, "agents"), nil, b, printToken)
		},
	}
	ids(register, true)
	register.Flags().StringVar(&b.Runner, "runner", "", "how the scheduler wakes it: exec, webhook or poll (default poll)")
	register.Flags().StringVar(&runnerConfig, "runner-config", "", "runner settings as a JSON object")
	register.Flags().StringVar(&b.WorkMode, "work-mode", "", "active or monitor_only (default active)")
	register.Flags().BoolVar(&b.IsDefault, "default", false, "make it the goal's default agent for chat messages")

	list := &cobra.Command{
		Use:     "list",
		Short:   "List a goal's agents",
		Example: `  loopx agent list --goal-id demo --format json`,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return a.call(c, http.MethodGet, goalPath(goal, "agents"), nil, nil, printList("agents", "agent_id", "runner", "work_mode", "is_default"))
		},
	}
	ids(list, false)

	rotate := &cobra.Command{
		Use:     "rotate-token",
		Short:   "Replace an agent's token and print the new one once",
		Example: `  loopx agent rotate-token --goal-id demo --agent-id codex`,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return a.call(c, http.MethodPost, goalPath(goal, "agents", agent, "rotate-token"), nil, struct{}{}, printToken)
		},
	}
	ids(rotate, true)

	var ub api.AgentUpdateBody
	var newConfig, workMode string
	update := &cobra.Command{
		Use:   "update",
		Short: "Change an agent's runner settings or secrets (admin token)",
		Long: `Change an agent's runner settings or work mode. --runner-config replaces the settings; the
secrets in it (a webhook's "secret", the values of an exec agent's "env") are set, and
secrets it leaves out are kept unless named with --unset-secret. Secrets are stored sealed
and never shown again: listings say that each is set and when it changed.`,
		Example: `  loopx agent update --goal-id demo --agent-id hook --runner-config '{"url":"https://host/new"}'
  loopx agent update --goal-id demo --agent-id codex --runner-config '{"argv":["codex","exec","{{prompt}}"],"env":{"OPENAI_API_KEY":"sk-..."}}'
  loopx agent update --goal-id demo --agent-id codex --unset-secret env.OPENAI_API_KEY`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if newConfig != "" {
				if !json.Valid([]byte(newConfig)) {
					return usageError{fmt.Errorf("--runner-config: not valid JSON")}
				}
				ub.RunnerConfig = json.RawMessage(newConfig)
			}
			if workMode != "" {
				ub.WorkMode = &workMode
			}
			return a.call(c, http.MethodPatch, goalPath(goal, "agents", agent), nil, ub,
				printFields)
		},
	}
	ids(update, true)
	update.Flags().StringVar(&newConfig, "runner-config", "", "new runner settings as a JSON object")
	update.Flags().StringArrayVar(&ub.UnsetSecrets, "unset-secret", nil, "remove a secret (secret, env.NAME); repeatable")
	update.Flags().StringVar(&workMode, "work-mode", "", "active or monitor_only")
	cmd.AddCommand(register, list, rotate, update)
	cmd.AddCommand(a.agentGrantCommands()...)
	cmd.AddCommand(a.workCommands()...)
	return cmd
}
