package store_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"loopx/store"
	"loopx/store/storetest"
)

// A secret sealed under one key is unreadable (and named) with another; re-encryption with
// both keys seals it under the new one.
func TestSecretKeyRotation(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := storetest.NewPool(t)
	oldKey, newKey := store.NewSecretKey(), store.NewSecretKey()
	oldRing, err := store.NewKeyring(oldKey)
	require.NoError(t, err)
	st := store.New(pool, store.Options{Keyring: oldRing})
	meta := store.Meta{Actor: "admin", Surface: "api"}
	_, err = st.CreateGoal(ctx, store.CreateGoalParams{ID: "g", Owners: []string{"ou_o"}, Meta: meta})
	require.NoError(t, err)
	_, err = st.RegisterAgent(ctx, store.RegisterAgentParams{GoalID: "g", AgentID: "hook", Runner: store.RunnerWebhook,
		RunnerConfig: json.RawMessage(`{"url":"https://h.example/w","secret":"0123456789abcdef-x"}`), Meta: meta})
	require.NoError(t, err)

	newRing, err := store.NewKeyring(newKey)
	require.NoError(t, err)
	other := store.New(pool, store.Options{Keyring: newRing})
	bad, err := other.ListUnreadableSecrets(ctx)
	require.NoError(t, err)
	require.Equal(t, []store.UnreadableSecret{{GoalID: "g", AgentID: "hook", Name: "secret", KeyID: oldRing.PrimaryID()}}, bad)
	_, err = other.RunnerConfig(ctx, "g", "hook")
	require.ErrorIs(t, err, store.ErrSecretUnreadable)
	_, err = other.ReencryptSecrets(ctx)
	require.ErrorIs(t, err, store.ErrSecretUnreadable, "no key given opens it: nothing changes")

	both, err := store.NewKeyring(newKey, oldKey)
	require.NoError(t, err)
	n, err := store.New(pool, store.Options{Keyring: both}).ReencryptSecrets(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	cfg, err := other.RunnerConfig(ctx, "g", "hook")
	require.NoError(t, err)
	require.JSONEq(t, `{"url":"https://h.example/w","secret":"0123456789abcdef-x"}`, string(cfg))
}

// Directly on PostgreSQL no pooler is detected; a pool opened for transaction pooling (no
// named statements, polling, a transaction lock for migrations) works all the same.
func TestPoolerModes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := storetest.NewDatabase(t)
	direct, err := store.OpenWith(ctx, url, store.OpenOptions{})
	require.NoError(t, err)
	defer direct.Pool.Close()
	require.True(t, direct.Detected)
	require.False(t, direct.TransactionPooling)

	pooled, err := store.OpenWith(ctx, url, store.OpenOptions{Pooler: store.PoolerTransaction})
	require.NoError(t, err)
	defer pooled.Pool.Close()
	require.True(t, pooled.TransactionPooling)
	require.NoError(t, store.Migrate(ctx, pooled.Pool))
	st := store.New(pooled.Pool, store.Options{TransactionPooling: true})
	meta := store.Meta{Actor: "admin", Surface: "api", IdempotencyKey: "k1"}
	_, err = st.CreateGoal(ctx, store.CreateGoalParams{ID: "g", Owners: []string{"ou_o"}, Meta: meta})
	require.NoError(t, err)
	_, err = st.CreateGoal(ctx, store.CreateGoalParams{ID: "g", Owners: []string{"ou_o"}, Meta: meta})
	require.NoError(t, err, "the replay answers from its receipt")
	woke := make(chan struct{}, 4)
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- st.Listen(lctx, store.OutboxNotifyChannel, func(string) { woke <- struct{}{} }) }()
	<-woke
	<-woke // a second wake-up comes from the poll alone
	cancel()
	require.NoError(t, <-done)

	_, err = store.OpenWith(ctx, url, store.OpenOptions{Pooler: "sometimes"})
	require.ErrorIs(t, err, store.ErrInvalid)
}
