package scheduler

import (
	"context"
	"fmt"

	"loopx/quota"
	"loopx/store"
)

// runNowBatch bounds the heartbeats fired now that one step answers.
const runNowBatch = 20

// RunOutcome is what a heartbeat fired now did, stored on its request and said in its chat.
type RunOutcome struct {
	Decision string `json:"decision"` // run | skip
	State    string `json:"state"`
	Reason   string `json:"reason"`
	TurnID   int64  `json:"turn_id,omitempty"`
	Started  bool   `json:"started"`         // a runner took the turn
	Due      bool   `json:"due,omitempty"`   // a poll agent: its host starts the turn
	Error    string `json:"error,omitempty"` // the decision failed
}

// runNow answers the heartbeats someone asked to fire now (/run, [Retry now], the API):
// each is claimed (a lapsed claim of a dead replica is taken over and replays), asked of
// should-run with a turn instance id of its own (the quota and every other rule apply; a
// replay opens no second turn), answered in its chat, and its turn started once that
// answer committed.
func (s *Scheduler) runNow(ctx context.Context) (int, error) {
	reqs, err := s.st.ClaimRunRequests(ctx, s.owner, s.now(), claimLease, runNowBatch)
	if err != nil || len(reqs) == 0 {
		return 0, err
	}
	n := 0
	for _, r := range reqs {
		if err := s.answerRun(ctx, r); err != nil {
			return n, fmt.Errorf("heartbeat fired now for %s/%s: %w", r.GoalID, r.AgentID, err)
		}
		n++
	}
	return n, nil
}

func (s *Scheduler) answerRun(ctx context.Context, r store.RunRequest) error {
	agent, err := s.st.GetAgent(ctx, r.GoalID, r.AgentID)
	if err != nil {
		return err
	}
	_, begin := s.cfg.Runners[r.Runner]
	var d quota.Decision
	if begin {
		d, err = s.cfg.Decider.ShouldRun(ctx, quota.ShouldRunParams{
			GoalID: r.GoalID, AgentID: r.AgentID, TurnInstanceID: store.RunInstanceID(r.ID),
			BeginTurn: true, LeaseDuration: s.cfg.TurnLease, Via: r.Runner,
			Meta: store.Meta{Actor: r.RequestedBy, Surface: "scheduler"},
		})
	} else {
		d, err = s.peek(ctx, r.GoalID, r.AgentID)
	}
	out := RunOutcome{Decision: d.Decision, State: d.State, Reason: d.Reason}
	if err != nil {
		out = RunOutcome{Decision: "skip", State: "error", Error: err.Error()}
	}
	var job *Job
	switch {
	case err == nil && d.Decision == "run" && d.Turn != nil && begin:
		out.Started, out.TurnID = true, d.Turn.ID
		job = &Job{Schedule: store.Schedule{GoalID: r.GoalID, AgentID: r.AgentID, Kind: store.ScheduleHeartbeat,
			Runner: r.Runner, RunnerConfig: agent.RunnerConfig}, Turn: *d.Turn, Decision: d}
	case err == nil && d.Decision == "run":
		out.Due = true
	}
	owned := false
	err = s.st.WithTx(ctx, func(tx *store.Tx) error {
		var ferr error
		if owned, ferr = store.FinishRunRequest(ctx, tx, r.ID, s.owner, out, s.now()); ferr != nil || !owned {
			return ferr
		}
		return s.runReply(ctx, tx, r, d, out)
	})
	if err != nil {
		return err
	}
	if owned && job != nil {
		s.start(ctx, *job)
	}
	return nil
}

// runReply answers a heartbeat fired now in the chat it was asked from.
func (s *Scheduler) runReply(ctx context.Context, tx *store.Tx, r store.RunRequest, d quota.Decision, out RunOutcome) error {
	if r.ChatID == "" || s.cfg.Cards == nil {
		return nil
	}
	tpl := s.cfg.Cards.Templates()
	lang := r.Lang
	if lang == "" {
		lang = s.cfg.Cards.DefaultLang()
	}
	why := out.State
	switch {
	case out.State == "error":
		why = tpl.Word(lang, "run.why.error")
	case d.Reason == "quota_zero":
		why = tpl.Word(lang, "run.why.quota_zero")
	case d.Reason == "monitor_only":
		why = tpl.Word(lang, "run.why.monitor_only")
	case d.Reason == "missing_capability" || d.Reason == "work_complete":
		why = tpl.Word(lang, "run.why."+d.Reason)
	case out.State != "":
		why = tpl.Word(lang, "run.why."+out.State)
	}
	data := map[string]any{"GoalID": r.GoalID, "AgentID": r.AgentID, "Started": out.Started, "Due": out.Due,
		"State": out.State, "Why": why, "TodoID": int64(0), "TodoText": ""}
	if d.SelectedTodo != nil {
		data["TodoID"], data["TodoText"] = d.SelectedTodo.ID, d.SelectedTodo.Text
	}
	if d.Turn != nil && d.Turn.TodoID == 0 && out.Started {
		data["TodoID"], data["TodoText"] = int64(0), ""
	}
	msg, err := tpl.Render(lang, "run_result", data)
	if err != nil {
		return err
	}
	_, _, err = store.InsertOutbox(ctx, tx, store.OutboxInsert{
		DedupeKey: store.RunReplyKey(r.ID), Kind: msg.Kind, ReceiveID: r.ChatID, ReplyTo: r.ReplyTo,
		Content: msg.Content, GoalID: r.GoalID, AgentID: r.AgentID,
	})
	return err
}
