package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// Gate statuses and kinds.
const (
	GateOpen     = "open"
	GateApproved = "approved"
	GateRejected = "rejected"
	// GateAnswered is a gate answered with one of its own options other than approve and
	// reject (say "later"): Answer holds the option. Like an approval it stops blocking (the
	// todo it held reopens); what the option means is for the asking agent to read.
	GateAnswered  = "answered"
	GateCancelled = "cancelled"

	GateKindQuestion   = "question"
	GateKindStall      = "stall"
	GateKindPermission = "permission" // a host's permission prompt (permission.go)
)

// Gate is an owner decision an agent (or the stall guard) waits for. TodoID 0 blocks the
// whole goal.
type Gate struct {
	ID             int64      `json:"gate_id"`
	GoalID         string     `json:"goal_id"`
	AgentID        string     `json:"agent_id"` // who asked; "" for system gates
	Kind           string     `json:"kind"`     // question | stall
	Question       string     `json:"question"`
	Options        []string   `json:"options"`
	TodoID         int64      `json:"todo_id,omitempty"`
	Status         string     `json:"status"`
	AnsweredBy     string     `json:"answered_by,omitempty"`
	Answer         string     `json:"answer,omitempty"`
	Comment        string     `json:"comment,omitempty"`
	AnsweredAt     *time.Time `json:"answered_at,omitempty"`
	CardVersion    int        `json:"card_version"`
	Reminders      int        `json:"reminders"`
	NextReminderAt *time.Time `json:"next_reminder_at,omitempty"`
	CreatedAt      time.Time  `json:"created_at"`
	// Request is a permission gate's request (what the host asks to run); ExpiresAt is when
	// it is denied if nobody answered.
	Request   *PermissionRequest `json:"permission,omitempty"`
	ExpiresAt *time.Time         `json:"expires_at,omitempty"`
}

// AskGateParams opens an owner gate. TodoID 0 blocks the whole goal; otherwise that todo
// becomes blocked until the gate is answered.
type AskGateParams struct {
	GoalID   string
	AgentID  string // "" for system gates
	Kind     string // question | stall; "" = question
	Question string
	Options  []string // nil = approve, reject
	TodoID   int64
	// Notice, when set, runs inside the transaction with the new gate and returns the outbox
	// rows that announce it (the gate card).
	Notice NoticeFunc `json:"-"`
	Meta   Meta       `json:"-"`
}

// AnswerGateParams answers an open gate. AnsweredBy must be an owner of the goal; anyone else
// is refused and the refusal is audited.
type AnswerGateParams struct {
	GoalID     string
	GateID     int64
	Answer     string // approve | reject | one of the gate's options
	AnsweredBy string // open_id
	Comment    string
	// CardVersion, when non-zero, must equal the gate's card_version (a click on an older
	// card is ErrConflict).
	CardVersion int
	// ByAdmin: the caller verified that AnsweredBy is a LoopX admin (LOOPX_ADMINS), who may
	// answer any goal's gates without being an owner.
	ByAdmin bool
	// Notice, when set, runs inside the transaction with the answered gate (card update).
	Notice NoticeFunc `json:"-"`
	Meta   Meta       `json:"-"`
}

// CancelGateParams withdraws an open gate; only the agent that asked may.
type CancelGateParams struct {
	GoalID  string
	GateID  int64
	AgentID string
	Notice  NoticeFunc `json:"-"`
	Meta    Meta       `json:"-"`
}

// ListGatesParams filters ListGates.
type ListGatesParams struct {
	GoalID string
	Status string // "" = all
	Limit  int
}

// firstReminder is when an open gate is first reminded; the scheduler owns the backoff after.
const firstReminder = 30 * time.Minute

const gateCols = `id, goal_id, agent_id, kind, question, options, coalesce(todo_id, 0), status,
	coalesce(answered_by, ''), coalesce(answer, ''), coalesce(comment, ''), answered_at, card_version,
	reminders, next_reminder_at, created_at, request, expires_at`

func scanGate(row pgx.Row) (Gate, error) {
	var g Gate
	err := row.Scan(&g.ID, &g.GoalID, &g.AgentID, &g.Kind, &g.Question, &g.Options, &g.TodoID, &g.Status,
		&g.AnsweredBy, &g.Answer, &g.Comment, &g.AnsweredAt, &g.CardVersion, &g.Reminders,
		&g.NextReminderAt, &g.CreatedAt, &g.Request, &g.ExpiresAt)
	return g, err
}

func checkAskGate(p AskGateParams) error {
	if err := checkID("goal_id", p.GoalID); err != nil {
		return err
	}
	if p.AgentID != "" {
		if err := checkID("agent_id", p.AgentID); err != nil {
			return err
		}
	}
	if err := checkOneOf("kind", strOr(p.Kind, GateKindQuestion), GateKindQuestion, GateKindStall); err != nil {
		return err
	}
	if err := checkText("question", p.Question, MaxText, true); err != nil {
		return err
	}
	return CheckGateOptions(p.Options)
}

// CheckGateOptions checks a gate's answer options: at most 10, each 1-100 characters, no two
// alike (ignoring case and surrounding space: two buttons that read the same cannot be told
// apart by the owner).
func CheckGateOptions(options []string) error {
	if len(options) > 10 {
		return Errorf(ErrInvalid, "options", "lists %d options; at most 10", len(options))
	}
	seen := map[string]bool{}
	for _, o := range options {
		if err := checkText("options", o, 100, true); err != nil {
			return err
		}
		k := strings.ToLower(strings.TrimSpace(o))
		if seen[k] {
			return Errorf(ErrInvalid, "options", "%q is given twice; each option must differ", clip(o))
		}
		seen[k] = true
	}
	return nil
}

// AskGate opens an owner gate: the todo given becomes blocked on it, or with TodoID 0 the whole
// goal waits. Notice (the gate card) runs inside the same transaction.
func (s *Store) AskGate(ctx context.Context, p AskGateParams) (Gate, error) {
	if err := checkAskGate(p); err != nil {
		return Gate{}, err
	}
	if p.Kind == GateKindStall {
		return Gate{}, Errorf(ErrInvalid, "kind", "stall gates are opened by should-run's stall guard, not asked")
	}
	return Do(ctx, s, "gate.ask", p.Meta, p, func(tx *Tx, now time.Time) (Gate, Audit, error) {
		g, err := insertGate(ctx, tx, p, now)
		if err != nil {
			return Gate{}, Audit{}, err
		}
		if err := gateNotice(ctx, tx, p.Notice, g); err != nil {
			return Gate{}, Audit{}, err
		}
		return g, Audit{GoalID: g.GoalID, Target: GateTarget(g.ID), Detail: auditDetail(map[string]any{
			"todo_id": g.TodoID, "kind": g.Kind, "agent_id": g.AgentID,
		})}, nil
	})
}

// StallGateParams opens the stall guard's gate of a goal.
type StallGateParams struct {
	GoalID   string
	AgentID  string // the agent whose turns stalled
	Question string
	Notice   NoticeFunc // the gate card; runs only when this call opened the gate
}

// OpenStallGate opens the goal's stall gate inside the caller's transaction, or returns the one
// already open with opened=false. The database allows one open stall gate per goal (index
// gate_one_open_stall): of concurrent callers one opens it and announces it, the others wait
// for its commit and then answer with that gate.
func OpenStallGate(ctx context.Context, tx DB, p StallGateParams, now time.Time) (g Gate, opened bool, err error) {
	ask := AskGateParams{GoalID: p.GoalID, AgentID: p.AgentID, Kind: GateKindStall, Question: p.Question,
		Options: []string{StallContinue, StallPause}}
	if err := checkAskGate(ask); err != nil {
		return Gate{}, false, err
	}
	g, err = scanGate(tx.QueryRow(ctx, `
		INSERT INTO gate (goal_id, agent_id, kind, question, options, next_reminder_at, created_at)
		VALUES ($1, $2, 'stall', $3, $4, $5, $6)
		ON CONFLICT (goal_id) WHERE kind = 'stall' AND status = 'open' DO NOTHING
		RETURNING `+gateCols, p.GoalID, p.AgentID, p.Question, ask.Options, now.Add(firstReminder), now))
	if errors.Is(err, pgx.ErrNoRows) {
		g, err = scanGate(tx.QueryRow(ctx, `SELECT `+gateCols+` FROM gate
			WHERE goal_id = $1 AND kind = 'stall' AND status = 'open'`, p.GoalID))
		if err != nil {
			return Gate{}, false, fmt.Errorf("read open stall gate: %w", mapErr(err))
		}
		return g, false, nil
	}
	if err != nil {
		return Gate{}, false, fmt.Errorf("insert stall gate: %w", mapErr(err))
	}
	if err := gateNotice(ctx, tx, p.Notice, g); err != nil {
		return Gate{}, false, err
	}
	return g, true, nil
}

// insertGate writes a question gate and blocks its todo, in the caller's transaction.
func insertGate(ctx context.Context, tx DB, p AskGateParams, now time.Time) (Gate, error) {
	if _, err := getGoal(ctx, tx, p.GoalID, false); err != nil {
		return Gate{}, err
	}
	if p.AgentID != "" {
		if _, err := getAgent(ctx, tx, p.GoalID, p.AgentID); err != nil {
			return Gate{}, err
		}
	}
	var todoID any
	if p.TodoID != 0 {
		t, err := getTodo(ctx, tx, p.GoalID, p.TodoID, true)
		if err != nil {
			return Gate{}, err
		}
		if t.Status == TodoDone || t.Status == TodoCancelled {
			return Gate{}, Errorf(ErrRefused, "todo_id", "todo %d is %s; a gate cannot block it", t.ID, t.Status)
		}
		todoID = t.ID
	}
	opts := p.Options
	if len(opts) == 0 {
		opts = []string{"approve", "reject"}
	}
	g, err := scanGate(tx.QueryRow(ctx, `
		INSERT INTO gate (goal_id, agent_id, kind, question, options, todo_id, next_reminder_at, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		RETURNING `+gateCols,
		p.GoalID, p.AgentID, strOr(p.Kind, GateKindQuestion), p.Question, opts, todoID, now.Add(firstReminder), now))
	if err != nil {
		return Gate{}, fmt.Errorf("insert gate: %w", mapErr(err))
	}
	if p.TodoID != 0 {
		if _, err := tx.Exec(ctx, `
			UPDATE todo SET status = 'blocked', blocked_by_gate = $2, version = version + 1, updated_at = $3
			WHERE id = $1`, p.TodoID, g.ID, now); err != nil {
			return Gate{}, fmt.Errorf("block todo: %w", mapErr(err))
		}
	}
	return g, nil
}

// NoticeFunc renders the outbox rows announcing a gate change (a gate card, or its update).
// It runs inside the operation's transaction and reads through db, the executor of that
// transaction, so it never needs a connection of its own; it must not call the network.
type NoticeFunc func(ctx context.Context, db DB, g Gate) ([]OutboxInsert, error)

func gateNotice(ctx context.Context, tx DB, notice NoticeFunc, g Gate) error {
	if notice == nil {
		return nil
	}
	rows, err := notice(ctx, tx, g)
	if err != nil {
		return fmt.Errorf("render gate notice: %w", err)
	}
	if _, err := InsertOutboxAll(ctx, tx, rows); err != nil {
		return err
	}
	return nil
}

// Answers of a stall gate.
const (
	StallContinue = "continue" // approves: the agent goes on
	StallPause    = "pause"    // rejects: the goal stops
)

// AnswerGate answers an open gate. Only an owner of the goal may answer; anyone else gets
// ErrForbidden and an audit row with allowed=false. A gate no longer open is ErrRefused with
// ReasonGateClosed. Answer is "approve", "reject" or one of the
// gate's options, and is stored as given. "approve" approves and "reject" rejects (on a stall
// gate, "continue" approves and "pause" rejects); any other option leaves the gate answered
// (GateAnswered): it no longer blocks, and the asking agent reads the option. Approving or
// answering unblocks the todo (its claim is kept); rejecting leaves it blocked for its agent to
// re-plan. Rejecting a stall gate stops the goal.
func (s *Store) AnswerGate(ctx context.Context, p AnswerGateParams) (Gate, error) {
	if err := checkID("goal_id", p.GoalID); err != nil {
		return Gate{}, err
	}
	if err := checkText("answer", p.Answer, 100, true); err != nil {
		return Gate{}, err
	}
	if p.AnsweredBy == "" {
		return Gate{}, Errorf(ErrInvalid, "answered_by", "is required: the open_id of the owner answering")
	}
	if err := checkText("comment", p.Comment, MaxText, false); err != nil {
		return Gate{}, err
	}
	if p.CardVersion < 0 {
		return Gate{}, Errorf(ErrInvalid, "card_version", "must not be negative")
	}
	return Do(ctx, s, "gate.answer", p.Meta, p, func(tx *Tx, now time.Time) (Gate, Audit, error) {
		goal, err := getGoal(ctx, tx, p.GoalID, false)
		if err != nil {
			return Gate{}, Audit{}, err
		}
		g, err := getGate(ctx, tx, p.GoalID, p.GateID, true)
		if err != nil {
			return Gate{}, Audit{}, err
		}
		role, err := goalRole(ctx, tx, goal.ID, Person{OpenID: p.AnsweredBy, Admin: p.ByAdmin})
		if err != nil {
			return Gate{}, Audit{}, err
		}
		if !role.AtLeast(RoleOwner) {
			return Gate{}, Audit{}, refuse(ErrForbidden, "answered_by",
				fmt.Sprintf("%s is not an owner of goal %q; only its owners may answer gates", p.AnsweredBy, goal.ID),
				goal.ID, GateTarget(g.ID), map[string]any{"answered_by": p.AnsweredBy, "answer": p.Answer})
		}
		if g.Status != GateOpen {
			return Gate{}, Audit{}, because(ReasonGateClosed, refuse(ErrRefused, "gate_id",
				fmt.Sprintf("gate %d is already %s by %s", g.ID, g.Status, orWhom(g.AnsweredBy)),
				goal.ID, GateTarget(g.ID), map[string]any{"answered_by": p.AnsweredBy}))
		}
		if g.Kind == GateKindPermission && g.ExpiresAt != nil && !now.Before(*g.ExpiresAt) {
			return Gate{}, Audit{}, because(ReasonGateClosed, refuse(ErrRefused, "gate_id",
				fmt.Sprintf("gate %d expired at %s unanswered: the request was denied", g.ID, g.ExpiresAt.UTC().Format(time.RFC3339)),
				goal.ID, GateTarget(g.ID), map[string]any{"answered_by": p.AnsweredBy}))
		}
		if p.CardVersion != 0 && p.CardVersion != g.CardVersion {
			return Gate{}, Audit{}, Errorf(ErrConflict, "card_version",
				"this card is out of date (version %d, current %d); use the latest card", p.CardVersion, g.CardVersion)
		}
		status := ""
		switch {
		case p.Answer == "approve", g.Kind == GateKindStall && p.Answer == StallContinue:
			status = GateApproved
		case p.Answer == "reject", g.Kind == GateKindStall && p.Answer == StallPause:
			status = GateRejected
		case contains(g.Options, p.Answer):
			status = GateAnswered
		default:
			return Gate{}, Audit{}, Errorf(ErrInvalid, "answer", "%q is not approve, reject or one of the gate's options %v", clip(p.Answer), g.Options)
		}
		out, err := closeGate(ctx, tx, g, status, p.AnsweredBy, p.Answer, p.Comment, now)
		if err != nil {
			return Gate{}, Audit{}, err
		}
		if out.TodoID != 0 && status != GateRejected {
			if err := unblockTodo(ctx, tx, out, now); err != nil {
				return Gate{}, Audit{}, err
			}
		}
		if out.Kind == GateKindStall && status == GateRejected {
			if _, err := setGoalStatusTx(ctx, tx, goal.ID, GoalStopped, now); err != nil {
				return Gate{}, Audit{}, err
			}
		}
		if err := gateNotice(ctx, tx, p.Notice, out); err != nil {
			return Gate{}, Audit{}, err
		}
		return out, Audit{GoalID: goal.ID, Target: GateTarget(g.ID), Detail: auditDetail(map[string]any{
			"answer": p.Answer, "status": status, "answered_by": p.AnsweredBy,
		})}, nil
	})
}

func orWhom(s string) string {
	if s == "" {
		return "its agent"
	}
	return s
}

func closeGate(ctx context.Context, tx DB, g Gate, status, by, answer, comment string, now time.Time) (Gate, error) {
	out, err := scanGate(tx.QueryRow(ctx, `
		UPDATE gate SET status = $2, answered_by = $3, answer = $4, comment = $5, answered_at = $6,
		       card_version = card_version + 1, next_reminder_at = NULL
		WHERE id = $1 RETURNING `+gateCols, g.ID, status, by, answer, comment, now))
	if err != nil {
		return Gate{}, fmt.Errorf("close gate: %w", mapErr(err))
	}
	return out, nil
}

// unblockTodo reopens the todo a gate blocked, if it still waits on that gate.
func unblockTodo(ctx context.Context, tx DB, g Gate, now time.Time) error {
	_, err := tx.Exec(ctx, `
		UPDATE todo SET status = 'open', blocked_by_gate = NULL, version = version + 1, updated_at = $3
		WHERE id = $1 AND blocked_by_gate = $2 AND status = 'blocked'`, g.TodoID, g.ID, now)
	if err != nil {
		return fmt.Errorf("unblock todo: %w", mapErr(err))
	}
	return nil
}

// CancelGate withdraws an open question gate; only the agent that asked may (else
// ErrForbidden, audited). The blocked todo reopens. Stall gates are answered by owners, never
// cancelled. A gate no longer open is ErrRefused with ReasonGateClosed.
func (s *Store) CancelGate(ctx context.Context, p CancelGateParams) (Gate, error) {
	if err := checkID("goal_id", p.GoalID); err != nil {
		return Gate{}, err
	}
	if err := checkID("agent_id", p.AgentID); err != nil {
		return Gate{}, err
	}
	return Do(ctx, s, "gate.cancel", p.Meta, p, func(tx *Tx, now time.Time) (Gate, Audit, error) {
		g, err := getGate(ctx, tx, p.GoalID, p.GateID, true)
		if err != nil {
			return Gate{}, Audit{}, err
		}
		if g.AgentID != p.AgentID || g.Kind != GateKindQuestion {
			return Gate{}, Audit{}, refuse(ErrForbidden, "agent_id",
				fmt.Sprintf("gate %d was not asked by agent %q; only the asking agent may cancel it", g.ID, p.AgentID),
				g.GoalID, GateTarget(g.ID), map[string]any{"agent_id": p.AgentID})
		}
		if g.Status != GateOpen {
			return Gate{}, Audit{}, because(ReasonGateClosed, Errorf(ErrRefused, "gate_id", "gate %d is already %s", g.ID, g.Status))
		}
		out, err := closeGate(ctx, tx, g, GateCancelled, "", "", "", now)
		if err != nil {
			return Gate{}, Audit{}, err
		}
		if out.TodoID != 0 {
			if err := unblockTodo(ctx, tx, out, now); err != nil {
				return Gate{}, Audit{}, err
			}
		}
		if err := gateNotice(ctx, tx, p.Notice, out); err != nil {
			return Gate{}, Audit{}, err
		}
		return out, Audit{GoalID: g.GoalID, Target: GateTarget(g.ID)}, nil
	})
}

// GetGate returns one gate of a goal; unknown is ErrNotFound naming gate_id.
func (s *Store) GetGate(ctx context.Context, goalID string, id int64) (Gate, error) {
	if err := checkID("goal_id", goalID); err != nil {
		return Gate{}, err
	}
	return getGate(ctx, s.DB(), goalID, id, false)
}

func getGate(ctx context.Context, db DB, goalID string, id int64, forUpdate bool) (Gate, error) {
	return getOfGoal(ctx, db, "gate", gateCols, scanGate, goalID, id, forUpdate)
}

// ListGates lists a goal's gates, newest first.
func (s *Store) ListGates(ctx context.Context, p ListGatesParams) ([]Gate, error) {
	if err := checkID("goal_id", p.GoalID); err != nil {
		return nil, err
	}
	if p.Status != "" {
		if err := checkOneOf("status", p.Status, GateOpen, GateApproved, GateRejected, GateAnswered, GateCancelled); err != nil {
			return nil, err
		}
	}
	limit, err := listLimit(p.Limit)
	if err != nil {
		return nil, err
	}
	rows, err := s.DB().Query(ctx, `
		SELECT `+gateCols+` FROM gate WHERE goal_id = $1 AND ($2 = '' OR status = $2)
		ORDER BY id DESC LIMIT $3`, p.GoalID, p.Status, limit)
	if err != nil {
		return nil, fmt.Errorf("list gates: %w", mapErr(err))
	}
	return collect(rows, "list gates", scanGate)
}

// GetGateByID reads one gate by its id alone (the chat's /approve g12 names no goal), through
// db; ErrNotFound when it does not exist.
func GetGateByID(ctx context.Context, db DB, id int64) (Gate, error) {
	g, err := scanGate(db.QueryRow(ctx, `SELECT `+gateCols+` FROM gate WHERE id = $1`, id))
	if err != nil {
		return Gate{}, fmt.Errorf("read gate %d: %w", id, mapErr(err))
	}
	return g, nil
}

// ListOpenGates lists a goal's open gates through db, oldest first.
func ListOpenGates(ctx context.Context, db DB, goalID string) ([]Gate, error) {
	rows, err := db.Query(ctx, `SELECT `+gateCols+` FROM gate
		WHERE goal_id = $1 AND status = 'open' ORDER BY id LIMIT 100`, goalID)
	if err != nil {
		return nil, fmt.Errorf("list open gates: %w", mapErr(err))
	}
	return collect(rows, "list open gates", scanGate)
}
