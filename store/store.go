package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DB is what every query runs on: the pool or a transaction. Functions that must join the
// caller's transaction take a DB; public operations open their own transaction.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

var (
	_ DB = (*pgxpool.Pool)(nil)
	_ DB = (pgx.Tx)(nil)
)

// Store is the only holder of SQL in the project. It is safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
	now  func() time.Time
}

// Options configures a Store.
type Options struct {
	// Now is the clock for values the store computes in Go. Nil means time.Now.
	// Where replicas must agree, SQL uses now() instead.
	Now func() time.Time
}

// New wraps an open pool. The caller owns the pool and closes it after the store is done.
func New(pool *pgxpool.Pool, opts Options) *Store {
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	return &Store{pool: pool, now: now}
}

// Open connects to url, checks the connection and returns the pool. It does not migrate.
func Open(ctx context.Context, url string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", redactErr(err))
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open pool: %w", err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("ping database: %w", err)
	}
	return pool, nil
}

// Pool exposes the pool for LISTEN connections and health checks.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Now returns the store's clock reading.
func (s *Store) Now() time.Time { return s.now() }

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error { return s.pool.Ping(ctx) }

// WithTx runs fn in one transaction and commits when fn returns nil. The rollback after a
// failure runs on a context that is not cancelled, so a cancelled request cannot leave a
// transaction open.
//
// When ctx carries a transaction (see InTx), WithTx joins it under a savepoint instead: fn's
// writes commit with the outer transaction, and a failure of fn undoes only fn's part.
func (s *Store) WithTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	if outer := txFrom(ctx); outer != nil {
		return withSavepoint(ctx, outer, fn)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin transaction: %w", mapErr(err))
	}
	defer rollback(ctx, tx)
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", mapErr(err))
	}
	return nil
}

func rollback(ctx context.Context, tx pgx.Tx) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = tx.Rollback(ctx) // after a commit this is a no-op returning ErrTxClosed
}

// redactErr keeps a password in a malformed URL out of logs: pgx quotes the URL in parse errors.
func redactErr(err error) error {
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) {
		return errors.New("invalid connection string")
	}
	return err
}
