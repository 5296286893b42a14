package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loopx/store"
	"loopx/store/storetest"
)

// A database a later release migrated (it holds a migration this binary does not know) is
// refused before anything changes, naming both versions and the release that wrote it; the
// later release's down migrations are the way back, and this binary then runs again.
func TestMigrateRefusesANewerSchemaAndMigrateDownIsTheWayBack(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, err := store.Open(ctx, storetest.NewDatabase(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	require.NoError(t, store.Migrate(ctx, pool), "a fresh database migrates")
	require.NoError(t, store.RecordRelease(ctx, pool, "v0.2.0", "c0ffee"))
	latest := store.LatestMigration()
	require.Equal(t, store.KnownMigrations()[len(store.KnownMigrations())-1], latest)

	// A later release added a table and recorded itself.
	future := latest + 1000
	_, err = pool.Exec(ctx, `CREATE TABLE later_release_probe (id int)`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO goose_db_version (version_id, is_applied) VALUES ($1, true)`, future)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO release_seen (version, schema_version) VALUES ('v0.3.0', $1)`, future)
	require.NoError(t, err)

	err = store.Migrate(ctx, pool)
	var newer *store.NewerSchemaError
	require.ErrorAs(t, err, &newer)
	require.Equal(t, store.NewerSchemaError{Database: future, Known: latest, Unknown: []int64{future}, Release: "v0.3.0"}, *newer)
	require.Contains(t, err.Error(), "newer than the newest this binary knows")

	// This binary cannot undo what it does not know, nor what is not applied.
	_, err = store.MigrateDown(ctx, pool, []int64{future})
	require.ErrorIs(t, err, store.ErrInvalid)
	require.Contains(t, err.Error(), "not one this binary knows")
	_, err = store.MigrateDown(ctx, pool, []int64{latest + 1})
	require.ErrorIs(t, err, store.ErrInvalid)

	// The later release undoes its migration (simulated: its row goes), and this binary runs.
	_, err = pool.Exec(ctx, `DROP TABLE later_release_probe`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `DELETE FROM goose_db_version WHERE version_id = $1`, future)
	require.NoError(t, err)
	require.NoError(t, store.Migrate(ctx, pool))

	// This binary's own down sections undo its newest migration, and Migrate applies it again.
	undone, err := store.MigrateDown(ctx, pool, []int64{250})
	require.NoError(t, err)
	require.Equal(t, []int64{250}, undone)
	applied, err := store.AppliedMigrations(ctx, pool)
	require.NoError(t, err)
	require.NotContains(t, applied, int64(250))
	var table *string
	require.NoError(t, pool.QueryRow(ctx, `SELECT to_regclass('release_seen')::text`).Scan(&table))
	require.Nil(t, table, "the down section dropped the table")
	require.NoError(t, store.Migrate(ctx, pool))
	applied, err = store.AppliedMigrations(ctx, pool)
	require.NoError(t, err)
	require.Equal(t, store.KnownMigrations(), applied)
}

// After a restore, every receipt still queued is looked up before it is added, claims of the
// original servers lapse at once, and the report says what is queued.
func TestAfterRestorePreparesWhatTheBackupLeftQueued(t *testing.T) {
	t.Parallel()
	st, _ := setup(t)
	ctx := t.Context()
	db := st.DB()
	old := time.Now().Add(-10 * time.Minute).UTC().Truncate(time.Microsecond)
	_, err := db.Exec(ctx, `INSERT INTO outbox (uuid, kind, receive_id, target_message, content, state, attempts, claimed_until, claimed_by, created_at) VALUES
		('u1', 'reaction', 'oc_1', 'om_1', '{}', 'pending', 0, NULL, '', $1),
		('u2', 'reaction', 'oc_1', 'om_2', '{}', 'sending', 0, now() + interval '1 minute', 'r1', now()),
		('u3', 'reaction', 'oc_1', 'om_3', '{}', 'pending', 2, NULL, '', now()),
		('u4', 'text', 'oc_1', '', '{"text":"hi"}', 'sending', 0, now() + interval '1 minute', 'r1', now()),
		('u5', 'text', 'oc_1', '', '{"text":"sent"}', 'sent', 1, NULL, '', now()),
		('u6', 'reaction', 'oc_1', 'om_6', '{}', 'sent', 1, NULL, '', now())`, old)
	require.NoError(t, err)

	r, err := store.AfterRestore(ctx, db)
	require.NoError(t, err)
	require.Equal(t, 2, r.ReactionsToCheck, "the two queued receipts never tried")
	require.Equal(t, 2, r.ClaimsReleased)
	require.Equal(t, map[string]int{"reaction": 3, "text": 1}, r.Queued)
	require.True(t, r.OldestQueued.Equal(old), "oldest %s, want %s", r.OldestQueued, old)

	var tried, live int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FILTER (WHERE attempts > 0 AND kind = 'reaction' AND state <> 'sent'),
		count(*) FILTER (WHERE state = 'sending' AND claimed_until >= now()) FROM outbox`).Scan(&tried, &live))
	require.Equal(t, 3, tried, "every queued receipt looks before it adds")
	require.Zero(t, live, "no claim of the original servers holds")

	again, err := store.AfterRestore(ctx, db)
	require.NoError(t, err)
	require.Zero(t, again.ReactionsToCheck+again.ClaimsReleased, "running it twice changes nothing more")
}
