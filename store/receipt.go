package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Receipt is the stored result of an idempotent operation.
type Receipt struct {
	Key         string          `json:"key"`
	RequestHash []byte          `json:"-"`
	Status      int             `json:"status"`
	Body        json.RawMessage `json:"body"`
	CreatedAt   time.Time       `json:"created_at"`
}

// lockReceiptSQL serializes every call under one key until the holder's transaction ends. It
// is a statement of its own on purpose: under READ COMMITTED each statement reads a fresh
// snapshot, so the receipt lookup that follows the lock sees a receipt the holder committed
// while this call waited. (Taking the lock inside the lookup's own statement reads a
// snapshot from before the wait, and the waiter then misses the receipt.)
const lockReceiptSQL = `SELECT pg_advisory_xact_lock(hashtextextended($1, 727274002))`

const lookupReceiptSQL = `SELECT request_hash, status, body, created_at FROM receipt WHERE key = $1`

// claimReceipt takes the key's lock in tx and looks the receipt up. Same hash: the receipt
// and true. Different hash: ErrConflict naming idempotency_key. Absent: false, and the key
// stays locked until tx ends, so the caller's operation runs at most once at a time.
func claimReceipt(ctx context.Context, db DB, key string, hash []byte) (Receipt, bool, error) {
	if _, err := db.Exec(ctx, lockReceiptSQL, key); err != nil {
		return Receipt{}, false, fmt.Errorf("lock idempotency key: %w", mapErr(err))
	}
	return checkReceipt(key, hash, db.QueryRow(ctx, lookupReceiptSQL, key))
}

// checkReceipt scans a receipt row (request_hash, status, body, created_at) and compares its
// request hash.
func checkReceipt(key string, hash []byte, row pgx.Row) (Receipt, bool, error) {
	rc := Receipt{Key: key}
	err := row.Scan(&rc.RequestHash, &rc.Status, &rc.Body, &rc.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Receipt{}, false, nil
	}
	if err != nil {
		return Receipt{}, false, fmt.Errorf("look up receipt: %w", mapErr(err))
	}
	if string(rc.RequestHash) != string(hash) {
		return Receipt{}, false, errKeyReused()
	}
	return rc, true, nil
}

// errKeyReused is the answer to an idempotency key used again for another request.
func errKeyReused() error {
	return &Error{Kind: ErrConflict, Field: "idempotency_key",
		Msg: "this key was already used for a different request; use a new key"}
}

// saveReceipt stores the result of an operation under its key, in the caller's transaction
// (which holds the key's lock, so no other call can store one meanwhile).
func saveReceipt(ctx context.Context, db DB, rc Receipt) error {
	_, err := db.Exec(ctx, `INSERT INTO receipt (key, request_hash, status, body, created_at) VALUES ($1, $2, $3, $4, $5)`,
		rc.Key, rc.RequestHash, rc.Status, rc.Body, rc.CreatedAt)
	if err != nil {
		return fmt.Errorf("save receipt: %w", mapErr(err))
	}
	return nil
}
