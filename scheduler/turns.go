package scheduler

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
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
	State   string // store.TurnOK or store.TurnFailed
	Outcome string // one line for people
	LogTail string // the end of the agent's output
}

// Runner wakes an agent for one turn and returns when the turn is over (or ctx ends).
type Runner interface {
	Run(ctx context.Context, job Job) Result
}

// start hands a job to its runner in a goroutine the Scheduler owns (Wait, Run).
func (s *Scheduler) start(ctx context.Context, job Job) {
	r := s.cfg.Runners[job.Schedule.Runner]
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
	}()
}

// Wait blocks until every turn this Scheduler started has ended.
func (s *Scheduler) Wait() { s.runners.Wait() }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b)
}
