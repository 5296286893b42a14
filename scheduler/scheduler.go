package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"time"

	"loopx/cards"
	"loopx/quota"
	"loopx/store"
)

// Decider answers should-run. *quota.Service implements it.
type Decider interface {
	ShouldRun(ctx context.Context, p quota.ShouldRunParams) (quota.Decision, error)
}

var _ Decider = (*quota.Service)(nil)

// Config configures a Scheduler. Store and Decider are required.
type Config struct {
	Store   *store.Store
	Decider Decider
	// Runners by runner kind (store.RunnerExec, store.RunnerWebhook). A heartbeat whose runner
	// has no entry here is treated like poll: the host asks should-run itself and owns the
	// hint progression, so the tick records a read-only answer and nothing is started.
	Runners map[string]Runner
	// Digests builds report digests; nil disables report schedules (their ticks say so).
	Digests *Digests
	// Reminders sends gate reminders; nil disables them.
	Reminders *Reminders
	// Cards renders turn cards (progress, failure, breaker) and the answers to heartbeats
	// fired now; nil: the breaker still holds agents, but nothing is posted.
	Cards *cards.Set
	// StopPoll is how often a running turn's runner looks for a stop request, besides the
	// notification that normally brings it at once; 0 means 2 s.
	StopPoll time.Duration
	// Now is the clock; nil means the store's clock.
	Now    func() time.Time
	Logger *slog.Logger
	// Replica names this process in tick rows (host:pid or similar) and, with a random
	// suffix, in its claims on schedules.
	Replica string
	// MaxJitter bounds the deterministic per-goal delay (the phase that spreads schedules
	// sharing a fire time), always below the schedule's shortest interval; 0 means 60 s,
	// negative means none, SpreadInterval means the whole interval.
	MaxJitter time.Duration
	// Batch is how many due schedules one transaction claims; 0 means 200.
	Batch int
	// Workers is how many should-run calls run at once inside a batch; 0 means 4.
	Workers int
	// TurnLease is the lease of turns opened by heartbeats; 0 means 30 minutes.
	TurnLease time.Duration
	// MaxMissedRows caps the missed rows written for one schedule after downtime; older
	// fires are summed into the oldest row's decision. 0 means 1440.
	MaxMissedRows int
	// MaxSleep bounds one sleep of Run, a safety net for a lost notification; 0 means 5 min.
	MaxSleep time.Duration
	// TimeScale is how much faster than real time Now runs (an accelerated clock in
	// process-level tests); Run divides its sleeps by it. 0 means 1.
	TimeScale float64
}

// Scheduler fires schedules. Run it on every replica; the database keeps them from firing a
// time twice.
type Scheduler struct {
	cfg     Config
	st      *store.Store
	now     func() time.Time
	log     *slog.Logger
	owner   string // this instance's name on the schedules it claims
	runners sync.WaitGroup
	specs   sync.Map // spec+"\x00"+tz -> Spec (parsing is pure; the cache is per instance)

	mu     sync.Mutex
	totals Stats // everything Step did since New, for metrics and the benchmark

	// running holds the cancel of every turn this replica's runners carry out, by turn id,
	// so a stop request reaches it.
	running sync.Map // int64 -> context.CancelCauseFunc
}

// Totals returns what every Step of this Scheduler did so far.
func (s *Scheduler) Totals() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.totals
}

// New checks cfg and returns a Scheduler.
func New(cfg Config) (*Scheduler, error) {
	if cfg.Store == nil {
		return nil, errors.New("scheduler config: Store is required")
	}
	if cfg.Decider == nil {
		return nil, errors.New("scheduler config: Decider is required")
	}
	if cfg.Now == nil {
		cfg.Now = cfg.Store.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxJitter == 0 {
		cfg.MaxJitter = 60 * time.Second
	}
	if cfg.MaxJitter < 0 {
		cfg.MaxJitter = 0
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 200
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 4
	}
	if cfg.TurnLease <= 0 {
		cfg.TurnLease = 30 * time.Minute
	}
	if cfg.MaxMissedRows <= 0 {
		cfg.MaxMissedRows = 1440
	}
	if cfg.MaxSleep <= 0 {
		cfg.MaxSleep = 5 * time.Minute
	}
	if cfg.TimeScale <= 0 {
		cfg.TimeScale = 1
	}
	if cfg.StopPoll <= 0 {
		cfg.StopPoll = 2 * time.Second
	}
	owner := cfg.Replica + "/" + randomHex(6)
	return &Scheduler{cfg: cfg, st: cfg.Store, now: cfg.Now, log: cfg.Logger.With("component", "scheduler"), owner: owner}, nil
}

// Stats counts what one Step did.
type Stats struct {
	Armed     int
	Schedules int // due schedules handled
	Ticks     int // tick rows written (ran, due, skipped and missed)
	Missed    int
	Started   int // turns handed to a runner
	Reminders int
	Cards     int           // turns whose card (or breaker) moved on
	RunNow    int           // heartbeats fired now
	DBTime    time.Duration // time spent claiming, deciding and settling due schedules
}

func (a *Stats) add(b Stats) {
	a.Armed += b.Armed
	a.Schedules += b.Schedules
	a.Ticks += b.Ticks
	a.Missed += b.Missed
	a.Started += b.Started
	a.Reminders += b.Reminders
	a.Cards += b.Cards
	a.RunNow += b.RunNow
	a.DBTime += b.DBTime
}

// Step does everything due at the clock's now: arms changed schedules, fires due ones
// (batch after batch until none is left), and sends due gate reminders. Run calls it in a
// loop; tests call it with an injected clock.
func (s *Scheduler) Step(ctx context.Context) (total Stats, err error) {
	defer func() {
		s.mu.Lock()
		s.totals.add(total)
		s.mu.Unlock()
	}()
	for {
		n, err := s.arm(ctx)
		if err != nil {
			return total, fmt.Errorf("arm schedules: %w", err)
		}
		total.Armed += n
		if n < s.cfg.Batch {
			break
		}
	}
	for {
		st, err := s.fireDue(ctx)
		total.add(st)
		if err != nil {
			return total, err
		}
		if st.Schedules < s.cfg.Batch {
			break
		}
	}
	if s.cfg.Reminders != nil {
		n, err := s.cfg.Reminders.Sweep(ctx, s.now())
		total.Reminders += n
		if err != nil {
			return total, fmt.Errorf("send gate reminders: %w", err)
		}
	}
	n, err := s.runNow(ctx)
	total.RunNow += n
	if err != nil {
		return total, fmt.Errorf("fire heartbeats asked for now: %w", err)
	}
	if total.Cards, err = s.TurnCards(ctx); err != nil {
		return total, fmt.Errorf("turn cards: %w", err)
	}
	return total, nil
}

func (s *Scheduler) spec(spec, tz string) (Spec, error) {
	key := spec + "\x00" + tz
	if v, ok := s.specs.Load(key); ok {
		return v.(Spec), nil
	}
	p, err := ParseSpec(spec, tz)
	if err != nil {
		return Spec{}, err
	}
	s.specs.Store(key, p)
	return p, nil
}

// SpreadInterval as Config.MaxJitter spreads each schedule's goals over its whole interval:
// a million goals with a 30-minute heartbeat fire about 555 a second, not all at once.
const SpreadInterval = time.Duration(math.MaxInt64)

// jitter is a goal's phase on a schedule: below MaxJitter and below the spec's shortest
// interval, so a fire always runs before the next one is due.
func (s *Scheduler) jitter(goalID string, spec Spec) time.Duration {
	max := s.cfg.MaxJitter
	if g := spec.MinGap(); g > 0 && g < max {
		max = g
	}
	return Jitter(goalID, max)
}

// arm computes the next fire of up to Batch schedules whose spec or state changed, in one
// transaction, and returns how many it armed.
func (s *Scheduler) arm(ctx context.Context) (int, error) {
	n := 0
	err := s.st.WithTx(ctx, func(tx *store.Tx) error {
		list, err := store.SchedulesToArm(ctx, tx, s.now(), s.cfg.Batch)
		if err != nil || len(list) == 0 {
			return err
		}
		n = len(list)
		return store.ArmSchedules(ctx, tx, s.plan(list))
	})
	return n, err
}

// plan computes the next fire of schedules whose spec or state changed. An overdue fire is
// kept so that it still gets its tick (or its missed row); otherwise the next fire is the
// first cron time at or after now (and after the last fire).
func (s *Scheduler) plan(list []store.Schedule) []store.SchedulePlan {
	now := s.now()
	out := make([]store.SchedulePlan, len(list))
	for i, sc := range list {
		out[i].ID = sc.ID
		spec, err := s.spec(sc.Spec, sc.TZ)
		if err != nil {
			s.log.Warn("schedule disabled: spec does not parse", "goal_id", sc.GoalID, "schedule_id", sc.ID, "err", err)
			continue
		}
		j := s.jitter(sc.GoalID, spec)
		fire := sc.NextFireAt
		if fire.IsZero() || !fire.Add(j).Before(now) {
			fire = spec.NextAtOrAfter(now)
			if !sc.LastFireAt.IsZero() && !fire.After(sc.LastFireAt) {
				fire = spec.Next(sc.LastFireAt) // never plan a fire that already has its tick
			}
		}
		if fire.IsZero() {
			continue
		}
		out[i].Fire, out[i].Run = fire, fire.Add(j)
	}
	return out
}

// fired is one schedule's work in a batch: its decision, its ticks, and the turn to start.
type fired struct {
	sched    store.Schedule
	fires    []time.Time // passed fire times, oldest first; the last one is acted on
	decision quota.Decision
	err      error
	ticks    []store.Tick // missed fires, then the one acted on
	job      *Job
}

// claimLease is how long a claimed batch of due schedules is this replica's to settle.
// Deciding a batch takes well under a second; a replica that has not settled its claims by
// then is presumed dead and another one fires them: the same fire times, replayed (should-run
// answers the same turn instance), and only the replica whose claim is current when it
// settles starts the turn. It is short of a minute, so a dead replica's every-minute
// heartbeats are taken over before their next fire.
const claimLease = 30 * time.Second

// fireDue fires one batch of due schedules. It claims them (one statement), asks should-run
// for the heartbeats with no transaction open (each should-run is a transaction of its own),
// then settles them in one transaction: the schedules move on, their tick rows and report
// digests are written, and the turns to start are known once it commits. No transaction
// ever waits for another pool connection.
func (s *Scheduler) fireDue(ctx context.Context) (st Stats, err error) {
	start := time.Now()
	defer func() { st.DBTime = time.Since(start) }()
	now := s.now()
	due, err := s.st.ClaimDueSchedules(ctx, now, s.cfg.Batch, claimLease, s.owner)
	if err != nil {
		return st, fmt.Errorf("fire due schedules: %w", err)
	}
	if len(due) == 0 {
		return st, nil
	}
	work := make([]*fired, len(due))
	for i, sc := range due {
		work[i] = &fired{sched: sc, fires: s.passedFires(sc, now)}
	}
	if err := s.decide(ctx, work); err != nil {
		return st, fmt.Errorf("fire due schedules: %w", err)
	}
	decided := s.now() // ticks record when their decision was known, for lateness
	adv := make([]store.ScheduleAdvance, len(work))
	for i, w := range work {
		adv[i] = s.settle(now, decided, w)
	}
	var jobs []Job
	err = s.st.WithTx(ctx, func(tx *store.Tx) error {
		jobs = jobs[:0]
		owned, err := store.SettleSchedules(ctx, tx, s.owner, adv)
		if err != nil {
			return err
		}
		var ticks []store.Tick
		for _, w := range work {
			if !owned[w.sched.ID] {
				// The claim lapsed and another replica fires this schedule now.
				continue
			}
			if w.sched.Kind == store.ScheduleReport {
				if err := s.settleReport(ctx, tx, w, &w.ticks[len(w.ticks)-1]); err != nil {
					return err
				}
			}
			ticks = append(ticks, w.ticks...)
			if w.job != nil {
				jobs = append(jobs, *w.job)
			}
		}
		inserted, err := store.InsertTicks(ctx, tx, ticks)
		if err != nil {
			return err
		}
		st.Ticks, st.Missed = int(inserted), 0
		for _, t := range ticks {
			if t.Outcome == store.TickMissed {
				st.Missed++
			}
		}
		if len(jobs) == 0 {
			// Nothing starts after this commit: were it lost in a database crash, the fires
			// would simply be handled again (should-run replays by turn instance id), so the
			// batch need not wait for the WAL flush.
			return store.RelaxCommit(ctx, tx)
		}
		return nil
	})
	if err != nil {
		return st, fmt.Errorf("fire due schedules: %w", err)
	}
	st.Schedules = len(due)
	for _, j := range jobs {
		s.start(ctx, j)
		st.Started++
	}
	return st, nil
}

// passedFires lists the fire times that are due at now, oldest first: the scheduled one and
// any later ones whose run time also passed (downtime).
func (s *Scheduler) passedFires(sc store.Schedule, now time.Time) []time.Time {
	fires := []time.Time{sc.NextFireAt}
	spec, err := s.spec(sc.Spec, sc.TZ)
	if err != nil {
		return fires
	}
	j := s.jitter(sc.GoalID, spec)
	// Walk at most MaxMissedRows+1 fires; beyond that, jump to the newest passed fire so the
	// catch-up still acts on it, and sum the gap into the oldest missed row.
	for f := spec.Next(sc.NextFireAt); !f.IsZero() && !f.Add(j).After(now); f = spec.Next(f) {
		if len(fires) > s.cfg.MaxMissedRows {
			fires = append(fires[:len(fires)-1], f)
			continue
		}
		fires = append(fires, f)
	}
	return fires
}

// decide asks should-run for every heartbeat in the batch, Workers at a time, with no
// transaction open. For exec and webhook runners each call is a transaction of its own (the
// quota service's, which opens the turn). The turn instance id is derived from the schedule
// and fire time, so a batch fired again by another replica (a lapsed claim) replays the same
// answer and the same turn. Poll runners get a read-only answer.
func (s *Scheduler) decide(ctx context.Context, work []*fired) error {
	sem := make(chan struct{}, s.cfg.Workers)
	var wg sync.WaitGroup
	for _, w := range work {
		if w.sched.Kind != store.ScheduleHeartbeat {
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			fire := w.fires[len(w.fires)-1]
			_, begin := s.cfg.Runners[w.sched.Runner]
			if !begin {
				w.decision, w.err = s.peek(ctx, w.sched.GoalID, w.sched.AgentID)
				return
			}
			w.decision, w.err = s.cfg.Decider.ShouldRun(ctx, quota.ShouldRunParams{
				GoalID:         w.sched.GoalID,
				AgentID:        w.sched.AgentID,
				TurnInstanceID: TurnInstanceID(w.sched.ID, fire),
				BeginTurn:      begin,
				LeaseDuration:  s.cfg.TurnLease,
				Via:            w.sched.Runner,
				Meta:           store.Meta{Actor: store.ActorScheduler, Surface: "scheduler"},
			})
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("ask should-run: %w", err)
	}
	return nil
}

// peek answers should-run without recording anything (no ledger row, no hint step, no
// turn): the host of a poll agent asks should-run itself.
func (s *Scheduler) peek(ctx context.Context, goalID, agentID string) (quota.Decision, error) {
	d, _, err := quota.Peek(ctx, s.st, goalID, agentID, s.now())
	return d, err
}

// TurnInstanceID names the turn a heartbeat fire opens: the same schedule and fire time
// always give the same id, so should-run replays instead of opening a second turn.
func TurnInstanceID(scheduleID int64, fire time.Time) string {
	return "tick-" + strconv.FormatInt(scheduleID, 10) + "-" + strconv.FormatInt(fire.Unix(), 10)
}

// settle turns one schedule's work into its tick rows (w.ticks) and its advance. A report's
// last tick gets its outcome once its digest is written (settleReport).
func (s *Scheduler) settle(now, decided time.Time, w *fired) store.ScheduleAdvance {
	sc := w.sched
	spec, specErr := s.spec(sc.Spec, sc.TZ)
	j := s.jitter(sc.GoalID, spec)
	last := w.fires[len(w.fires)-1]
	w.ticks = w.ticks[:0]
	for i, f := range w.fires[:len(w.fires)-1] {
		t := store.Tick{ScheduleID: sc.ID, GoalID: sc.GoalID, AgentID: sc.AgentID, Kind: sc.Kind,
			FireAt: f, RunAt: f.Add(j), Outcome: store.TickMissed, Reason: "downtime",
			NextFireAt: w.fires[i+1], Replica: s.cfg.Replica, DecidedAt: decided}
		if specErr == nil && !spec.Next(f).Equal(w.fires[i+1]) {
			// The fires between this one and the next row were summed (MaxMissedRows).
			t.Decision, _ = json.Marshal(map[string]any{"missed_through": w.fires[i+1], "summarised": true})
		}
		w.ticks = append(w.ticks, t)
	}
	tick := store.Tick{ScheduleID: sc.ID, GoalID: sc.GoalID, AgentID: sc.AgentID, Kind: sc.Kind,
		FireAt: last, RunAt: last.Add(j), CatchUp: len(w.fires) > 1, Replica: s.cfg.Replica, DecidedAt: decided}
	adv := store.ScheduleAdvance{ID: sc.ID, LastFireAt: last}
	var hint time.Duration
	if sc.Kind == store.ScheduleHeartbeat {
		hint, adv.Hold = s.settleHeartbeat(w, &tick)
	}
	if !adv.Hold && specErr == nil {
		next := spec.Next(last)
		if hint > 0 {
			if h := spec.NextAtOrAfter(now.Add(hint)); h.After(next) {
				next = h
			}
		}
		adv.NextFireAt = next
		if !next.IsZero() {
			adv.NextRunAt = next.Add(j)
		}
	}
	tick.NextFireAt = adv.NextFireAt
	w.ticks = append(w.ticks, tick)
	return adv
}

// settleHeartbeat fills the tick from the should-run answer and returns the hint interval to
// apply and whether to hold the heartbeat until an explicit resume.
func (s *Scheduler) settleHeartbeat(w *fired, tick *store.Tick) (time.Duration, bool) {
	sc := w.sched
	if w.err != nil {
		s.log.Error("should-run failed; tick skipped", "goal_id", sc.GoalID, "agent_id", sc.AgentID, "err", w.err)
		tick.Outcome, tick.Reason = store.TickSkipped, "decide_failed"
		tick.Decision, _ = json.Marshal(map[string]string{"error": w.err.Error()})
		return 0, false
	}
	d := w.decision
	tick.Decision, _ = json.Marshal(d.Summary())
	_, woken := s.cfg.Runners[sc.Runner]
	switch {
	case d.Decision == "run" && d.Turn != nil && woken:
		tick.Outcome, tick.TurnID = store.TickRan, d.Turn.ID
		tick.Reason = d.EffectiveAction
		w.job = &Job{Schedule: sc, Turn: *d.Turn, Decision: d}
	case d.Decision == "run":
		// Poll: nothing starts here. The host asks should-run itself and runs the turn; the
		// tick records that one is due, and why.
		tick.Outcome, tick.Reason = store.TickDue, d.EffectiveAction
	default:
		tick.Outcome, tick.Reason = store.TickSkipped, d.State
	}
	if d.SchedulerHint.Action == "stop_until_explicit_resume" {
		return 0, true
	}
	if !woken {
		return 0, false
	}
	return time.Duration(d.SchedulerHint.IntervalMinutes) * time.Minute, false
}

// settleReport writes the digest a report fire is due (in the settling transaction) and
// fills its tick's outcome.
func (s *Scheduler) settleReport(ctx context.Context, tx *store.Tx, w *fired, tick *store.Tick) error {
	sc := w.sched
	switch {
	case s.cfg.Digests == nil:
		tick.Outcome, tick.Reason = store.TickSkipped, "digests_disabled"
		return nil
	case sc.GoalStatus != store.GoalActive:
		tick.Outcome, tick.Reason = store.TickSkipped, "goal_"+sc.GoalStatus
		return nil
	}
	res, err := s.cfg.Digests.Scheduled(ctx, tx, sc.GoalID, tick.FireAt)
	if err != nil {
		return fmt.Errorf("build digest for %s: %w", sc.GoalID, err)
	}
	tick.Outcome, tick.Reason = store.TickRan, res.Reason
	return nil
}
