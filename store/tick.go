package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// TickSnapshot is everything the should-run decision reads, fetched by ReadTickSnapshot in
// one SQL statement.
type TickSnapshot struct {
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
	// Runnable are the highest-priority open todos this agent may work on (unclaimed, claimed
	// by it, or with an expired claim lease), at most 5, by priority then id.
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
}

// tickSnapshotSQL reads everything should-run needs in one statement. $1 goal, $2 agent,
// $3 now, $4 receipt key ("" = none).
const tickSnapshotSQL = `
WITH g AS (
	SELECT ` + goalCols + ` FROM goal WHERE id = $1
), spends AS (
	SELECT q.created_at, q.slots FROM quota_ledger q, g
	WHERE q.goal_id = $1 AND q.kind = 'slot_spent'
	  AND q.created_at > $3::timestamptz - make_interval(hours => g.window_hours) AND q.created_at <= $3::timestamptz
), spent AS (
	SELECT coalesce(sum(slots), 0)::int AS n FROM spends
), stall_mark AS (
	SELECT coalesce(max(answered_at), '-infinity'::timestamptz) AS at FROM gate
	WHERE goal_id = $1 AND agent_id = $2 AND kind = 'stall' AND status <> 'open'
)
SELECT
	(SELECT row_to_json(g) FROM g),
	(SELECT json_build_object('goal_id', goal_id, 'agent_id', id, 'runner', runner, 'runner_config', runner_config,
	        'work_mode', work_mode, 'is_default', is_default, 'created_at', created_at)
	   FROM agent WHERE goal_id = $1 AND id = $2),
	(SELECT json_build_object('turn_id', id, 'goal_id', goal_id, 'agent_id', agent_id, 'turn_instance_id', instance_id,
	        'session_id', session_id, 'todo_id', coalesce(todo_id, 0), 'action', action, 'state', state,
	        'progress', progress, 'lease_expires_at', lease_expires_at, 'started_at', started_at,
	        'outcome', outcome, 'log_tail', '')
	   FROM turn WHERE goal_id = $1 AND agent_id = $2 AND state = 'live' AND lease_expires_at > $3::timestamptz),
	(SELECT n FROM spent),
	(SELECT created_at FROM spends ORDER BY created_at
	   OFFSET greatest((SELECT n FROM spent) - coalesce((SELECT allowed_slots FROM g), 0), 0) LIMIT 1),
	(SELECT coalesce(json_agg(json_build_object('gate_id', id, 'goal_id', goal_id, 'agent_id', agent_id, 'kind', kind,
	        'question', question, 'options', options, 'todo_id', coalesce(todo_id, 0), 'status', status,
	        'card_version', card_version, 'reminders', reminders, 'created_at', created_at) ORDER BY id), '[]')
	   FROM gate WHERE goal_id = $1 AND status = 'open'),
	(SELECT coalesce(json_agg(json_build_object('todo_id', id, 'goal_id', goal_id, 'role', role, 'text', text,
	        'priority', priority, 'status', status, 'claimed_by', coalesce(claimed_by, ''), 'claimed_at', claimed_at,
	        'lease_expires_at', lease_expires_at, 'created_by', created_by, 'version', version,
	        'created_at', created_at, 'updated_at', updated_at) ORDER BY priority, mine DESC, id), '[]')
	   FROM (SELECT *, claimed_by IS NOT DISTINCT FROM $2 AS mine FROM todo
	         WHERE goal_id = $1 AND status = 'open' AND role = 'agent'
	           AND (claimed_by IS NULL OR claimed_by = $2 OR lease_expires_at <= $3::timestamptz)
	         ORDER BY priority, mine DESC, id LIMIT 5) t),
	(SELECT coalesce(array_agg(DISTINCT gt.id), '{}') FROM gate gt JOIN todo t ON t.id = gt.todo_id
	   WHERE gt.goal_id = $1 AND gt.status = 'open' AND t.status = 'blocked' AND t.role = 'agent'
	     AND (t.claimed_by IS NULL OR t.claimed_by = $2 OR t.lease_expires_at <= $3::timestamptz)),
	(SELECT count(*)::int FROM inbox_item
	   WHERE goal_id = $1 AND agent_id = $2 AND state = 'pending' AND (expires_at IS NULL OR expires_at > $3::timestamptz)),
	(SELECT count(*)::int FROM inbox_item
	   WHERE goal_id = $1 AND agent_id = $2 AND state = 'pending' AND mode = 'steer' AND (expires_at IS NULL OR expires_at > $3::timestamptz)),
	(SELECT coalesce(array_agg(progress ORDER BY id DESC), '{}')
	   FROM (SELECT turn.id, turn.progress FROM turn, stall_mark
	         WHERE goal_id = $1 AND agent_id = $2 AND state <> 'live' AND started_at > stall_mark.at
	         ORDER BY turn.id DESC LIMIT coalesce((SELECT stall_turns FROM g), 0)) r),
	(SELECT identity FROM hint_state WHERE goal_id = $1 AND agent_id = $2),
	(SELECT step FROM hint_state WHERE goal_id = $1 AND agent_id = $2),
	(SELECT detail->>'next_action' FROM quota_ledger
	   WHERE goal_id = $1 AND agent_id = $2 AND kind = 'state_refreshed' ORDER BY id DESC LIMIT 1),
	(SELECT request_hash FROM receipt WHERE $4 <> '' AND key = $4),
	(SELECT body FROM receipt WHERE $4 <> '' AND key = $4)`

// ReadTickSnapshot reads the should-run snapshot for goal x agent at now in one statement.
// db may be a transaction. An unknown goal or agent is reported in GoalFound / AgentFound,
// not as an error.
func ReadTickSnapshot(ctx context.Context, db DB, goalID, agentID string, now time.Time) (TickSnapshot, error) {
	snap, _, err := ReadTickSnapshotWithReceipt(ctx, db, goalID, agentID, "", nil, now)
	return snap, err
}

// ReadTickSnapshotWithReceipt is ReadTickSnapshot that also looks up the receipt stored under
// receiptKey in the same statement: found, it is returned (and the snapshot may be ignored);
// stored for another request hash, the error is ErrConflict.
func ReadTickSnapshotWithReceipt(ctx context.Context, db DB, goalID, agentID, receiptKey string, hash []byte, now time.Time) (TickSnapshot, *Receipt, error) {
	var (
		snap                          TickSnapshot
		goalJSON, agentJSON, liveJSON []byte
		gatesJSON, todosJSON          []byte
		hintIdentity, nextAction      *string
		hintStep                      *int
		rcHash, rcBody                []byte
	)
	err := db.QueryRow(ctx, tickSnapshotSQL, goalID, agentID, now, receiptKey).Scan(
		&goalJSON, &agentJSON, &liveJSON, &snap.SpentSlots, &snap.FreeingSpendAt, &gatesJSON, &todosJSON,
		&snap.BlockedGates, &snap.InboxPending, &snap.InboxSteer, &snap.RecentProgress,
		&hintIdentity, &hintStep, &nextAction, &rcHash, &rcBody)
	if err != nil {
		return TickSnapshot{}, nil, fmt.Errorf("read should-run snapshot: %w", mapErr(err))
	}
	if rcBody != nil {
		if string(rcHash) != string(hash) {
			return TickSnapshot{}, nil, Errorf(ErrConflict, "turn_instance_id",
				"this turn instance id was already used for a different request; use a new id")
		}
		return TickSnapshot{}, &Receipt{Key: receiptKey, RequestHash: rcHash, Status: 200, Body: rcBody}, nil
	}
	if goalJSON != nil {
		snap.GoalFound = true
		if err := json.Unmarshal(goalJSON, &snap.Goal); err != nil {
			return TickSnapshot{}, nil, fmt.Errorf("decode goal: %w", err)
		}
	}
	if agentJSON != nil {
		snap.AgentFound = true
		if err := json.Unmarshal(agentJSON, &snap.Agent); err != nil {
			return TickSnapshot{}, nil, fmt.Errorf("decode agent: %w", err)
		}
	}
	if liveJSON != nil {
		snap.LiveTurn = new(Turn)
		if err := json.Unmarshal(liveJSON, snap.LiveTurn); err != nil {
			return TickSnapshot{}, nil, fmt.Errorf("decode live turn: %w", err)
		}
	}
	if err := json.Unmarshal(gatesJSON, &snap.OpenGates); err != nil {
		return TickSnapshot{}, nil, fmt.Errorf("decode gates: %w", err)
	}
	if err := json.Unmarshal(todosJSON, &snap.Runnable); err != nil {
		return TickSnapshot{}, nil, fmt.Errorf("decode todos: %w", err)
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

// TickRecord is what should-run writes after deciding.
type TickRecord struct {
	Entry        LedgerEntry // the tick_decision row (Kind is set by RecordTick)
	HintIdentity string
	HintStep     int
	// ReceiptKey, when set, stores Body as the heartbeat receipt, with the new ledger row's
	// id written at heartbeat_receipt.event_id.
	ReceiptKey  string
	RequestHash []byte
	Body        json.RawMessage
	// Async lets the commit return before its WAL record is flushed (synchronous_commit off
	// for this transaction). Use it only when the transaction changed nothing but the record:
	// a crash may then lose the last fraction of a second of tick records, never more.
	Async bool
}

// ErrReceiptRace reports that a concurrent call stored the receipt first; the caller rolls
// back and retries, and then replays that receipt.
var ErrReceiptRace = errors.New("receipt stored concurrently")

// RecordTick writes a should-run decision in one statement: the tick_decision ledger row,
// the hint progression and the heartbeat receipt. It returns the ledger row id.
func RecordTick(ctx context.Context, db DB, r TickRecord) (int64, error) {
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
	var id int64
	var stored int
	err := db.QueryRow(ctx, `
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
			ON CONFLICT (key) DO NOTHING RETURNING 1
		)
		SELECT l.id, (SELECT count(*)::int FROM r) + CASE WHEN $9 = '' THEN 1 ELSE 0 END
		FROM l, cfg, (SELECT count(*) FROM h) hc`,
		r.Entry.GoalID, r.Entry.AgentID, turnID, todoID, detail, r.Entry.CreatedAt,
		r.HintIdentity, r.HintStep, r.ReceiptKey, r.RequestHash, r.Async, body).Scan(&id, &stored)
	if err != nil {
		return 0, fmt.Errorf("record tick: %w", mapErr(err))
	}
	if stored == 0 {
		return 0, ErrReceiptRace
	}
	return id, nil
}

// SaveHintState stores the scheduler-hint progression of goal x agent.
func SaveHintState(ctx context.Context, db DB, goalID, agentID, identity string, step int, now time.Time) error {
	_, err := db.Exec(ctx, `
		INSERT INTO hint_state (goal_id, agent_id, identity, step, updated_at) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (goal_id, agent_id) DO UPDATE SET identity = EXCLUDED.identity, step = EXCLUDED.step,
		       updated_at = EXCLUDED.updated_at`, goalID, agentID, identity, step, now)
	if err != nil {
		return fmt.Errorf("save hint state: %w", mapErr(err))
	}
	return nil
}
