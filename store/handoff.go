package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Handoff kinds: what the receiver is to do with the work it is handed.
const (
	HandoffResume     = "resume"      // carry on where the last turn stopped
	HandoffReview     = "review"      // review what was done
	HandoffVerify     = "verify"      // check the work against its criteria
	HandoffAnswerGate = "answer_gate" // act on a gate's answer
)

// Handoff is what a turn (or a person) handed on: what was done, what is next, open
// questions, for whom, with the evidence it rests on. The receiver's should-run carries it
// as its continuation until the receiver acknowledges it.
type Handoff struct {
	ID          int64      `json:"handoff_id"`
	GoalID      string     `json:"goal_id"`
	TodoID      int64      `json:"todo_id,omitempty"`
	TurnID      int64      `json:"turn_id,omitempty"`
	From        string     `json:"from_agent"` // "" when a person handed it over
	To          string     `json:"to_agent"`
	Kind        string     `json:"kind"`
	Done        string     `json:"done"`
	Next        string     `json:"next"`
	Questions   string     `json:"questions"`
	EvidenceIDs []int64    `json:"evidence_ids"`
	GateID      int64      `json:"gate_id,omitempty"`
	CreatedBy   string     `json:"created_by"`
	CreatedAt   time.Time  `json:"created_at"`
	AckedAt     *time.Time `json:"acked_at,omitempty"`
	AckedBy     string     `json:"acked_by,omitempty"`
}

const handoffCols = `id, goal_id, coalesce(todo_id, 0), coalesce(turn_id, 0), from_agent, to_agent, kind, done, next,
	questions, evidence_ids, coalesce(gate_id, 0), created_by, created_at, acked_at, acked_by`

func scanHandoff(row pgx.Row) (Handoff, error) {
	var h Handoff
	err := row.Scan(&h.ID, &h.GoalID, &h.TodoID, &h.TurnID, &h.From, &h.To, &h.Kind, &h.Done, &h.Next,
		&h.Questions, &h.EvidenceIDs, &h.GateID, &h.CreatedBy, &h.CreatedAt, &h.AckedAt, &h.AckedBy)
	return h, err
}

// HandoffParams hands work on. From is the agent handing it over ("" for a person, whose
// permission the caller checked); To the agent that receives it (From itself: its own next
// turn). With a TodoID held by From (or by nobody, or when a person hands it over), the
// todo's claim moves to To.
type HandoffParams struct {
	GoalID    string
	TodoID    int64
	From      string
	To        string
	Kind      string // resume (default) | review | verify | answer_gate
	Done      string // what was done
	Next      string // what is next
	Questions string // open questions
	// EvidenceIDs the handoff rests on; empty: the todo's evidence (the newest 20).
	EvidenceIDs []int64
	GateID      int64
	Meta        Meta `json:"-"`
}

// handoffRow is a handoff as it is written.
type handoffRow struct {
	GoalID                 string
	TodoID, TurnID, GateID int64
	From, To, Kind         string
	Done, Next, Questions  string
	EvidenceIDs            []int64
	CreatedBy              string
}

func checkHandoff(p HandoffParams) error {
	if err := checkID("goal_id", p.GoalID); err != nil {
		return err
	}
	if p.From != "" {
		if err := checkID("from_agent", p.From); err != nil {
			return err
		}
	}
	if err := checkID("to_agent", p.To); err != nil {
		return err
	}
	if p.Kind != "" {
		if err := checkOneOf("kind", p.Kind, HandoffResume, HandoffReview, HandoffVerify, HandoffAnswerGate); err != nil {
			return err
		}
	}
	for field, v := range map[string]string{"done": p.Done, "next": p.Next, "questions": p.Questions} {
		if err := checkText(field, v, 4000, false); err != nil {
			return err
		}
	}
	if strings.TrimSpace(p.Done) == "" && strings.TrimSpace(p.Next) == "" {
		return Errorf(ErrInvalid, "note", "say what was done or what is next: the receiver starts from it")
	}
	if len(p.EvidenceIDs) > 50 {
		return Errorf(ErrInvalid, "evidence_ids", "lists %d; at most 50", len(p.EvidenceIDs))
	}
	return nil
}

// HandOff records a handoff and, for a todo, moves its claim to the receiver. An agent may
// hand over only a todo it holds or nobody holds; the receiver must hold every capability
// the todo requires.
func (s *Store) HandOff(ctx context.Context, p HandoffParams) (Handoff, error) {
	if err := checkHandoff(p); err != nil {
		return Handoff{}, err
	}
	return Do(ctx, s, "todo.handoff", p.Meta, p, func(tx *Tx, now time.Time) (Handoff, Audit, error) {
		h, err := handOffTx(ctx, tx, p, 0, now)
		if err != nil {
			return Handoff{}, Audit{}, err
		}
		target := AgentTarget(h.GoalID, h.To)
		if h.TodoID != 0 {
			target = TodoTarget(h.TodoID)
		}
		return h, Audit{GoalID: h.GoalID, Target: target, Detail: auditDetail(map[string]any{
			"handoff_id": h.ID, "from_agent": h.From, "to_agent": h.To, "kind": h.Kind, "todo_id": h.TodoID})}, nil
	})
}

// handOffTx checks and writes a handoff in tx (turnID: the turn it ends, 0 for none).
func handOffTx(ctx context.Context, tx DB, p HandoffParams, turnID int64, now time.Time) (Handoff, error) {
	g, err := getGoal(ctx, tx, p.GoalID, false)
	if err != nil {
		return Handoff{}, err
	}
	if g.Status == GoalDone {
		return Handoff{}, because(ReasonGoalDone, Errorf(ErrRefused, "goal_id", "goal %s is done; an owner reopens it before work is handed on", g.ID))
	}
	to, err := getAgent(ctx, tx, p.GoalID, p.To)
	if err != nil {
		return Handoff{}, Errorf(ErrNotFound, "to_agent", "no agent %q on goal %s", p.To, p.GoalID)
	}
	if p.From != "" {
		if _, err := getAgent(ctx, tx, p.GoalID, p.From); err != nil {
			return Handoff{}, err
		}
	}
	kind := p.Kind
	if kind == "" {
		kind = HandoffResume
	}
	ev := p.EvidenceIDs
	if p.TodoID != 0 {
		t, err := getTodo(ctx, tx, p.GoalID, p.TodoID, true)
		if err != nil {
			return Handoff{}, err
		}
		if p.From != "" && t.ClaimedBy != "" && t.ClaimedBy != p.From {
			return Handoff{}, because(ReasonClaimed, Errorf(ErrConflict, "todo_id",
				"todo %d is claimed by agent %q; only its holder (or an owner) hands it over", t.ID, t.ClaimedBy))
		}
		if miss := Missing(t.Requires, to.Capabilities); len(miss) > 0 {
			return Handoff{}, capabilityRefusal(p.GoalID, t.ID, to, t.Requires, miss)
		}
		if t.Role == "agent" && (t.Status == TodoOpen || t.Status == TodoBlocked) && t.ClaimedBy != to.ID {
			if _, err := tx.Exec(ctx, `UPDATE todo SET claimed_by = $2, claimed_at = $3, lease_expires_at = NULL,
				version = version + 1, updated_at = $3 WHERE id = $1`, t.ID, to.ID, now); err != nil {
				return Handoff{}, fmt.Errorf("move the todo's claim: %w", mapErr(err))
			}
		}
		if len(ev) == 0 {
			if err := tx.QueryRow(ctx, `SELECT coalesce(array_agg(id ORDER BY id), '{}') FROM (
				SELECT id FROM evidence WHERE todo_id = $1 ORDER BY id DESC LIMIT 20) e`, t.ID).Scan(&ev); err != nil {
				return Handoff{}, fmt.Errorf("read the todo's evidence: %w", mapErr(err))
			}
		}
	}
	if len(ev) > 0 {
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*)::int FROM evidence WHERE goal_id = $1 AND id = ANY ($2)`, p.GoalID, ev).Scan(&n); err != nil {
			return Handoff{}, fmt.Errorf("check evidence: %w", mapErr(err))
		}
		if n != len(uniqInt64(ev)) {
			return Handoff{}, Errorf(ErrNotFound, "evidence_ids", "some of evidence %s are not this goal's", joinInt64(ev))
		}
	}
	return insertHandoff(ctx, tx, handoffRow{GoalID: p.GoalID, TodoID: p.TodoID, TurnID: turnID, GateID: p.GateID,
		From: p.From, To: to.ID, Kind: kind, Done: p.Done, Next: p.Next, Questions: p.Questions,
		EvidenceIDs: uniqInt64(ev), CreatedBy: p.Meta.Actor}, now)
}

func insertHandoff(ctx context.Context, tx DB, h handoffRow, now time.Time) (Handoff, error) {
	var todo, turn, gate any
	if h.TodoID != 0 {
		todo = h.TodoID
	}
	if h.TurnID != 0 {
		turn = h.TurnID
	}
	if h.GateID != 0 {
		gate = h.GateID
	}
	out, err := scanHandoff(tx.QueryRow(ctx, `
		INSERT INTO handoff (goal_id, todo_id, turn_id, from_agent, to_agent, kind, done, next, questions,
		                     evidence_ids, gate_id, created_by, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) RETURNING `+handoffCols,
		h.GoalID, todo, turn, h.From, h.To, h.Kind, strings.TrimSpace(h.Done), strings.TrimSpace(h.Next),
		strings.TrimSpace(h.Questions), nonNilInt64(h.EvidenceIDs), gate, h.CreatedBy, now))
	if err != nil {
		return Handoff{}, fmt.Errorf("record handoff: %w", mapErr(err))
	}
	return out, nil
}

// ListHandoffsParams filters ListHandoffs: by todo, by turn, or those pending for an agent.
type ListHandoffsParams struct {
	GoalID    string
	TodoID    int64
	TurnID    int64
	PendingTo string
	Limit     int
}

// ListHandoffs lists a goal's handoffs, newest first.
func ListHandoffs(ctx context.Context, db DB, p ListHandoffsParams) ([]Handoff, error) {
	limit, err := listLimit(p.Limit)
	if err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, `SELECT `+handoffCols+` FROM handoff
		WHERE goal_id = $1 AND ($2 = 0 OR todo_id = $2) AND ($3 = 0 OR turn_id = $3)
		  AND ($4 = '' OR (to_agent = $4 AND acked_at IS NULL))
		ORDER BY id DESC LIMIT $5`, p.GoalID, p.TodoID, p.TurnID, p.PendingTo, limit)
	if err != nil {
		return nil, fmt.Errorf("list handoffs: %w", mapErr(err))
	}
	return collect(rows, "list handoffs", scanHandoff)
}

// ListHandoffs lists a goal's handoffs (see the function of the same name).
func (s *Store) ListHandoffs(ctx context.Context, p ListHandoffsParams) ([]Handoff, error) {
	if err := checkID("goal_id", p.GoalID); err != nil {
		return nil, err
	}
	return ListHandoffs(ctx, s.DB(), p)
}

// AckParams acknowledges, for an agent, a continuation (HandoffID) or an objective change
// (DecisionID: every replan up to it).
type AckParams struct {
	GoalID     string
	AgentID    string
	HandoffID  int64
	DecisionID int64
	Meta       Meta `json:"-"`
}

// Ack is what an acknowledgement settled.
type Ack struct {
	Handoff  *Handoff      `json:"handoff,omitempty"`
	Decision *GoalDecision `json:"decision,omitempty"`
}

// Acknowledge marks a continuation or an objective change as read by the agent it was for,
// so its should-run no longer carries it. Acknowledging twice answers the first.
func (s *Store) Acknowledge(ctx context.Context, p AckParams) (Ack, error) {
	if err := checkID("goal_id", p.GoalID); err != nil {
		return Ack{}, err
	}
	if err := checkID("agent_id", p.AgentID); err != nil {
		return Ack{}, err
	}
	if (p.HandoffID == 0) == (p.DecisionID == 0) {
		return Ack{}, Errorf(ErrInvalid, "handoff_id", "name one handoff_id or one decision_id")
	}
	return Do(ctx, s, "agent.ack", p.Meta, p, func(tx *Tx, now time.Time) (Ack, Audit, error) {
		if _, err := getAgent(ctx, tx, p.GoalID, p.AgentID); err != nil {
			return Ack{}, Audit{}, err
		}
		audit := Audit{GoalID: p.GoalID, Target: AgentTarget(p.GoalID, p.AgentID)}
		if p.HandoffID != 0 {
			h, err := scanHandoff(tx.QueryRow(ctx, `SELECT `+handoffCols+` FROM handoff WHERE id = $1 AND goal_id = $2 FOR UPDATE`, p.HandoffID, p.GoalID))
			if errors.Is(err, pgx.ErrNoRows) || err == nil && h.To != p.AgentID {
				return Ack{}, Audit{}, Errorf(ErrNotFound, "handoff_id", "no handoff %d to agent %s on goal %s", p.HandoffID, p.AgentID, p.GoalID)
			}
			if err != nil {
				return Ack{}, Audit{}, fmt.Errorf("read handoff: %w", mapErr(err))
			}
			if h.AckedAt == nil {
				if h, err = scanHandoff(tx.QueryRow(ctx, `UPDATE handoff SET acked_at = $2, acked_by = $3 WHERE id = $1 RETURNING `+handoffCols,
					h.ID, now, p.Meta.Actor)); err != nil {
					return Ack{}, Audit{}, fmt.Errorf("acknowledge handoff: %w", mapErr(err))
				}
			}
			audit.Detail = auditDetail(map[string]any{"handoff_id": h.ID})
			return Ack{Handoff: &h}, audit, nil
		}
		d, err := getDecision(ctx, tx, p.GoalID, p.DecisionID)
		if err != nil {
			return Ack{}, Audit{}, err
		}
		if d.Kind != DecisionReplan {
			return Ack{}, Audit{}, Errorf(ErrInvalid, "decision_id", "decision %d is a %s, not a replan; only replans are acknowledged", d.ID, d.Kind)
		}
		if _, err := tx.Exec(ctx, `UPDATE agent SET replan_acked = greatest(replan_acked, $3) WHERE goal_id = $1 AND id = $2`,
			p.GoalID, p.AgentID, d.ID); err != nil {
			return Ack{}, Audit{}, fmt.Errorf("acknowledge replan: %w", mapErr(err))
		}
		audit.Detail = auditDetail(map[string]any{"decision_id": d.ID})
		return Ack{Decision: &d}, audit, nil
	})
}

func uniqInt64(v []int64) []int64 {
	out := make([]int64, 0, len(v))
	for _, x := range v {
		if x > 0 && !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

func nonNilInt64(v []int64) []int64 {
	if v == nil {
		return []int64{}
	}
	return v
}

func joinInt64(v []int64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprint(x)
	}
	return strings.Join(parts, ", ")
}
