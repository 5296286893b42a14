package store

import (
	"context"
	"encoding/json"
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
// $3 now.
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
	   WHERE goal_id = $1 AND agent_id = $2 AND kind = 'state_refreshed' ORDER BY id DESC LIMIT 1)`

// ReadTickSnapshot reads the should-run snapshot for goal x agent at now in one statement.
// db may be a transaction. An unknown goal or agent is reported in GoalFound / AgentFound,
// not as an error.
func ReadTickSnapshot(ctx context.Context, db DB, goalID, agentID string, now time.Time) (TickSnapshot, error) {
	var (
		snap                          TickSnapshot
		goalJSON, agentJSON, liveJSON []byte
		gatesJSON, todosJSON          []byte
		hintIdentity, nextAction      *string
		hintStep                      *int
	)
	err := db.QueryRow(ctx, tickSnapshotSQL, goalID, agentID, now).Scan(
		&goalJSON, &agentJSON, &liveJSON, &snap.SpentSlots, &snap.FreeingSpendAt, &gatesJSON, &todosJSON,
		&snap.BlockedGates, &snap.InboxPending, &snap.InboxSteer, &snap.RecentProgress,
		&hintIdentity, &hintStep, &nextAction)
	if err != nil {
		return TickSnapshot{}, fmt.Errorf("read should-run snapshot: %w", mapErr(err))
	}
	if goalJSON != nil {
		snap.GoalFound = true
		if err := json.Unmarshal(goalJSON, &snap.Goal); err != nil {
			return TickSnapshot{}, fmt.Errorf("decode goal: %w", err)
		}
	}
	if agentJSON != nil {
		snap.AgentFound = true
		if err := json.Unmarshal(agentJSON, &snap.Agent); err != nil {
			return TickSnapshot{}, fmt.Errorf("decode agent: %w", err)
		}
	}
	if liveJSON != nil {
		snap.LiveTurn = new(Turn)
		if err := json.Unmarshal(liveJSON, snap.LiveTurn); err != nil {
			return TickSnapshot{}, fmt.Errorf("decode live turn: %w", err)
		}
	}
	if err := json.Unmarshal(gatesJSON, &snap.OpenGates); err != nil {
		return TickSnapshot{}, fmt.Errorf("decode gates: %w", err)
	}
	if err := json.Unmarshal(todosJSON, &snap.Runnable); err != nil {
		return TickSnapshot{}, fmt.Errorf("decode todos: %w", err)
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
	return snap, nil
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
