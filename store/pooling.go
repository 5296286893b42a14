package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Pooler modes for OpenOptions.Pooler (LOOPX_PGBOUNCER).
const (
	PoolerAuto        = "auto"        // detect a pooler in transaction mode at start
	PoolerTransaction = "transaction" // the database is behind a pooler in transaction mode
	PoolerOff         = "off"         // connections reach PostgreSQL itself (or a session pooler)
)

// OpenOptions tunes OpenWith.
type OpenOptions struct {
	// Pooler says whether the URL reaches PostgreSQL through a pooler in transaction mode
	// (PgBouncer's pool_mode=transaction): PoolerAuto (""), PoolerTransaction or PoolerOff.
	Pooler string
}

// Opened is a pool and what OpenWith learned about the way to the database.
type Opened struct {
	Pool *pgxpool.Pool
	// TransactionPooling: a pooler in transaction mode sits between LoopX and PostgreSQL. The
	// pool then caches statement descriptions instead of preparing named statements (which
	// live on one server connection, while the pooler hands each transaction any of them), and
	// the Store must be told (Options.TransactionPooling) so that Listen polls.
	TransactionPooling bool
	Detected           bool // the mode was detected rather than configured
}

// OpenWith connects to url like Open, and finds out (or is told) whether a pooler in
// transaction mode is in the way; with one it reopens the pool in a mode that works there.
func OpenWith(ctx context.Context, url string, o OpenOptions) (Opened, error) {
	pool, err := open(ctx, url, false)
	if err != nil {
		return Opened{}, err
	}
	var pooled, detected bool
	switch o.Pooler {
	case PoolerTransaction:
		pooled = true
	case PoolerOff:
	case "", PoolerAuto:
		if pooled, err = DetectTransactionPooling(ctx, pool); err != nil {
			pool.Close()
			return Opened{}, err
		}
		detected = true
	default:
		pool.Close()
		return Opened{}, Errorf(ErrInvalid, "pooler", "%q is not auto, transaction or off", o.Pooler)
	}
	if !pooled {
		return Opened{Pool: pool, Detected: detected}, nil
	}
	pool.Close()
	if pool, err = open(ctx, url, true); err != nil {
		return Opened{}, err
	}
	return Opened{Pool: pool, TransactionPooling: true, Detected: detected}, nil
}

func open(ctx context.Context, url string, txPooling bool) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", redactErr(err))
	}
	if txPooling {
		// Named prepared statements live on one server connection; the pooler gives each
		// transaction whichever is free. Cached descriptions with unnamed statements run each
		// query in one round trip that carries its own Parse.
		cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
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

// DetectTransactionPooling tells whether the pool's connections reach PostgreSQL through a
// pooler in transaction (or statement) mode: two client connections held at once see the
// same server backend between their statements. Directly, or through a session pooler,
// each client connection keeps its own backend for its whole life.
func DetectTransactionPooling(ctx context.Context, pool *pgxpool.Pool) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	a, err := pool.Acquire(ctx)
	if err != nil {
		return false, fmt.Errorf("detect pooler: %w", mapErr(err))
	}
	defer a.Release()
	b, err := pool.Acquire(ctx)
	if err != nil {
		return false, fmt.Errorf("detect pooler: %w", mapErr(err))
	}
	defer b.Release()
	seen := map[int32]int{}
	pid := func(c *pgxpool.Conn, who int) (bool, error) {
		var p int32
		// The simple protocol: no statement is prepared on a backend another client gets.
		if err := c.QueryRow(ctx, "SELECT pg_backend_pid()", pgx.QueryExecModeSimpleProtocol).Scan(&p); err != nil {
			return false, fmt.Errorf("detect pooler: %w", mapErr(err))
		}
		if w, ok := seen[p]; ok && w != who {
			return true, nil
		}
		seen[p] = who
		return false, nil
	}
	for range 4 {
		for who, c := range []*pgxpool.Conn{a, b} {
			shared, err := pid(c, who)
			if err != nil || shared {
				return shared, err
			}
		}
	}
	return false, nil
}

// TransactionPooling reports whether this Store was told it runs behind a pooler in
// transaction mode.
func (s *Store) TransactionPooling() bool { return s.txPooling }
