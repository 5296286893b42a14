package cards

import (
	"time"

	"loopx/store"
	"loopx/templates"
)

// digestView is the data the digest templates render.
type digestView struct {
	store.DigestFacts
	From, To       string // window bounds in the report's zone
	Zone           string
	SkippedTotal   int
	QuotaExhausted bool
	NextHeartbeat  string // "" when no heartbeat is scheduled
	Chart          map[string]any
	SkipLine       string // "idle ×3 · busy ×1", reasons in the digest's language
	QuietLine      string // how long it was quiet before this report ("" when it was not)
	Decisions      []digestDecision
}

// digestDecision is one decision of the goal's trail in the window, oldest first.
type digestDecision struct {
	Kind          string // done | reopen | replan
	When          string
	By            string // open_id of who confirmed it
	Before, After string // a replan's objectives
	Reason        string
}

// reportView prepares digest facts for the templates: times in the report's zone and the
// Lark card chart (turns and slots per day, grouped bars).
func reportView(tpl *templates.Set, f store.DigestFacts, trail []store.GoalDecision, lang string, loc *time.Location, nextHeartbeat time.Time) any {
	const layout = "2006-01-02 15:04"
	v := digestView{
		DigestFacts:    f,
		From:           f.WindowStart.In(loc).Format(layout),
		To:             f.WindowEnd.In(loc).Format(layout),
		Zone:           loc.String(),
		QuotaExhausted: f.AllowedSlots > 0 && f.WindowSpent >= f.AllowedSlots || f.AllowedSlots == 0,
		Decisions:      []digestDecision{},
	}
	for i := len(trail) - 1; i >= 0; i-- { // the trail is newest first; the report reads in order
		d := trail[i]
		v.Decisions = append(v.Decisions, digestDecision{Kind: d.Kind, When: d.CreatedAt.In(loc).Format(layout), By: d.DecidedBy,
			Before: d.Before, After: d.After, Reason: d.Reason})
	}
	if !f.QuietSince.IsZero() {
		v.QuietLine = tpl.Word(lang, "digest.quiet_for", Duration(tpl, lang, f.WindowStart.Sub(f.QuietSince)),
			f.QuietSince.In(loc).Format(layout), v.From, v.Zone)
	}
	for i, s := range f.Skipped {
		v.SkippedTotal += s.Count
		if i > 0 {
			v.SkipLine += tpl.Word(lang, "skip.separator")
		}
		v.SkipLine += tpl.Word(lang, "skip.count", tpl.Word(lang, "skip."+s.Reason), s.Count)
	}
	if !nextHeartbeat.IsZero() {
		v.NextHeartbeat = nextHeartbeat.In(loc).Format(layout)
	}
	if len(f.Days) > 0 {
		turns, slots := tpl.Word(lang, "chart.turns"), tpl.Word(lang, "chart.slots")
		var values []map[string]any
		for _, d := range f.Days {
			values = append(values,
				map[string]any{"day": d.Day[5:], "series": turns, "count": d.Turns},
				map[string]any{"day": d.Day[5:], "series": slots, "count": d.Slots})
		}
		v.Chart = map[string]any{
			"type":        "bar",
			"data":        map[string]any{"values": values},
			"xField":      []string{"day", "series"},
			"yField":      "count",
			"seriesField": "series",
			"legends":     map[string]any{"visible": true, "orient": "bottom"},
		}
	}
	return v
}
