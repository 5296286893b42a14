package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"loopx/hosts/project"
	"net/http"
	"net/url"
	"strconv"

	"github.com/spf13/cobra"

	"loopx/api"
	"loopx/store"
)

func (a *app) quotaCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "quota",
		Short: "Ask whether to run a turn, spend a turn of the quota, show the quota",
		Example: `  loopx quota should-run --goal-id demo --agent-id codex --turn-instance-id t-42 --begin-turn --format json
  loopx quota spend-slot --goal-id demo --agent-id codex --turn-instance-id t-42 --todo-id 7
  loopx quota status --goal-id demo --agent-id codex`,
	}
	var goal string
	goalFlag := func(c *cobra.Command) {
		c.Flags().StringVar(&goal, "goal-id", "", "goal id")
		_ = c.MarkFlagRequired("goal-id")
	}

	var sr api.ShouldRunBody
	shouldRun := &cobra.Command{
		Use:   "should-run",
		Short: "Decide whether the agent should act now (records the decision)",
		Long: `Answer run or skip with the state, reason, selected todo, inbox, quota, gates and a
scheduler hint. With --turn-instance-id the answer carries a heartbeat receipt and the same id
replays it. With --begin-turn a run decision opens the turn (with a lease) at once.`,
		Example: `  loopx quota should-run --goal-id demo --agent-id codex --format json
  loopx quota should-run --goal-id demo --agent-id codex --turn-instance-id t-42 --begin-turn`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return a.call(c, http.MethodPost, goalPath(goal, "should-run"), nil, sr, printDecision)
		},
	}
	goalFlag(shouldRun)
	shouldRun.Flags().StringVar(&sr.AgentID, "agent-id", "", "agent asking")
	shouldRun.Flags().StringVar(&sr.TurnInstanceID, "turn-instance-id", "", "the host's id for this turn; the same id replays the same answer")
	shouldRun.Flags().BoolVar(&sr.BeginTurn, "begin-turn", false, "open the turn now when the answer is run")
	shouldRun.Flags().Int64Var(&sr.TodoID, "todo-id", 0, "the todo the turn is for (claimed when it opens); default the highest-priority runnable one")
	shouldRun.Flags().IntVar(&sr.LeaseSeconds, "lease-seconds", 0, "lease of the opened turn (default 30 minutes)")

	var sp api.SpendBody
	spend := &cobra.Command{
		Use:   "spend-slot",
		Short: "Count a turn that ran against the quota (exactly once per turn)",
		Long: `Count the turn against the goal's quota (one turn spent). A retry returns the same receipt; a spend for a turn that
was skipped, is unknown or was already settled differently is refused (exit 1).`,
		Example: `  loopx quota spend-slot --goal-id demo --agent-id codex --turn-instance-id t-42 --todo-id 7`,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return a.call(c, http.MethodPost, goalPath(goal, "spend-slot"), nil, sp, nil)
		},
	}
	goalFlag(spend)
	spend.Flags().StringVar(&sp.AgentID, "agent-id", "", "agent whose turn ran")
	spend.Flags().StringVar(&sp.TurnInstanceID, "turn-instance-id", "", "the turn that ran")
	_ = spend.MarkFlagRequired("turn-instance-id")
	spend.Flags().Int64Var(&sp.TodoID, "todo-id", 0, "the todo the turn worked on")

	var agent string
	status := &cobra.Command{
		Use:     "status",
		Short:   "Show the current decision and quota without recording anything",
		Example: `  loopx quota status --goal-id demo --agent-id codex --format json`,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			q := url.Values{}
			if agent != "" {
				q.Set("agent_id", agent)
			}
			return a.call(c, http.MethodGet, goalPath(goal, "quota"), q, nil, printDecision)
		},
	}
	goalFlag(status)
	status.Flags().StringVar(&agent, "agent-id", "", "agent")

	cmd.AddCommand(shouldRun, spend, status)
	return cmd
}

func printDecision(w io.Writer, raw json.RawMessage) error {
	var d struct {
		Decision        string `json:"decision"`
		State           string `json:"state"`
		Reason          string `json:"reason"`
		Message         string `json:"message"`
		EffectiveAction string `json:"effective_action"`
		SelectedTodo    *struct {
			ID   int64  `json:"todo_id"`
			Text string `json:"text"`
		} `json:"selected_todo"`
		Quota struct {
			WindowHours  int     `json:"window_hours"`
			AllowedSlots int     `json:"allowed_slots"`
			SpentSlots   int     `json:"spent_slots"`
			NextEligible *string `json:"next_eligible_at"`
		} `json:"quota"`
		Hint struct {
			Action   string `json:"action"`
			Interval int    `json:"interval_minutes"`
		} `json:"scheduler_hint"`
		Turn *struct {
			InstanceID string `json:"turn_instance_id"`
		} `json:"turn"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return fmt.Errorf("decode answer: %w", err)
	}
	fmt.Fprintf(w, "%s (%s): %s\n", d.Decision, d.State, cmp.Or(d.Message, d.Reason))
	if d.EffectiveAction != "" {
		fmt.Fprintf(w, "action: %s\n", d.EffectiveAction)
	}
	if d.SelectedTodo != nil {
		fmt.Fprintf(w, "todo: #%d %s\n", d.SelectedTodo.ID, d.SelectedTodo.Text)
	}
	if d.Turn != nil {
		fmt.Fprintf(w, "turn: %s\n", d.Turn.InstanceID)
	}
	fmt.Fprintf(w, "quota: %d of %d turns used in %d h", d.Quota.SpentSlots, d.Quota.AllowedSlots, d.Quota.WindowHours)
	if d.Quota.NextEligible != nil {
		fmt.Fprintf(w, ", next eligible %s", *d.Quota.NextEligible)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "next check: %s, in %d min\n", project.HintText(d.Hint.Action), d.Hint.Interval)
	return nil
}

func (a *app) refreshStateCommand() *cobra.Command {
	var goal string
	var b api.RefreshBody
	var h store.TurnHandoff
	cmd := &cobra.Command{
		Use:   "refresh-state",
		Short: "Record what the next turn should see, and end the turn with a handoff (quota-neutral)",
		Long: `Record what the next turn should see. With --done, --next, --questions or --handoff-to the
turn ends with a handoff: what was done, what is next and open questions, about the turn's
todo, resting on its evidence, for the agent's own next turn or for --handoff-to (the todo's
claim moves to it). The receiver's should-run carries it as its continuation until it
acknowledges it (loopx ack).`,
		Example: `  loopx refresh-state --goal-id demo --agent-id codex --turn-instance-id t-42 --next-action "run the integration suite"
  loopx refresh-state --goal-id demo --agent-id codex --turn-instance-id t-42 --done "the tokenizer" --next "review the grammar" --handoff-to claude --handoff-kind review`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			fs := c.Flags()
			if fs.Changed("done") || fs.Changed("next") || fs.Changed("questions") || fs.Changed("handoff-to") || fs.Changed("handoff-kind") {
				b.Handoff = &h
			}
			return a.call(c, http.MethodPost, goalPath(goal, "refresh-state"), nil, b, nil)
		},
	}
	cmd.Flags().StringVar(&goal, "goal-id", "", "goal id")
	_ = cmd.MarkFlagRequired("goal-id")
	cmd.Flags().StringVar(&b.AgentID, "agent-id", "", "agent")
	cmd.Flags().StringVar(&b.TurnInstanceID, "turn-instance-id", "", "the turn that refreshes the state")
	cmd.Flags().StringVar(&b.NextAction, "next-action", "", "what the next turn should do")
	cmd.Flags().StringVar(&h.Done, "done", "", "the handoff: what this turn did")
	cmd.Flags().StringVar(&h.Next, "next", "", "the handoff: what is next (default: --next-action)")
	cmd.Flags().StringVar(&h.Questions, "questions", "", "the handoff: open questions")
	cmd.Flags().StringVar(&h.To, "handoff-to", "", "the agent the handoff is for (default: this agent's next turn)")
	cmd.Flags().StringVar(&h.Kind, "handoff-kind", "", "resume, review, verify or answer_gate (default resume)")
	cmd.Flags().Int64Var(&h.TodoID, "todo-id", 0, "the todo handed on (default: the turn's)")
	return cmd
}

func (a *app) auditCommand() *cobra.Command {
	var goal, actor, action, outcome, since, until string
	var limit, after int64
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Read the audit log, refusals included (admin token)",
		Long: `Read the audit log, oldest first: who (actor) did what (action) to what (target), from which
surface, and how it ended (outcome: ok, refused, forbidden, conflict, full). Changes carry
the before and after of each field in detail.changes, secrets redacted.`,
		Example: `  loopx audit --goal-id demo --limit 50 --format json
  loopx audit --outcome refused --since 2026-01-02T00:00:00Z
  loopx audit --actor ou_ann --action goal.update`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			q := url.Values{}
			for k, v := range map[string]string{"goal_id": goal, "actor": actor, "action": action,
				"outcome": outcome, "since": since, "until": until} {
				if v != "" {
					q.Set(k, v)
				}
			}
			if limit > 0 {
				q.Set("limit", strconv.FormatInt(limit, 10))
			}
			if after > 0 {
				q.Set("after_id", strconv.FormatInt(after, 10))
			}
			return a.call(c, http.MethodGet, "/v1/audit", q, nil,
				printList("audit", "id", "at", "actor", "surface", "action", "goal_id", "target", "outcome"))
		},
	}
	cmd.Flags().StringVar(&goal, "goal-id", "", "only this goal")
	cmd.Flags().StringVar(&actor, "actor", "", "only this actor (an open_id, agent:<goal>/<agent>, admin)")
	cmd.Flags().StringVar(&action, "action", "", "only this action (e.g. goal.update, chat.steer)")
	cmd.Flags().StringVar(&outcome, "outcome", "", "only this outcome: ok, refused, forbidden, conflict or full")
	cmd.Flags().StringVar(&since, "since", "", "only rows at or after this RFC 3339 time")
	cmd.Flags().StringVar(&until, "until", "", "only rows before this RFC 3339 time")
	cmd.Flags().Int64Var(&limit, "limit", 0, "at most this many rows (default 100)")
	cmd.Flags().Int64Var(&after, "after-id", 0, "rows after this id")
	return cmd
}
