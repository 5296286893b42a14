package templates_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"loopx/templates"
)

func TestScheduleReadsInWords(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ spec, en, zh string }{
		{"* * * * *", "every minute", "每分钟"},
		{"*/1 * * * *", "every minute", "每分钟"},
		{"*/30 * * * *", "every 30 minutes", "每 30 分钟"},
		{"*/2 * * * *", "every 2 minutes", "每 2 分钟"},
		{"0 9 * * 1-5", "weekdays at 09:00", "工作日 09:00"},
		{"30 18 * * *", "every day at 18:30", "每天 18:30"},
		{"0 * * * *", "every hour", "每小时"},
		{"15 */4 * * *", "every 4 hours at :15", "每 4 小时（第 15 分）"},
		{"0 10 * * 1", "Mondays at 10:00", "每周一 10:00"},
		{"@every 90m", "every 90m", "每 90m"},
		{"", "off", "关闭"},
		{"0 9 1 * *", "cron 0 9 1 * *", "cron 表达式 0 9 1 * *"},
	} {
		require.Equal(t, c.en, templates.Schedule("en", c.spec), c.spec)
		require.Equal(t, c.zh, templates.Schedule("zh", c.spec), c.spec)
	}
}
