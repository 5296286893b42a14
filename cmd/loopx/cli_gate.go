package main

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/spf13/cobra"

	"loopx/api"
)

func (a *app) gateCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "gate",
		Short: "Ask, list, answer and cancel owner gates",
		Example: `  loopx gate ask --goal-id demo --agent-id codex --question "Deploy to prod?" --option approve --option reject
  loopx gate list --goal-id demo --status open
  loopx gate answer --goal-id demo --gate-id 3 --answer approve --as ou_123`,
	}
	var goal, agent string
	var gate int64
	ids := func(c *cobra.Command, withGate bool) {
		c.Flags().StringVar(&goal, "goal-id", "", "goal id")
		_ = c.MarkFlagRequired("goal-id")
		if withGate {
			c.Flags().Int64Var(&gate, "gate-id", 0, "gate id")
			_ = c.MarkFlagRequired("gate-id")
		}
	}
	gatePath := func(verb string) string {
		return goalPath(goal, "gates", strconv.FormatInt(gate, 10), verb)
	}

	var ask api.GateBody
	askCmd := &cobra.Command{
		Use:   "ask",
		Short: "Ask the goal's owners a question; the todo (or the whole goal) waits for the answer",
		Example: `  loopx gate ask --goal-id demo --agent-id codex --todo-id 7 --question "Use Postgres 16?"
  loopx gate ask --goal-id demo --agent-id codex --question "Ship now?" --option approve --option reject`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			ask.AgentID = agent
			return a.call(c, http.MethodPost, goalPath(goal, "gates"), nil, ask, nil)
		},
	}
	ids(askCmd, false)
	askCmd.Flags().StringVar(&agent, "agent-id", "", "agent that asks")
	askCmd.Flags().StringVar(&ask.Question, "question", "", "the question (up to 12,000 characters)")
	_ = askCmd.MarkFlagRequired("question")
	askCmd.Flags().StringArrayVar(&ask.Options, "option", nil, "an answer option; repeat (default approve, reject)")
	askCmd.Flags().Int64Var(&ask.TodoID, "todo-id", 0, "the todo that waits (default: the whole goal waits)")

	var status string
	list := &cobra.Command{
		Use:     "list",
		Short:   "List a goal's gates, newest first",
		Example: `  loopx gate list --goal-id demo --status open --format json`,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			q := url.Values{}
			if status != "" {
				q.Set("status", status)
			}
			return a.call(c, http.MethodGet, goalPath(goal, "gates"), q, nil,
				printList("gates", "gate_id", "status", "answer", "agent_id", "todo_id", "question"))
		},
	}
	ids(list, false)
	list.Flags().StringVar(&status, "status", "", "open, approved, rejected, answered (with one of its own options) or cancelled")

	var ans api.AnswerBody
	answer := &cobra.Command{
		Use:   "answer",
		Short: "Answer a gate on behalf of a goal owner (admin token)",
		Long: `Answer an open gate. --as is the Lark open_id of the goal owner who decides; anyone who
is not an owner is refused (exit 1) and the refusal is audited.`,
		Example: `  loopx gate answer --goal-id demo --gate-id 3 --answer approve --as ou_123
  loopx gate answer --goal-id demo --gate-id 3 --answer reject --as ou_123 --comment "not yet"`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return a.call(c, http.MethodPost, gatePath("answer"), nil, ans, nil)
		},
	}
	ids(answer, true)
	answer.Flags().StringVar(&ans.Answer, "answer", "", "approve, reject, or another of the gate's options (stored as it is: status answered)")
	_ = answer.MarkFlagRequired("answer")
	answer.Flags().StringVar(&ans.AnsweredBy, "as", "", "open_id of the owner who decides")
	_ = answer.MarkFlagRequired("as")
	answer.Flags().StringVar(&ans.Comment, "comment", "", "a note for the agent")

	cancel := &cobra.Command{
		Use:     "cancel",
		Short:   "Withdraw a gate the agent asked",
		Example: `  loopx gate cancel --goal-id demo --gate-id 3 --agent-id codex`,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return a.call(c, http.MethodPost, gatePath("cancel"), nil, api.CancelBody{AgentID: agent}, nil)
		},
	}
	ids(cancel, true)
	cancel.Flags().StringVar(&agent, "agent-id", "", "agent that asked")

	cmd.AddCommand(askCmd, list, answer, cancel)
	return cmd
}
