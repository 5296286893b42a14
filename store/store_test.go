package store_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"loopx/store"
	"loopx/store/storetest"
)

func TestMigrateIsIdempotent(t *testing.T) {
	t.Parallel()
	pool := storetest.NewPool(t)
	require.NoError(t, store.Migrate(t.Context(), pool))
	cur, latest, err := store.MigrationStatus(t.Context(), pool)
	require.NoError(t, err)
	require.Equal(t, latest, cur)
	require.NotZero(t, cur)
}
