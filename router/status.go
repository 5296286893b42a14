package router

import (
	"context"
	"slices"
	"strconv"
	"time"

	"loopx/change"
	"loopx/store"
)

// statusProblemLimit is how many failed sends and missed fires /status lists; the totals say
// how many more there are.
const statusProblemLimit = 3

// statusMissedWindow is how far back /status counts missed fires.
const statusMissedWindow = 24 * time.Hour

// problemsView is the template data for the failed sends and missed fires of /status. Times
// are shown in the goal's heartbeat zone (UTC when it does not load), codes as strings so the
// templates never do arithmetic on them.
func problemsView(p store.GoalProblems, tz string, advice func(code int) string) map[string]any {
	loc, err := time.LoadLocation(tz)
	if err != nil || tz == "" {
		loc, tz = time.UTC, "UTC"
	}
	const layout = "2006-01-02 15:04"
	failed := []map[string]any{}
	for _, f := range p.Failures {
		failed = append(failed, map[string]any{
			"Code": strconv.Itoa(f.Code), "Hint": advice(f.Code), "Error": f.Error, "Kind": f.Kind,
			"To": f.ReceiveID, "When": f.CreatedAt.In(loc).Format(layout),
		})
	}
	missed := []map[string]any{}
	for _, m := range p.Missed {
		missed = append(missed, map[string]any{
			"When": m.FireAt.In(loc).Format(layout), "Kind": m.Kind, "Agent": m.AgentID,
		})
	}
	return map[string]any{
		"Zone":        tz,
		"Failed":      failed,
		"FailedTotal": p.FailureTotal,
		"FailedMore":  p.FailureTotal - len(p.Failures),
		"Missed":      missed,
		"MissedTotal": p.MissedTotal,
		"MissedMore":  p.MissedTotal - len(p.Missed),
		"MissedHours": int(statusMissedWindow / time.Hour),
	}
}

// statusSettings are the settings with a machine default /status shows, the ones people act
// on from a phone; the workspace and goal show list every one.
func statusSettings() []string {
	return []string{store.SettingAllowedSlots, store.SettingWindowHours, store.SettingStallTurns, store.SettingBreakerFailures}
}

// contractBrief is the part of /status about the contract and the goal's decisions: the
// criteria met, the scope and capabilities in short, each setting with a machine default
// marked as the default or the goal's own, and when and why a done goal was finished.
func (h *handling) contractBrief(ctx context.Context, g store.Goal) (map[string]any, error) {
	criteria, err := store.CriteriaStatus(ctx, h.tx, g.ID, 0, g.Criteria)
	if err != nil {
		return nil, err
	}
	lang, err := h.langFor(ctx, &g)
	if err != nil {
		return nil, err
	}
	defaults, err := store.GetMachineDefaults(ctx, h.tx)
	if err != nil {
		return nil, err
	}
	settings := []map[string]any{}
	for _, v := range store.GoalSettings(g, defaults, store.PermissionPolicy{}) {
		if !slices.Contains(statusSettings(), v.Setting) {
			continue
		}
		value := v.Value
		if value == "0" && (v.Setting == store.SettingStallTurns || v.Setting == store.SettingBreakerFailures) {
			value = h.c.tpl.Word(lang, "setting.off")
		}
		if v.Source == store.SourceDefault {
			value = h.c.tpl.Word(lang, "setting.default_value", value)
		}
		settings = append(settings, map[string]any{"Name": change.FieldName(h.c.tpl, lang, v.Setting), "Value": value})
	}
	out := map[string]any{
		"Criteria": len(criteria), "CriteriaMet": len(criteria) - len(store.Unmet(criteria)),
		"Editable": nonNil(g.ScopeEditable), "Protected": nonNil(g.ScopeProtected), "HasNotes": g.ScopeNotes != "",
		"Grants": nonNil(g.Capabilities), "Settings": settings, "Finished": nil,
	}
	if g.Status == store.GoalDone {
		trail, err := store.ListTrail(ctx, h.tx, g.ID, 1)
		if err != nil {
			return nil, err
		}
		if len(trail) == 1 && trail[0].Kind == store.DecisionDone {
			loc, zone := zoneOf(g.HeartbeatTZ)
			d := trail[0]
			out["Finished"] = map[string]any{"When": d.CreatedAt.In(loc).Format(statusTimeLayout), "Zone": zone,
				"By": d.DecidedBy, "Reason": d.Reason}
		}
	}
	return out, nil
}
