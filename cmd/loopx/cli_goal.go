package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"loopx/api"
	"loopx/api/client"
	"loopx/store"
)

// call runs one API request from a command and prints the answer.
func (a *app) call(cmd *cobra.Command, method, path string, query url.Values, body any, text func(io.Writer, json.RawMessage) error) error {
	c, err := a.newClient()
	if err != nil {
		return err
	}
	raw, err := c.Do(cmd.Context(), client.Request{Method: method, Path: path, Query: query, Body: body, IdempotencyKey: a.key()})
	if err != nil {
		return err
	}
	return a.show(raw, text)
}

// goalPath is /v1/goals/{goal} with the id escaped; the server validates it.
func goalPath(goal string, rest ...string) string { return client.GoalPath(goal, rest...) }

// goalFlags are the settable fields of a goal, shared by create and set.
type goalFlags struct {
	title, objective, heartbeat, heartbeatTZ, report, reportTZ, lang string
	owners, members                                                  []string
	windowHours, allowedSlots, stallTurns                            int
	breaker, progressCard, quietDigests                              string
	reminders                                                        string
	escalateAfter                                                    int
	defaults                                                         []string
	editable, protected                                              []string
	scopeNotes                                                       string
	capabilities, addCapabilities, removeCapabilities                []string
	criteria, addCriteria, removeCriteria                            []string
}

func (g *goalFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&g.title, "title", "", "short title")
	fs.StringVar(&g.objective, "objective", "", "what the goal is for (up to 12,000 characters)")
	fs.StringSliceVar(&g.owners, "owner", nil, "Lark open_id of an owner (may steer and answer gates); repeat or comma-separate")
	fs.StringSliceVar(&g.members, "member", nil, "Lark open_id of a member (may message agents and read); repeat or comma-separate")
	fs.IntVar(&g.windowHours, "window-hours", 0, "quota window in hours (1-720; default 24)")
	fs.IntVar(&g.allowedSlots, "allowed-slots", 0, "turns allowed per window (0 pauses the goal; default 24)")
	fs.StringVar(&g.heartbeat, "heartbeat", "", `heartbeat cron spec, e.g. "*/30 * * * *" ("" = none)`)
	fs.StringVar(&g.heartbeatTZ, "heartbeat-tz", "", "IANA time zone of the heartbeat spec (default UTC)")
	fs.StringVar(&g.report, "report", "", `report digest cron spec, e.g. "0 9 * * 1-5"`)
	fs.StringVar(&g.reportTZ, "report-tz", "", "IANA time zone of the report spec (default UTC)")
	fs.StringVar(&g.lang, "lang", "", "language of messages: en or zh (default en)")
	fs.IntVar(&g.stallTurns, "stall-turns", 0, "turns in a row without progress before asking the owner (0 = off; default 3)")
	fs.StringVar(&g.breaker, "breaker-failures", "", "failed or empty turns in a row before an agent is held: 1-100, off, or default (the machine's, 3 unless set)")
	fs.StringVar(&g.progressCard, "progress-card", "", "a live progress card in chat while turns run: on, off or default (the machine's: on for exec and MCP turns)")
	fs.StringVar(&g.quietDigests, "quiet-digests", "", "skip scheduled reports with nothing new: on, off or default (the machine's: on)")
	fs.StringVar(&g.reminders, "reminder-minutes", "", `gate reminder ladder in minutes, e.g. "30,60,120" (the last repeats), or default`)
	fs.IntVar(&g.escalateAfter, "reminder-escalate-after", 0, "from this reminder on, owners also get it by direct message (1-100)")
	fs.StringArrayVar(&g.defaults, "default", nil, "follow the machine default again for this setting (allowed-slots, heartbeat, ...); repeat")
	fs.StringArrayVar(&g.editable, "scope-editable", nil, `a path pattern agents may change, e.g. "src/**"; repeat ("" empties the list)`)
	fs.StringArrayVar(&g.protected, "scope-protected", nil, `a path pattern agents must not change, e.g. "deploy/**"; repeat ("" empties)`)
	fs.StringVar(&g.scopeNotes, "scope-notes", "", "the scope's boundaries in words")
	fs.StringArrayVar(&g.capabilities, "capability", nil, `a capability the goal grants (write-code, publish); repeat; the whole list ("" empties)`)
	fs.StringArrayVar(&g.addCapabilities, "add-capability", nil, "add a capability the goal grants; repeat")
	fs.StringArrayVar(&g.removeCapabilities, "remove-capability", nil, "remove a capability (agents lose it too); repeat")
	fs.StringArrayVar(&g.criteria, "criterion", nil, `an acceptance criterion, "text" or "g2: text"; repeat; the whole list ("" empties)`)
	fs.StringArrayVar(&g.addCriteria, "add-criterion", nil, `add an acceptance criterion, "text" or "g2: text"; repeat`)
	fs.StringArrayVar(&g.removeCriteria, "remove-criterion", nil, "remove an acceptance criterion by id; repeat")
}

// nonEmpty drops "" from a repeated flag, so a lone "" empties a list.
func nonEmpty(v []string) []string {
	out := []string{}
	for _, s := range v {
		if strings.TrimSpace(s) != "" {
			out = append(out, s)
		}
	}
	return out
}

// criteriaOf reads repeated --criterion flags.
func criteriaOf(v []string) api.Criteria {
	out := api.Criteria{}
	for _, s := range nonEmpty(v) {
		out = append(out, store.ParseCriterion(s))
	}
	return out
}

// settingName reads a setting as a flag names it (allowed-slots, heartbeat) into the API's.
func settingName(s string) string {
	s = strings.ReplaceAll(strings.TrimSpace(s), "-", "_")
	switch s {
	case "heartbeat":
		return store.SettingHeartbeatSpec
	case "report":
		return store.SettingReportSpec
	case "permission_timeout":
		return store.SettingPermissionTimeout
	}
	return s
}

// body fills only the flags given on the command line, so the server keeps its defaults
// (create) or the current values (set).
func (g *goalFlags) body(fs *pflag.FlagSet) api.GoalBody {
	var b api.GoalBody
	str := func(name string, v string) *string {
		if fs.Changed(name) {
			return &v
		}
		return nil
	}
	num := func(name string, v int) *int {
		if fs.Changed(name) {
			return &v
		}
		return nil
	}
	list := func(name string, v []string) *[]string {
		if fs.Changed(name) {
			v = append([]string{}, v...)
			return &v
		}
		return nil
	}
	b.Title, b.Objective = str("title", g.title), str("objective", g.objective)
	b.Owners, b.Members = list("owner", g.owners), list("member", g.members)
	b.WindowHours, b.AllowedSlots = num("window-hours", g.windowHours), num("allowed-slots", g.allowedSlots)
	b.HeartbeatSpec, b.HeartbeatTZ = str("heartbeat", g.heartbeat), str("heartbeat-tz", g.heartbeatTZ)
	b.ReportSpec, b.ReportTZ = str("report", g.report), str("report-tz", g.reportTZ)
	b.Lang, b.StallTurns = str("lang", g.lang), num("stall-turns", g.stallTurns)
	setting := func(name, v string) *api.Setting {
		if !fs.Changed(name) {
			return nil
		}
		s := api.Setting(v)
		return &s
	}
	b.BreakerFailures = setting("breaker-failures", g.breaker)
	b.ProgressCard = setting("progress-card", g.progressCard)
	b.QuietDigests = setting("quiet-digests", g.quietDigests)
	b.ReminderMinutes, b.ReminderEscalateAfter = str("reminder-minutes", g.reminders), num("reminder-escalate-after", g.escalateAfter)
	for _, d := range g.defaults {
		b.Defaults = append(b.Defaults, settingName(d))
	}
	if fs.Changed("scope-editable") {
		v := nonEmpty(g.editable)
		b.ScopeEditable = &v
	}
	if fs.Changed("scope-protected") {
		v := nonEmpty(g.protected)
		b.ScopeProtected = &v
	}
	b.ScopeNotes = str("scope-notes", g.scopeNotes)
	if fs.Changed("capability") {
		v := nonEmpty(g.capabilities)
		b.Capabilities = &v
	}
	b.AddCapabilities, b.RemoveCapabilities = nonEmptyOrNil(g.addCapabilities), nonEmptyOrNil(g.removeCapabilities)
	if fs.Changed("criterion") {
		v := criteriaOf(g.criteria)
		b.Criteria = &v
	}
	if len(g.addCriteria) > 0 {
		b.AddCriteria = criteriaOf(g.addCriteria)
	}
	b.RemoveCriteria = nonEmptyOrNil(g.removeCriteria)
	return b
}

func nonEmptyOrNil(v []string) []string {
	if out := nonEmpty(v); len(out) > 0 {
		return out
	}
	return nil
}

func (a *app) goalCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "goal",
		Short: "Create, list, show, stop, resume and change goals",
		Example: `  loopx goal create --goal-id demo --title "Demo" --owner ou_123 --allowed-slots 12
  loopx goal list
  loopx goal set --goal-id demo --heartbeat "*/30 * * * *" --heartbeat-tz Asia/Shanghai`,
	}
	var goal string
	goalFlag := func(c *cobra.Command) {
		c.Flags().StringVar(&goal, "goal-id", "", "goal id ([a-z0-9][a-z0-9._-]{0,62})")
		_ = c.MarkFlagRequired("goal-id")
	}

	var cf goalFlags
	create := &cobra.Command{
		Use:   "create",
		Short: "Create a goal",
		Example: `  loopx goal create --goal-id demo --title "Ship the demo" --objective "..." \
    --owner ou_123 --window-hours 24 --allowed-slots 12 --heartbeat "*/30 * * * *" --lang en`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			b := cf.body(c.Flags())
			b.GoalID = goal
			return a.call(c, http.MethodPost, "/v1/goals", nil, b, nil)
		},
	}
	goalFlag(create)
	cf.register(create.Flags())

	var status string
	list := &cobra.Command{
		Use:     "list",
		Short:   "List goals",
		Example: `  loopx goal list --status active --format json`,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			q := url.Values{}
			if status != "" {
				q.Set("status", status)
			}
			return a.call(c, http.MethodGet, "/v1/goals", q, nil, printList("goals", "id", "status", "allowed_slots", "window_hours", "title"))
		},
	}
	list.Flags().StringVar(&status, "status", "", "only goals with this status: active, stopped or done")

	show := &cobra.Command{
		Use:     "show",
		Short:   "Show a goal",
		Example: `  loopx goal show --goal-id demo`,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return a.call(c, http.MethodGet, goalPath(goal), nil, nil, printGoal)
		},
	}
	goalFlag(show)

	var preview bool
	previewFlag := func(c *cobra.Command) {
		c.Flags().BoolVar(&preview, "preview", false, "only preview the change: print the proposal (diff and effects) to confirm with `loopx proposal confirm`")
	}
	lifecycle := func(verb, short, example string) *cobra.Command {
		c := &cobra.Command{
			Use: verb, Short: short, Example: example, Args: cobra.NoArgs,
			RunE: func(c *cobra.Command, _ []string) error {
				if preview {
					kind := map[string]string{"stop": "goal.pause", "resume": "goal.resume"}[verb]
					return a.previewChange(c, goal, api.ProposalBody{Kind: kind})
				}
				return a.call(c, http.MethodPost, goalPath(goal, verb), nil, struct{}{}, nil)
			},
		}
		goalFlag(c)
		previewFlag(c)
		return c
	}

	var sf goalFlags
	var version int64
	set := &cobra.Command{
		Use:   "set",
		Short: "Change a goal's settings (compare-and-set on its version)",
		Long: `Change the given settings of a goal. --version is the version you read (goal show);
if the goal changed since, the server answers conflict (exit 1). Without --version the
current version is read first. With --preview nothing changes: the server answers a
proposal (the diff and its effects) that ` + "`loopx proposal confirm`" + ` applies.`,
		Example: `  loopx goal set --goal-id demo --allowed-slots 6 --window-hours 12
  loopx goal set --goal-id demo --version 3 --owner ou_123,ou_456
  loopx goal set --goal-id demo --allowed-slots 50 --preview   # then: loopx proposal confirm p12`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			b := sf.body(c.Flags())
			if preview {
				return a.previewChange(c, goal, proposalBody(b))
			}
			b.Version = version
			if b.Version == 0 {
				v, err := a.currentVersion(c, goalPath(goal))
				if err != nil {
					return err
				}
				b.Version = v
			}
			return a.call(c, http.MethodPatch, goalPath(goal), nil, b, nil)
		},
	}
	goalFlag(set)
	sf.register(set.Flags())
	set.Flags().Int64Var(&version, "version", 0, "the goal version you read (default: read it now)")
	previewFlag(set)

	cmd.AddCommand(create, list, show,
		lifecycle("stop", "Stop a goal: should-run answers paused until resume", "  loopx goal stop --goal-id demo"),
		lifecycle("resume", "Resume a stopped goal", "  loopx goal resume --goal-id demo"),
		set)
	cmd.AddCommand(a.goalContractCommands()...)
	return cmd
}

// currentVersion reads the "version" member of the object at path.
func (a *app) currentVersion(cmd *cobra.Command, path string) (int64, error) {
	c, err := a.newClient()
	if err != nil {
		return 0, err
	}
	raw, err := c.Do(cmd.Context(), client.Request{Method: http.MethodGet, Path: path})
	if err != nil {
		return 0, err
	}
	var v struct {
		Version int64 `json:"version"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return 0, fmt.Errorf("read version: %w", err)
	}
	return v.Version, nil
}

// parsePriority accepts P0..P4 or 0..4.
func parsePriority(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimPrefix(strings.ToUpper(s), "P"))
	if err != nil || n < 0 || n > 4 {
		return 0, usageError{fmt.Errorf("--priority: %q is not P0..P4", s)}
	}
	return n, nil
}
