package store

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Sentinel errors. Callers test them with errors.Is; nobody outside store inspects pgx errors.
// Each is one row of the table of error kinds (kinds.go), which says how every surface
// reports it.
var (
	// ErrNotFound: the row the operation names does not exist.
	ErrNotFound = errors.New("not found")
	// ErrForbidden: the caller may not do this, whatever the state (a gate answered by
	// someone who is not an owner, a gate cancelled by an agent that did not ask it, a change
	// proposed or confirmed by someone without the role it needs).
	ErrForbidden = errors.New("forbidden")
	// ErrConflict: the state changed under the caller (stale version, claim held by another
	// agent, a live turn already open, an idempotency key reused with another request).
	ErrConflict = errors.New("conflict")
	// ErrRefused: the state does not allow the operation (spend on a skipped turn, answer to a
	// closed gate).
	ErrRefused = errors.New("refused")
	// ErrInvalid: the input breaks a rule the database enforces (check constraint, bad id).
	ErrInvalid = errors.New("invalid")
	// ErrFull: a bound was reached (inbox pending limit).
	ErrFull = errors.New("full")
)

// Error carries a sentinel Kind and a message a person can act on.
type Error struct {
	Kind  error  // one of the sentinels above
	Field string // the input field at fault, when there is one
	// Reason, when set, is one of the Reason constants: which case of Kind this is, for
	// programs that must tell cases apart (the API's "reason" member). Callers switch on it,
	// never on Msg.
	Reason string
	Msg    string
}

func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s: %s", e.Field, e.Msg)
	}
	return e.Msg
}

func (e *Error) Unwrap() error { return e.Kind }

// Errorf builds an *Error of the given kind.
func Errorf(kind error, field, format string, args ...any) error {
	return &Error{Kind: kind, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// because sets the reason of err's *Error (as Errorf and refuse build it) and returns err.
func because(reason string, err error) error {
	var e *Error
	if errors.As(err, &e) {
		e.Reason = reason
	}
	return err
}

// mapErr turns driver errors into sentinels so callers never import pgx to check them. The
// answer names the input at fault in the caller's words, never a constraint's name.
func mapErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "23505": // unique_violation
			field, msg := uniqueAnswer(pe.ConstraintName)
			return &Error{Kind: ErrConflict, Field: field, Msg: msg}
		case "23503": // foreign_key_violation
			field, msg := missingAnswer(pe.ConstraintName)
			return &Error{Kind: ErrNotFound, Field: field, Msg: msg}
		case "23514": // check_violation: PostgreSQL's message names the constraint, so say what it guards
			field := pe.ColumnName
			if field == "" {
				field = pe.TableName
			}
			return &Error{Kind: ErrInvalid, Field: field, Msg: "a value is outside what LoopX accepts here; see the field's documented values"}
		case "22001", "22P02", "23502", "22021": // too long, bad text repr, not null, bad encoding
			return &Error{Kind: ErrInvalid, Msg: pe.Message}
		case "40001", "40P01": // serialization failure, deadlock
			return &Error{Kind: ErrConflict, Msg: "concurrent update, retry"}
		}
	}
	return err
}

// uniqueAnswer says, for a unique constraint a caller can run into, which input repeats what
// already exists.
func uniqueAnswer(constraint string) (field, msg string) {
	switch constraint {
	case "goal_pkey":
		return "goal_id", "a goal with this id already exists"
	case "agent_pkey":
		return "agent_id", "an agent with this id is already registered on the goal"
	case "agent_one_default":
		return "is_default", "the goal already has a default agent"
	case "turn_goal_id_agent_id_instance_id_key":
		return "turn_instance_id", "this turn instance id was already used"
	case "turn_one_live":
		return "agent_id", "the agent already has a live turn"
	case "quota_ledger_one_spend":
		return "turn_instance_id", "a slot was already spent for this turn"
	case "receipt_pkey":
		return "idempotency_key", "a call with this key was already made; retry it with the same request"
	case "inbox_item_source":
		return "message_id", "this message is already in the agent's inbox"
	case "binding_pkey":
		return "chat_id", "this chat is already bound to the goal"
	case "gate_one_open_stall":
		return "kind", "the goal already has an open stall gate"
	}
	return "", "already exists"
}

// missingAnswer says, for a foreign key a caller can run into, which input names nothing.
func missingAnswer(constraint string) (field, msg string) {
	switch constraint {
	case "agent_goal_id_fkey", "todo_goal_id_fkey", "gate_goal_id_fkey", "evidence_goal_id_fkey", "binding_goal_id_fkey":
		return "goal_id", "no such goal"
	case "turn_goal_id_agent_id_fkey", "inbox_item_goal_id_agent_id_fkey", "hint_state_goal_id_agent_id_fkey",
		"turn_token_goal_id_agent_id_fkey":
		return "agent_id", "no such agent on this goal"
	case "gate_todo_id_fkey", "evidence_todo_id_fkey", "turn_todo_id_fkey":
		return "todo_id", "no such todo"
	case "evidence_turn_id_fkey":
		return "turn_id", "no such turn"
	}
	return "", "refers to something that does not exist"
}
