package scheduler

import (
	"context"
	"time"

	"loopx/store"
)

// Run fires schedules until ctx ends: it sleeps until the earliest next_run_at (or the next
// gate reminder) and wakes early on NOTIFY loopx_schedule. It returns nil after ctx is done
// and every turn it started has ended.
func (s *Scheduler) Run(ctx context.Context) error {
	wake := make(chan struct{}, 1)
	listenDone := make(chan struct{})
	stopsDone := make(chan struct{})
	go func() {
		defer close(listenDone)
		s.listen(ctx, wake)
	}()
	go func() {
		defer close(stopsDone)
		s.listenStops(ctx)
	}()
	defer func() {
		<-listenDone
		<-stopsDone
		s.Wait()
	}()
	failures := 0
	for {
		if ctx.Err() != nil {
			return nil
		}
		st, err := s.Step(ctx)
		if err != nil && ctx.Err() == nil {
			failures++
			s.log.Error("scheduler step", "err", err, "failures", failures)
		} else {
			failures = 0
		}
		if st.Ticks > 0 || st.Reminders > 0 {
			s.log.Debug("scheduler step", "schedules", st.Schedules, "ticks", st.Ticks, "missed", st.Missed,
				"started", st.Started, "reminders", st.Reminders, "db_time", st.DBTime)
		}
		d := s.sleepFor(ctx, failures)
		if failures == 0 {
			d = time.Duration(float64(d) / s.cfg.TimeScale)
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-wake:
			t.Stop()
		case <-t.C:
		}
	}
}

// sleepFor is the time until the next thing is due, at most MaxSleep; after failures it
// backs off (1 s, 2 s, ... up to 30 s) so a database outage is not hammered.
func (s *Scheduler) sleepFor(ctx context.Context, failures int) time.Duration {
	if failures > 0 {
		return min(time.Duration(1<<min(failures-1, 5))*time.Second, 30*time.Second)
	}
	d := s.cfg.MaxSleep
	now := s.now()
	at, rearm, ok, err := s.st.NextWake(ctx, now)
	if err != nil {
		return time.Second
	}
	if rearm {
		return 0
	}
	if ok {
		d = min(d, at.Sub(now))
	}
	if s.cfg.Reminders != nil {
		if at, ok, err := s.cfg.Reminders.NextDue(ctx); err == nil && ok {
			d = min(d, at.Sub(now))
		}
	}
	if at, ok := s.nextCardDue(ctx); ok {
		d = min(d, at.Sub(now))
	}
	if pending, err := s.st.HasPendingRunRequests(ctx, now); err == nil && pending {
		d = min(d, time.Second) // a lapsed claim of a heartbeat fired now is taken over soon
	}
	return max(d, 0)
}

// listen holds a LISTEN connection and signals wake on every notification, reconnecting
// after errors until ctx ends.
func (s *Scheduler) listen(ctx context.Context, wake chan<- struct{}) {
	backoff := time.Second
	for ctx.Err() == nil {
		err := s.listenOnce(ctx, wake)
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("schedule notifications lost; reconnecting", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
		// A notification may have been missed while disconnected.
		select {
		case wake <- struct{}{}:
		default:
		}
	}
}

func (s *Scheduler) listenOnce(ctx context.Context, wake chan<- struct{}) error {
	return s.st.Listen(ctx, store.ScheduleChannel, func(string) {
		select {
		case wake <- struct{}{}:
		default:
		}
	})
}
