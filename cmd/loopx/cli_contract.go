package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"loopx/api"
	"loopx/change"
	"loopx/store"
)

// The goal contract on the command line: finishing, reopening and replanning a goal, its
// trail, waivers, the machine defaults, handoffs and acknowledgements.

// goalContractCommands are the goal subcommands of the contract.
func (a *app) goalContractCommands() []*cobra.Command {
	var goal, reason string
	var preview bool
	flags := func(c *cobra.Command) {
		c.Flags().StringVar(&goal, "goal-id", "", "goal id")
		_ = c.MarkFlagRequired("goal-id")
		c.Flags().StringVar(&reason, "reason", "", "why (kept in the goal's trail of decisions)")
		c.Flags().BoolVar(&preview, "preview", false, "only preview: print the proposal (what is unmet, what stops) to confirm with `loopx proposal confirm`")
	}
	decide := func(verb, kind, short, long, example string) *cobra.Command {
		c := &cobra.Command{
			Use: verb, Short: short, Long: long, Example: example, Args: cobra.NoArgs,
			RunE: func(c *cobra.Command, _ []string) error {
				if preview {
					return a.previewChange(c, goal, api.ProposalBody{Kind: kind, Reason: reason})
				}
				return a.call(c, http.MethodPost, goalPath(goal, verb), nil, api.LifecycleBody{Reason: reason}, printResult)
			},
		}
		flags(c)
		return c
	}
	done := decide("done", store.ProposalGoalDone, "Finish a goal: its heartbeats and reports stop, should-run answers done",
		`Finish a goal. --preview lists what finishing leaves unmet (acceptance criteria with no
evidence, open todos, open gates, live turns) without changing anything; confirm the
proposal it prints with `+"`loopx proposal confirm`"+`. Finishing stops the goal's heartbeats and
reports, cancels its open gates and records the decision in its trail; reopen undoes it.`,
		`  loopx goal done --goal-id demo --preview
  loopx goal done --goal-id demo --reason "shipped in v1.2"`)
	reopen := decide("reopen", store.ProposalGoalReopen, "Reopen a done goal: its heartbeats run again",
		"", `  loopx goal reopen --goal-id demo --reason "a regression came in"`)

	var rb api.ReplanBody
	var cancel, reopenTodos []int64
	var rgoal string
	var rpreview bool
	replan := &cobra.Command{
		Use:   "replan",
		Short: "Change a goal's objective, with why and the todos it cancels or reopens",
		Long: `Change a goal's objective. --preview shows the new objective beside the old one and the
todos it affects (it suggests which open todos fit only the old objective, and which finished
ones fit the new one); --cancel and --reopen name the todos the replan changes. Confirming
records the decision (who, why, before and after, the goal version) in the goal's trail, and
every agent's next should-run announces the new objective until it acknowledges it.`,
		Example: `  loopx goal replan --goal-id demo --objective "Parse JSON as well" --because "the customer sends JSON" --preview
  loopx goal replan --goal-id demo --objective "Parse JSON as well" --because "..." --cancel 4,7 --reopen 2`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			rb.CancelTodos, rb.ReopenTodos = cancel, reopenTodos
			if rpreview {
				return a.previewChange(c, rgoal, api.ProposalBody{Kind: store.ProposalGoalReplan, Reason: rb.Reason,
					Replan: &change.ReplanChange{Objective: rb.Objective, Cancel: cancel, Reopen: reopenTodos}})
			}
			return a.call(c, http.MethodPost, goalPath(rgoal, "replan"), nil, rb, printResult)
		},
	}
	replan.Flags().StringVar(&rgoal, "goal-id", "", "goal id")
	_ = replan.MarkFlagRequired("goal-id")
	replan.Flags().StringVar(&rb.Objective, "objective", "", "the new objective")
	_ = replan.MarkFlagRequired("objective")
	replan.Flags().StringVar(&rb.Reason, "because", "", "why the objective changes")
	replan.Flags().Int64SliceVar(&cancel, "cancel", nil, "open todos the replan cancels (ids, comma-separated)")
	replan.Flags().Int64SliceVar(&reopenTodos, "reopen", nil, "finished todos the replan reopens (ids, comma-separated)")
	replan.Flags().BoolVar(&rpreview, "preview", false, "only preview the replan")

	var tgoal string
	trail := &cobra.Command{
		Use:     "trail",
		Short:   "List a goal's decisions, newest first: replans, done, reopened",
		Example: `  loopx goal trail --goal-id demo`,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return a.call(c, http.MethodGet, goalPath(tgoal, "trail"), nil, nil, printTrail)
		},
	}
	trail.Flags().StringVar(&tgoal, "goal-id", "", "goal id")
	_ = trail.MarkFlagRequired("goal-id")

	var wgoal string
	var wb api.WaiverBody
	waive := &cobra.Command{
		Use:   "waive",
		Short: "Count an acceptance criterion as met without evidence, and say why (admin)",
		Example: `  loopx goal waive --goal-id demo --criterion g2 --reason "docs move to the wiki"
  loopx goal waive --goal-id demo --todo-id 7 --criterion c1 --reason "measured by hand"`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return a.call(c, http.MethodPost, goalPath(wgoal, "waivers"), nil, wb, nil)
		},
	}
	waive.Flags().StringVar(&wgoal, "goal-id", "", "goal id")
	_ = waive.MarkFlagRequired("goal-id")
	waive.Flags().Int64Var(&wb.TodoID, "todo-id", 0, "the todo whose criterion it is (default: the goal's own)")
	waive.Flags().StringVar(&wb.Criterion, "criterion", "", "the criterion's id (g1, c2, ...)")
	_ = waive.MarkFlagRequired("criterion")
	waive.Flags().StringVar(&wb.Reason, "reason", "", "why it counts as met")
	_ = waive.MarkFlagRequired("reason")
	return []*cobra.Command{done, reopen, replan, trail, waive}
}

// defaultsFlags are the machine defaults a command may change.
type defaultsFlags struct {
	windowHours, allowedSlots, stallTurns, escalate, permission                  int
	heartbeat, heartbeatTZ, report, reportTZ, lang, reminders, breaker, progress string
	quiet                                                                        string
}

func (d *defaultsFlags) register(fs *pflag.FlagSet) {
	fs.IntVar(&d.allowedSlots, "allowed-slots", 0, "turns allowed per window")
	fs.IntVar(&d.windowHours, "window-hours", 0, "quota window in hours (1-720)")
	fs.IntVar(&d.stallTurns, "stall-turns", 0, "turns in a row without progress before the owners are asked (0 = off)")
	fs.StringVar(&d.heartbeat, "heartbeat", "", `heartbeat cron spec, e.g. "*/30 * * * *" ("" = none)`)
	fs.StringVar(&d.heartbeatTZ, "heartbeat-tz", "", "IANA time zone of the heartbeat")
	fs.StringVar(&d.report, "report", "", "report cron spec")
	fs.StringVar(&d.reportTZ, "report-tz", "", "IANA time zone of the report")
	fs.StringVar(&d.lang, "lang", "", "language of new goals: en or zh")
	fs.StringVar(&d.reminders, "reminder-minutes", "", `gate reminder ladder in minutes, e.g. "30,60,120"`)
	fs.IntVar(&d.escalate, "reminder-escalate-after", 0, "from this reminder on, owners get it by direct message")
	fs.IntVar(&d.permission, "permission-timeout", 0, "seconds a permission card waits for an owner (10-86400)")
	fs.StringVar(&d.breaker, "breaker-failures", "", "failed or empty turns in a row before an agent is held (0-100, or off)")
	fs.StringVar(&d.progress, "progress-card", "", "live progress cards for exec and MCP turns: on or off")
	fs.StringVar(&d.quiet, "quiet-digests", "", "skip scheduled reports with nothing new: on or off")
}

func (d *defaultsFlags) change(fs *pflag.FlagSet) change.DefaultsChange {
	var c change.DefaultsChange
	num := func(name string, v int) *int {
		if fs.Changed(name) {
			return &v
		}
		return nil
	}
	str := func(name, v string) *string {
		if fs.Changed(name) {
			return &v
		}
		return nil
	}
	c.AllowedSlots, c.WindowHours, c.StallTurns = num("allowed-slots", d.allowedSlots), num("window-hours", d.windowHours), num("stall-turns", d.stallTurns)
	c.HeartbeatSpec, c.HeartbeatTZ = str("heartbeat", d.heartbeat), str("heartbeat-tz", d.heartbeatTZ)
	c.ReportSpec, c.ReportTZ, c.Lang = str("report", d.report), str("report-tz", d.reportTZ), str("lang", d.lang)
	c.ReminderMinutes, c.ReminderEscalateAfter = str("reminder-minutes", d.reminders), num("reminder-escalate-after", d.escalate)
	c.PermissionTimeoutSeconds = num("permission-timeout", d.permission)
	c.BreakerFailures, c.ProgressCard, c.QuietDigests = str("breaker-failures", d.breaker), str("progress-card", d.progress), str("quiet-digests", d.quiet)
	return c
}

// defaultsCommand shows and changes the machine defaults every goal follows unless it
// overrides them.
func (a *app) defaultsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "defaults",
		Short: "Show and change the machine defaults goals follow unless they set their own (admin token)",
		Example: `  loopx defaults show
  loopx defaults set --allowed-slots 30 --preview
  loopx defaults set --heartbeat "*/30 * * * *" --heartbeat-tz Asia/Shanghai`,
	}
	show := &cobra.Command{
		Use: "show", Short: "Show the machine defaults and how many goals follow each", Args: cobra.NoArgs,
		Example: `  loopx defaults show --format json`,
		RunE: func(c *cobra.Command, _ []string) error {
			return a.call(c, http.MethodGet, "/v1/defaults", nil, nil, printDefaults)
		},
	}
	var df defaultsFlags
	var preview bool
	set := &cobra.Command{
		Use:   "set",
		Short: "Change machine defaults: every goal that does not set its own follows",
		Long: `Change the given machine defaults. Goals that set their own value keep it; the others
follow the new default at once. --preview lists the goals each change reaches and changes
nothing; confirm the proposal it prints with ` + "`loopx proposal confirm`" + `.`,
		Example: `  loopx defaults set --allowed-slots 30 --window-hours 12 --preview`,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			ch := df.change(c.Flags())
			if ch == (change.DefaultsChange{}) {
				return usageErr(errors.New("name at least one default to change (loopx defaults set --help)"))
			}
			b := api.DefaultsBody{DefaultsChange: ch}
			if preview {
				return a.call(c, http.MethodPost, "/v1/defaults/proposals", nil, b, printProposal)
			}
			return a.call(c, http.MethodPatch, "/v1/defaults", nil, b, printResult)
		},
	}
	df.register(set.Flags())
	set.Flags().BoolVar(&preview, "preview", false, "only preview the change and the goals it reaches")
	cmd.AddCommand(show, set)
	return cmd
}

// ackCommand acknowledges a continuation or an objective change for an agent.
func (a *app) ackCommand() *cobra.Command {
	var goal, agent string
	var b api.AcknowledgeBody
	cmd := &cobra.Command{
		Use:   "ack",
		Short: "Acknowledge a continuation (handoff) or an objective change, so should-run stops carrying it",
		Example: `  loopx ack --goal-id demo --agent-id codex --handoff-id 12
  loopx ack --goal-id demo --agent-id codex --decision-id 3`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if (b.HandoffID == 0) == (b.DecisionID == 0) {
				return usageErr(errors.New("give one of --handoff-id or --decision-id"))
			}
			if agent == "" {
				return usageErr(errors.New("--agent-id is required"))
			}
			return a.call(c, http.MethodPost, goalPath(goal, "agents", agent, "ack"), nil, b, nil)
		},
	}
	cmd.Flags().StringVar(&goal, "goal-id", "", "goal id")
	_ = cmd.MarkFlagRequired("goal-id")
	cmd.Flags().StringVar(&agent, "agent-id", "", "the agent that read it")
	cmd.Flags().Int64Var(&b.HandoffID, "handoff-id", 0, "the continuation (handoff) read")
	cmd.Flags().Int64Var(&b.DecisionID, "decision-id", 0, "the replan read (every earlier one too)")
	return cmd
}

// handoffCommand is `loopx todo handoff`.
func (a *app) handoffCommand() *cobra.Command {
	var goal string
	var todo int64
	var b api.HandoffBody
	cmd := &cobra.Command{
		Use:   "handoff",
		Short: "Hand a todo to another agent (or your next turn) with what was done and what is next",
		Long: `Hand a todo on: its claim moves to --to, and a handoff record says what was done (--note),
what is next (--next) and open questions (--questions), resting on the todo's evidence. The
receiver's next should-run carries it as its continuation until it acknowledges it (loopx
ack). --kind says what the receiver does: resume (default), review, verify, answer_gate.`,
		Example: `  loopx todo handoff --goal-id demo --todo-id 7 --agent-id codex --to claude --kind review \
    --note "the tokenizer and its tests" --next "review the grammar, then merge"`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return a.call(c, http.MethodPost, goalPath(goal, "todos", strconv.FormatInt(todo, 10), "handoff"), nil, b, nil)
		},
	}
	cmd.Flags().StringVar(&goal, "goal-id", "", "goal id")
	_ = cmd.MarkFlagRequired("goal-id")
	cmd.Flags().Int64Var(&todo, "todo-id", 0, "todo id")
	_ = cmd.MarkFlagRequired("todo-id")
	cmd.Flags().StringVar(&b.FromAgent, "agent-id", "", "the agent handing it over (its holder); empty with the admin token: a person")
	cmd.Flags().StringVar(&b.ToAgent, "to", "", "the agent that receives it")
	_ = cmd.MarkFlagRequired("to")
	cmd.Flags().StringVar(&b.Kind, "kind", "", "resume, review, verify or answer_gate (default resume)")
	cmd.Flags().StringVar(&b.Done, "note", "", "what was done")
	cmd.Flags().StringVar(&b.Next, "next", "", "what is next")
	cmd.Flags().StringVar(&b.Questions, "questions", "", "open questions")
	cmd.Flags().Int64SliceVar(&b.EvidenceIDs, "evidence-id", nil, "evidence it rests on (default: the todo's)")
	return cmd
}

// agentGrantCommands are `loopx agent grant` and `loopx agent revoke`: an agent's
// capabilities, through the change kernel.
func (a *app) agentGrantCommands() []*cobra.Command {
	make := func(verb, short string) *cobra.Command {
		var goal, agent string
		var caps []string
		var preview bool
		c := &cobra.Command{
			Use: verb, Short: short, Args: cobra.NoArgs,
			Example: fmt.Sprintf("  loopx agent %s --goal-id demo --agent-id codex --capability publish --preview", verb),
			RunE: func(c *cobra.Command, _ []string) error {
				ch := change.AgentChange{}
				if verb == "grant" {
					ch.Grant = caps
				} else {
					ch.Revoke = caps
				}
				if preview {
					return a.previewChange(c, goal, api.ProposalBody{Kind: store.ProposalAgentSet, AgentID: agent, Agent: ch})
				}
				return a.call(c, http.MethodPost, goalPath(goal, "agents", agent, "capabilities"), nil,
					api.CapabilitiesBody{Grant: ch.Grant, Revoke: ch.Revoke}, printResult)
			},
		}
		c.Flags().StringVar(&goal, "goal-id", "", "goal id")
		_ = c.MarkFlagRequired("goal-id")
		c.Flags().StringVar(&agent, "agent-id", "", "agent id")
		_ = c.MarkFlagRequired("agent-id")
		c.Flags().StringSliceVar(&caps, "capability", nil, "capability (one the goal grants); repeat or comma-separate")
		_ = c.MarkFlagRequired("capability")
		c.Flags().BoolVar(&preview, "preview", false, "only preview the change")
		return c
	}
	return []*cobra.Command{
		make("grant", "Let an agent take todos that need a capability the goal grants"),
		make("revoke", "Take a capability from an agent"),
	}
}

// printGoal prints a goal: its fields, each setting with where its value comes from, and
// its contract.
func printGoal(w io.Writer, raw json.RawMessage) error {
	var g api.GoalAnswer
	if err := json.Unmarshal(raw, &g); err != nil {
		return fmt.Errorf("decode goal: %w", err)
	}
	fmt.Fprintf(w, "#%s · %s · version %d\n", g.ID, g.Status, g.Version)
	if g.Title != "" {
		fmt.Fprintf(w, "title: %s\n", g.Title)
	}
	if g.Objective != "" {
		fmt.Fprintf(w, "objective: %s\n", g.Objective)
	}
	fmt.Fprintf(w, "owners: %s\nmembers: %s\n", orDash(strings.Join(g.Owners, ", ")), orDash(strings.Join(g.Members, ", ")))
	fmt.Fprintln(w, "settings:")
	for _, s := range g.Settings {
		src := "default"
		if s.Source == store.SourceOverride {
			src = "set for this goal; default " + orDash(s.Default)
		}
		fmt.Fprintf(w, "  %s: %s (%s)\n", s.Setting, orDash(s.Value), src)
	}
	c := g.Contract
	fmt.Fprintln(w, "contract:")
	fmt.Fprintf(w, "  editable: %s\n  protected: %s\n", orDash(strings.Join(c.Scope.Editable, ", ")), orDash(strings.Join(c.Scope.Protected, ", ")))
	if c.Scope.Notes != "" {
		fmt.Fprintf(w, "  boundaries: %s\n", c.Scope.Notes)
	}
	fmt.Fprintf(w, "  capabilities: %s\n", orDash(strings.Join(c.Capabilities.Goal, ", ")))
	for _, cr := range c.Criteria {
		fmt.Fprintf(w, "  criterion %s: %s (%s)\n", cr.ID, cr.Text, metWord(cr))
	}
	return nil
}

func metWord(c store.CriterionStatus) string {
	switch {
	case c.WaivedBy != "":
		return "waived by " + c.WaivedBy + ": " + c.Waiver
	case c.Met:
		return fmt.Sprintf("met by evidence %d", c.EvidenceID)
	}
	return "not met"
}

// printResult prints the answer to a change applied at once.
func printResult(w io.Writer, raw json.RawMessage) error {
	var r api.ResultAnswer
	if err := json.Unmarshal(raw, &r); err != nil {
		return fmt.Errorf("decode result: %w", err)
	}
	writeProposal(w, r.Proposal)
	return nil
}

func printTrail(w io.Writer, raw json.RawMessage) error {
	var v struct {
		Decisions []store.GoalDecision `json:"decisions"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return fmt.Errorf("decode trail: %w", err)
	}
	if len(v.Decisions) == 0 {
		fmt.Fprintln(w, "no decisions yet")
	}
	for _, d := range v.Decisions {
		fmt.Fprintf(w, "d%d · %s · %s · by %s · goal version %d\n", d.ID, d.CreatedAt.UTC().Format("2006-01-02 15:04 UTC"), d.Kind, d.DecidedBy, d.GoalVersion)
		if d.Kind == store.DecisionReplan {
			fmt.Fprintf(w, "  %s → %s\n", orDash(d.Before), d.After)
		}
		if d.Reason != "" {
			fmt.Fprintf(w, "  why: %s\n", d.Reason)
		}
	}
	return nil
}

func printDefaults(w io.Writer, raw json.RawMessage) error {
	var v api.DefaultsAnswer
	if err := json.Unmarshal(raw, &v); err != nil {
		return fmt.Errorf("decode defaults: %w", err)
	}
	fmt.Fprintf(w, "machine defaults · version %d", v.Defaults.Version)
	if v.Defaults.UpdatedBy != "" {
		fmt.Fprintf(w, " · changed by %s %s", v.Defaults.UpdatedBy, v.Defaults.UpdatedAt.UTC().Format("2006-01-02 15:04 UTC"))
	}
	fmt.Fprintln(w)
	for _, f := range store.Settings() {
		fmt.Fprintf(w, "  %s: %s (%d %s)\n", f, orDash(v.Defaults.Value(f)), v.Followers[f], plural(v.Followers[f], "goal follows it", "goals follow it"))
	}
	return nil
}

func plural(n int, one, other string) string {
	if n == 1 {
		return one
	}
	return other
}
