package main

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/spf13/cobra"

	"loopx/api"
)

func (a *app) todoCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "todo",
		Short: "Add, list, claim, update and finish todos",
		Example: `  loopx todo add --goal-id demo --text "Write the parser" --priority P1
  loopx todo claim --goal-id demo --todo-id 7 --agent-id codex
  loopx todo done --goal-id demo --todo-id 7 --agent-id codex`,
	}
	var goal, agent string
	var todo int64
	ids := func(c *cobra.Command, withTodo bool) {
		c.Flags().StringVar(&goal, "goal-id", "", "goal id")
		_ = c.MarkFlagRequired("goal-id")
		if withTodo {
			c.Flags().Int64Var(&todo, "todo-id", 0, "todo id")
			_ = c.MarkFlagRequired("todo-id")
		}
	}
	agentFlag := func(c *cobra.Command, help string) {
		c.Flags().StringVar(&agent, "agent-id", "", help)
	}
	todoPath := func(rest ...string) string {
		return goalPath(goal, append([]string{"todos", strconv.FormatInt(todo, 10)}, rest...)...)
	}

	var text, role, priority string
	var claim bool
	var criteria, requires []string
	add := &cobra.Command{
		Use:   "add",
		Short: "Add a todo",
		Example: `  loopx todo add --goal-id demo --text "Write the parser" --priority P1
  loopx todo add --goal-id demo --text "Review the plan" --role user
  loopx todo add --goal-id demo --agent-id codex --claim --text "Fix the flaky test"`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			b := api.TodoBody{Text: text, Role: role, Criteria: criteriaOf(criteria), Requires: nonEmptyOrNil(requires)}
			if priority != "" {
				p, err := parsePriority(priority)
				if err != nil {
					return err
				}
				b.Priority = &p
			}
			if claim {
				if agent == "" {
					return usageError{errors.New("--claim needs --agent-id")}
				}
				b.ClaimFor = agent
			}
			return a.call(c, http.MethodPost, goalPath(goal, "todos"), nil, b, nil)
		},
	}
	ids(add, false)
	add.Flags().StringVar(&text, "text", "", "what to do (up to 12,000 characters)")
	_ = add.MarkFlagRequired("text")
	add.Flags().StringVar(&role, "role", "", "agent or user (default agent)")
	add.Flags().StringVar(&priority, "priority", "", "P0 (most urgent) .. P4 (default P2)")
	add.Flags().BoolVar(&claim, "claim", false, "claim it at once for --agent-id")
	add.Flags().StringArrayVar(&criteria, "criterion", nil, `an acceptance criterion, "text" or "c2: text": evidence must name it before the todo is done; repeat`)
	add.Flags().StringSliceVar(&requires, "requires", nil, "a capability an agent needs to claim it (one the goal grants); repeat or comma-separate")
	agentFlag(add, "agent that claims it (with --claim)")

	var status, claimedBy string
	list := &cobra.Command{
		Use:     "list",
		Short:   "List todos by priority",
		Example: `  loopx todo list --goal-id demo --status open,blocked --format json`,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			q := url.Values{}
			if status != "" {
				q.Set("status", status)
			}
			if claimedBy != "" {
				q.Set("claimed_by", claimedBy)
			}
			return a.call(c, http.MethodGet, goalPath(goal, "todos"), q, nil,
				printList("todos", "todo_id", "priority", "status", "claimed_by", "version", "text"))
		},
	}
	ids(list, false)
	list.Flags().StringVar(&status, "status", "", "comma-separated statuses: open, blocked, done, cancelled")
	list.Flags().StringVar(&claimedBy, "claimed-by", "", "only todos claimed by this agent")

	var transfer bool
	var lease int
	var note, next string
	claimCmd := &cobra.Command{
		Use:   "claim",
		Short: "Claim a todo for an agent (never takes another agent's claim unless --transfer)",
		Example: `  loopx todo claim --goal-id demo --todo-id 7 --agent-id codex
  loopx todo claim --goal-id demo --todo-id 7 --agent-id claude --transfer`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return a.call(c, http.MethodPost, todoPath("claim"), nil,
				api.ClaimBody{AgentID: agent, Transfer: transfer, LeaseSeconds: lease, Note: note, Next: next}, nil)
		},
	}
	ids(claimCmd, true)
	agentFlag(claimCmd, "agent that claims it")
	claimCmd.Flags().BoolVar(&transfer, "transfer", false, "take the todo over from the agent that holds it")
	claimCmd.Flags().IntVar(&lease, "lease-seconds", 0, "claim expires after this many seconds (0 = never)")
	claimCmd.Flags().StringVar(&note, "note", "", "with --transfer: what the previous holder did (needed when the todo has evidence)")
	claimCmd.Flags().StringVar(&next, "next", "", "with --transfer: what is next")

	var version int64
	var newStatus, newText, newPriority string
	var release bool
	var newCriteria, newRequires []string
	update := &cobra.Command{
		Use:   "update",
		Short: "Change a todo (compare-and-set on its version)",
		Long: `Change a todo's status, text or priority. --version is the version you read; if the
todo changed since, the answer is conflict (exit 1). Without --version it is read first.`,
		Example: `  loopx todo update --goal-id demo --todo-id 7 --agent-id codex --status blocked
  loopx todo update --goal-id demo --todo-id 7 --version 4 --priority P0`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			b := api.TodoUpdateBody{AgentID: agent, Version: version, ClearClaim: release}
			fs := c.Flags()
			if fs.Changed("status") {
				b.Status = &newStatus
			}
			if fs.Changed("text") {
				b.Text = &newText
			}
			if fs.Changed("priority") {
				p, err := parsePriority(newPriority)
				if err != nil {
					return err
				}
				b.Priority = &p
			}
			if fs.Changed("criterion") {
				cs := criteriaOf(newCriteria)
				b.Criteria = &cs
			}
			if fs.Changed("requires") {
				rs := nonEmpty(newRequires)
				b.Requires = &rs
			}
			if b.Version == 0 {
				v, err := a.currentVersion(c, todoPath())
				if err != nil {
					return err
				}
				b.Version = v
			}
			return a.call(c, http.MethodPatch, todoPath(), nil, b, nil)
		},
	}
	ids(update, true)
	agentFlag(update, "agent making the change (must hold the claim)")
	update.Flags().Int64Var(&version, "version", 0, "the todo version you read (default: read it now)")
	update.Flags().StringVar(&newStatus, "status", "", "open, blocked, done or cancelled")
	update.Flags().StringVar(&newText, "text", "", "new text")
	update.Flags().StringVar(&newPriority, "priority", "", "P0..P4")
	update.Flags().BoolVar(&release, "release", false, "drop the claim")
	update.Flags().StringArrayVar(&newCriteria, "criterion", nil, `replace the acceptance criteria (admin token): "text" or "c2: text"; repeat ("" empties)`)
	update.Flags().StringSliceVar(&newRequires, "requires", nil, `replace the capabilities it requires (admin token); "" empties`)

	done := &cobra.Command{
		Use:     "done",
		Short:   "Mark a todo done",
		Example: `  loopx todo done --goal-id demo --todo-id 7 --agent-id codex`,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			b := api.TodoUpdateBody{AgentID: agent, Version: version}
			if b.Version == 0 {
				v, err := a.currentVersion(c, todoPath())
				if err != nil {
					return err
				}
				b.Version = v
			}
			return a.call(c, http.MethodPost, todoPath("done"), nil, b, nil)
		},
	}
	ids(done, true)
	agentFlag(done, "agent that finished it (must hold the claim)")
	done.Flags().Int64Var(&version, "version", 0, "the todo version you read (default: read it now)")

	cmd.AddCommand(add, list, claimCmd, update, done, a.handoffCommand())
	return cmd
}
