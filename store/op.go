package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Surfaces an operation can come from (the audit table's check constraint).
var surfaces = map[string]bool{"api": true, "chat": true, "card": true, "scheduler": true, "system": true}

// refusal is an error whose audit row must survive the rollback of the operation that was
// refused: run commits it in a transaction of its own.
type refusal struct {
	err   error
	audit Audit
}

func (r *refusal) Error() string { return r.err.Error() }
func (r *refusal) Unwrap() error { return r.err }

// refuse builds a refusal of kind ErrRefused (or another kind) with its audit detail.
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

// run executes one mutating operation in one transaction: the receipt lookup (when the caller
// gave an idempotency key), the operation, its audit row and its receipt. fn returns the
// result and the audit row's goal, target and detail; run fills in who, where and when.
func run[T any](ctx context.Context, s *Store, op string, m Meta, req any, fn func(tx pgx.Tx, now time.Time) (T, Audit, error)) (T, error) {
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
		key = m.Actor + "|" + m.IdempotencyKey
	}
	var out T
	now := s.now()
	err = s.WithTx(ctx, func(tx pgx.Tx) error {
		if key != "" {
			rc, found, err := LookupReceipt(ctx, tx, key, hash)
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
		a.At, a.Actor, a.Surface, a.Action, a.Allowed = now, m.Actor, m.Surface, op, true
		if err := InsertAudit(ctx, tx, a); err != nil {
			return err
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
			if err := SaveReceipt(ctx, tx, Receipt{Key: key, RequestHash: hash, Status: 200, Body: b, CreatedAt: now}); err != nil {
				return err
			}
		}
		out = res
		return nil
	})
	var rf *refusal
	if errors.As(err, &rf) {
		a := rf.audit
		a.At, a.Actor, a.Surface, a.Action, a.Allowed = now, m.Actor, m.Surface, op, false
		if a.Detail == nil {
			a.Detail = json.RawMessage(`{}`)
		}
		var withReason map[string]any
		_ = json.Unmarshal(a.Detail, &withReason)
		if withReason == nil {
			withReason = map[string]any{}
		}
		withReason["refused"] = rf.err.Error()
		a.Detail, _ = json.Marshal(withReason)
		if aerr := InsertAudit(context.WithoutCancel(ctx), s.pool, a); aerr != nil {
			return zero, errors.Join(rf.err, fmt.Errorf("audit refusal: %w", aerr))
		}
		return zero, rf.err
	}
	if err != nil {
		return zero, err
	}
	return out, nil
}

func validMeta(m Meta) error {
	if m.Actor == "" {
		return Errorf(ErrInvalid, "actor", "who performs the operation is required")
	}
	if len(m.Actor) > 200 {
		return Errorf(ErrInvalid, "actor", "at most 200 characters")
	}
	if !surfaces[m.Surface] {
		return Errorf(ErrInvalid, "surface", "must be one of api, chat, card, scheduler, system (got %q)", m.Surface)
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

// RequestHash is the hash LookupReceipt compares, for callers that keep receipts of their
// own operations (op names the operation, req is its JSON-encodable request).
func RequestHash(op string, req any) ([]byte, error) { return requestHash(op, req) }

// LookupReceipt looks up a receipt inside the caller's transaction, holding a transaction
// advisory lock on the key so that two requests with one key run one after the other. Same
// hash: the receipt and true. Different hash: ErrConflict. Absent: false.
func LookupReceipt(ctx context.Context, db DB, key string, hash []byte) (Receipt, bool, error) {
	var (
		rh     []byte
		status *int
		body   []byte
		at     *time.Time
	)
	// The lock is taken in the same statement: one round trip. LEFT JOIN keeps one row when
	// there is no receipt, with NULLs.
	err := db.QueryRow(ctx, `
		WITH l AS (SELECT pg_advisory_xact_lock(hashtextextended($1, 727274002)) AS locked)
		SELECT r.request_hash, r.status, r.body, r.created_at
		FROM l LEFT JOIN receipt r ON r.key = $1`, key).Scan(&rh, &status, &body, &at)
	if err != nil {
		return Receipt{}, false, fmt.Errorf("look up receipt: %w", mapErr(err))
	}
	if status == nil {
		return Receipt{}, false, nil
	}
	if string(rh) != string(hash) {
		return Receipt{}, false, Errorf(ErrConflict, "idempotency_key",
			"this key was already used for a different request; use a new key")
	}
	return Receipt{Key: key, RequestHash: rh, Status: *status, Body: body, CreatedAt: *at}, true, nil
}

// SaveReceipt stores the result of an operation under its key, in the caller's transaction.
func SaveReceipt(ctx context.Context, db DB, rc Receipt) error {
	_, err := db.Exec(ctx, `INSERT INTO receipt (key, request_hash, status, body, created_at) VALUES ($1, $2, $3, $4, $5)`,
		rc.Key, rc.RequestHash, rc.Status, rc.Body, rc.CreatedAt)
	if err != nil {
		return fmt.Errorf("save receipt: %w", mapErr(err))
	}
	return nil
}

// InsertAudit writes one audit row in the caller's transaction. A zero At means now().
func InsertAudit(ctx context.Context, db DB, a Audit) error {
	if a.Detail == nil {
		a.Detail = json.RawMessage(`{}`)
	}
	var at any = a.At
	if a.At.IsZero() {
		at = nil
	}
	_, err := db.Exec(ctx, `
		INSERT INTO audit (at, actor, surface, action, goal_id, target, allowed, detail)
		VALUES (coalesce($1, now()), $2, $3, $4, $5, $6, $7, $8)`,
		at, a.Actor, a.Surface, a.Action, a.GoalID, a.Target, a.Allowed, a.Detail)
	if err != nil {
		return fmt.Errorf("insert audit: %w", mapErr(err))
	}
	return nil
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

// PruneReceipts deletes idempotency receipts older than cutoff and returns how many. Keep
// them at least as long as clients retry (a day is plenty); heartbeat receipts also let
// spend-slot tell a skipped turn from an unknown one.
func (s *Store) PruneReceipts(ctx context.Context, cutoff time.Time) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM receipt WHERE created_at < $1`, cutoff)
	if err != nil {
		return 0, fmt.Errorf("prune receipts: %w", mapErr(err))
	}
	return tag.RowsAffected(), nil
}
