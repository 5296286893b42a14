package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ShouldRunSnapshot is everything the should-run decision reads, fetched by ReadShouldRunSnapshot in
// one SQL statement.
type ShouldRunSnapshot struct {
	GoalFound  bool
	Goal       Goal
	AgentFound bool
	Agent      Agent
	// LiveTurn is the agent's live turn with an unexpired lease, nil when none. A turn whose
	// lease passed no longer counts: it is ended as abandoned by ExpireTurns or by the next
	// OpenTurn.
	LiveTurn *Turn
	// SpentSlots is the number of slots spent in the rolling window ending now.
	SpentSlots int
	// FreeingSpendAt is the spend whose leaving the window brings SpentSlots below
	// AllowedSlots (the oldest spend when exactly all slots are spent); nil when none.
	FreeingSpendAt *time.Time
	// OpenGates are the goal's open gates, oldest first.
	OpenGates []Gate
	// Runnable are the highest-priority open agent todos this agent may work on (unclaimed,
	// claimed by it, or with an expired claim lease), at most 5, by priority then age.
	Runnable []Todo
	// BlockedGates are the open gates that block a todo this agent could otherwise work on.
	BlockedGates []int64
	// InboxPending and InboxSteer count pending, unexpired inbox items for the agent.
	InboxPending int
	InboxSteer   int
	// RecentProgress holds, newest first, whether each of the agent's last ended turns made
	// progress: at most Goal.StallTurns turns, only those started after the last answered
	// stall gate.
	RecentProgress []bool
	// HintIdentity and HintStep are the stored scheduler-hint progression.
	HintIdentity string
	HintStep     int
	// NextAction is the next action of the agent's latest refresh-state, "" when none.
	NextAction string
	// CapabilityBlocked counts the open agent todos the agent could take but for a capability
	// it lacks (they are not in Runnable).
	CapabilityBlocked int
	// OpenTodos counts the goal's open and blocked todos (agents' and people's); AnyTodos says
	// whether it has any at all. With GoalCriteriaMet they tell whether the work is complete.
	OpenTodos int
	AnyTodos  bool
	// GoalCriteriaMet lists the goal criteria met (named by evidence, or waived).
	GoalCriteriaMet []string
	// Continuations are the handoffs to this agent it has not acknowledged, oldest first (at
	// most 5).
	Continuations []Handoff
	// Replan is the newest replan of the goal this agent has not acknowledged, nil when none.
	Replan *GoalDecision
}

// shouldRunSnapshotSQL reads everything should-run needs in one statement. $1 goal, $2 agent,
// $3 now, $4 receipt key ("" = none).
const shouldRunSnapshotSQL = `
WITH g AS (
	SELECT ` + goalCols + ` FROM goal WHERE id = $1
), spends AS (
	SELECT q.created_at, q.slots FROM quota_ledger q, g
	WHERE q.goal_id = $1 AND q.kind = 'slot_spent'
	  AND q.created_at > $3::timestamptz - make_interval(hours => g.window_hours) AND q.created_at <= $3::timestamptz
), spent AS (
	SELECT coalesce(sum(slots), 0)::int AS n FROM spends
), me AS (
	SELECT coalesce((SELECT capabilities FROM agent WHERE goal_id = $1 AND id = $2), '{}') AS caps,
	       coalesce((SELECT replan_acked FROM agent WHERE goal_id = $1 AND id = $2), 0) AS replan_acked
), stall_mark AS (
	SELECT coalesce(max(answered_at), '-infinity'::timestamptz) AS at FROM gate
	WHERE goal_id = $1 AND agent_id = $2 AND kind = 'stall' AND status <> 'open'
)
SELECT
	(SELECT row_to_json(g) FROM g),
	(SELECT json_build_object('goal_id', goal_id, 'agent_id', id, 'runner', runner, 'runner_config', runner_config,
	        'work_mode', work_mode, 'is_default', is_default, 'created_at', created_at,
	        'held_at', held_at, 'held_reason', held_reason, 'held_by', held_by, 'held_failures', held_failures,
	        'capabilities', capabilities, 'replan_acked', replan_acked)
	   FROM agent WHERE goal_id = $1 AND id = $2),
	(SELECT json_build_object('turn_id', id, 'goal_id', goal_id, 'agent_id', agent_id, 'turn_instance_id', instance_id,
	        'session_id', session_id, 'todo_id', coalesce(todo_id, 0), 'action', action, 'state', state,
	        'progress', progress, 'lease_expires_at', lease_expires_at, 'started_at', started_at,
	        'outcome', outcome, 'log_tail', '', 'via', via, 'stop_requested_at', stop_requested_at,
	        'stop_requested_by', stop_requested_by)
	   FROM turn WHERE goal_id = $1 AND agent_id = $2 AND state = 'live' AND lease_expires_at > $3::timestamptz),
	(SELECT n FROM spent),
	(SELECT created_at FROM spends ORDER BY created_at
	   OFFSET greatest((SELECT n FROM spent) - coalesce((SELECT allowed_slots FROM g), 0), 0) LIMIT 1),
	(SELECT coalesce(json_agg(json_build_object('gate_id', id, 'goal_id', goal_id, 'agent_id', agent_id, 'kind', kind,
	        'question', question, 'options', options, 'todo_id', coalesce(todo_id, 0), 'status', status,
	        'card_version', card_version, 'reminders', reminders, 'created_at', created_at) ORDER BY id), '[]')
	   FROM gate WHERE goal_id = $1 AND status = 'open' AND kind <> 'permission'),
	(SELECT coalesce(json_agg(json_build_object('todo_id', id, 'goal_id', goal_id, 'role', role, 'text', text,
	        'priority', priority, 'status', status, 'claimed_by', coalesce(claimed_by, ''), 'claimed_at', claimed_at,
	        'lease_expires_at', lease_expires_at, 'created_by', created_by, 'version', version,
	        'created_at', created_at, 'updated_at', updated_at, 'criteria', criteria, 'requires', requires,
	        'criteria_met', CASE WHEN jsonb_array_length(criteria) > 0 THEN (SELECT coalesce(array_agg(DISTINCT m.c), '{}') FROM (
	            SELECT unnest(e.criteria) c FROM evidence e WHERE e.goal_id = $1 AND e.todo_id = t.id AND cardinality(e.criteria) > 0
	            UNION SELECT w.criterion FROM criterion_waiver w WHERE w.goal_id = $1 AND w.todo_id = t.id) m) END)
	        ORDER BY priority, id), '[]')
	   FROM (SELECT * FROM todo
	         WHERE goal_id = $1 AND status = 'open' AND role = 'agent'
	           AND (claimed_by IS NULL OR claimed_by = $2 OR lease_expires_at <= $3::timestamptz)
	           AND requires <@ (SELECT caps FROM me)
	         ORDER BY priority, id LIMIT 5) t),
	(SELECT coalesce(array_agg(DISTINCT gt.id), '{}') FROM gate gt JOIN todo t ON t.id = gt.todo_id
	   WHERE gt.goal_id = $1 AND gt.status = 'open' AND t.status = 'blocked' AND t.role = 'agent'
	     AND (t.claimed_by IS NULL OR t.claimed_by = $2 OR t.lease_expires_at <= $3::timestamptz)),
	(SELECT count(*)::int FROM inbox_item
	   WHERE goal_id = $1 AND agent_id = $2 AND (state = 'pending' OR (state = 'delivered' AND redeliver_at <= $3::timestamptz)) AND (expires_at IS NULL OR expires_at > $3::timestamptz)),
	(SELECT count(*)::int FROM inbox_item
	   WHERE goal_id = $1 AND agent_id = $2 AND (state = 'pending' OR (state = 'delivered' AND redeliver_at <= $3::timestamptz)) AND mode = 'steer' AND (expires_at IS NULL OR expires_at > $3::timestamptz)),
	(SELECT coalesce(array_agg(progress ORDER BY id DESC), '{}')
	   FROM (SELECT turn.id, turn.progress FROM turn, stall_mark
	         WHERE goal_id = $1 AND agent_id = $2 AND state <> 'live' AND started_at > stall_mark.at
	         ORDER BY turn.id DESC LIMIT coalesce((SELECT stall_turns FROM g), 0)) r),
	hs.identity,
	hs.step,
	(SELECT detail->>'next_action' FROM quota_ledger
	   WHERE goal_id = $1 AND agent_id = $2 AND kind = 'state_refreshed' ORDER BY id DESC LIMIT 1),
	(SELECT count(*)::int FROM todo
	   WHERE goal_id = $1 AND status = 'open' AND role = 'agent' AND cardinality(requires) > 0
	     AND (claimed_by IS NULL OR claimed_by = $2 OR lease_expires_at <= $3::timestamptz)
	     AND NOT requires <@ (SELECT caps FROM me)),
	(SELECT count(*)::int FROM todo WHERE goal_id = $1 AND status IN ('open', 'blocked')),
	EXISTS (SELECT 1 FROM todo WHERE goal_id = $1),
	(SELECT coalesce(array_agg(DISTINCT m.c), '{}') FROM (
	    SELECT unnest(e.criteria) c FROM evidence e, g
	     WHERE e.goal_id = $1 AND cardinality(e.criteria) > 0 AND jsonb_array_length(g.criteria) > 0
	    UNION SELECT w.criterion FROM criterion_waiver w WHERE w.goal_id = $1 AND w.todo_id IS NULL) m),
	(SELECT coalesce(json_agg(h ORDER BY h.handoff_id), '[]') FROM (
	    SELECT id AS handoff_id, goal_id, coalesce(todo_id, 0) AS todo_id, coalesce(turn_id, 0) AS turn_id, from_agent,
	           to_agent, kind, done, next, questions, evidence_ids, coalesce(gate_id, 0) AS gate_id, created_by, created_at
	      FROM handoff WHERE goal_id = $1 AND to_agent = $2 AND acked_at IS NULL ORDER BY id LIMIT 5) h),
	(SELECT row_to_json(d) FROM (
	    SELECT id AS decision_id, goal_id, kind, coalesce(proposal_id, 0) AS proposal_id, goal_version, before, after,
	           reason, detail, proposed_by, decided_by, created_at
	      FROM goal_decision WHERE goal_id = $1 AND kind = 'replan' AND id > (SELECT replan_acked FROM me)
	     ORDER BY id DESC LIMIT 1) d),
	rc.request_hash,
	rc.body
FROM (SELECT 1) one
LEFT JOIN hint_state hs ON hs.goal_id = $1 AND hs.agent_id = $2
LEFT JOIN receipt rc ON $4 <> '' AND rc.key = $4`

// ReadShouldRunSnapshot reads the should-run snapshot for goal x agent at now in one statement,
// recording nothing (`loopx quota status`, poll heartbeats). An unknown goal or agent is
// reported in GoalFound / AgentFound, not as an error.
func (s *Store) ReadShouldRunSnapshot(ctx context.Context, goalID, agentID string, now time.Time) (ShouldRunSnapshot, error) {
	snap, _, err := scanShouldRunSnapshot(s.DB().QueryRow(ctx, shouldRunSnapshotSQL, goalID, agentID, now, ""), "", nil)
	return snap, err
}

func scanShouldRunSnapshot(row pgx.Row, receiptKey string, hash []byte) (ShouldRunSnapshot, *Receipt, error) {
	var (
		snap                          ShouldRunSnapshot
		goalJSON, agentJSON, liveJSON []byte
		gatesJSON, todosJSON          []byte
		hintIdentity, nextAction      *string
		hintStep                      *int
		rcHash, rcBody                []byte
		handoffsJSON, replanJSON      []byte
	)
	err := row.Scan(
		&goalJSON, &agentJSON, &liveJSON, &snap.SpentSlots, &snap.FreeingSpendAt, &gatesJSON, &todosJSON,
		&snap.BlockedGates, &snap.InboxPending, &snap.InboxSteer, &snap.RecentProgress,
		&hintIdentity, &hintStep, &nextAction, &snap.CapabilityBlocked, &snap.OpenTodos, &snap.AnyTodos,
		&snap.GoalCriteriaMet, &handoffsJSON, &replanJSON, &rcHash, &rcBody)
	if err != nil {
		return ShouldRunSnapshot{}, nil, fmt.Errorf("read should-run snapshot: %w", mapErr(err))
	}
	if rcBody != nil {
		if string(rcHash) != string(hash) {
			return ShouldRunSnapshot{}, nil, errKeyReused()
		}
		return ShouldRunSnapshot{}, &Receipt{Key: receiptKey, RequestHash: rcHash, Status: 200, Body: rcBody}, nil
	}
	if goalJSON != nil {
		snap.GoalFound = true
		if err := json.Unmarshal(goalJSON, &snap.Goal); err != nil {
			return ShouldRunSnapshot{}, nil, fmt.Errorf("decode goal: %w", err)
		}
	}
	if agentJSON != nil {
		snap.AgentFound = true
		if err := json.Unmarshal(agentJSON, &snap.Agent); err != nil {
			return ShouldRunSnapshot{}, nil, fmt.Errorf("decode agent: %w", err)
		}
	}
	if liveJSON != nil {
		snap.LiveTurn = new(Turn)
		if err := json.Unmarshal(liveJSON, snap.LiveTurn); err != nil {
			return ShouldRunSnapshot{}, nil, fmt.Errorf("decode live turn: %w", err)
		}
	}
	if err := json.Unmarshal(gatesJSON, &snap.OpenGates); err != nil {
		return ShouldRunSnapshot{}, nil, fmt.Errorf("decode gates: %w", err)
	}
	if err := json.Unmarshal(todosJSON, &snap.Runnable); err != nil {
		return ShouldRunSnapshot{}, nil, fmt.Errorf("decode todos: %w", err)
	}
	if err := json.Unmarshal(handoffsJSON, &snap.Continuations); err != nil {
		return ShouldRunSnapshot{}, nil, fmt.Errorf("decode continuations: %w", err)
	}
	if replanJSON != nil {
		snap.Replan = new(GoalDecision)
		if err := json.Unmarshal(replanJSON, snap.Replan); err != nil {
			return ShouldRunSnapshot{}, nil, fmt.Errorf("decode replan: %w", err)
		}
	}
	if hintIdentity != nil {
		snap.HintIdentity = *hintIdentity
	}
	if hintStep != nil {
		snap.HintStep = *hintStep
	}
	if nextAction != nil {
		snap.NextAction = *nextAction
	}
	return snap, nil, nil
}

// DecisionRecord is what should-run writes after deciding.
type DecisionRecord struct {
	Entry        LedgerEntry // the tick_decision row (its Kind is ignored: recordDecisionSQL writes tick_decision)
	HintIdentity string
	HintStep     int
	// Body is the answer stored as the receipt when the ShouldRunTx was opened with a receipt key
	// (its heartbeat_receipt.event_id, when present, gets the new ledger row's id).
	Body json.RawMessage
	// Async lets the commit return before its WAL record is flushed (synchronous_commit off
	// for this transaction). Use it only when the transaction changed nothing but the record:
	// a crash may then lose the last fraction of a second of tick records, never more.
	Async bool
}

// recordDecisionSQL writes a should-run decision in one statement: the tick_decision ledger row,
// the hint progression and the heartbeat receipt (with the ledger row id written at
// heartbeat_receipt.event_id). The receipt's key is locked since BeginShouldRun, so no concurrent
// call can store one under it meanwhile.
const recordDecisionSQL = `
WITH cfg AS (
	SELECT CASE WHEN $11::bool THEN set_config('synchronous_commit', 'off', true) END AS v
), l AS (
	INSERT INTO quota_ledger (goal_id, agent_id, kind, turn_id, todo_id, detail, created_at)
	VALUES ($1, $2, 'tick_decision', $3, $4, $5, $6) RETURNING id
), h AS (
	INSERT INTO hint_state (goal_id, agent_id, identity, step, updated_at) VALUES ($1, $2, $7, $8, $6)
	ON CONFLICT (goal_id, agent_id) DO UPDATE
	SET identity = EXCLUDED.identity, step = EXCLUDED.step, updated_at = EXCLUDED.updated_at
	RETURNING 1
), r AS (
	INSERT INTO receipt (key, request_hash, status, body, created_at)
	SELECT $9, $10, 200, jsonb_set($12::jsonb, '{heartbeat_receipt,event_id}', to_jsonb(l.id)), $6
	FROM l WHERE $9 <> ''
	RETURNING 1
)
SELECT l.id FROM l, cfg, (SELECT count(*) FROM h) hc, (SELECT count(*) FROM r) rc`

func recordDecisionArgs(r DecisionRecord, key string, hash []byte) []any {
	detail := r.Entry.Detail
	if detail == nil {
		detail = json.RawMessage(`{}`)
	}
	var turnID, todoID any
	if r.Entry.TurnID != 0 {
		turnID = r.Entry.TurnID
	}
	if r.Entry.TodoID != 0 {
		todoID = r.Entry.TodoID
	}
	body := r.Body
	if body == nil {
		body = json.RawMessage(`{}`)
	}
	return []any{r.Entry.GoalID, r.Entry.AgentID, turnID, todoID, detail, r.Entry.CreatedAt,
		r.HintIdentity, r.HintStep, key, hash, r.Async, body}
}

// ShouldRunTx is the transaction of one should-run. BEGIN travels with the snapshot read, and
// COMMIT with the record, so a plain tick costs two round trips. Between the two it is a DB
// for the statements a stall gate or a begun turn need.
type ShouldRunTx struct {
	conn *pgxpool.Conn
	key  string // the receipt key locked for this should-run; "" = none
	hash []byte // the request hash its receipt answers
}

var _ DB = (*ShouldRunTx)(nil)

// Exec runs a statement inside the tick's transaction.
func (t *ShouldRunTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return t.conn.Exec(ctx, sql, args...)
}

// Query runs a query inside the tick's transaction.
func (t *ShouldRunTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return t.conn.Query(ctx, sql, args...)
}

// QueryRow runs a one-row query inside the tick's transaction.
func (t *ShouldRunTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return t.conn.QueryRow(ctx, sql, args...)
}

// ShouldRunOpen names the should-run a ShouldRunTx is for.
type ShouldRunOpen struct {
	GoalID  string
	AgentID string
	// ReceiptKey, when set, makes the call replayable: it is locked for the transaction (a
	// concurrent call under it waits, then replays), and a receipt stored under it is
	// returned instead of a snapshot. Request is what that receipt answers: the same key
	// with another request is ErrConflict naming idempotency_key.
	ReceiptKey string
	Request    any
	Now        time.Time
}

// BeginShouldRun opens a should-run transaction and reads the snapshot (and the receipt under
// o.ReceiptKey, after taking its lock) in the same round trip: BEGIN, the lock and the read
// are pipelined, each its own statement so the read sees a receipt committed while the lock
// was awaited. The caller must call Commit or Close. A receipt found is returned with no
// snapshot; the caller then replays it and closes.
func (s *Store) BeginShouldRun(ctx context.Context, o ShouldRunOpen) (*ShouldRunTx, ShouldRunSnapshot, *Receipt, error) {
	var hash []byte
	if o.ReceiptKey != "" {
		var err error
		if hash, err = requestHash("quota.should_run", o.Request); err != nil {
			return nil, ShouldRunSnapshot{}, nil, err
		}
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, ShouldRunSnapshot{}, nil, fmt.Errorf("acquire connection: %w", mapErr(err))
	}
	t := &ShouldRunTx{conn: conn, key: o.ReceiptKey, hash: hash}
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	if o.ReceiptKey != "" {
		b.Queue(lockReceiptSQL, o.ReceiptKey)
	}
	var snap ShouldRunSnapshot
	var rc *Receipt
	var readErr error
	b.Queue(shouldRunSnapshotSQL, o.GoalID, o.AgentID, o.Now, o.ReceiptKey).QueryRow(func(row pgx.Row) error {
		snap, rc, readErr = scanShouldRunSnapshot(row, o.ReceiptKey, hash)
		return readErr
	})
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		t.Close(ctx)
		if readErr != nil {
			return nil, ShouldRunSnapshot{}, nil, readErr
		}
		return nil, ShouldRunSnapshot{}, nil, fmt.Errorf("read should-run snapshot: %w", mapErr(err))
	}
	return t, snap, rc, nil
}

// Commit writes the record and commits in one round trip, then releases the connection.
func (t *ShouldRunTx) Commit(ctx context.Context, r DecisionRecord) (int64, error) {
	defer t.Close(ctx)
	var id int64
	b := &pgx.Batch{}
	b.Queue(recordDecisionSQL, recordDecisionArgs(r, t.key, t.hash)...).QueryRow(func(row pgx.Row) error { return row.Scan(&id) })
	b.Queue("COMMIT")
	if err := t.conn.SendBatch(ctx, b).Close(); err != nil {
		return 0, fmt.Errorf("record should-run decision: %w", mapErr(err))
	}
	if t.conn.Conn().PgConn().TxStatus() != 'I' {
		return 0, errors.New("commit should-run: the transaction did not commit")
	}
	return id, nil
}

// Close rolls back when the transaction is still open and releases the connection. It is
// safe to call more than once.
func (t *ShouldRunTx) Close(ctx context.Context) {
	if t.conn == nil {
		return
	}
	if t.conn.Conn().PgConn().TxStatus() != 'I' {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_, _ = t.conn.Exec(rctx, "ROLLBACK")
		cancel()
	}
	// The pool destroys a connection released inside a transaction, so a failed rollback
	// cannot leak one.
	t.conn.Release()
	t.conn = nil
}
