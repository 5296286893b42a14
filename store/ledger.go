package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Quota ledger kinds.
const (
	LedgerSlotSpent      = "slot_spent"
	LedgerSlotVoided     = "slot_voided"
	LedgerStateRefreshed = "state_refreshed"
	LedgerTickDecision   = "tick_decision"
)

// LedgerEntry is one append-only quota ledger row.
type LedgerEntry struct {
	ID        int64           `json:"event_id"`
	GoalID    string          `json:"goal_id"`
	AgentID   string          `json:"agent_id"`
	Kind      string          `json:"kind"`
	TurnID    int64           `json:"turn_id,omitempty"`
	TodoID    int64           `json:"todo_id,omitempty"`
	Slots     int             `json:"slots"`
	Detail    json.RawMessage `json:"detail"`
	CreatedAt time.Time       `json:"created_at"`
}

// SpendSlotParams debits one slot for a turn that ran. TurnInstanceID names the turn.
type SpendSlotParams struct {
	GoalID         string
	AgentID        string
	TurnInstanceID string
	TodoID         int64
	Meta           Meta `json:"-"`
}

// SpendReceipt is the result of SpendSlot; a retry returns the same one with Replayed true.
type SpendReceipt struct {
	Entry      LedgerEntry `json:"quota_event"`
	Turn       Turn        `json:"turn"`
	SpentSlots int         `json:"spent_slots"`
	Replayed   bool        `json:"-"`
}

// RefreshStateParams records the next action the following turn should see, quota-neutral.
type RefreshStateParams struct {
	GoalID         string
	AgentID        string
	TurnInstanceID string
	NextAction     string
	// Handoff, when set, ends the turn with a handoff record: what was done, what is next,
	// open questions, for whom (To; "" = the agent's own next turn), about the turn's todo
	// (or TodoID), resting on the turn's evidence.
	Handoff *TurnHandoff `json:"handoff,omitempty"`
	Meta    Meta         `json:"-"`
}

// TurnHandoff is the handoff a turn ends with (RefreshStateParams.Handoff).
type TurnHandoff struct {
	To        string `json:"to_agent"`
	Kind      string `json:"kind"`
	TodoID    int64  `json:"todo_id"`
	Done      string `json:"done"`
	Next      string `json:"next"`
	Questions string `json:"questions"`
}

// RefreshResult is what refresh-state recorded: the ledger row and, when the turn handed off,
// the handoff.
type RefreshResult struct {
	LedgerEntry
	Handoff *Handoff `json:"handoff,omitempty"`
}

const ledgerCols = `id, goal_id, agent_id, kind, coalesce(turn_id, 0), coalesce(todo_id, 0), slots, detail, created_at`

func scanLedger(row pgx.Row) (LedgerEntry, error) {
	var e LedgerEntry
	err := row.Scan(&e.ID, &e.GoalID, &e.AgentID, &e.Kind, &e.TurnID, &e.TodoID, &e.Slots, &e.Detail, &e.CreatedAt)
	return e, err
}

// InsertLedger appends one quota ledger row in the caller's transaction. CreatedAt zero means
// now().
func InsertLedger(ctx context.Context, db DB, e LedgerEntry) (LedgerEntry, error) {
	if e.Detail == nil {
		e.Detail = json.RawMessage(`{}`)
	}
	var turnID, todoID, at any
	if e.TurnID != 0 {
		turnID = e.TurnID
	}
	if e.TodoID != 0 {
		todoID = e.TodoID
	}
	if !e.CreatedAt.IsZero() {
		at = e.CreatedAt
	}
	out, err := scanLedger(db.QueryRow(ctx, `
		INSERT INTO quota_ledger (goal_id, agent_id, kind, turn_id, todo_id, slots, detail, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, coalesce($8, now()))
		RETURNING `+ledgerCols, e.GoalID, e.AgentID, e.Kind, turnID, todoID, e.Slots, e.Detail, at))
	if err != nil {
		return LedgerEntry{}, fmt.Errorf("append ledger: %w", mapErr(err))
	}
	return out, nil
}

// SpentSlots sums the slots spent by a goal in the window ending at now.
func SpentSlots(ctx context.Context, db DB, goalID string, window time.Duration, now time.Time) (int, error) {
	var n int
	err := db.QueryRow(ctx, `
		SELECT coalesce(sum(slots), 0) FROM quota_ledger
		WHERE goal_id = $1 AND kind = 'slot_spent' AND created_at > $2 AND created_at <= $3`,
		goalID, now.Add(-window), now).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("sum spent slots: %w", mapErr(err))
	}
	return n, nil
}

func (r *SpendReceipt) markReplayed() { r.Replayed = true }

// spentAfter is the spent-slot count a spend recorded in its ledger detail; entries written
// without it fall back to the count in the window now.
func spentAfter(ctx context.Context, db DB, e LedgerEntry, goal Goal, now time.Time) (int, error) {
	var d struct {
		After struct {
			SpentSlots *int `json:"spent_slots"`
		} `json:"after"`
	}
	if json.Unmarshal(e.Detail, &d) == nil && d.After.SpentSlots != nil {
		return *d.After.SpentSlots, nil
	}
	return SpentSlots(ctx, db, e.GoalID, time.Duration(goal.WindowHours)*time.Hour, now)
}

// SpendSlot debits one slot for a turn that ran, exactly once: the turn's row is locked and a
// unique index allows one slot_spent per turn, so of concurrent spends one debits and the
// others (and any later retry) return the same receipt with Replayed set. A live turn ends as
// ok ("settled"). Refused (ErrRefused with ReasonNotOwed): a turn that should-run skipped, an
// unknown turn, a turn that failed or was abandoned, a todo other than the turn's, or a turn
// already settled for another todo.
func (s *Store) SpendSlot(ctx context.Context, p SpendSlotParams) (SpendReceipt, error) {
	if err := checkID("goal_id", p.GoalID); err != nil {
		return SpendReceipt{}, err
	}
	if err := checkID("agent_id", p.AgentID); err != nil {
		return SpendReceipt{}, err
	}
	if p.TurnInstanceID == "" {
		return SpendReceipt{}, Errorf(ErrInvalid, "turn_instance_id", "is required: spend for the turn that ran")
	}
	if err := checkInstanceID("turn_instance_id", p.TurnInstanceID); err != nil {
		return SpendReceipt{}, err
	}
	if p.TodoID < 0 {
		return SpendReceipt{}, Errorf(ErrInvalid, "todo_id", "must not be negative")
	}
	return Do(ctx, s, "quota.spend_slot", p.Meta, p, func(tx *Tx, now time.Time) (SpendReceipt, Audit, error) {
		goal, err := getGoal(ctx, tx, p.GoalID, false)
		if err != nil {
			return SpendReceipt{}, Audit{}, err
		}
		t, err := getTurn(ctx, tx, p.GoalID, p.AgentID, p.TurnInstanceID, true)
		if errors.Is(err, ErrNotFound) {
			return SpendReceipt{}, Audit{}, unknownTurnRefusal(ctx, tx, p)
		}
		if err != nil {
			return SpendReceipt{}, Audit{}, err
		}
		audit := Audit{GoalID: p.GoalID, Target: TurnTarget(t.ID)}
		prev, err := scanLedger(tx.QueryRow(ctx, `SELECT `+ledgerCols+` FROM quota_ledger WHERE turn_id = $1 AND kind = 'slot_spent'`, t.ID))
		switch {
		case err == nil:
			if p.TodoID != 0 && prev.TodoID != p.TodoID {
				return SpendReceipt{}, Audit{}, because(ReasonNotOwed, refuse(ErrRefused, "todo_id",
					fmt.Sprintf("turn %s is already settled for todo %d", t.InstanceID, prev.TodoID), p.GoalID, TurnTarget(t.ID), nil))
			}
			// A retry answers the original receipt, so spent_slots is the count the spend
			// recorded, not one recomputed at a clock that may read earlier than the spend.
			spent, err := spentAfter(ctx, tx, prev, goal, now)
			if err != nil {
				return SpendReceipt{}, Audit{}, err
			}
			audit.Detail = auditDetail(map[string]any{"replayed": true, "event_id": prev.ID})
			return SpendReceipt{Entry: prev, Turn: t, SpentSlots: spent, Replayed: true}, audit, nil
		case !errors.Is(err, pgx.ErrNoRows):
			return SpendReceipt{}, Audit{}, fmt.Errorf("read spend: %w", mapErr(err))
		}
		if t.State == TurnFailed || t.State == TurnAbandoned {
			return SpendReceipt{}, Audit{}, because(ReasonNotOwed, refuse(ErrRefused, "turn_instance_id",
				fmt.Sprintf("turn %s ended %s; only a turn that completed is spent", t.InstanceID, t.State), p.GoalID, TurnTarget(t.ID), nil))
		}
		todoID := p.TodoID
		if t.TodoID != 0 && todoID != 0 && t.TodoID != todoID {
			return SpendReceipt{}, Audit{}, because(ReasonNotOwed, refuse(ErrRefused, "todo_id",
				fmt.Sprintf("turn %s was opened for todo %d, not %d; spend for the todo it worked on", t.InstanceID, t.TodoID, todoID),
				p.GoalID, TurnTarget(t.ID), nil))
		}
		if todoID == 0 {
			todoID = t.TodoID
		}
		window := time.Duration(goal.WindowHours) * time.Hour
		before, err := SpentSlots(ctx, tx, p.GoalID, window, now)
		if err != nil {
			return SpendReceipt{}, Audit{}, err
		}
		detail, _ := json.Marshal(map[string]any{
			"turn_instance_id": t.InstanceID, "source": p.Meta.Surface,
			"before": map[string]int{"spent_slots": before}, "after": map[string]int{"spent_slots": before + 1},
		})
		e, err := InsertLedger(ctx, tx, LedgerEntry{GoalID: p.GoalID, AgentID: p.AgentID, Kind: LedgerSlotSpent,
			TurnID: t.ID, TodoID: todoID, Slots: 1, Detail: detail, CreatedAt: now})
		if err != nil {
			return SpendReceipt{}, Audit{}, err
		}
		if t.State == TurnLive {
			if t, err = endTurnTx(ctx, tx, t.ID, TurnOK, OutcomeSpent, "", now); err != nil {
				return SpendReceipt{}, Audit{}, err
			}
		}
		audit.Detail = auditDetail(map[string]any{"event_id": e.ID, "todo_id": todoID})
		return SpendReceipt{Entry: e, Turn: t, SpentSlots: before + 1}, audit, nil
	})
}

// unknownTurnRefusal tells a skipped turn (should-run answered it, no turn opened) from one
// LoopX never saw.
func unknownTurnRefusal(ctx context.Context, tx DB, p SpendSlotParams) error {
	var state string
	err := tx.QueryRow(ctx, `SELECT coalesce(body->>'state', '') FROM receipt WHERE key = $1`,
		HeartbeatKey(p.GoalID, p.AgentID, p.TurnInstanceID)).Scan(&state)
	if err == nil {
		return because(ReasonNotOwed, refuse(ErrRefused, "turn_instance_id",
			fmt.Sprintf("turn %s was skipped by should-run (state %s); a skip never spends", p.TurnInstanceID, state),
			p.GoalID, TurnInstanceTarget(p.TurnInstanceID), nil))
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("read heartbeat receipt: %w", mapErr(err))
	}
	return because(ReasonNotOwed, refuse(ErrRefused, "turn_instance_id",
		fmt.Sprintf("no turn %s of agent %s on goal %s; spend only for a turn that should-run began", p.TurnInstanceID, p.AgentID, p.GoalID),
		p.GoalID, TurnInstanceTarget(p.TurnInstanceID), nil))
}

// RefreshState appends a quota-neutral state_refreshed row holding the next action, which the
// next should-run shows as next_action, and, with p.Handoff, the turn's handoff record (the
// receiver's continuation; for another agent the todo's claim moves to it).
func (s *Store) RefreshState(ctx context.Context, p RefreshStateParams) (RefreshResult, error) {
	if err := checkID("goal_id", p.GoalID); err != nil {
		return RefreshResult{}, err
	}
	if err := checkID("agent_id", p.AgentID); err != nil {
		return RefreshResult{}, err
	}
	if err := checkInstanceID("turn_instance_id", p.TurnInstanceID); err != nil {
		return RefreshResult{}, err
	}
	if err := checkText("next_action", p.NextAction, MaxText, false); err != nil {
		return RefreshResult{}, err
	}
	var hp HandoffParams
	if h := p.Handoff; h != nil {
		hp = HandoffParams{GoalID: p.GoalID, TodoID: h.TodoID, From: p.AgentID, To: cmpOr(h.To, p.AgentID), Kind: h.Kind,
			Done: h.Done, Next: cmpOr(h.Next, p.NextAction), Questions: h.Questions, Meta: p.Meta}
		if err := checkHandoff(hp); err != nil {
			return RefreshResult{}, err
		}
	}
	return Do(ctx, s, "quota.refresh_state", p.Meta, p, func(tx *Tx, now time.Time) (RefreshResult, Audit, error) {
		if _, err := getAgent(ctx, tx, p.GoalID, p.AgentID); err != nil {
			return RefreshResult{}, Audit{}, err
		}
		var turnID int64
		if p.TurnInstanceID != "" {
			t, err := getTurn(ctx, tx, p.GoalID, p.AgentID, p.TurnInstanceID, false)
			if err != nil {
				return RefreshResult{}, Audit{}, err
			}
			turnID = t.ID
			if hp.TodoID == 0 {
				hp.TodoID = t.TodoID
			}
		}
		detail, _ := json.Marshal(map[string]any{"next_action": p.NextAction, "turn_instance_id": p.TurnInstanceID})
		e, err := InsertLedger(ctx, tx, LedgerEntry{GoalID: p.GoalID, AgentID: p.AgentID, Kind: LedgerStateRefreshed,
			TurnID: turnID, Detail: detail, CreatedAt: now})
		if err != nil {
			return RefreshResult{}, Audit{}, err
		}
		out := RefreshResult{LedgerEntry: e}
		audit := Audit{GoalID: p.GoalID, Target: AgentTarget(p.GoalID, p.AgentID)}
		if p.Handoff != nil && turnID != 0 {
			// A turn that ends with its own handoff has read the continuations it was
			// carrying (those pending when it began): they are acknowledged.
			if _, err := tx.Exec(ctx, `UPDATE handoff SET acked_at = $3, acked_by = $4
				WHERE goal_id = $1 AND to_agent = $2 AND acked_at IS NULL
				  AND created_at <= (SELECT started_at FROM turn WHERE id = $5)`,
				p.GoalID, p.AgentID, now, p.Meta.Actor, turnID); err != nil {
				return RefreshResult{}, Audit{}, fmt.Errorf("acknowledge the turn's continuations: %w", mapErr(err))
			}
		}
		if p.Handoff != nil {
			if turnID != 0 && len(hp.EvidenceIDs) == 0 {
				if err := tx.QueryRow(ctx, `SELECT coalesce(array_agg(id ORDER BY id), '{}') FROM evidence WHERE turn_id = $1`, turnID).
					Scan(&hp.EvidenceIDs); err != nil {
					return RefreshResult{}, Audit{}, fmt.Errorf("read the turn's evidence: %w", mapErr(err))
				}
			}
			h, err := handOffTx(ctx, tx, hp, turnID, now)
			if err != nil {
				return RefreshResult{}, Audit{}, err
			}
			out.Handoff = &h
			audit.Detail = auditDetail(map[string]any{"handoff_id": h.ID, "to_agent": h.To, "kind": h.Kind, "todo_id": h.TodoID})
		}
		return out, audit, nil
	})
}

func cmpOr(v, def string) string {
	if strings.TrimSpace(v) == "" {
		return def
	}
	return v
}

// ListLedger lists a goal's ledger rows of one kind ("" = all), oldest first.
func (s *Store) ListLedger(ctx context.Context, goalID, kind string, afterID int64, limit int) ([]LedgerEntry, error) {
	if err := checkID("goal_id", goalID); err != nil {
		return nil, err
	}
	n, err := listLimit(limit)
	if err != nil {
		return nil, err
	}
	rows, err := s.DB().Query(ctx, `
		SELECT `+ledgerCols+` FROM quota_ledger WHERE goal_id = $1 AND ($2 = '' OR kind = $2) AND id > $3
		ORDER BY id LIMIT $4`, goalID, kind, afterID, n)
	if err != nil {
		return nil, fmt.Errorf("list ledger: %w", mapErr(err))
	}
	return collect(rows, "list ledger", scanLedger)
}
