package scheduler

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strconv"
	"time"

	"loopx/quota"
	"loopx/store"
)

// Job is one turn a runner must carry out: the agent to wake and the should-run answer that
// opened the turn (its JSON is the turn packet).
type Job struct {
	Schedule store.Schedule // the heartbeat schedule (goal, agent, runner and its settings)
	Turn     store.Turn
	Decision quota.Decision
}

// Result is how a turn ended, as the runner saw it.
type Result struct {
	State   string // store.TurnOK, store.TurnFailed or store.TurnStopped
	Outcome string // one line for people
	LogTail string // the end of the agent's output
}

// Runner wakes an agent for one turn and returns when the turn is over (or ctx ends). When
// an owner stops the turn, ctx ends with a *Stop cause (StopOf): the runner ends the turn
// (kills the process group, calls the cancel URL) and returns State store.TurnStopped.
type Runner interface {
	Run(ctx context.Context, job Job) Result
}

// Stop is the cause a turn's context ends with when an owner stopped it.
type Stop struct{ By string }

func (s *Stop) Error() string { return store.HaltedBy(s.By) }

// StopOf returns the stop that ended ctx, nil when ctx ended otherwise (or not at all).
func StopOf(ctx context.Context) *Stop {
	var s *Stop
	if errors.As(context.Cause(ctx), &s) {
		return s
	}
	return nil
}

// start hands a job to its runner in a goroutine the Scheduler owns (Wait, Run).
func (s *Scheduler) start(ctx context.Context, job Job) {
	r := s.cfg.Runners[job.Schedule.Runner]
	s.runners.Add(1)
	go func() {
		defer s.runners.Done()
		runCtx, endRun := context.WithCancelCause(ctx)
		defer endRun(nil)
		s.running.Store(job.Turn.ID, endRun)
		defer s.running.Delete(job.Turn.ID)
		watchDone := make(chan struct{})
		go func() {
			defer close(watchDone)
			s.watchStop(runCtx, job.Turn.ID, endRun)
		}()
		res := r.Run(runCtx, job)
		endRun(nil)
		<-watchDone
		if stop := StopOf(runCtx); stop != nil && res.State != store.TurnOK {
			res.State = store.TurnStopped
			if res.Outcome == "" {
				res.Outcome = stop.Error()
			}
		}
		if ctx.Err() != nil && res.State != store.TurnOK && res.State != store.TurnStopped {
			res.State, res.Outcome = store.TurnFailed, "interrupted: the scheduler stopped"
		}
		if res.State == "" {
			res.State = store.TurnFailed
		}
		// The turn must end even while shutting down, so its lease does not hold the agent.
		endCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_, err := s.st.EndTurn(endCtx, store.EndTurnParams{
			GoalID: job.Turn.GoalID, AgentID: job.Turn.AgentID, InstanceID: job.Turn.InstanceID,
			State: res.State, Outcome: res.Outcome, LogTail: res.LogTail,
			Meta: store.Meta{Actor: store.ActorScheduler, Surface: "scheduler"},
		})
		switch {
		case errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrRefused):
			// The agent settled the turn itself (spend-slot); keep its output anyway.
			if err := s.st.RecordTurnLog(endCtx, job.Turn.ID, res.LogTail); err != nil {
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
		// Its card shows the outcome and, after a failure, the breaker counts it now, before
		// the agent's next heartbeat can start another turn.
		if _, err := s.TurnCards(endCtx); err != nil && endCtx.Err() == nil {
			s.log.Warn("turn cards after a turn ended", "turn_id", job.Turn.ID, "err", err)
		}
	}()
}

// watchStop ends ctx with a *Stop when an owner asks to stop turn id: the notification
// (listenStops) normally brings it at once; this poll covers a lost one.
func (s *Scheduler) watchStop(ctx context.Context, id int64, cancel context.CancelCauseFunc) {
	t := time.NewTicker(s.cfg.StopPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		stopped, by, err := s.st.StopRequested(ctx, id)
		if err != nil {
			continue
		}
		if stopped {
			cancel(&Stop{By: by})
			return
		}
	}
}

// stopTurn stops turn id when this replica runs it.
func (s *Scheduler) stopTurn(ctx context.Context, id int64) {
	v, ok := s.running.Load(id)
	if !ok {
		return
	}
	_, by, err := s.st.StopRequested(ctx, id)
	if err != nil {
		s.log.Warn("read stop request", "turn_id", id, "err", err)
	}
	v.(context.CancelCauseFunc)(&Stop{By: by})
}

// listenStops stops the turns this replica runs as soon as an owner asks (TurnStopChannel),
// reconnecting after errors until ctx ends.
func (s *Scheduler) listenStops(ctx context.Context) {
	backoff := time.Second
	for ctx.Err() == nil {
		err := s.st.Listen(ctx, store.TurnStopChannel, func(payload string) {
			if id, err := strconv.ParseInt(payload, 10, 64); err == nil {
				s.stopTurn(ctx, id)
			}
		})
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("turn stop notifications lost; reconnecting (the runners' poll covers the gap)", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

// Wait blocks until every turn this Scheduler started has ended.
func (s *Scheduler) Wait() { s.runners.Wait() }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b)
}
