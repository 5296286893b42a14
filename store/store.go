package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Store is the only holder of SQL in the project. It is safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
	now  func() time.Time
	// tx, when set, is the caller's transaction every operation of this Store joins (see In).
	tx *Tx
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

// Now returns the store's clock reading.
func (s *Store) Now() time.Time { return s.now() }

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error { return s.pool.Ping(ctx) }

// DB is the executor the Store's statements run on: its joined transaction (In), else the
// pool. Plain reads outside any operation pass it to the store's read functions.
func (s *Store) DB() DB {
	if s.tx != nil {
		return s.tx
	}
	return s.pool
}

// redactErr keeps a password in a malformed URL out of logs: pgx quotes the URL in parse errors.
func redactErr(err error) error {
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) {
		return errors.New("invalid connection string")
	}
	return err
}
