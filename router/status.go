package router

import (
	"strconv"
	"time"

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
