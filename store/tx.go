package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DB is the executor every statement runs on: the pool, or one open transaction (*Tx,
// *ShouldRunTx). Functions that must join the caller's transaction take a DB argument; nothing
// finds a transaction anywhere else (not in a context, not in a global), so a caller always
// sees which connection its statements use. Packages outside store only pass a DB along.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

var (
	_ DB = (*pgxpool.Pool)(nil)
	_ DB = (*Tx)(nil)
)

// Tx is one open transaction. Everything given a *Tx runs on its connection: inside a
// transaction nothing takes a second pool connection, so a burst that holds every connection
// in open transactions cannot wait on itself.
type Tx struct {
	tx pgx.Tx
}

// Exec runs a statement in the transaction.
func (t *Tx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return t.tx.Exec(ctx, sql, args...)
}

// Query runs a query in the transaction.
func (t *Tx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return t.tx.Query(ctx, sql, args...)
}

// QueryRow runs a one-row query in the transaction.
func (t *Tx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return t.tx.QueryRow(ctx, sql, args...)
}

// WithTx runs fn in one transaction and commits when fn returns nil. Acquiring the
// connection waits at most as long as ctx allows. The rollback after a failure runs on a
// context that is not cancelled, so a cancelled request cannot leave a transaction open.
//
// On a Store joined to a transaction (In), WithTx opens a savepoint of that transaction
// instead: fn's writes commit with the outer transaction, and a failure of fn undoes only
// fn's part.
func (s *Store) WithTx(ctx context.Context, fn func(tx *Tx) error) error {
	var (
		tx  pgx.Tx
		err error
	)
	if s.tx != nil {
		tx, err = s.tx.tx.Begin(ctx)
	} else {
		tx, err = s.pool.Begin(ctx)
	}
	if err != nil {
		return fmt.Errorf("begin transaction: %w", mapErr(err))
	}
	defer rollback(ctx, tx)
	if err := fn(&Tx{tx: tx}); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", mapErr(err))
	}
	return nil
}

// In returns a Store whose operations join tx: each runs under a savepoint of tx and reads
// through it, so they see tx's uncommitted writes and commit or roll back with it. The chat
// entry points use it to make "record the event id, do the operation, write audit and outbox
// rows" one commit.
func (s *Store) In(tx *Tx) *Store {
	c := *s
	c.tx = tx
	return &c
}

func rollback(ctx context.Context, tx pgx.Tx) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = tx.Rollback(ctx) // after a commit this is a no-op returning ErrTxClosed
}
