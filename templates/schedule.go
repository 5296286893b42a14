package templates

import (
	"fmt"
	"strconv"
	"strings"
)

// Schedule says a cron spec (robfig/cron's standard five fields, or a descriptor) the way a
// person reads it: "every 30 minutes", "weekdays at 09:00", "每天 09:00". A spec it has no
// words for reads as "cron <spec>", never wrong words.
func Schedule(lang, spec string) string {
	zh := Lang(lang) == "zh"
	spec = strings.TrimSpace(spec)
	if spec == "" {
		if zh {
			return "关闭"
		}
		return "off"
	}
	raw := func() string {
		if zh {
			return "cron 表达式 " + spec
		}
		return "cron " + spec
	}
	switch spec {
	case "@hourly":
		return pick(zh, "every hour", "每小时")
	case "@daily", "@midnight":
		return pick(zh, "every day at 00:00", "每天 00:00")
	case "@weekly":
		return pick(zh, "Sundays at 00:00", "每周日 00:00")
	}
	if d, ok := strings.CutPrefix(spec, "@every "); ok {
		return pick(zh, "every "+d, "每 "+d)
	}
	f := strings.Fields(spec)
	if len(f) == 6 { // a leading seconds field
		f = f[1:]
	}
	if len(f) != 5 || f[2] != "*" || f[3] != "*" {
		return raw()
	}
	min, hour, dow := f[0], f[1], f[4]
	if min == "*" && hour == "*" && dow == "*" {
		return pick(zh, "every minute", "每分钟")
	}
	if n, ok := step(min); ok && hour == "*" && dow == "*" {
		if n == 1 {
			return pick(zh, "every minute", "每分钟")
		}
		return pick(zh, fmt.Sprintf("every %d minutes", n), fmt.Sprintf("每 %d 分钟", n))
	}
	if min == "*" {
		return raw()
	}
	m, err := strconv.Atoi(min)
	if err != nil || m < 0 || m > 59 {
		return raw()
	}
	if hour == "*" && dow == "*" {
		if m == 0 {
			return pick(zh, "every hour", "每小时")
		}
		return pick(zh, fmt.Sprintf("every hour at :%02d", m), fmt.Sprintf("每小时第 %d 分", m))
	}
	if n, ok := step(hour); ok && dow == "*" {
		return pick(zh, fmt.Sprintf("every %d hours at :%02d", n, m), fmt.Sprintf("每 %d 小时（第 %d 分）", n, m))
	}
	h, err := strconv.Atoi(hour)
	if err != nil || h < 0 || h > 23 {
		return raw()
	}
	at := fmt.Sprintf("%02d:%02d", h, m)
	days, ok := weekdays(zh, dow)
	if !ok {
		return raw()
	}
	if zh {
		return days + " " + at
	}
	return days + " at " + at
}

func pick(zh bool, en, cn string) string {
	if zh {
		return cn
	}
	return en
}

// step reads "*/n".
func step(s string) (int, bool) {
	v, ok := strings.CutPrefix(s, "*/")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	return n, err == nil && n > 0
}

// weekdays says a day-of-week field: *, 1-5, 0,6 or one day.
func weekdays(zh bool, dow string) (string, bool) {
	en := []string{"Sundays", "Mondays", "Tuesdays", "Wednesdays", "Thursdays", "Fridays", "Saturdays"}
	cn := []string{"每周日", "每周一", "每周二", "每周三", "每周四", "每周五", "每周六"}
	switch strings.ToUpper(dow) {
	case "*":
		return pick(zh, "every day", "每天"), true
	case "1-5", "MON-FRI":
		return pick(zh, "weekdays", "工作日"), true
	case "0,6", "6,0", "SAT,SUN", "SUN,SAT":
		return pick(zh, "weekends", "周末"), true
	}
	n, err := strconv.Atoi(dow)
	if err != nil || n < 0 || n > 7 {
		return "", false
	}
	n %= 7
	return pick(zh, en[n], cn[n]), true
}
