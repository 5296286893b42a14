package change

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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
	}
	return computed{}, store.Errorf(store.ErrInvalid, "kind", "%q is not a change kind", req.Kind)
}

// goalAfter is g with the change applied.
func goalAfter(g store.Goal, c GoalChange) store.Goal {
	set := func(dst *string, v *string) {
		if v != nil {
			*dst = strings.TrimSpace(*v)
		}
	}
	setInt := func(dst *int, v *int) {
		if v != nil {
			*dst = *v
		}
	}
	setInt(&g.WindowHours, c.WindowHours)
	setInt(&g.AllowedSlots, c.AllowedSlots)
	setInt(&g.StallTurns, c.StallTurns)
	set(&g.HeartbeatSpec, c.HeartbeatSpec)
	set(&g.HeartbeatTZ, c.HeartbeatTZ)
	set(&g.ReportSpec, c.ReportSpec)
	set(&g.ReportTZ, c.ReportTZ)
	set(&g.Title, c.Title)
	set(&g.Objective, c.Objective)
	set(&g.Lang, c.Lang)
	g.Owners = editList(g.Owners, c.Owners, c.AddOwners, c.RemoveOwners)
	g.Members = editList(g.Members, c.Members, c.AddMembers, c.RemoveMembers)
	return g
}

func computeGoal(ctx context.Context, db store.DB, g store.Goal, req Request, now time.Time) (computed, error) {
	if g.Status == store.GoalDone {
		return computed{}, store.Errorf(store.ErrRefused, "status", "goal %s is done; it cannot change", g.ID)
	}
	after := goalAfter(g, req.Goal)
	if err := store.CheckGoal(after); err != nil {
		return computed{}, err
	}
	// The normalized request names exactly the fields that change, with their new values.
	var n GoalChange
	var diff []store.FieldChange
	str := func(field string, before, after string, dst **string) {
		if before != after {
			diff = append(diff, store.FieldChange{Field: field, Before: before, After: after})
			v := after
			*dst = &v
		}
	}
	num := func(field string, before, after int, dst **int) {
		if before != after {
			diff = append(diff, store.FieldChange{Field: field, Before: strconv.Itoa(before), After: strconv.Itoa(after)})
			v := after
			*dst = &v
		}
	}
	list := func(field string, before, after []string, dst **[]string) {
		if !slices.Equal(before, after) {
			diff = append(diff, store.FieldChange{Field: field, Before: strings.Join(before, ", "), After: strings.Join(after, ", ")})
			v := slices.Clone(after)
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
	str("title", g.Title, after.Title, &n.Title)
	str("objective", g.Objective, after.Objective, &n.Objective)
	str("lang", g.Lang, after.Lang, &n.Lang)
	if len(diff) == 0 {
		return computed{}, store.Errorf(store.ErrInvalid, "goal", "nothing would change: goal %s already has these settings", g.ID)
	}
	out := computed{req: Request{GoalID: g.ID, Kind: req.Kind, Goal: n}, diff: diff}
	var err error
	if out.effects, err = goalEffects(ctx, db, g, after, now); err != nil {
		return computed{}, err
	}
	return out, nil
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
		return computed{}, store.Errorf(store.ErrRefused, "status", "goal %s is done; it cannot be paused or resumed", g.ID)
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
	return store.AgentSettings{Runner: a.Runner, RunnerConfig: a.RunnerConfig, WorkMode: a.WorkMode, IsDefault: a.IsDefault}
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
	return a
}

func computeAgent(ctx context.Context, db store.DB, g store.Goal, req Request) (computed, error) {
	if g.Status == store.GoalDone {
		return computed{}, store.Errorf(store.ErrRefused, "status", "goal %s is done; it cannot change", g.ID)
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

// apply makes the normalized change on the locked goal g (still at the proposal's version).
// An agent change also moves the goal's version on, so other proposals computed before it go
// stale.
func apply(ctx context.Context, tx *store.Tx, g store.Goal, req Request, now time.Time) (store.Goal, error) {
	switch req.Kind {
	case store.ProposalGoalSet:
		return store.WriteGoal(ctx, tx, goalAfter(g, req.Goal), now)
	case store.ProposalGoalPause:
		return store.SetGoalStatus(ctx, tx, g.ID, store.GoalStopped, now)
	case store.ProposalGoalResume:
		return store.SetGoalStatus(ctx, tx, g.ID, store.GoalActive, now)
	case store.ProposalAgentSet:
		a, err := store.LockAgent(ctx, tx, g.ID, req.AgentID)
		if err != nil {
			return store.Goal{}, err
		}
		if _, err := store.SetAgentSettings(ctx, tx, g.ID, a.ID, agentAfter(settingsOf(a), req.Agent)); err != nil {
			return store.Goal{}, err
		}
		return store.WriteGoal(ctx, tx, g, now)
	}
	return store.Goal{}, store.Errorf(store.ErrInvalid, "kind", "%q is not a change kind", req.Kind)
}

func itoa(n int) string { return strconv.Itoa(n) }

// Words says a proposal's effects in lang, one sentence each.
func Words(tpl *templates.Set, lang string, effects []store.Effect) ([]string, error) {
	out := make([]string, 0, len(effects))
	for _, e := range effects {
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
	if value == "" {
		return ""
	}
	s, err := tpl.Text(lang, "field", map[string]string{"Field": field, "Value": value})
	if err != nil {
		return value
	}
	return s
}
