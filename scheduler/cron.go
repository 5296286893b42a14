package scheduler

import (
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// maxFiresScan bounds how many cron times one computation walks, so a pathological spec
// cannot spin the loop (a year of minutely fires is 525,600).
const maxFiresScan = 2000

// Spec is a parsed cron schedule bound to an IANA zone.
type Spec struct {
	loc      *time.Location
	wall     cron.Schedule // evaluated on wall-clock time (expressed in UTC, which has no DST)
	constant bool          // @every: a fixed real-time period, no wall clock
	minGap   time.Duration // the shortest time between two fires (see MinGap)
}

// ParseSpec parses a standard five-field cron spec (or a descriptor such as @hourly or
// @every 5m) in the IANA zone tz. The zone goes in tz, never in the spec.
func ParseSpec(spec, tz string) (Spec, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return Spec{}, fmt.Errorf("spec: empty; give a cron spec such as \"*/15 * * * *\"")
	}
	if strings.HasPrefix(spec, "CRON_TZ=") || strings.HasPrefix(spec, "TZ=") {
		return Spec{}, fmt.Errorf("spec: %q carries a time zone; set the zone separately", spec)
	}
	if tz == "" {
		tz = "UTC"
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return Spec{}, fmt.Errorf("tz: %q is not an IANA time zone (for example Asia/Shanghai)", tz)
	}
	s, err := cron.ParseStandard(spec)
	if err != nil {
		return Spec{}, fmt.Errorf("spec: %q: %s", spec, err.Error())
	}
	_, constant := s.(cron.ConstantDelaySchedule)
	if ss, ok := s.(*cron.SpecSchedule); ok {
		ss.Location = time.UTC
	}
	sp := Spec{loc: loc, wall: s, constant: constant}
	sp.minGap = sp.shortestGap()
	return sp, nil
}

// gapReference is where MinGap starts looking: a fixed Monday, so every process computes the
// same gap for the same spec.
var gapReference = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)

// MinGap is the shortest time between two consecutive fires over the week after a fixed
// reference (zero when the spec fires less than twice in it). A per-goal phase below it keeps
// every fire's run time before the next fire.
func (s Spec) MinGap() time.Duration { return s.minGap }

func (s Spec) shortestGap() time.Duration {
	var gap time.Duration
	end := gapReference.Add(8 * 24 * time.Hour)
	prev := s.Next(gapReference)
	for range maxFiresScan {
		if prev.IsZero() || prev.After(end) {
			break
		}
		next := s.Next(prev)
		if next.IsZero() {
			break
		}
		if d := next.Sub(prev); gap == 0 || d < gap {
			gap = d
		}
		prev = next
	}
	return gap
}

// Validate checks a spec and zone the way the scheduler will read them; the API calls it
// before it saves a goal's schedule. An empty spec means "no schedule" and is valid.
func Validate(spec, tz string) error {
	if strings.TrimSpace(spec) == "" {
		if tz != "" {
			if _, err := time.LoadLocation(tz); err != nil {
				return fmt.Errorf("tz: %q is not an IANA time zone (for example Asia/Shanghai)", tz)
			}
		}
		return nil
	}
	s, err := ParseSpec(spec, tz)
	if err != nil {
		return err
	}
	if s.Next(time.Now()).IsZero() {
		return fmt.Errorf("spec: %q never fires", spec)
	}
	return nil
}

// Next returns the first fire time strictly after t, or the zero time when there is none.
//
// Fire times are wall-clock times in the schedule's zone. A wall-clock time that does not
// exist (the hour skipped when daylight saving starts) fires once, at the end of the gap;
// several such times in one gap fire once together. A wall-clock time that happens twice
// (the hour repeated when daylight saving ends) fires once, at its first occurrence.
func (s Spec) Next(t time.Time) time.Time {
	if s.constant {
		return s.wall.Next(t)
	}
	w := wallAsUTC(t.In(s.loc))
	for range maxFiresScan {
		w = s.wall.Next(w)
		if w.IsZero() {
			return time.Time{}
		}
		if at := s.instant(w); at.After(t) {
			return at
		}
	}
	return time.Time{}
}

// NextAtOrAfter returns the first fire time at or after t.
func (s Spec) NextAtOrAfter(t time.Time) time.Time {
	return s.Next(t.Add(-time.Nanosecond))
}

// instant maps a wall-clock time (carried in UTC) to the instant it happens in s.loc.
func (s Spec) instant(w time.Time) time.Time {
	at := time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), 0, s.loc)
	if !sameWall(at, w) {
		// w falls in a gap: fire when the gap ends. time.Date may have normalised w to
		// either side of the gap; the transition is the bound between the two sides.
		start, end := at.ZoneBounds()
		if wallAsUTC(at).After(w) && !start.IsZero() {
			return start
		}
		if !end.IsZero() {
			return end
		}
		return at
	}
	// w may happen twice; prefer the earlier instant, in the previous zone period.
	start, _ := at.ZoneBounds()
	if start.IsZero() {
		return at
	}
	_, offNow := at.Zone()
	_, offPrev := start.Add(-time.Nanosecond).Zone()
	if offPrev > offNow {
		if early := at.Add(-time.Duration(offPrev-offNow) * time.Second); early.Before(start) && sameWall(early, w) {
			return early
		}
	}
	return at
}

func wallAsUTC(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
}

func sameWall(at, w time.Time) bool {
	return at.Year() == w.Year() && at.Month() == w.Month() && at.Day() == w.Day() &&
		at.Hour() == w.Hour() && at.Minute() == w.Minute() && at.Second() == w.Second()
}

// Jitter is the deterministic delay of a goal's schedules, in [0, max): the same goal always
// gets the same delay, so replicas agree and a restart changes nothing, while goals sharing
// a spec spread over max (like Jenkins' H). The scheduler caps max at the schedule's MinGap.
func Jitter(goalID string, max time.Duration) time.Duration {
	if max <= 0 {
		return 0
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(goalID))
	return time.Duration(h.Sum64()%uint64(max/time.Millisecond)) * time.Millisecond
}
