package main

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/spf13/cobra"

	"loopx/api"
)

func (a *app) evidenceCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "evidence",
		Short: "Record and list what agents produced",
		Example: `  loopx evidence add --goal-id demo --agent-id codex --todo-id 7 --summary "parser passes 40 tests" --kind command --ref "go test ./parser"
  loopx evidence list --goal-id demo --todo-id 7`,
	}
	var goal, file string
	var b api.EvidenceBody
	add := &cobra.Command{
		Use:     "add",
		Short:   "Record evidence for a todo or turn (counts as progress for the live turn)",
		Example: `  loopx evidence add --goal-id demo --agent-id codex --todo-id 7 --summary "opened PR" --kind link --ref https://git/pr/12`,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if file != "" {
				f, err := api.FileBodyOf(file, maxUpload)
				if err != nil {
					return usageErr(err)
				}
				b.File = f
			}
			return a.call(c, http.MethodPost, goalPath(goal, "evidence"), nil, b, nil)
		},
	}
	add.Flags().StringVar(&file, "file", "", "a deliverable to attach (members download it in the workspace)")
	add.Flags().StringVar(&goal, "goal-id", "", "goal id")
	_ = add.MarkFlagRequired("goal-id")
	add.Flags().StringVar(&b.AgentID, "agent-id", "", "agent that produced it")
	add.Flags().Int64Var(&b.TodoID, "todo-id", 0, "todo it belongs to")
	add.Flags().Int64Var(&b.TurnID, "turn-id", 0, "turn it belongs to (default: the agent's live turn)")
	add.Flags().StringVar(&b.Kind, "kind", "", "link, command, note or artifact (default note)")
	add.Flags().StringVar(&b.Summary, "summary", "", "what was produced (up to 12,000 characters)")
	_ = add.MarkFlagRequired("summary")
	add.Flags().StringVar(&b.Ref, "ref", "", "a link, command line or artifact reference")
	add.Flags().StringSliceVar(&b.Criteria, "criterion", nil, "an acceptance criterion this evidence meets (the todo's c1.. or the goal's g1..); repeat or comma-separate")

	var todo int64
	var agent string
	list := &cobra.Command{
		Use:     "list",
		Short:   "List evidence, oldest first",
		Example: `  loopx evidence list --goal-id demo --todo-id 7 --format json`,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			q := url.Values{}
			if todo != 0 {
				q.Set("todo_id", strconv.FormatInt(todo, 10))
			}
			if agent != "" {
				q.Set("agent_id", agent)
			}
			return a.call(c, http.MethodGet, goalPath(goal, "evidence"), q, nil,
				printList("evidence", "evidence_id", "agent_id", "todo_id", "kind", "summary", "ref"))
		},
	}
	list.Flags().StringVar(&goal, "goal-id", "", "goal id")
	_ = list.MarkFlagRequired("goal-id")
	list.Flags().Int64Var(&todo, "todo-id", 0, "only evidence for this todo")
	list.Flags().StringVar(&agent, "agent-id", "", "only evidence from this agent")
	cmd.AddCommand(add, list)
	return cmd
}
