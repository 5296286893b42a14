package quota

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"loopx/store"
	"loopx/templates"
)

// Service answers should-run against the store and records each answer.
type Service struct {
	st         *store.Store
	tpl        *templates.Set
	now        func() time.Time
	gateNotice store.NoticeFunc
	complete   func(ctx context.Context, goalID string)
}

// Options configures a Service.
type Options struct {
	// Now is the clock; nil means the store's clock.
	Now func() time.Time
	// GateNotice renders the outbox rows announcing a stall gate (the gate card), inside the
	// should-run's transaction. Nil: the gate is opened without a notice.
	GateNotice store.NoticeFunc
	// Complete runs after a recorded answer found the goal's work complete (reason
	// work_complete), outside its transaction: serve proposes to finish the goal
	// (change.Kernel.ProposeCompletion, which asks once). Nil: nothing is proposed.
	Complete func(ctx context.Context, goalID string)
}

// NewService returns a Service over st; tpl words the stall gate's question (the process's
// one template set).
func NewService(st *store.Store, tpl *templates.Set, opts Options) *Service {
	now := opts.Now
	if now == nil {
		now = st.Now
	}
	return &Service{st: st, tpl: tpl, now: now, gateNotice: opts.GateNotice, complete: opts.Complete}
}

// ModeStatus is the mode of a read-only answer (Peek): nothing was recorded.
const ModeStatus = "status"

// Peek answers should-run for goal x agent at now without recording anything (no ledger row,
// no hint step, no stall gate, no turn, no receipt): the read-only form behind status pages,
// chat /status, GET quota status and poll agents' ticks. It reads the snapshot with st, so a
// caller inside a transaction passes the Store joined to it. The decision's Mode is
// ModeStatus; the snapshot is returned for callers that show more of it.
func Peek(ctx context.Context, st *store.Store, goalID, agentID string, now time.Time) (Decision, store.ShouldRunSnapshot, error) {
	snap, err := st.ReadShouldRunSnapshot(ctx, goalID, agentID, now)
	if err != nil {
		return Decision{}, snap, err
	}
	d := Decide(snap, now)
	d.Mode = ModeStatus
	return d, snap, nil
}

// ShouldRun answers whether the agent should act now. In one transaction it reads the snapshot
// (one statement), decides, and records: a tick_decision ledger row, the hint progression, a
// stall gate when the decision is stalled, a turn when BeginTurn is set and the decision is
// run, and a receipt. The receipt is keyed by the turn instance id when one is given (any
// call naming it replays the stored answer), else by the caller's idempotency key (the same
// key and request replay it; another request under it is ErrConflict). A replay writes
// nothing, and a call under a key still in flight waits for it and then replays. An unknown
// goal or agent is ErrNotFound naming the field.
func (s *Service) ShouldRun(ctx context.Context, p ShouldRunParams) (Decision, error) {
	if err := checkParams(p); err != nil {
		return Decision{}, err
	}
	actor, surface := p.Meta.Actor, p.Meta.Surface
	if actor == "" {
		actor = store.AgentActor(p.GoalID, p.AgentID)
	}
	if surface == "" {
		surface = "api"
	}
	open := store.ShouldRunOpen{GoalID: p.GoalID, AgentID: p.AgentID, Now: s.now()}
	instance := p.TurnInstanceID
	switch {
	case instance != "":
		// Any call naming this turn instance replays: the request is only its identity.
		open.ReceiptKey = store.HeartbeatKey(p.GoalID, p.AgentID, instance)
		open.Request = []string{p.GoalID, p.AgentID, instance}
	case p.Meta.IdempotencyKey != "":
		open.ReceiptKey = store.ReceiptKey(actor, p.Meta.IdempotencyKey)
		open.Request = []any{p.GoalID, p.AgentID, p.BeginTurn, p.LeaseDuration}
		if p.TodoID != 0 {
			open.Request = append(open.Request.([]any), p.TodoID)
		}
	}
	if p.BeginTurn && instance == "" {
		instance = newInstanceID()
	}
	d, err := s.shouldRun(ctx, p, open, instance, actor, surface)
	if err != nil {
		return Decision{}, fmt.Errorf("should-run: %w", err)
	}
	if d.Reason == "work_complete" && !d.Replayed && s.complete != nil {
		s.complete(ctx, p.GoalID)
	}
	return d, nil
}

func (s *Service) shouldRun(ctx context.Context, p ShouldRunParams, open store.ShouldRunOpen, instance, actor, surface string) (Decision, error) {
	now := open.Now
	tx, snap, rc, err := s.st.BeginShouldRun(ctx, open)
	if err != nil {
		return Decision{}, err
	}
	defer tx.Close(ctx)
	if rc != nil {
		var out Decision
		if err := json.Unmarshal(rc.Body, &out); err != nil {
			return Decision{}, fmt.Errorf("decode should-run receipt: %w", err)
		}
		out.Replayed = true
		return out, nil
	}
	if !snap.GoalFound {
		return Decision{}, store.Errorf(store.ErrNotFound, "goal_id", "no goal %q", p.GoalID)
	}
	if !snap.AgentFound {
		return Decision{}, store.Errorf(store.ErrNotFound, "agent_id", "no agent %q on goal %q; register it first", p.AgentID, p.GoalID)
	}
	d, err := decideFor(ctx, tx, snap, p, now)
	if err != nil {
		return Decision{}, err
	}
	changed := false // state beyond the decision record: its commit must be durable
	if d.State == StateStalled {
		if d, err = s.openStallGate(ctx, tx, snap, d, actor, surface, now); err != nil {
			return Decision{}, err
		}
		changed = true
	}
	if d.State == StateStop && snap.LiveTurn != nil && snap.LiveTurn.Via != store.RunnerExec && snap.LiveTurn.Via != store.RunnerWebhook {
		// A host runs this turn: this answer is how it learns of the stop, so the turn ends
		// here. (A runner's turn is ended by the runner once it killed or cancelled it.)
		if d, err = s.endStopped(ctx, tx, snap, d, actor, surface, now); err != nil {
			return Decision{}, err
		}
		changed = true
	}
	if d.ShouldRun && p.BeginTurn {
		if d, err = s.beginTurn(ctx, tx, p, snap, d, instance, actor, surface, now); err != nil {
			return Decision{}, err
		}
		changed = d.Turn != nil
	}
	todoID, turnID := int64(0), int64(0)
	if d.SelectedTodo != nil {
		todoID = d.SelectedTodo.ID
	}
	if d.Turn != nil {
		turnID = d.Turn.ID
	}
	detail, _ := json.Marshal(map[string]any{
		"decision": d.Decision, "state": d.State, "reason": d.Reason, "effective_action": d.EffectiveAction,
		"turn_instance_id": instance, "hint": d.SchedulerHint.Action, "interval_minutes": d.SchedulerHint.IntervalMinutes,
	})
	var body []byte
	if instance != "" {
		d.HeartbeatReceipt = &HeartbeatReceipt{Status: "committed", TurnInstanceID: instance}
	}
	if open.ReceiptKey != "" {
		if body, err = json.Marshal(d); err != nil {
			return Decision{}, fmt.Errorf("encode should-run receipt: %w", err)
		}
	}
	id, err := tx.Commit(ctx, store.DecisionRecord{
		Entry: store.LedgerEntry{GoalID: p.GoalID, AgentID: p.AgentID, TurnID: turnID, TodoID: todoID,
			Detail: detail, CreatedAt: now},
		HintIdentity: d.Identity, HintStep: d.SchedulerHint.Step,
		Body: body,
		// A plain tick changes nothing but its own record: it need not wait for the WAL flush.
		Async: !changed,
	})
	if err != nil {
		return Decision{}, err
	}
	if d.HeartbeatReceipt != nil {
		d.HeartbeatReceipt.LedgerID = id
	}
	return d, nil
}

// decideFor decides over snap; with p.TodoID the named todo is the one selected, when the
// agent may work on it. When it may not and the answer would otherwise have been work (or
// idle, or the stall guard), the error says why; a skip for another reason (paused, busy,
// throttled, waiting for an owner) is answered as it is.
func decideFor(ctx context.Context, tx store.DB, snap Input, p ShouldRunParams, now time.Time) (Decision, error) {
	if p.TodoID == 0 {
		return Decide(snap, now), nil
	}
	t, todoErr := store.RunnableTodo(ctx, tx, p.GoalID, p.AgentID, p.TodoID, now)
	if todoErr == nil {
		pinned := []store.Todo{t}
		for _, r := range snap.Runnable {
			if r.ID != t.ID {
				pinned = append(pinned, r)
			}
		}
		snap.Runnable = pinned
	}
	d := decide(snap, now, todoErr == nil)
	if todoErr != nil && (d.ShouldRun || d.State == StateIdle || d.State == StateStalled) {
		return Decision{}, todoErr
	}
	return d, nil
}

func checkParams(p ShouldRunParams) error {
	if !store.ValidID(p.GoalID) {
		return store.Errorf(store.ErrInvalid, "goal_id", "%q is not a valid id: use 1-63 characters of a-z, 0-9, '.', '_', '-'", p.GoalID)
	}
	if !store.ValidID(p.AgentID) {
		return store.Errorf(store.ErrInvalid, "agent_id", "%q is not a valid id: use 1-63 characters of a-z, 0-9, '.', '_', '-'", p.AgentID)
	}
	switch p.Via {
	case "", store.RunnerExec, store.RunnerWebhook, "mcp", "cli":
	default:
		return store.Errorf(store.ErrInvalid, "via", "%q is not exec, webhook, mcp or cli", p.Via)
	}
	if !store.ValidInstanceID(p.TurnInstanceID) {
		return store.Errorf(store.ErrInvalid, "turn_instance_id", "%q is not a valid turn instance id: use 1-128 characters of A-Z, a-z, 0-9, '.', '_', ':', '-'", p.TurnInstanceID)
	}
	if p.TodoID < 0 {
		return store.Errorf(store.ErrInvalid, "todo_id", "must be a todo id (1 or more), or 0 for the highest-priority one")
	}
	if p.LeaseDuration < 0 || p.LeaseDuration > 24*time.Hour {
		return store.Errorf(store.ErrInvalid, "lease", "must be between 0 (the default, %s) and 24h", store.DefaultTurnLease)
	}
	return nil
}

// openStallGate records the goal's one open stall gate in the decision. The call that opens
// it announces it (the gate card) and audits it; concurrent callers that find it open answer
// with it and write nothing more.
func (s *Service) openStallGate(ctx context.Context, tx store.DB, snap Input, d Decision, actor, surface string, now time.Time) (Decision, error) {
	g, opened, err := store.OpenStallGate(ctx, tx, store.StallGateParams{
		GoalID: snap.Goal.ID, AgentID: snap.Agent.ID, Question: s.tpl.Word(snap.Goal.Lang, "stall_question", snap.Goal.StallTurns),
		Notice: s.gateNotice,
	}, now)
	if err != nil {
		return d, fmt.Errorf("open stall gate: %w", err)
	}
	d.Gates.Open = append(d.Gates.Open, g.ID)
	d.Gates.Blocking = append(d.Gates.Blocking, g.ID)
	if !opened {
		return d, nil
	}
	err = store.InsertAudit(ctx, tx, store.Audit{At: now, Actor: actor, Surface: surface, Action: "gate.stall",
		GoalID: snap.Goal.ID, Target: store.GateTarget(g.ID), Allowed: true})
	return d, err
}

// endStopped ends the host's live turn an owner stopped, as stopped, and audits it.
func (s *Service) endStopped(ctx context.Context, tx store.DB, snap Input, d Decision, actor, surface string, now time.Time) (Decision, error) {
	t, err := store.EndStoppedTurnTx(ctx, tx, *snap.LiveTurn, now)
	if err != nil {
		return d, fmt.Errorf("end stopped turn: %w", err)
	}
	d.Stopped = &t
	err = store.InsertAudit(ctx, tx, store.Audit{At: now, Actor: actor, Surface: surface, Action: "turn.stopped",
		GoalID: snap.Goal.ID, Target: store.TurnTarget(t.ID), Allowed: true,
		Detail: mustJSON(map[string]any{"agent_id": t.AgentID, "turn_instance_id": t.InstanceID, "stopped_by": t.StopRequestedBy})})
	return d, err
}

// beginTurn opens the turn a run decision starts. If another call opened one first, the
// answer becomes busy.
func (s *Service) beginTurn(ctx context.Context, tx store.DB, p ShouldRunParams, snap Input, d Decision, instance, actor, surface string, now time.Time) (Decision, error) {
	todoID := int64(0)
	if d.SelectedTodo != nil {
		todoID = d.SelectedTodo.ID
	}
	if p.TodoID != 0 && todoID == p.TodoID {
		if err := store.ClaimForTurn(ctx, tx, p.GoalID, p.AgentID, todoID, now); err != nil {
			return d, fmt.Errorf("begin turn: %w", err)
		}
	}
	t, err := store.OpenTurnTx(ctx, tx, store.OpenTurnParams{
		GoalID: p.GoalID, AgentID: p.AgentID, InstanceID: instance, TodoID: todoID,
		Action: d.EffectiveAction, Lease: p.LeaseDuration, Via: p.Via,
	}, now)
	if err != nil {
		var se *store.Error
		if errors.As(err, &se) && se.Kind == store.ErrConflict && se.Field == "agent_id" {
			busy := snap
			busy.LiveTurn = &store.Turn{InstanceID: "(just opened)", LeaseExpiresAt: now}
			return Decide(busy, now), nil
		}
		return d, fmt.Errorf("begin turn: %w", err)
	}
	d.Turn = &t
	err = store.InsertAudit(ctx, tx, store.Audit{At: now, Actor: actor, Surface: surface, Action: "turn.open",
		GoalID: p.GoalID, Target: store.TurnTarget(t.ID), Allowed: true,
		Detail: mustJSON(map[string]any{"agent_id": p.AgentID, "turn_instance_id": t.InstanceID, "todo_id": todoID})})
	return d, err
}
