package store

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Sentinel errors. Callers test them with errors.Is; nobody outside store inspects pgx errors.
var (
	// ErrNotFound: the row the operation names does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict: the state changed under the caller (stale version, claim held by another
	// agent, a live turn already open, an idempotency key reused with another request).
	ErrConflict = errors.New("conflict")
	// ErrRefused: the state does not allow the operation (spend on a skipped turn, answer to a
	// closed gate). The CLI maps it to exit code 1.
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
	Msg   string
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

// mapErr turns driver errors into sentinels so callers never import pgx to check them.
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
			return &Error{Kind: ErrConflict, Msg: "already exists (" + pe.ConstraintName + ")"}
		case "23503": // foreign_key_violation
			return &Error{Kind: ErrNotFound, Msg: "refers to a missing row (" + pe.ConstraintName + ")"}
		case "23514", "22001", "22P02", "23502": // check, too long, bad text repr, not null
			return &Error{Kind: ErrInvalid, Msg: pe.Message}
		case "40001", "40P01": // serialization failure, deadlock
			return &Error{Kind: ErrConflict, Msg: "concurrent update, retry"}
		}
	}
	return err
}
