package store

import (
	"context"
	"fmt"
	"time"
)

// A turn names one todo, and its evidence and its spent slot name the same one. A turn can be
// opened on a todo its agent names (should-run with a todo id), and a live turn that has
// recorded nothing yet (no evidence, no spend) can be moved to another todo (BindTurnTodo),
// so a task the agent adds at the start of its turn is the one the turn is charged to.

// RunnableTodo reads todo id of goal and checks that agent may open a turn on it now: an open
// agent todo, unclaimed, claimed by agent, or whose claim lease has passed. Otherwise the
// error says why (ErrNotFound, ErrRefused, or ErrConflict with ReasonClaimed), naming
// todo_id.
func RunnableTodo(ctx context.Context, db DB, goalID, agentID string, id int64, now time.Time) (Todo, error) {
	if id <= 0 {
		return Todo{}, Errorf(ErrInvalid, "todo_id", "must be a todo id (1 or more)")
	}
	t, err := getTodo(ctx, db, goalID, id, false)
	if err != nil {
		return Todo{}, err
	}
	switch {
	case t.Role == "user":
		return Todo{}, Errorf(ErrRefused, "todo_id", "todo %d is a task for a person; an agent turn cannot work on it", t.ID)
	case t.Status == TodoBlocked && t.BlockedByGate != 0:
		return Todo{}, Errorf(ErrRefused, "todo_id", "todo %d waits for an owner to answer gate %d; it cannot be worked on until then", t.ID, t.BlockedByGate)
	case t.Status != TodoOpen:
		return Todo{}, Errorf(ErrRefused, "todo_id", "todo %d is %s; only an open todo can be worked on", t.ID, t.Status)
	case t.ClaimedBy != "" && t.ClaimedBy != agentID && (t.LeaseExpiresAt == nil || t.LeaseExpiresAt.After(now)):
		return Todo{}, because(ReasonClaimed, Errorf(ErrConflict, "todo_id",
			"todo %d is claimed by agent %q; pick another todo, or claim it with transfer only if asked to", t.ID, t.ClaimedBy))
	}
	return t, nil
}

// ClaimForTurn claims todo id for agent inside the caller's transaction, when nobody holds
// it (or the holder's lease passed); a todo the agent already holds is left as it is.
func ClaimForTurn(ctx context.Context, db DB, goalID, agentID string, id int64, now time.Time) error {
	_, err := db.Exec(ctx, `
		UPDATE todo SET claimed_by = $3, claimed_at = $4, lease_expires_at = NULL, version = version + 1, updated_at = $4
		WHERE goal_id = $1 AND id = $2 AND claimed_by IS DISTINCT FROM $3
		  AND (claimed_by IS NULL OR lease_expires_at <= $4)`, goalID, id, agentID, now)
	if err != nil {
		return fmt.Errorf("claim todo for the turn: %w", mapErr(err))
	}
	return nil
}

// BindTurnParams moves a live turn to another todo.
type BindTurnParams struct {
	GoalID     string
	AgentID    string
	InstanceID string
	TodoID     int64
	Meta       Meta `json:"-"`
}

// BindTurnTodo moves the agent's live turn to todo TodoID (claiming it), while the turn has
// recorded nothing: no evidence and no spend. A turn already on that todo is answered as it
// is. Refused (ErrRefused with ReasonTurnRecorded) once the turn recorded evidence or was
// spent, so the turn, its evidence and its slot keep naming one todo; a turn that is not
// live is ErrRefused too, and a todo the agent may not work on is refused as RunnableTodo
// says.
func (s *Store) BindTurnTodo(ctx context.Context, p BindTurnParams) (Turn, error) {
	if err := checkID("goal_id", p.GoalID); err != nil {
		return Turn{}, err
	}
	if err := checkID("agent_id", p.AgentID); err != nil {
		return Turn{}, err
	}
	if p.InstanceID == "" {
		return Turn{}, Errorf(ErrInvalid, "turn_instance_id", "is required: the live turn to move")
	}
	if err := checkInstanceID("turn_instance_id", p.InstanceID); err != nil {
		return Turn{}, err
	}
	return Do(ctx, s, "turn.bind", p.Meta, p, func(tx *Tx, now time.Time) (Turn, Audit, error) {
		t, err := getTurn(ctx, tx, p.GoalID, p.AgentID, p.InstanceID, true)
		if err != nil {
			return Turn{}, Audit{}, err
		}
		audit := Audit{GoalID: p.GoalID, Target: TurnTarget(t.ID)}
		if t.State != TurnLive || !t.LeaseExpiresAt.After(now) {
			return Turn{}, Audit{}, Errorf(ErrRefused, "turn_instance_id", "turn %s is no longer live; start a new turn with should-run", t.InstanceID)
		}
		if t.TodoID == p.TodoID {
			return t, audit, nil
		}
		var recorded string
		err = tx.QueryRow(ctx, `
			SELECT CASE WHEN EXISTS (SELECT 1 FROM quota_ledger WHERE turn_id = $1 AND kind = 'slot_spent') THEN 'spent'
			            WHEN EXISTS (SELECT 1 FROM evidence WHERE turn_id = $1) THEN 'evidence'
			            ELSE '' END`, t.ID).Scan(&recorded)
		if err != nil {
			return Turn{}, Audit{}, fmt.Errorf("read what the turn recorded: %w", mapErr(err))
		}
		if recorded != "" {
			what := "evidence"
			if recorded == "spent" {
				what = "its spent slot"
			}
			return Turn{}, Audit{}, because(ReasonTurnRecorded, Errorf(ErrRefused, "todo_id",
				"turn %s already recorded %s for todo %d; it stays on that todo (finish it, then start a new turn for todo %d)",
				t.InstanceID, what, t.TodoID, p.TodoID))
		}
		if _, err := RunnableTodo(ctx, tx, p.GoalID, p.AgentID, p.TodoID, now); err != nil {
			return Turn{}, Audit{}, err
		}
		if err := ClaimForTurn(ctx, tx, p.GoalID, p.AgentID, p.TodoID, now); err != nil {
			return Turn{}, Audit{}, err
		}
		out, err := scanTurn(tx.QueryRow(ctx, `UPDATE turn SET todo_id = $2 WHERE id = $1 RETURNING `+turnCols, t.ID, p.TodoID))
		if err != nil {
			return Turn{}, Audit{}, fmt.Errorf("move turn: %w", mapErr(err))
		}
		audit.Detail = auditDetail(map[string]any{"agent_id": p.AgentID, "turn_instance_id": t.InstanceID,
			"changes": map[string]Change{"todo_id": {Before: t.TodoID, After: p.TodoID}}})
		return out, audit, nil
	})
}
