package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"loopx/scheduler/quota"
	"loopx/store"
)

// Decider answers should-run. *quota.Service implements it.
type Decider interface {
	ShouldRun(ctx context.Context, p quota.ShouldRunParams) (quota.Decision, error)
}

var _ Decider = (*quota.Service)(nil)

// Job is one turn a runner must carry out: the agent to wake and the should-run answer that
// opened the turn (its JSON is the turn packet).
type Job struct {
	Goal     store.Schedule // the heartbeat schedule (goal, agent, runner and its settings)
	Turn     store.Turn
	Decision quota.Decision
}

// Result is how a turn ended, as the runner saw it.
type Result struct {
	State   string // store.TurnOK or store.TurnFailed
	Outcome string // one line for people
	LogTail string // the end of the agent's output
}

// Runner wakes an agent for one turn and returns when the turn is over (or ctx ends).
type Runner interface {
	Run(ctx context.Context, job Job) Result
}

// TurnEnder closes a turn when its runner returns. *store.Store implements it.
type TurnEnder interface {
	EndTurn(ctx context.Context, p store.EndTurnParams) (store.Turn, error)
	// RecordTurnLog keeps the log tail of a turn the agent already settled (spend-slot).
	RecordTurnLog(ctx context.Context, turnID int64, tail string) error
}

// PeekFunc answers should-run without recording anything (no ledger row, no hint step, no
// turn).
type PeekFunc func(ctx context.Context, goalID, agentID string, now time.Time) (quota.Decision, error)

// Config configures a Scheduler. Store and Decider are required.
type Config struct {
	Store   *store.Store
	Decider Decider
	// Peek answers for heartbeats whose runner is poll: the host asks should-run itself and
	// owns the hint progression, so the tick must not advance it; it records the answer in
	// the tick row only. Nil means the pure quota.Decide over store.ReadTickSnapshot.
	Peek PeekFunc
	// Runners by runner kind (store.RunnerExec, store.RunnerWebhook). A heartbeat whose runner
	// has no entry here is treated like poll: the decision is recorded and nothing is started.
	Runners map[string]Runner
	// Turns ends turns when a runner returns; nil means Store.
	Turns TurnEnder
	// Digests builds report digests; nil disables report schedules (their ticks say so).
	Digests *Digests
	// Reminders sends gate reminders; nil disables them.
	Reminders *Reminders
	// Now is the clock; nil means the store's clock.
	Now    func() time.Time
	Logger *slog.Logger
	// Replica names this process in tick rows (host:pid or similar).
	Replica string
	// MaxJitter bounds the deterministic per-goal delay; 0 means 60 s, negative means none.
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
	// TickRetention is how long tick rows are kept; 0 means 35 days (longer than a monthly
	// report window). Step prunes at most every 10 minutes, 10,000 rows at a time.
	TickRetention time.Duration
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
	turns   TurnEnder
	runners sync.WaitGroup
	specs   sync.Map // spec+"\x00"+tz -> Spec (parsing is pure; the cache is per instance)

	mu        sync.Mutex
	totals    Stats     // everything Step did since New, for metrics and the benchmark
	lastPrune time.Time // when Step last pruned old ticks
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
		cfg.Logger = slog.Default()
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
	if cfg.TickRetention <= 0 {
		cfg.TickRetention = 35 * 24 * time.Hour
	}
	if cfg.Peek == nil {
		st := cfg.Store
		cfg.Peek = func(ctx context.Context, goalID, agentID string, now time.Time) (quota.Decision, error) {
			snap, err := store.ReadTickSnapshot(ctx, st.Pool(), goalID, agentID, now)
			if err != nil {
				return quota.Decision{}, err
			}
			return quota.Decide(snap, now), nil
		}
	}
	turns := cfg.Turns
	if turns == nil {
		turns = cfg.Store
	}
	return &Scheduler{cfg: cfg, st: cfg.Store, now: cfg.Now, log: cfg.Logger.With("component", "scheduler"), turns: turns}, nil
}

// Stats counts what one Step did.
type Stats struct {
	Armed     int
	Schedules int // due schedules handled
	Ticks     int // tick rows written (ran, skipped and missed)
	Missed    int
	Started   int // turns handed to a runner
	Reminders int
	DBTime    time.Duration // time spent in claiming transactions
}

func (a *Stats) add(b Stats) {
	a.Armed += b.Armed
	a.Schedules += b.Schedules
	a.Ticks += b.Ticks
	a.Missed += b.Missed
	a.Started += b.Started
	a.Reminders += b.Reminders
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
		n, err := s.st.ArmSchedules(ctx, s.cfg.Batch, s.plan)
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
	s.prune(ctx)
	if s.cfg.Reminders != nil {
		n, err := s.cfg.Reminders.Sweep(ctx, s.now())
		total.Reminders += n
		if err != nil {
			return total, fmt.Errorf("send gate reminders: %w", err)
		}
	}
	return total, nil
}

// prune deletes ticks older than the retention, at most every 10 minutes. A failure is
// logged and retried next time: old rows are no reason to stop firing.
func (s *Scheduler) prune(ctx context.Context) {
	now := s.now()
	s.mu.Lock()
	due := now.Sub(s.lastPrune) >= 10*time.Minute
	if due {
		s.lastPrune = now
	}
	s.mu.Unlock()
	if !due {
		return
	}
	if _, err := s.st.PruneTicks(ctx, now.Add(-s.cfg.TickRetention), 10000); err != nil {
		s.log.Warn("prune old ticks", "err", err)
	}
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

func (s *Scheduler) jitter(goalID string) time.Duration { return Jitter(goalID, s.cfg.MaxJitter) }

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
		j := s.jitter(sc.GoalID)
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

// fired is one schedule's work in a batch: its ticks, its advance, and the turn to start.
type fired struct {
	sched    store.Schedule
	fires    []time.Time // passed fire times, oldest first; the last one is acted on
	decision quota.Decision
	err      error
	job      *Job
}

func (s *Scheduler) fireDue(ctx context.Context) (Stats, error) {
	var st Stats
	var jobs []Job
	start := time.Now()
	now := s.now()
	n, err := s.st.ProcessDueSchedules(ctx, now, s.cfg.Batch, func(tx pgx.Tx, due []store.Schedule) error {
		work := make([]*fired, len(due))
		for i, sc := range due {
			work[i] = &fired{sched: sc, fires: s.passedFires(sc, now)}
		}
		if err := s.decide(ctx, work); err != nil {
			return err
		}
		decided := s.now() // ticks record when their decision was known, for lateness
		var ticks []store.Tick
		var adv []store.ScheduleAdvance
		jobs = jobs[:0]
		for _, w := range work {
			t, a, err := s.settle(ctx, tx, now, decided, w)
			if err != nil {
				return err
			}
			ticks = append(ticks, t...)
			adv = append(adv, a)
			if w.job != nil {
				jobs = append(jobs, *w.job)
			}
		}
		inserted, err := store.InsertTicks(ctx, tx, ticks)
		if err != nil {
			return err
		}
		st.Ticks = int(inserted)
		for _, t := range ticks {
			if t.Outcome == store.TickMissed {
				st.Missed++
			}
		}
		if err := store.AdvanceSchedules(ctx, tx, adv); err != nil {
			return err
		}
		if len(jobs) == 0 {
			// Nothing starts after this commit: were it lost in a database crash, the fires
			// would simply be handled again (should-run replays by turn instance id), so the
			// batch need not wait for the WAL flush.
			return store.RelaxCommit(ctx, tx)
		}
		return nil
	})
	st.DBTime = time.Since(start)
	if err != nil {
		return st, fmt.Errorf("fire due schedules: %w", err)
	}
	st.Schedules = n
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
	j := s.jitter(sc.GoalID)
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

// decide asks should-run for every heartbeat in the batch, Workers at a time. For exec and
// webhook runners the calls run in their own transactions (the quota service's, which opens
// the turn); the batch transaction only holds the schedule rows. The turn instance id is
// derived from the schedule and fire time, so a batch retried by another replica replays the
// same answer and the same turn. Poll runners get a read-only answer (Peek).
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
				w.decision, w.err = s.cfg.Peek(ctx, w.sched.GoalID, w.sched.AgentID, s.now())
				return
			}
			w.decision, w.err = s.cfg.Decider.ShouldRun(ctx, quota.ShouldRunParams{
				GoalID:         w.sched.GoalID,
				AgentID:        w.sched.AgentID,
				TurnInstanceID: TurnInstanceID(w.sched.ID, fire),
				BeginTurn:      begin,
				LeaseDuration:  s.cfg.TurnLease,
				Meta:           store.Meta{Actor: "scheduler", Surface: "scheduler"},
			})
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("ask should-run: %w", err)
	}
	return nil
}

// TurnInstanceID names the turn a heartbeat fire opens: the same schedule and fire time
// always give the same id, so should-run replays instead of opening a second turn.
func TurnInstanceID(scheduleID int64, fire time.Time) string {
	return "tick-" + strconv.FormatInt(scheduleID, 10) + "-" + strconv.FormatInt(fire.Unix(), 10)
}

// settle turns one schedule's work into tick rows and its advance.
func (s *Scheduler) settle(ctx context.Context, tx pgx.Tx, now, decided time.Time, w *fired) ([]store.Tick, store.ScheduleAdvance, error) {
	sc := w.sched
	j := s.jitter(sc.GoalID)
	spec, specErr := s.spec(sc.Spec, sc.TZ)
	last := w.fires[len(w.fires)-1]
	var ticks []store.Tick
	for i, f := range w.fires[:len(w.fires)-1] {
		t := store.Tick{ScheduleID: sc.ID, GoalID: sc.GoalID, AgentID: sc.AgentID, Kind: sc.Kind,
			FireAt: f, RunAt: f.Add(j), Outcome: store.TickMissed, Reason: "downtime",
			NextFireAt: w.fires[i+1], Replica: s.cfg.Replica, DecidedAt: decided}
		if specErr == nil && !spec.Next(f).Equal(w.fires[i+1]) {
			// The fires between this one and the next row were summed (MaxMissedRows).
			t.Decision, _ = json.Marshal(map[string]any{"missed_through": w.fires[i+1], "summarised": true})
		}
		ticks = append(ticks, t)
	}
	tick := store.Tick{ScheduleID: sc.ID, GoalID: sc.GoalID, AgentID: sc.AgentID, Kind: sc.Kind,
		FireAt: last, RunAt: last.Add(j), CatchUp: len(w.fires) > 1, Replica: s.cfg.Replica, DecidedAt: decided}
	adv := store.ScheduleAdvance{ID: sc.ID, LastFireAt: last}

	var hint time.Duration
	switch sc.Kind {
	case store.ScheduleHeartbeat:
		h, hold := s.settleHeartbeat(w, &tick)
		hint, adv.Hold = h, hold
	case store.ScheduleReport:
		if err := s.settleReport(ctx, tx, w, &tick); err != nil {
			return nil, adv, err
		}
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
	return append(ticks, tick), adv, nil
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
	tick.Decision, _ = json.Marshal(d)
	_, woken := s.cfg.Runners[sc.Runner]
	switch {
	case d.Decision == "run" && d.Turn != nil && woken:
		tick.Outcome, tick.TurnID = store.TickRan, d.Turn.ID
		tick.Reason = d.EffectiveAction
		w.job = &Job{Goal: sc, Turn: *d.Turn, Decision: d}
	case d.Decision == "run":
		// Poll: the host asks should-run itself and runs the turn; the tick records the answer.
		tick.Outcome, tick.Reason = store.TickRan, "host_polls"
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

func (s *Scheduler) settleReport(ctx context.Context, tx pgx.Tx, w *fired, tick *store.Tick) error {
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

// start hands a job to its runner in a goroutine the Scheduler owns (Wait, Run).
func (s *Scheduler) start(ctx context.Context, job Job) {
	r := s.cfg.Runners[job.Goal.Runner]
	s.runners.Add(1)
	go func() {
		defer s.runners.Done()
		res := r.Run(ctx, job)
		if ctx.Err() != nil && res.State != store.TurnOK {
			res.State, res.Outcome = store.TurnFailed, "interrupted: the scheduler stopped"
		}
		if res.State == "" {
			res.State = store.TurnFailed
		}
		// The turn must end even while shutting down, so its lease does not hold the agent.
		endCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_, err := s.turns.EndTurn(endCtx, store.EndTurnParams{
			GoalID: job.Turn.GoalID, AgentID: job.Turn.AgentID, InstanceID: job.Turn.InstanceID,
			State: res.State, Outcome: res.Outcome, LogTail: res.LogTail,
			Meta: store.Meta{Actor: "scheduler", Surface: "scheduler"},
		})
		switch {
		case errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrRefused):
			// The agent settled the turn itself (spend-slot); keep its output anyway.
			if err := s.turns.RecordTurnLog(endCtx, job.Turn.ID, res.LogTail); err != nil {
				s.log.Error("record turn log", "goal_id", job.Turn.GoalID, "turn_id", job.Turn.ID, "err", err)
			}
		case err != nil:
			s.log.Error("end turn", "goal_id", job.Turn.GoalID, "agent_id", job.Turn.AgentID, "turn_id", job.Turn.ID, "err", err)
		}
		// The per-turn token died with the turn; drop its row.
		if err := s.st.RevokeTurnTokens(endCtx, job.Turn.ID); err != nil {
			s.log.Warn("revoke turn tokens", "turn_id", job.Turn.ID, "err", err)
		}
		s.log.Info("turn ended", "goal_id", job.Turn.GoalID, "agent_id", job.Turn.AgentID, "turn_id", job.Turn.ID,
			"state", res.State, "outcome", res.Outcome)
	}()
}

// Wait blocks until every turn this Scheduler started has ended.
func (s *Scheduler) Wait() { s.runners.Wait() }
