package change

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"loopx/store"
	"loopx/templates"
)

// computed is a request normalized against the goal as it is, its diff and its effects.
type computed struct {
	req     Request
	diff    []store.FieldChange
	effects []store.Effect
}

// compute normalizes req against g (and the agent it names), diffs every field and computes
// the effects. A request that changes nothing or breaks a rule is an *store.Error.
func compute(ctx context.Context, db store.DB, g store.Goal, req Request, now time.Time) (computed, error) {
	switch req.Kind {
	case store.ProposalGoalSet:
		return computeGoal(ctx, db, g, req, now)
	case store.ProposalGoalPause, store.ProposalGoalResume:
		return computeStatus(ctx, db, g, req, now)
	case store.ProposalAgentSet:
		return computeAgent(ctx, db, g, req)
	case store.ProposalGoalDone:
		return computeDone(ctx, db, g, req, now)
	case store.ProposalGoalReopen:
		return computeReopen(g, req, now)
	case store.ProposalGoalReplan:
		return computeReplan(ctx, db, g, req)
	}
	return computed{}, store.Errorf(store.ErrInvalid, "kind", "%q is not a change kind", req.Kind)
}

// goalAfter is g with the change applied: a setting given a value becomes the goal's own
// (an override), a setting named in c.Defaults follows the machine default d again.
func goalAfter(g store.Goal, c GoalChange, d store.MachineDefaults) (store.Goal, error) {
	g.Overrides = slices.Clone(g.Overrides)
	own := func(setting string) {
		if !slices.Contains(g.Overrides, setting) {
			g.Overrides = append(g.Overrides, setting)
		}
	}
	set := func(setting string, dst *string, v *string) {
		if v != nil {
			*dst = strings.TrimSpace(*v)
			if setting != "" {
				own(setting)
			}
		}
	}
	setInt := func(setting string, dst *int, v *int) {
		if v != nil {
			*dst = *v
			own(setting)
		}
	}
	setInt(store.SettingWindowHours, &g.WindowHours, c.WindowHours)
	setInt(store.SettingAllowedSlots, &g.AllowedSlots, c.AllowedSlots)
	setInt(store.SettingStallTurns, &g.StallTurns, c.StallTurns)
	set(store.SettingHeartbeatSpec, &g.HeartbeatSpec, c.HeartbeatSpec)
	set(store.SettingHeartbeatTZ, &g.HeartbeatTZ, c.HeartbeatTZ)
	set(store.SettingReportSpec, &g.ReportSpec, c.ReportSpec)
	set(store.SettingReportTZ, &g.ReportTZ, c.ReportTZ)
	set("", &g.Title, c.Title)
	set("", &g.Objective, c.Objective)
	set(store.SettingLang, &g.Lang, c.Lang)
	g.Owners = editList(g.Owners, c.Owners, c.AddOwners, c.RemoveOwners)
	g.Members = editList(g.Members, c.Members, c.AddMembers, c.RemoveMembers)
	if err := settingsAfter(&g, c); err != nil {
		return g, err
	}
	if err := contractAfter(&g, c); err != nil {
		return g, err
	}
	for _, f := range c.Defaults {
		if !slices.Contains(store.Settings(), f) || f == store.SettingPermissionTimeout {
			return g, store.Errorf(store.ErrInvalid, "defaults", "%q is not a goal setting with a machine default", clipStr(f))
		}
		toDefault(&g, f, d)
	}
	return g, nil
}

// toDefault makes g follow the machine default of setting.
func toDefault(g *store.Goal, setting string, d store.MachineDefaults) {
	g.Overrides = slices.DeleteFunc(g.Overrides, func(o string) bool { return o == setting })
	switch setting {
	case store.SettingWindowHours:
		g.WindowHours = d.WindowHours
	case store.SettingAllowedSlots:
		g.AllowedSlots = d.AllowedSlots
	case store.SettingStallTurns:
		g.StallTurns = d.StallTurns
	case store.SettingHeartbeatSpec:
		g.HeartbeatSpec = d.HeartbeatSpec
	case store.SettingHeartbeatTZ:
		g.HeartbeatTZ = d.HeartbeatTZ
	case store.SettingReportSpec:
		g.ReportSpec = d.ReportSpec
	case store.SettingReportTZ:
		g.ReportTZ = d.ReportTZ
	case store.SettingLang:
		g.Lang = d.Lang
	case store.SettingBreakerFailures:
		g.BreakerFailures = nil
	case store.SettingProgressCard:
		g.ProgressCard = nil
	case store.SettingQuietDigests:
		g.QuietDigests = nil
	case store.SettingReminderMinutes:
		g.ReminderMinutes = nil
	case store.SettingReminderEscalate:
		g.ReminderEscalateAfter = nil
	}
}

// contractAfter applies the contract's part of c to g: scope, capabilities, criteria.
func contractAfter(g *store.Goal, c GoalChange) error {
	trim := func(v []string) []string {
		out := make([]string, 0, len(v))
		for _, s := range v {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
		return out
	}
	if c.ScopeEditable != nil {
		g.ScopeEditable = trim(*c.ScopeEditable)
	}
	if c.ScopeProtected != nil {
		g.ScopeProtected = trim(*c.ScopeProtected)
	}
	if c.ScopeNotes != nil {
		g.ScopeNotes = strings.TrimSpace(*c.ScopeNotes)
	}
	if c.Capabilities != nil || len(c.AddCapabilities) > 0 || len(c.RemoveCapabilities) > 0 {
		lower := func(v []string) []string {
			out := trim(v)
			for i := range out {
				out[i] = strings.ToLower(out[i])
			}
			return out
		}
		var set *[]string
		if c.Capabilities != nil {
			l := lower(*c.Capabilities)
			set = &l
		}
		g.Capabilities = editList(g.Capabilities, set, lower(c.AddCapabilities), lower(c.RemoveCapabilities))
	}
	if c.Criteria != nil || len(c.AddCriteria) > 0 || len(c.RemoveCriteria) > 0 {
		cs := slices.Clone(g.Criteria)
		if c.Criteria != nil {
			cs = slices.Clone(*c.Criteria)
		}
		for _, id := range c.RemoveCriteria {
			id = strings.ToLower(strings.TrimSpace(id))
			if !slices.ContainsFunc(cs, func(x store.Criterion) bool { return x.ID == id }) {
				return store.Errorf(store.ErrInvalid, "remove_criteria", "the goal has no criterion %s", clipStr(id))
			}
			cs = slices.DeleteFunc(cs, func(x store.Criterion) bool { return x.ID == id })
		}
		cs = append(cs, c.AddCriteria...)
		out, err := store.NormalizeCriteria("criteria", "g", cs)
		if err != nil {
			return err
		}
		g.Criteria = out
	}
	return nil
}

func computeGoal(ctx context.Context, db store.DB, g store.Goal, req Request, now time.Time) (computed, error) {
	if g.Status == store.GoalDone {
		return computed{}, doneRefusal(g)
	}
	d, err := store.GetMachineDefaults(ctx, db)
	if err != nil {
		return computed{}, err
	}
	after, err := goalAfter(g, req.Goal, d)
	if err != nil {
		return computed{}, err
	}
	if err := store.CheckGoal(after); err != nil {
		return computed{}, err
	}
	// The normalized request names exactly the fields that change, with their new values.
	var n GoalChange
	var diff []store.FieldChange
	// shown writes a setting's value with its source: a value that follows the machine
	// default reads "24 (default)".
	shown := func(gl store.Goal, setting, v string) string {
		if setting != "" && gl.Source(setting) == store.SourceDefault {
			return v + DefaultMark
		}
		return v
	}
	back := func(setting string) bool {
		if g.Source(setting) == store.SourceOverride && after.Source(setting) == store.SourceDefault {
			n.Defaults = append(n.Defaults, setting)
			return true
		}
		return false
	}
	str := func(field, before, afterV string, dst **string) {
		b, a := shown(g, settingOf(field), before), shown(after, settingOf(field), afterV)
		if b == a {
			return
		}
		diff = append(diff, store.FieldChange{Field: field, Before: b, After: a})
		if !back(settingOf(field)) {
			v := afterV
			*dst = &v
		}
	}
	num := func(field string, before, afterV int, dst **int) {
		b, a := shown(g, settingOf(field), strconv.Itoa(before)), shown(after, settingOf(field), strconv.Itoa(afterV))
		if b == a {
			return
		}
		diff = append(diff, store.FieldChange{Field: field, Before: b, After: a})
		if !back(settingOf(field)) {
			v := afterV
			*dst = &v
		}
	}
	list := func(field string, before, afterV []string, dst **[]string) {
		if !slices.Equal(before, afterV) {
			diff = append(diff, store.FieldChange{Field: field, Before: strings.Join(before, ", "), After: strings.Join(afterV, ", ")})
			v := slices.Clone(afterV)
			*dst = &v
		}
	}
	num("allowed_slots", g.AllowedSlots, after.AllowedSlots, &n.AllowedSlots)
	num("window_hours", g.WindowHours, after.WindowHours, &n.WindowHours)
	str("heartbeat_spec", g.HeartbeatSpec, after.HeartbeatSpec, &n.HeartbeatSpec)
	str("heartbeat_tz", g.HeartbeatTZ, after.HeartbeatTZ, &n.HeartbeatTZ)
	str("report_spec", g.ReportSpec, after.ReportSpec, &n.ReportSpec)
	str("report_tz", g.ReportTZ, after.ReportTZ, &n.ReportTZ)
	list("owners", g.Owners, after.Owners, &n.Owners)
	list("members", g.Members, after.Members, &n.Members)
	num("stall_turns", g.StallTurns, after.StallTurns, &n.StallTurns)
	nullable := func(field, before, afterV string, dst **string) {
		if before != afterV {
			diff = append(diff, store.FieldChange{Field: field, Before: before, After: afterV})
			v := afterV
			if after.Source(field) == store.SourceDefault {
				v = "default"
			}
			*dst = &v
		}
	}
	nullable("breaker_failures", settingShown(g, d, store.SettingBreakerFailures), settingShown(after, d, store.SettingBreakerFailures), &n.BreakerFailures)
	nullable("progress_card", settingShown(g, d, store.SettingProgressCard), settingShown(after, d, store.SettingProgressCard), &n.ProgressCard)
	nullable("quiet_digests", settingShown(g, d, store.SettingQuietDigests), settingShown(after, d, store.SettingQuietDigests), &n.QuietDigests)
	nullable("reminder_minutes", settingShown(g, d, store.SettingReminderMinutes), settingShown(after, d, store.SettingReminderMinutes), &n.ReminderMinutes)
	if b, a := settingShown(g, d, store.SettingReminderEscalate), settingShown(after, d, store.SettingReminderEscalate); b != a {
		diff = append(diff, store.FieldChange{Field: "reminder_escalate_after", Before: b, After: a})
		if after.ReminderEscalateAfter == nil {
			n.Defaults = append(n.Defaults, store.SettingReminderEscalate)
		} else {
			v := *after.ReminderEscalateAfter
			n.ReminderEscalateAfter = &v
		}
	}
	str("title", g.Title, after.Title, &n.Title)
	str("objective", g.Objective, after.Objective, &n.Objective)
	str("lang", g.Lang, after.Lang, &n.Lang)
	list("scope_editable", g.ScopeEditable, after.ScopeEditable, &n.ScopeEditable)
	list("scope_protected", g.ScopeProtected, after.ScopeProtected, &n.ScopeProtected)
	str("scope_notes", g.ScopeNotes, after.ScopeNotes, &n.ScopeNotes)
	list("capabilities", g.Capabilities, after.Capabilities, &n.Capabilities)
	if before, afterC := showCriteria(g.Criteria), showCriteria(after.Criteria); before != afterC {
		diff = append(diff, store.FieldChange{Field: "criteria", Before: before, After: afterC})
		cs := slices.Clone(after.Criteria)
		n.Criteria = &cs
	}
	if len(diff) == 0 {
		return computed{}, store.Errorf(store.ErrInvalid, "goal", "nothing would change: goal %s already has these settings", g.ID)
	}
	out := computed{req: Request{GoalID: g.ID, Kind: req.Kind, Goal: n}, diff: diff}
	if out.effects, err = goalEffects(ctx, db, g, after, now); err != nil {
		return computed{}, err
	}
	out.effects = append(out.effects, settingEffects(g, after, d)...)
	fx, err := contractEffects(ctx, db, g, after)
	if err != nil {
		return computed{}, err
	}
	out.effects = append(out.effects, fx...)
	return out, nil
}

// DefaultMark follows a value in a diff when the value is the machine default the goal
// follows ("24 (default)"); ValueName words it per language.
const DefaultMark = " (default)"

// settingOf is the setting with a machine default a diff field is ("" for the others).
func settingOf(field string) string {
	if slices.Contains(store.Settings(), field) && store.IsMaterialized(field) {
		return field
	}
	return ""
}

// settingShown is a nullable setting's effective value, marked when it is the default.
func settingShown(g store.Goal, d store.MachineDefaults, setting string) string {
	for _, v := range store.GoalSettings(g, d, store.PermissionPolicy{}) {
		if v.Setting == setting {
			if v.Source == store.SourceDefault {
				return v.Value + DefaultMark
			}
			return v.Value
		}
	}
	return ""
}

// showCriteria writes criteria as a diff shows them: "g1: tests pass; g2: docs updated".
func showCriteria(cs []store.Criterion) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = c.ID + ": " + c.Text
	}
	return strings.Join(parts, "; ")
}

func doneRefusal(g store.Goal) error {
	return &store.Error{Kind: store.ErrRefused, Field: "status", Reason: store.ReasonGoalDone,
		Msg: fmt.Sprintf("goal %s is done; it cannot change (reopen it first)", g.ID)}
}

func goalEffects(ctx context.Context, db store.DB, before, after store.Goal, now time.Time) ([]store.Effect, error) {
	var fx []store.Effect
	if before.AllowedSlots != after.AllowedSlots || before.WindowHours != after.WindowHours {
		spentBefore, err := store.SpentSlots(ctx, db, before.ID, time.Duration(before.WindowHours)*time.Hour, now)
		if err != nil {
			return nil, err
		}
		spentAfter, err := store.SpentSlots(ctx, db, before.ID, time.Duration(after.WindowHours)*time.Hour, now)
		if err != nil {
			return nil, err
		}
		fx = append(fx, store.Effect{Code: "quota", Args: map[string]string{
			"left": itoa(max(before.AllowedSlots-spentBefore, 0)), "allowed": itoa(before.AllowedSlots),
			"window": itoa(before.WindowHours), "left_after": itoa(max(after.AllowedSlots-spentAfter, 0)),
			"allowed_after": itoa(after.AllowedSlots), "window_after": itoa(after.WindowHours),
		}})
		if after.AllowedSlots == 0 {
			fx = append(fx, store.Effect{Code: "quota_zero"})
		}
	}
	if before.HeartbeatSpec != after.HeartbeatSpec || before.HeartbeatTZ != after.HeartbeatTZ {
		fx = append(fx, nextFire("heartbeat", before.HeartbeatSpec, before.HeartbeatTZ, after.HeartbeatSpec, after.HeartbeatTZ, now))
	}
	if before.ReportSpec != after.ReportSpec || before.ReportTZ != after.ReportTZ {
		fx = append(fx, nextFire("report", before.ReportSpec, before.ReportTZ, after.ReportSpec, after.ReportTZ, now))
	}
	fx = append(fx, people("owners", before.Owners, after.Owners)...)
	fx = append(fx, people("members", before.Members, after.Members)...)
	if len(after.Owners) == 0 && len(before.Owners) > 0 {
		fx = append(fx, store.Effect{Code: "no_owners"})
	}
	if before.StallTurns != after.StallTurns {
		if after.StallTurns == 0 {
			fx = append(fx, store.Effect{Code: "stall_off"})
		} else {
			fx = append(fx, store.Effect{Code: "stall", Args: map[string]string{"turns": itoa(after.StallTurns)}})
		}
	}
	return fx, nil
}

// nextFire words the next fire of a schedule before and after the change, each in its zone.
func nextFire(code, spec, tz, spec2, tz2 string, now time.Time) store.Effect {
	return store.Effect{Code: code, Args: map[string]string{
		"before": fireAt(spec, tz, now), "after": fireAt(spec2, tz2, now), "tz": tz, "tz_after": tz2,
	}}
}

// fireAt is the next fire of spec in zone tz after now, "" when there is no schedule.
func fireAt(spec, tz string, now time.Time) string {
	if spec == "" {
		return ""
	}
	sched, err := cron.ParseStandard(spec)
	if err != nil {
		return ""
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return ""
	}
	next := sched.Next(now.In(loc))
	if next.IsZero() {
		return ""
	}
	if next.Sub(now) < 24*time.Hour && next.YearDay() == now.In(loc).YearDay() {
		return next.Format("15:04")
	}
	return next.Format("2006-01-02 15:04")
}

func people(field string, before, after []string) []store.Effect {
	var added, removed []string
	for _, p := range after {
		if !slices.Contains(before, p) {
			added = append(added, p)
		}
	}
	for _, p := range before {
		if !slices.Contains(after, p) {
			removed = append(removed, p)
		}
	}
	var fx []store.Effect
	if len(added) > 0 {
		fx = append(fx, store.Effect{Code: field + "_added", Args: map[string]string{"who": strings.Join(added, ", ")}})
	}
	if len(removed) > 0 {
		fx = append(fx, store.Effect{Code: field + "_removed", Args: map[string]string{"who": strings.Join(removed, ", ")}})
	}
	return fx
}

func computeStatus(ctx context.Context, db store.DB, g store.Goal, req Request, now time.Time) (computed, error) {
	want := store.GoalStopped
	if req.Kind == store.ProposalGoalResume {
		want = store.GoalActive
	}
	switch {
	case g.Status == store.GoalDone:
		return computed{}, &store.Error{Kind: store.ErrRefused, Field: "status", Reason: store.ReasonGoalDone,
			Msg: fmt.Sprintf("goal %s is done; it cannot be paused or resumed (reopen it instead)", g.ID)}
	case g.Status == want && want == store.GoalStopped:
		return computed{}, store.Errorf(store.ErrInvalid, "status", "goal %s is already paused", g.ID)
	case g.Status == want:
		return computed{}, store.Errorf(store.ErrInvalid, "status", "goal %s is already running", g.ID)
	}
	out := computed{
		req:  Request{GoalID: g.ID, Kind: req.Kind},
		diff: []store.FieldChange{{Field: "status", Before: g.Status, After: want}},
	}
	if want == store.GoalStopped {
		gates, live, err := store.CountOpenGates(ctx, db, g.ID, now)
		if err != nil {
			return computed{}, err
		}
		out.effects = append(out.effects, store.Effect{Code: "pause"})
		if gates > 0 {
			out.effects = append(out.effects, store.Effect{Code: "pause_gates", Args: map[string]string{"n": itoa(gates)}})
		}
		if live > 0 {
			out.effects = append(out.effects, store.Effect{Code: "pause_live", Args: map[string]string{"n": itoa(live)}})
		}
		return out, nil
	}
	out.effects = append(out.effects, store.Effect{Code: "resume", Args: map[string]string{
		"next": fireAt(g.HeartbeatSpec, g.HeartbeatTZ, now), "tz": g.HeartbeatTZ,
	}})
	return out, nil
}

func findAgent(ctx context.Context, db store.DB, goalID, agentID string) (store.Agent, []store.Agent, error) {
	agents, err := store.ListAgents(ctx, db, goalID)
	if err != nil {
		return store.Agent{}, nil, err
	}
	for _, a := range agents {
		if a.ID == agentID {
			return a, agents, nil
		}
	}
	return store.Agent{}, agents, store.Errorf(store.ErrNotFound, "agent_id", "no agent %q on goal %s", agentID, goalID)
}

func settingsOf(a store.Agent) store.AgentSettings {
	return store.AgentSettings{Runner: a.Runner, RunnerConfig: a.RunnerConfig, WorkMode: a.WorkMode, IsDefault: a.IsDefault,
		Capabilities: slices.Clone(a.Capabilities)}
}

func agentAfter(a store.AgentSettings, c AgentChange) store.AgentSettings {
	if c.Runner != nil {
		a.Runner = strings.TrimSpace(*c.Runner)
	}
	if c.RunnerConfig != nil {
		a.RunnerConfig = *c.RunnerConfig
	}
	if c.WorkMode != nil {
		a.WorkMode = strings.TrimSpace(*c.WorkMode)
	}
	if c.IsDefault != nil {
		a.IsDefault = *c.IsDefault
	}
	if c.Capabilities != nil || len(c.Grant) > 0 || len(c.Revoke) > 0 {
		lower := func(v []string) []string {
			out := make([]string, 0, len(v))
			for _, s := range v {
				if s = strings.ToLower(strings.TrimSpace(s)); s != "" {
					out = append(out, s)
				}
			}
			return out
		}
		var set *[]string
		if c.Capabilities != nil {
			l := lower(*c.Capabilities)
			set = &l
		}
		a.Capabilities = editList(a.Capabilities, set, lower(c.Grant), lower(c.Revoke))
	}
	return a
}

func computeAgent(ctx context.Context, db store.DB, g store.Goal, req Request) (computed, error) {
	if g.Status == store.GoalDone {
		return computed{}, doneRefusal(g)
	}
	a, agents, err := findAgent(ctx, db, g.ID, req.AgentID)
	if err != nil {
		return computed{}, err
	}
	before := settingsOf(a)
	after := agentAfter(before, req.Agent)
	if err := store.CheckAgentSettings(after); err != nil {
		return computed{}, err
	}
	if miss := store.Missing(after.Capabilities, g.Capabilities); len(miss) > 0 {
		return computed{}, store.Errorf(store.ErrInvalid, "capabilities", "goal %s grants no capability %s (it grants: %s); add it to the goal first",
			g.ID, strings.Join(miss, ", "), noneIfEmpty(strings.Join(g.Capabilities, ", ")))
	}
	var n AgentChange
	var diff []store.FieldChange
	var fx []store.Effect
	if before.Runner != after.Runner {
		diff = append(diff, store.FieldChange{Field: "runner", Before: before.Runner, After: after.Runner})
		n.Runner = &after.Runner
		fx = append(fx, store.Effect{Code: "runner", Args: map[string]string{"agent": a.ID, "runner": after.Runner}})
	}
	if !jsonEqual(before.RunnerConfig, after.RunnerConfig) {
		diff = append(diff, store.FieldChange{Field: "runner_config", Before: compact(before.RunnerConfig), After: compact(after.RunnerConfig)})
		cfg := json.RawMessage(compact(after.RunnerConfig))
		n.RunnerConfig = &cfg
		if before.Runner == after.Runner {
			fx = append(fx, store.Effect{Code: "runner", Args: map[string]string{"agent": a.ID, "runner": after.Runner}})
		}
	}
	if before.WorkMode != after.WorkMode {
		diff = append(diff, store.FieldChange{Field: "work_mode", Before: before.WorkMode, After: after.WorkMode})
		n.WorkMode = &after.WorkMode
		fx = append(fx, store.Effect{Code: "work_mode_" + after.WorkMode, Args: map[string]string{"agent": a.ID}})
	}
	if before.IsDefault != after.IsDefault {
		diff = append(diff, store.FieldChange{Field: "is_default", Before: strconv.FormatBool(before.IsDefault), After: strconv.FormatBool(after.IsDefault)})
		n.IsDefault = &after.IsDefault
		prev := ""
		for _, o := range agents {
			if o.IsDefault && o.ID != a.ID {
				prev = o.ID
			}
		}
		if after.IsDefault {
			fx = append(fx, store.Effect{Code: "default_agent", Args: map[string]string{"agent": a.ID, "before": prev}})
		} else {
			fx = append(fx, store.Effect{Code: "no_default_agent", Args: map[string]string{"agent": a.ID}})
		}
	}
	if !slices.Equal(before.Capabilities, after.Capabilities) {
		diff = append(diff, store.FieldChange{Field: "capabilities", Before: strings.Join(before.Capabilities, ", "), After: strings.Join(after.Capabilities, ", ")})
		caps := slices.Clone(after.Capabilities)
		n.Capabilities = &caps
		if added := store.Missing(after.Capabilities, before.Capabilities); len(added) > 0 {
			fx = append(fx, store.Effect{Code: "capabilities_granted", Args: map[string]string{"agent": a.ID, "names": strings.Join(added, ", ")}})
		}
		if removed := store.Missing(before.Capabilities, after.Capabilities); len(removed) > 0 {
			fx = append(fx, store.Effect{Code: "capabilities_revoked", Args: map[string]string{"agent": a.ID, "names": strings.Join(removed, ", ")}})
		}
	}
	if len(diff) == 0 {
		return computed{}, store.Errorf(store.ErrInvalid, "agent", "nothing would change: agent %s already has these settings", a.ID)
	}
	return computed{req: Request{GoalID: g.ID, Kind: req.Kind, AgentID: a.ID, Agent: n}, diff: diff, effects: fx}, nil
}

func jsonEqual(a, b json.RawMessage) bool { return compact(a) == compact(b) }

func compact(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "{}"
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return string(raw)
	}
	return buf.String()
}

// apply makes the normalized change on the locked goal g (still at the proposal's version),
// proposal p settled by m.Actor. An agent change also moves the goal's version on, so other
// proposals computed before it go stale. A change of the objective (a replan, or a goal.set
// naming it) is recorded in the goal's trail, and so are done and reopen.
func (k *Kernel) apply(ctx context.Context, tx *store.Tx, g store.Goal, req Request, p store.Proposal, m store.Meta, now time.Time) (store.Goal, error) {
	switch req.Kind {
	case store.ProposalGoalSet:
		d, err := store.GetMachineDefaults(ctx, tx)
		if err != nil {
			return store.Goal{}, err
		}
		after, err := goalAfter(g, req.Goal, d)
		if err != nil {
			return store.Goal{}, err
		}
		out, err := store.WriteGoal(ctx, tx, after, now)
		if err != nil || out.Objective == g.Objective {
			return out, err
		}
		_, err = store.InsertDecision(ctx, tx, store.GoalDecision{GoalID: g.ID, Kind: store.DecisionReplan, ProposalID: p.ID,
			GoalVersion: out.Version, Before: g.Objective, After: out.Objective, ProposedBy: p.ProposedBy, DecidedBy: m.Actor}, now)
		return out, err
	case store.ProposalGoalPause:
		return store.SetGoalStatus(ctx, tx, g.ID, store.GoalStopped, now)
	case store.ProposalGoalResume:
		return store.SetGoalStatus(ctx, tx, g.ID, store.GoalActive, now)
	case store.ProposalAgentSet:
		a, err := store.LockAgent(ctx, tx, g.ID, req.AgentID)
		if err != nil {
			return store.Goal{}, err
		}
		after := agentAfter(settingsOf(a), req.Agent)
		if miss := store.Missing(after.Capabilities, g.Capabilities); len(miss) > 0 {
			return store.Goal{}, store.Errorf(store.ErrRefused, "capabilities", "goal %s no longer grants %s", g.ID, strings.Join(miss, ", "))
		}
		if _, err := store.SetAgentSettings(ctx, tx, g.ID, a.ID, after); err != nil {
			return store.Goal{}, err
		}
		return store.WriteGoal(ctx, tx, g, now)
	case store.ProposalGoalDone:
		return k.applyDone(ctx, tx, g, req, p, m, now)
	case store.ProposalGoalReopen:
		return applyReopen(ctx, tx, g, req, p, m, now)
	case store.ProposalGoalReplan:
		return applyReplan(ctx, tx, g, req, p, m, now)
	}
	return store.Goal{}, store.Errorf(store.ErrInvalid, "kind", "%q is not a change kind", req.Kind)
}

func itoa(n int) string { return strconv.Itoa(n) }

// settingsAfter applies the changes of the settings with a machine default to g ("default"
// puts the machine default back). A value that is not one of the forms is ErrInvalid.
func settingsAfter(g *store.Goal, c GoalChange) error {
	if c.BreakerFailures != nil {
		switch v := strings.ToLower(strings.TrimSpace(*c.BreakerFailures)); v {
		case "default":
			g.BreakerFailures = nil
		case "off":
			zero := 0
			g.BreakerFailures = &zero
		default:
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n > 100 {
				return store.Errorf(store.ErrInvalid, "breaker_failures", "%q is not a number of failures from 0 (off) to 100, off or default", clipStr(v))
			}
			g.BreakerFailures = &n
		}
	}
	onOff := func(field string, v *string, dst **bool) error {
		if v == nil {
			return nil
		}
		switch strings.ToLower(strings.TrimSpace(*v)) {
		case "default":
			*dst = nil
		case "on", "true", "1", "yes":
			t := true
			*dst = &t
		case "off", "false", "0", "no":
			f := false
			*dst = &f
		default:
			return store.Errorf(store.ErrInvalid, field, "%q is not on, off or default", clipStr(*v))
		}
		return nil
	}
	if err := onOff("progress_card", c.ProgressCard, &g.ProgressCard); err != nil {
		return err
	}
	if err := onOff("quiet_digests", c.QuietDigests, &g.QuietDigests); err != nil {
		return err
	}
	if c.ReminderMinutes != nil {
		v := strings.TrimSpace(*c.ReminderMinutes)
		if strings.EqualFold(v, "default") {
			g.ReminderMinutes = nil
		} else {
			ladder, err := ParseLadder(v)
			if err != nil {
				return err
			}
			g.ReminderMinutes = ladder
		}
	}
	if c.ReminderEscalateAfter != nil {
		n := *c.ReminderEscalateAfter
		g.ReminderEscalateAfter = &n
	}
	return nil
}

// ParseLadder reads a reminder ladder as people type it: waits in minutes, "30,60,120" (or
// separated by spaces).
func ParseLadder(v string) ([]int, error) {
	fields := strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' || r == '，' })
	if len(fields) == 0 || len(fields) > 10 {
		return nil, store.Errorf(store.ErrInvalid, "reminder_minutes", "give 1 to 10 waits in minutes, such as 30,60,120")
	}
	out := make([]int, len(fields))
	for i, f := range fields {
		n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(f), "m"))
		if err != nil || n < 1 || n > 7*24*60 {
			return nil, store.Errorf(store.ErrInvalid, "reminder_minutes", "%q is not a wait from 1 to 10080 minutes", clipStr(f))
		}
		out[i] = n
	}
	return out, nil
}

func clipStr(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// showInt and showBool write a setting with a machine default in a diff: its value, or
// "default".
func showInt(v *int) string {
	if v == nil {
		return "default"
	}
	return strconv.Itoa(*v)
}

func showBool(v *bool) string {
	switch {
	case v == nil:
		return "default"
	case *v:
		return "on"
	}
	return "off"
}

// settingEffects words what a change of the settings with a machine default does, with
// the machine default spelled out where it applies.
func settingEffects(before, after store.Goal, d store.MachineDefaults) []store.Effect {
	var fx []store.Effect
	mark := func(v bool) string {
		if v {
			return "1"
		}
		return ""
	}
	if showInt(before.BreakerFailures) != showInt(after.BreakerFailures) {
		n := after.Breaker(d)
		code := "breaker"
		if n == 0 {
			code = "breaker_off"
		}
		fx = append(fx, store.Effect{Code: code, Args: map[string]string{"turns": itoa(n), "default": mark(after.BreakerFailures == nil)}})
	}
	if showBool(before.ProgressCard) != showBool(after.ProgressCard) {
		code := "progress_off"
		if after.ProgressCard == nil && d.ProgressCard || after.ProgressCard != nil && *after.ProgressCard {
			code = "progress_on"
		}
		fx = append(fx, store.Effect{Code: code, Args: map[string]string{"default": mark(after.ProgressCard == nil)}})
	}
	if showBool(before.QuietDigests) != showBool(after.QuietDigests) {
		code := "quiet_off"
		if after.Quiet(d) {
			code = "quiet_on"
		}
		fx = append(fx, store.Effect{Code: code, Args: map[string]string{"default": mark(after.QuietDigests == nil)}})
	}
	return fx
}

// Words says a proposal's effects in lang, one sentence each.
func Words(tpl *templates.Set, lang string, effects []store.Effect) ([]string, error) {
	out := make([]string, 0, len(effects))
	for _, e := range effects {
		if f, ok := e.Args["field"]; ok { // a setting's name, worded in lang
			args := maps.Clone(e.Args)
			args["field"] = FieldName(tpl, lang, f)
			e.Args = args
		}
		s, err := tpl.Text(lang, "effect", e)
		if err != nil {
			return nil, fmt.Errorf("word effect %s: %w", e.Code, err)
		}
		out = append(out, s)
	}
	return out, nil
}

// FieldName is how lang names a diff's field.
func FieldName(tpl *templates.Set, lang, field string) string {
	s, err := tpl.Text(lang, "field", map[string]string{"Field": field, "Value": ""})
	if err != nil {
		return field
	}
	return s
}

// ValueName words a field's value for people where the value is a state ("stopped" reads
// "Paused", "已暂停"); any other value reads as it is.
func ValueName(tpl *templates.Set, lang, field, value string) string {
	if base, ok := strings.CutSuffix(value, DefaultMark); ok {
		shown := "—"
		if base != "" {
			shown = ValueName(tpl, lang, field, base)
		}
		return tpl.Word(lang, "setting.default_value", shown)
	}
	if value == "" {
		return ""
	}
	s, err := tpl.Text(lang, "field", map[string]string{"Field": field, "Value": value})
	if err != nil {
		return value
	}
	return s
}

func noneIfEmpty(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
