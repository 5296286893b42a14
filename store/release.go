package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pressly/goose/v3"
)

// KnownMigrations lists the versions of the migrations embedded in this binary, oldest first.
func KnownMigrations() []int64 {
	entries, _ := fs.ReadDir(migrationFS, "migrations")
	var out []int64
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		if v, err := strconv.ParseInt(num, 10, 64); ok && err == nil && strings.HasSuffix(e.Name(), ".sql") {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out
}

// LatestMigration is the newest migration embedded in this binary: the schema version it knows.
func LatestMigration() int64 {
	known := KnownMigrations()
	if len(known) == 0 {
		return 0
	}
	return known[len(known)-1]
}

// NewerSchemaError says the database holds migrations this binary does not know: a later
// release migrated it, and this binary must not run on a schema it cannot read or write
// correctly. Migrate returns it before it changes anything.
type NewerSchemaError struct {
	Database int64   // the newest migration applied to the database
	Known    int64   // the newest migration this binary knows
	Unknown  []int64 // the applied migrations this binary does not know, oldest first
	Release  string  // the release that recorded the newest schema (RecordRelease), "" when none did
}

func (e *NewerSchemaError) Error() string {
	by := ""
	if e.Release != "" {
		by = ", migrated by loopx " + e.Release
	}
	return fmt.Sprintf("the database's schema (version %d%s) is newer than the newest this binary knows (version %d): "+
		"it holds migrations %s", e.Database, by, e.Known, joinVersions(e.Unknown, ", "))
}

// joinVersions prints versions as loopx migrate down takes them.
func joinVersions(vs []int64, sep string) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = strconv.FormatInt(v, 10)
	}
	return strings.Join(s, sep)
}

// AppliedMigrations lists the migrations applied to the database, oldest version first; none
// on a database that was never migrated.
func AppliedMigrations(ctx context.Context, db DB) ([]int64, error) {
	var exists bool
	if err := db.QueryRow(ctx, `SELECT to_regclass('goose_db_version') IS NOT NULL`).Scan(&exists); err != nil {
		return nil, fmt.Errorf("read applied migrations: %w", mapErr(err))
	}
	if !exists {
		return nil, nil
	}
	rows, err := db.Query(ctx, `SELECT DISTINCT version_id FROM goose_db_version WHERE is_applied AND version_id > 0 ORDER BY 1`)
	if err != nil {
		return nil, fmt.Errorf("read applied migrations: %w", mapErr(err))
	}
	return collect(rows, "read applied migrations", func(r pgx.Row) (v int64, err error) { return v, r.Scan(&v) })
}

// checkSchemaNotNewer returns a *NewerSchemaError when the database holds a migration this
// binary does not know.
func checkSchemaNotNewer(ctx context.Context, db DB) error {
	applied, err := AppliedMigrations(ctx, db)
	if err != nil {
		return err
	}
	known := KnownMigrations()
	var unknown []int64
	for _, v := range applied {
		if _, found := slices.BinarySearch(known, v); !found {
			unknown = append(unknown, v)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	e := &NewerSchemaError{Database: applied[len(applied)-1], Known: LatestMigration(), Unknown: unknown}
	// The release that knows the database's newest migration, when one recorded itself.
	var recorded bool
	if err := db.QueryRow(ctx, `SELECT to_regclass('release_seen') IS NOT NULL`).Scan(&recorded); err != nil {
		return fmt.Errorf("read the releases seen: %w", mapErr(err))
	}
	if recorded {
		err := db.QueryRow(ctx, `SELECT version FROM release_seen WHERE schema_version >= $1
			ORDER BY schema_version, last_seen DESC LIMIT 1`, e.Database).Scan(&e.Release)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("read the releases seen: %w", mapErr(err))
		}
	}
	return e
}

// RecordRelease notes that release version (built from commit), which knows migrations up to
// LatestMigration, ran on the database now. Serve and migrate call it after migrating.
func RecordRelease(ctx context.Context, db DB, version, commit string) error {
	if version == "" {
		return nil
	}
	_, err := db.Exec(ctx, `
		INSERT INTO release_seen (version, schema_version, commit_id) VALUES ($1, $2, $3)
		ON CONFLICT (version) DO UPDATE SET schema_version = EXCLUDED.schema_version,
		    commit_id = EXCLUDED.commit_id, last_seen = now()`,
		version, LatestMigration(), commit)
	if err != nil {
		return fmt.Errorf("record the release: %w", mapErr(err))
	}
	return nil
}

// MigrateDown undoes the given applied migrations with their down sections, newest first,
// each in its own transaction, under the migration lock: the way back for an older binary
// that refuses the schema (NewerSchemaError.Unknown). A version that is not applied, or
// that this binary does not know, is refused before anything runs.
func MigrateDown(ctx context.Context, pool *pgxpool.Pool, versions []int64) ([]int64, error) {
	applied, err := AppliedMigrations(ctx, pool)
	if err != nil {
		return nil, err
	}
	known := KnownMigrations()
	todo := slices.Clone(versions)
	slices.Sort(todo)
	todo = slices.Compact(todo)
	for _, v := range todo {
		if _, ok := slices.BinarySearch(known, v); !ok {
			return nil, Errorf(ErrInvalid, "version", "migration %d is not one this binary knows (it knows %s): undo it with the release that added it", v, joinVersions(known, ", "))
		}
		if _, ok := slices.BinarySearch(applied, v); !ok {
			return nil, Errorf(ErrInvalid, "version", "migration %d is not applied to this database", v)
		}
	}
	var done []int64
	err = withMigrations(ctx, pool, func(p *goose.Provider) error {
		for _, v := range slices.Backward(todo) {
			if _, err := p.ApplyVersion(ctx, v, false); err != nil {
				return fmt.Errorf("undo migration %d: %w", v, err)
			}
			done = append(done, v)
		}
		return nil
	})
	if err != nil {
		return done, err
	}
	return done, nil
}
