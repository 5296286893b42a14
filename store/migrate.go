package store

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Migrate applies every embedded migration that has not run yet. It holds a PostgreSQL
// session advisory lock while it works, so replicas starting together apply each migration
// exactly once; the others wait and then find nothing to do.
//
// A database migrated by a later release (it holds a migration this binary does not know) is
// refused with a *NewerSchemaError before anything changes: an older binary never runs on a
// schema it does not know.
//
// Behind a pooler in transaction mode (a pool from OpenWith that found one) a session lock
// would stay on whichever backend took it, so the lock is a transaction lock instead, held
// by a transaction of its own for as long as the migrations run.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	if err := checkSchemaNotNewer(ctx, pool); err != nil {
		return err
	}
	return withMigrations(ctx, pool, func(p *goose.Provider) error {
		if _, err := p.Up(ctx); err != nil {
			return fmt.Errorf("apply migrations: %w", err)
		}
		return nil
	})
}

// withMigrations runs fn with a migration provider over pool, under the migration lock:
// goose's session lock, or behind a pooler in transaction mode a transaction lock held for
// as long as fn runs.
func withMigrations(ctx context.Context, pool *pgxpool.Pool, fn func(p *goose.Provider) error) error {
	pooled := pool.Config().ConnConfig.DefaultQueryExecMode == pgx.QueryExecModeCacheDescribe
	if pooled {
		tx, err := pool.Begin(ctx)
		if err != nil {
			return fmt.Errorf("lock migrations: %w", mapErr(err))
		}
		defer rollback(ctx, tx)
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLockID); err != nil {
			return fmt.Errorf("lock migrations: %w", mapErr(err))
		}
	}
	p, db, err := provider(pool, !pooled)
	if err != nil {
		return err
	}
	defer db.Close()
	return fn(p)
}

// MigrationStatus reports the applied version and the newest embedded one.
func MigrationStatus(ctx context.Context, pool *pgxpool.Pool) (current, latest int64, err error) {
	p, db, err := provider(pool, false)
	if err != nil {
		return 0, 0, err
	}
	defer db.Close()
	current, err = p.GetDBVersion(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("read migration version: %w", err)
	}
	sources := p.ListSources()
	if n := len(sources); n > 0 {
		latest = sources[n-1].Version
	}
	return current, latest, nil
}

// migrationLockID is the transaction lock Migrate takes behind a pooler in transaction mode.
const migrationLockID = 727274050

func provider(pool *pgxpool.Pool, sessionLock bool) (*goose.Provider, *sql.DB, error) {
	sub, err := fs.Sub(migrationFS, "migrations")
	if err != nil {
		return nil, nil, fmt.Errorf("open embedded migrations: %w", err)
	}
	// Issues add their tables in their own version ranges; a database that ran a later
	// range first must still accept an earlier one.
	opts := []goose.ProviderOption{goose.WithAllowOutofOrder(true)}
	if sessionLock {
		locker, err := lock.NewPostgresSessionLocker()
		if err != nil {
			return nil, nil, fmt.Errorf("create migration lock: %w", err)
		}
		opts = append(opts, goose.WithSessionLocker(locker))
	}
	db := stdlib.OpenDBFromPool(pool)
	p, err := goose.NewProvider(goose.DialectPostgres, db, sub, opts...)
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("create migration provider: %w", err)
	}
	return p, db, nil
}

// MigrationFS exposes the embedded migration files (tests hash them to name template databases).
func MigrationFS() fs.FS {
	sub, _ := fs.Sub(migrationFS, "migrations")
	return sub
}

// MigrationStatus reports the store's database's applied and latest migration versions.
func (s *Store) MigrationStatus(ctx context.Context) (current, latest int64, err error) {
	return MigrationStatus(ctx, s.pool)
}
