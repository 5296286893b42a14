package cards

import (
	"strconv"
	"time"

	"loopx/store"
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
}

// skipReasons names should-run states (the skip reasons of heartbeat ticks) for people.
var skipReasons = map[string]map[string]string{
	"en": {"idle": "no runnable todo", "busy": "a turn was live", "waiting": "waiting for an owner",
		"throttled": "slot budget used up", "paused": "goal paused", "stalled": "stalled, asked the owner",
		"decide_failed": "decision failed", "not_found": "agent not found"},
	"zh": {"idle": "没有可执行的待办", "busy": "上一轮仍在进行", "waiting": "等待负责人决定",
		"throttled": "配额已用完", "paused": "目标已暂停", "stalled": "停滞，已询问负责人",
		"decide_failed": "决策失败", "not_found": "找不到智能体"},
}

// ReportView prepares digest facts for the templates: times in the report's zone and the
// Lark card chart (turns and slots per day, grouped bars).
func ReportView(f store.DigestFacts, lang string, loc *time.Location, nextHeartbeat time.Time) any {
	const layout = "2006-01-02 15:04"
	v := digestView{
		DigestFacts:    f,
		From:           f.WindowStart.In(loc).Format(layout),
		To:             f.WindowEnd.In(loc).Format(layout),
		Zone:           loc.String(),
		QuotaExhausted: f.AllowedSlots > 0 && f.WindowSpent >= f.AllowedSlots || f.AllowedSlots == 0,
	}
	sep, times := " · ", " ×"
	if lang == "zh" {
		sep = "；"
	}
	for i, s := range f.Skipped {
		v.SkippedTotal += s.Count
		label := skipReasons[lang][s.Reason]
		if label == "" {
			label = s.Reason
		}
		if i > 0 {
			v.SkipLine += sep
		}
		v.SkipLine += label + times + strconv.Itoa(s.Count)
	}
	if !nextHeartbeat.IsZero() {
		v.NextHeartbeat = nextHeartbeat.In(loc).Format(layout)
	}
	if len(f.Days) > 0 {
		turns, slots := "turns", "slots"
		if lang == "zh" {
			turns, slots = "轮次", "配额"
		}
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
