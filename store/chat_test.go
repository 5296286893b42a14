package store_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"loopx/store"
	"loopx/store/storetest"
)

var sys = store.Meta{Actor: "admin", Surface: "system"}

// A Store joined to a transaction (In) makes kernel operations join it: all commit together
// or none do, and a failed operation inside undoes only its own part.
func TestInJoinsKernelOperations(t *testing.T) {
	t.Parallel()
	st := storetest.New(t, store.Options{})
	ctx := t.Context()

	boom := errors.New("boom")
	err := st.WithTx(ctx, func(tx *store.Tx) error {
		_, err := st.In(tx).CreateGoal(ctx, store.CreateGoalParams{ID: "rolled-back", Owners: []string{"ou_a"}, Meta: sys})
		require.NoError(t, err)
		return boom
	})
	require.ErrorIs(t, err, boom)
	_, err = st.GetGoal(ctx, "rolled-back")
	require.ErrorIs(t, err, store.ErrNotFound, "the joined operation rolled back with the outer transaction")

	_, err = st.CreateGoal(ctx, store.CreateGoalParams{ID: "exists", Owners: []string{"ou_a"}, Meta: sys})
	require.NoError(t, err)
	err = st.WithTx(ctx, func(tx *store.Tx) error {
		_, err := st.In(tx).CreateGoal(ctx, store.CreateGoalParams{ID: "exists", Owners: []string{"ou_a"}, Meta: sys})
		require.ErrorIs(t, err, store.ErrConflict) // a failed statement, undone by its savepoint
		fresh, err := store.RecordLarkEvent(ctx, tx, "ev-1", "test")
		require.NoError(t, err, "the outer transaction is still usable")
		require.True(t, fresh)
		_, err = st.In(tx).CreateGoal(ctx, store.CreateGoalParams{ID: "second", Owners: []string{"ou_a"}, Meta: sys})
		return err
	})
	require.NoError(t, err)
	_, err = st.GetGoal(ctx, "second")
	require.NoError(t, err)
	fresh, err := store.RecordLarkEvent(ctx, st.DB(), "ev-1", "test")
	require.NoError(t, err)
	require.False(t, fresh, "a repeated event id is reported")
	_, err = store.RecordLarkEvent(ctx, st.DB(), "", "test")
	require.ErrorIs(t, err, store.ErrInvalid)
}

func TestOutboxInsertDedupesAndValidates(t *testing.T) {
	t.Parallel()
	st := storetest.New(t, store.Options{})
	ctx := t.Context()
	in := store.OutboxInsert{DedupeKey: "k1", Kind: "text", ReceiveID: "oc_1", Content: "hi", GoalID: "g"}
	id1, created, err := store.InsertOutbox(ctx, st.DB(), in)
	require.NoError(t, err)
	require.True(t, created)
	id2, created, err := store.InsertOutbox(ctx, st.DB(), in)
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, id1, id2)
	// Without a key every insert is a row; each gets its own Lark uuid (at most 50 chars).
	a, _, err := store.InsertOutbox(ctx, st.DB(), store.OutboxInsert{Kind: "text", ReceiveID: "oc_1", Content: "x"})
	require.NoError(t, err)
	b, _, err := store.InsertOutbox(ctx, st.DB(), store.OutboxInsert{Kind: "text", ReceiveID: "oc_1", Content: "x"})
	require.NoError(t, err)
	ra, err := store.GetOutbox(ctx, st.DB(), a)
	require.NoError(t, err)
	rb, err := store.GetOutbox(ctx, st.DB(), b)
	require.NoError(t, err)
	require.NotEqual(t, ra.UUID, rb.UUID)
	require.LessOrEqual(t, len(ra.UUID), 50)

	for field, bad := range map[string]store.OutboxInsert{
		"kind":           {Kind: "sms", ReceiveID: "oc_1", Content: "x"},
		"receive_id":     {Kind: "text", Content: "x"},
		"content":        {Kind: "text", ReceiveID: "oc_1"},
		"update_of":      {Kind: "card_update", ReceiveID: "oc_1", Content: "{}"},
		"target_message": {Kind: "reaction", ReceiveID: "oc_1", Content: "OK"},
	} {
		_, _, err := store.InsertOutbox(ctx, st.DB(), bad)
		var se *store.Error
		require.ErrorAs(t, err, &se, field)
		require.Equal(t, field, se.Field)
	}
	rows, err := store.ListOutboxAfter(ctx, st.DB(), 0, 0)
	require.NoError(t, err)
	require.Len(t, rows, 3, "bad input wrote nothing")

	require.NoError(t, st.MarkOutboxSent(ctx, id1, "om_sent"))
	got, err := store.GetOutboxByLarkMessage(ctx, st.DB(), "om_sent")
	require.NoError(t, err)
	require.Equal(t, id1, got.ID)
	require.Equal(t, "g", got.GoalID)
	_, err = store.GetOutboxByLarkMessage(ctx, st.DB(), "om_unknown")
	require.ErrorIs(t, err, store.ErrNotFound)
}

func TestBindingsAndChatSettings(t *testing.T) {
	t.Parallel()
	st := storetest.New(t, store.Options{})
	ctx := t.Context()
	for _, id := range []string{"a", "b"} {
		_, err := st.CreateGoal(ctx, store.CreateGoalParams{ID: id, Owners: []string{"ou_a"}, Meta: sys})
		require.NoError(t, err)
	}
	require.NoError(t, store.Bind(ctx, st.DB(), store.Binding{ChatID: "oc", GoalID: "a", CreatedBy: "ou_a"}))
	require.NoError(t, store.Bind(ctx, st.DB(), store.Binding{ChatID: "oc", GoalID: "a", AgentID: "x", CreatedBy: "ou_a"}))
	require.NoError(t, store.Bind(ctx, st.DB(), store.Binding{ChatID: "oc", ThreadRoot: "om_t", GoalID: "b", CreatedBy: "ou_a"}))
	bs, err := store.ListChatBindings(ctx, st.DB(), "oc")
	require.NoError(t, err)
	require.Len(t, bs, 2)
	require.Equal(t, "x", bs[0].AgentID, "binding again replaces the agent")
	gb, err := store.ListGoalBindings(ctx, st.DB(), "b")
	require.NoError(t, err)
	require.Len(t, gb, 1)
	require.Equal(t, "om_t", gb[0].ThreadRoot)
	removed, err := store.Unbind(ctx, st.DB(), "oc", "", "")
	require.NoError(t, err)
	require.Len(t, removed, 1, "only the whole-chat level")
	require.Error(t, store.Bind(ctx, st.DB(), store.Binding{ChatID: "oc", GoalID: "nope", CreatedBy: "ou_a"}))

	l, err := store.GetChatLang(ctx, st.DB(), "oc")
	require.NoError(t, err)
	require.Empty(t, l)
	require.NoError(t, store.SetChatLang(ctx, st.DB(), "oc", "zh", "ou_a"))
	l, err = store.GetChatLang(ctx, st.DB(), "oc")
	require.NoError(t, err)
	require.Equal(t, "zh", l)
	err = store.SetChatLang(ctx, st.DB(), "oc", "fr", "ou_a")
	var se *store.Error
	require.ErrorAs(t, err, &se)
	require.Equal(t, "lang", se.Field)
}
