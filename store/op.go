package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Meta says who performs an operation, from which surface, and under which idempotency key.
// Every mutating operation takes one; it becomes the audit row (and the receipt key).
type Meta struct {
	// Actor is an open_id, AgentActor(goal, agent), ActorAdmin, ActorSystem or ActorScheduler.
	Actor string
	// Surface is one of "api", "chat", "card", "scheduler", "system", "web".
	Surface string
	// IdempotencyKey, when set, makes the operation replayable: the same key with the same
	// request returns the stored result and writes nothing; with another request it is
	// ErrConflict. Keys are scoped by Actor.
	IdempotencyKey string
}

// Surfaces an operation can come from (the audit table's check constraint).
var surfaces = map[string]bool{"api": true, "chat": true, "card": true, "scheduler": true, "system": true, "web": true}

// refusal is an error whose audit row must survive the rollback of the operation that was
// refused: run commits it in a transaction of its own.
type refusal struct {
	err   error
	audit Audit
}

func (r *refusal) Error() string { return r.err.Error() }
func (r *refusal) Unwrap() error { return r.err }

// refuse builds a refusal of kind ErrRefused or ErrForbidden with its audit detail.
func refuse(kind error, field, msg, goalID, target string, detail map[string]any) error {
	d, _ := json.Marshal(detail)
	return &refusal{
		err:   &Error{Kind: kind, Field: field, Msg: msg},
		audit: Audit{GoalID: goalID, Target: target, Detail: d},
	}
}

// replayable lets a result type adjust what its receipt stores and how a replay looks.
type replayable interface {
	receiptBody() any
}

type replayMarker interface {
	markReplayed()
}

// Do runs one mutating operation in one transaction: the replay check (when the caller gave
// an idempotency key), the operation, its audit row and its receipt. fn returns the result and
// the audit row's goal, target and detail; Do fills in who, where and when. It is the one
// replay path of every mutating call, whichever surface it comes from (API, chat, card,
// scheduler):
//
//   - Same key, same request: the stored result, even while the first call is still in
//     flight (the retry waits for it and then reads its receipt), and nothing is written.
//   - Same key, another request: ErrConflict naming idempotency_key.
//   - A refusal (ErrRefused or ErrForbidden from refuse) rolls the operation back but keeps
//     its audit row.
//
// On a Store joined to a transaction (In), the operation runs under a savepoint of it and a
// refusal's audit row is written in the outer transaction.
func Do[T any](ctx context.Context, s *Store, op string, m Meta, req any, fn func(tx *Tx, now time.Time) (T, Audit, error)) (T, error) {
	var zero T
	if err := validMeta(m); err != nil {
		return zero, err
	}
	hash, err := requestHash(op, req)
	if err != nil {
		return zero, err
	}
	key := ""
	if m.IdempotencyKey != "" {
		key = ReceiptKey(m.Actor, m.IdempotencyKey)
	}
	var out T
	now := s.now()
	err = s.WithTx(ctx, func(tx *Tx) error {
		if key != "" {
			rc, found, err := claimReceipt(ctx, tx, key, hash)
			if err != nil {
				return err
			}
			if found {
				if err := json.Unmarshal(rc.Body, &out); err != nil {
					return fmt.Errorf("decode receipt: %w", err)
				}
				if r, ok := any(&out).(replayMarker); ok {
					r.markReplayed()
				}
				return nil
			}
		}
		res, a, err := fn(tx, now)
		if err != nil {
			return err
		}
		if !a.skip {
			a.At, a.Actor, a.Surface, a.Action, a.Allowed = now, m.Actor, m.Surface, op, true
			if err := InsertAudit(ctx, tx, a); err != nil {
				return err
			}
		}
		if key != "" {
			var body any = res
			if r, ok := any(res).(replayable); ok {
				body = r.receiptBody()
			}
			b, err := json.Marshal(body)
			if err != nil {
				return fmt.Errorf("encode receipt: %w", err)
			}
			if err := saveReceipt(ctx, tx, Receipt{Key: key, RequestHash: hash, Status: 200, Body: b, CreatedAt: now}); err != nil {
				return err
			}
		}
		out = res
		return nil
	})
	var rf *refusal
	if errors.As(err, &rf) {
		if aerr := s.auditRefusal(ctx, rf, m, op, now); aerr != nil {
			return zero, errors.Join(rf.err, fmt.Errorf("audit refusal: %w", aerr))
		}
		return zero, rf.err
	}
	if err != nil {
		if outcome := refusedOutcome(err); outcome != "" && m.Surface != "scheduler" && m.Surface != "system" {
			// A conflict, a bound or a refusal of the state is a decision about someone's
			// attempt: it is audited like a change. (The scheduler's own retries are not.)
			if aerr := s.auditFailure(ctx, err, m, op, req, now, outcome); aerr != nil {
				return zero, errors.Join(err, fmt.Errorf("audit %s: %w", outcome, aerr))
			}
		}
		return zero, err
	}
	return out, nil
}

// refusedOutcome names the audit outcome of an operation's error: "" for errors that are
// not a decision (bad input, not found, a failure of the database).
func refusedOutcome(err error) string {
	switch {
	case errors.Is(err, ErrConflict):
		return OutcomeConflict
	case errors.Is(err, ErrFull):
		return OutcomeFull
	case errors.Is(err, ErrRefused), errors.Is(err, ErrForbidden):
		// An operation that refuses a person or agent who may not act (ErrForbidden) has
		// always been audited as refused; OutcomeForbidden stays the API's refusal of a token
		// outside its scope, decided before any operation runs.
		return OutcomeRefused
	}
	return ""
}

// auditFailure writes the audit row of an operation that ended in a conflict or refusal
// (rolled back): who, what, the goal and target named by the request, and why.
func (s *Store) auditFailure(ctx context.Context, err error, m Meta, op string, req any, now time.Time, outcome string) error {
	goalID, target := requestTarget(req)
	detail := map[string]any{"refused": err.Error()}
	var se *Error
	if errors.As(err, &se) && se.Field != "" {
		detail["field"] = se.Field
	}
	d, _ := json.Marshal(detail)
	return InsertAudit(context.WithoutCancel(ctx), s.DB(), Audit{
		At: now, Actor: m.Actor, Surface: m.Surface, Action: op, GoalID: goalID, Target: target,
		Allowed: false, Outcome: outcome, Detail: d,
	})
}

// AuditFailure records a conflict or refusal decided outside Do (should-run keeps a receipt
// path of its own): one audit row with allowed false and the outcome err names.
func (s *Store) AuditFailure(ctx context.Context, m Meta, action, goalID, target string, err error) error {
	outcome := refusedOutcome(err)
	if outcome == "" {
		return nil
	}
	detail := map[string]any{"refused": err.Error()}
	var se *Error
	if errors.As(err, &se) && se.Field != "" {
		detail["field"] = se.Field
	}
	d, _ := json.Marshal(detail)
	return InsertAudit(ctx, s.DB(), Audit{At: s.now(), Actor: m.Actor, Surface: m.Surface, Action: action,
		GoalID: goalID, Target: target, Allowed: false, Outcome: outcome, Detail: d})
}

// requestTarget reads the goal and the most specific row a request names (its GoalID and
// TodoID, GateID, ItemID, TurnInstanceID or AgentID member), for the audit row of a failure.
func requestTarget(req any) (goalID, target string) {
	b, err := json.Marshal(req)
	if err != nil {
		return "", ""
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	str := func(k string) string {
		switch v := m[k].(type) {
		case string:
			return v
		case float64:
			if v != 0 {
				return strconv.FormatFloat(v, 'f', -1, 64)
			}
		}
		return ""
	}
	id := func(k string) int64 { n, _ := strconv.ParseInt(str(k), 10, 64); return n }
	goalID = str("GoalID")
	switch {
	case str("TodoID") != "":
		target = TodoTarget(id("TodoID"))
	case str("GateID") != "":
		target = GateTarget(id("GateID"))
	case str("ItemID") != "":
		target = InboxTarget(id("ItemID"))
	case str("AgentID") != "" && goalID != "":
		target = AgentTarget(goalID, str("AgentID"))
	case goalID != "":
		target = GoalTarget(goalID)
	}
	return goalID, target
}

// auditRefusal writes the audit row of a refused operation after its transaction rolled back:
// in the caller's transaction when the Store joined one, else on its own.
func (s *Store) auditRefusal(ctx context.Context, rf *refusal, m Meta, op string, now time.Time) error {
	a := rf.audit
	a.At, a.Actor, a.Surface, a.Action, a.Allowed = now, m.Actor, m.Surface, op, false
	a.Outcome = refusedOutcome(rf.err)
	var detail map[string]any
	_ = json.Unmarshal(a.Detail, &detail) // refuse encoded it from a map (or nil)
	if detail == nil {
		detail = map[string]any{}
	}
	detail["refused"] = rf.err.Error()
	a.Detail, _ = json.Marshal(detail)
	return InsertAudit(context.WithoutCancel(ctx), s.DB(), a)
}

// NoAudit is the audit of an operation that changed nothing worth a row (an empty inbox
// poll): Do writes no audit row for it.
func NoAudit() Audit { return Audit{skip: true} }

func validMeta(m Meta) error {
	if m.Actor == "" {
		return Errorf(ErrInvalid, "actor", "who performs the operation is required")
	}
	if len(m.Actor) > 200 {
		return Errorf(ErrInvalid, "actor", "at most 200 characters")
	}
	if !surfaces[m.Surface] {
		return Errorf(ErrInvalid, "surface", "must be one of api, chat, card, scheduler, system, web (got %q)", m.Surface)
	}
	if len(m.IdempotencyKey) > 200 {
		return Errorf(ErrInvalid, "idempotency_key", "at most 200 characters")
	}
	return nil
}

// requestHash identifies a request for the idempotency check: the operation and its
// parameters (Meta and callbacks excluded by their json:"-" tags).
func requestHash(op string, req any) ([]byte, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("hash request: %w", err)
	}
	h := sha256.New()
	h.Write([]byte(op))
	h.Write([]byte{0})
	h.Write(b)
	return h.Sum(nil), nil
}

// kernelHex returns n random bytes as hex.
func kernelHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b)
}

func auditDetail(kv map[string]any) json.RawMessage {
	b, _ := json.Marshal(kv)
	return b
}
