package scheduler

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// next is the pure function the loop uses: first fire strictly after `after`.
func next(t *testing.T, spec, tz string, after time.Time) time.Time {
	t.Helper()
	s, err := ParseSpec(spec, tz)
	require.NoError(t, err)
	return s.Next(after)
}

func TestNextTable(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, spec, tz, after, want string
	}{
		{"utc quarter hours", "*/15 * * * *", "UTC", "2026-05-04T10:07:00Z", "2026-05-04T10:15:00Z"},
		{"utc strictly after", "*/15 * * * *", "UTC", "2026-05-04T10:15:00Z", "2026-05-04T10:30:00Z"},
		{"utc weekly monday", "0 9 * * 1", "UTC", "2026-05-05T09:00:00Z", "2026-05-11T09:00:00Z"},
		{"shanghai 09:00 is 01:00Z", "0 9 * * *", "Asia/Shanghai", "2026-06-01T00:00:00Z", "2026-06-01T01:00:00Z"},
		{"shanghai after 09:00 -> next day", "0 9 * * *", "Asia/Shanghai", "2026-06-01T01:00:00Z", "2026-06-02T01:00:00Z"},
		{"shanghai minutely", "* * * * *", "Asia/Shanghai", "2026-06-01T00:00:30Z", "2026-06-01T00:01:00Z"},
		// America/New_York 2026: DST starts 2026-03-08 02:00 EST (07:00Z), ends 2026-11-01 02:00 EDT (06:00Z).
		{"ny spring: 02:30 does not exist, fires once at 03:00 EDT", "30 2 * * *", "America/New_York", "2026-03-08T05:00:00Z", "2026-03-08T07:00:00Z"},
		{"ny spring: after the gap fire, the next day's 02:30 EDT", "30 2 * * *", "America/New_York", "2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"},
		{"ny spring: minutely 01:59 EST -> 03:00 EDT", "* * * * *", "America/New_York", "2026-03-08T06:59:00Z", "2026-03-08T07:00:00Z"},
		{"ny spring: minutely after 03:00 EDT -> 03:01", "* * * * *", "America/New_York", "2026-03-08T07:00:00Z", "2026-03-08T07:01:00Z"},
		{"ny spring: 03:00 itself is a normal fire", "0 3 * * *", "America/New_York", "2026-03-08T05:00:00Z", "2026-03-08T07:00:00Z"},
		{"ny fall: 01:30 fires at its first occurrence (EDT)", "30 1 * * *", "America/New_York", "2026-11-01T04:00:00Z", "2026-11-01T05:30:00Z"},
		{"ny fall: the repeated 01:30 EST does not fire again", "30 1 * * *", "America/New_York", "2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"},
		{"ny fall: hourly skips the repeated 01:00 EST", "0 * * * *", "America/New_York", "2026-11-01T05:00:00Z", "2026-11-01T07:00:00Z"},
		{"ny fall: minutely 01:59 EDT -> 02:00 EST", "* * * * *", "America/New_York", "2026-11-01T05:59:00Z", "2026-11-01T07:00:00Z"},
		{"ny fall: starting inside the repeated hour", "45 1 * * *", "America/New_York", "2026-11-01T06:30:00Z", "2026-11-02T06:45:00Z"},
		{"ny summer normal", "0 9 * * *", "America/New_York", "2026-07-01T00:00:00Z", "2026-07-01T13:00:00Z"},
		{"every is real time", "@every 90m", "America/New_York", "2026-03-08T06:30:00Z", "2026-03-08T08:00:00Z"},
		{"hourly descriptor", "@hourly", "UTC", "2026-05-04T10:07:00Z", "2026-05-04T11:00:00Z"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got := next(t, c.spec, c.tz, utc(c.after))
			require.Equal(t, utc(c.want), got.UTC(), "next(%q, %q, %s)", c.spec, c.tz, c.after)
		})
	}
}

// A whole DST day of minutely fires: every real minute fires at most once, the spring gap
// collapses to one fire, the repeated fall hour does not fire twice, and nothing else is lost.
func TestNextDSTDays(t *testing.T) {
	t.Parallel()
	for _, day := range []struct {
		from, to string
		fires    int
	}{
		{"2026-03-08T05:00:00Z", "2026-03-08T09:00:00Z", 4 * 60},    // every real minute fires once; the gap wall times collapse into 03:00 EDT
		{"2026-11-01T04:00:00Z", "2026-11-01T08:00:00Z", 4*60 - 60}, // the repeated hour fires once
		{"2026-05-04T00:00:00Z", "2026-05-04T04:00:00Z", 4 * 60},
	} {
		s, err := ParseSpec("* * * * *", "America/New_York")
		require.NoError(t, err)
		from, to := utc(day.from), utc(day.to)
		n, prev := 0, from
		seen := map[time.Time]bool{}
		for at := s.Next(from); !at.After(to); at = s.Next(at) {
			require.True(t, at.After(prev), "fire times strictly increase")
			require.False(t, seen[at])
			seen[at] = true
			prev = at
			n++
		}
		require.Equal(t, day.fires, n, "fires between %s and %s", day.from, day.to)
	}
}

func TestNextAtOrAfter(t *testing.T) {
	t.Parallel()
	s, err := ParseSpec("*/5 * * * *", "UTC")
	require.NoError(t, err)
	require.Equal(t, utc("2026-05-04T10:05:00Z"), s.NextAtOrAfter(utc("2026-05-04T10:05:00Z")))
	require.Equal(t, utc("2026-05-04T10:10:00Z"), s.NextAtOrAfter(utc("2026-05-04T10:05:00.5Z")))
}

func TestValidate(t *testing.T) {
	t.Parallel()
	require.NoError(t, Validate("", "UTC"))
	require.NoError(t, Validate("0 9 * * 1-5", "Asia/Shanghai"))
	for _, c := range []struct{ spec, tz, field string }{
		{"0 9 * *", "UTC", "spec"},
		{"61 * * * *", "UTC", "spec"},
		{"0 9 * * *", "Mars/Olympus", "tz"},
		{"CRON_TZ=UTC 0 9 * * *", "UTC", "spec"},
		{"", "Nowhere/City", "tz"},
	} {
		err := Validate(c.spec, c.tz)
		require.Error(t, err, "%q %q", c.spec, c.tz)
		require.Contains(t, err.Error(), c.field+":")
	}
}

func TestJitter(t *testing.T) {
	t.Parallel()
	max := 60 * time.Second
	seen := map[time.Duration]bool{}
	for i := range 200 {
		id := fmt.Sprintf("goal-%d", i)
		j := Jitter(id, max)
		require.GreaterOrEqual(t, j, time.Duration(0))
		require.Less(t, j, max)
		require.Equal(t, j, Jitter(id, max), "deterministic")
		seen[j.Truncate(10*time.Second)] = true
	}
	require.Len(t, seen, 6, "200 goals spread over every 10 s bucket of the minute")
	require.Zero(t, Jitter("g", 0))
}

// MinGap is the shortest time between two fires; a goal's phase stays below it, so with the
// spread set to the whole interval (SpreadInterval) goals sharing a 30-minute spec
// fire evenly over the 30 minutes, each at the same phase every time.
func TestSpreadStaysWithinTheInterval(t *testing.T) {
	t.Parallel()
	for spec, want := range map[string]time.Duration{
		"* * * * *": time.Minute, "*/30 * * * *": 30 * time.Minute, "0 9 * * 1-5": 24 * time.Hour,
		"@every 5m": 5 * time.Minute, "0 0 1 1 *": 0,
	} {
		s, err := ParseSpec(spec, "Asia/Shanghai")
		require.NoError(t, err)
		require.Equal(t, want, s.MinGap(), spec)
	}
	gap := 30 * time.Minute
	buckets := make([]int, 30)
	for i := range 30000 {
		j := Jitter(fmt.Sprintf("g%07d", i), gap)
		require.Less(t, j, gap)
		require.GreaterOrEqual(t, j, time.Duration(0))
		buckets[int(j/time.Minute)]++
	}
	for m, n := range buckets {
		require.InDelta(t, 1000, n, 200, "minute %d of the interval", m)
	}
	require.Equal(t, Jitter("g0000001", gap), Jitter("g0000001", gap), "stable")
}
