package inbox_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loopx/inbox"
	"loopx/store"
	"loopx/store/storetest"
)

type testBundle struct {
	st    *store.Store
	ib    *inbox.Inbox
	clock *storetest.Clock
	agent inbox.Agent
}

func setup(t *testing.T, opts inbox.Options) testBundle {
	t.Helper()
	clk := storetest.NewClock(time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC))
	st := storetest.New(t, store.Options{Now: clk.Now})
	meta := store.Meta{Actor: "admin", Surface: "system"}
	_, err := st.CreateGoal(t.Context(), store.CreateGoalParams{ID: "docs", Owners: []string{"ou_owner"}, Meta: meta})
	require.NoError(t, err)
	for _, a := range []string{"codex", "claude"} {
		_, err = st.RegisterAgent(t.Context(), store.RegisterAgentParams{GoalID: "docs", AgentID: a, Meta: meta})
		require.NoError(t, err)
	}
	opts.Now = clk.Now
	ib, err := inbox.New(st, opts)
	require.NoError(t, err)
	return testBundle{st: st, ib: ib, clock: clk, agent: inbox.Agent{GoalID: "docs", AgentID: "codex"}}
}

func (f testBundle) enqueue(t *testing.T, mode, text, source string) store.InboxItem {
	t.Helper()
	var it store.InboxItem
	ctx := t.Context()
	err := f.st.WithTx(ctx, func(tx *store.Tx) error {
		var err error
		it, _, err = f.ib.Enqueue(t.Context(), tx, store.InboxInsert{
			GoalID: "docs", AgentID: "codex", Mode: mode, Text: text, Sender: "ou_member",
			SourceChat: "oc_chat", SourceMessage: source, SourceThread: "om_root",
		})
		return err
	})
	require.NoError(t, err)
	return it
}

func itemIDs(items []store.InboxItem) []int64 {
	out := make([]int64, len(items))
	for i, it := range items {
		out[i] = it.ID
	}
	return out
}

func TestDrainOrderSteerFirstThenOldest(t *testing.T) {
	t.Parallel()
	f := setup(t, inbox.Options{})
	a := f.enqueue(t, store.ModeInbox, "first", "om_1")
	b := f.enqueue(t, store.ModeQueue, "second", "om_2")
	c := f.enqueue(t, store.ModeSteer, "steer me", "om_3")
	d := f.enqueue(t, store.ModeInbox, "fourth", "om_4")

	counts, err := f.ib.Counts(t.Context(), f.agent)
	require.NoError(t, err)
	require.Equal(t, store.InboxCounts{Pending: 4, Steer: 1}, counts)

	got, err := f.ib.Drain(t.Context(), f.agent, inbox.DrainParams{Limit: 3})
	require.NoError(t, err)
	require.Equal(t, []int64{c.ID, a.ID, b.ID}, itemIDs(got))
	for _, it := range got {
		require.Equal(t, store.InboxDelivered, it.State)
		require.Equal(t, 1, it.Deliveries)
	}
	got, err = f.ib.Drain(t.Context(), f.agent, inbox.DrainParams{Limit: 10})
	require.NoError(t, err)
	require.Equal(t, []int64{d.ID}, itemIDs(got))
	got, err = f.ib.Drain(t.Context(), f.agent, inbox.DrainParams{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, got)

	// The other agent's inbox is separate.
	other, err := f.ib.Drain(t.Context(), inbox.Agent{GoalID: "docs", AgentID: "claude"}, inbox.DrainParams{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, other)
}

func TestRedeliveryAfterAckTimeout(t *testing.T) {
	t.Parallel()
	f := setup(t, inbox.Options{AckTimeout: 10 * time.Minute})
	a := f.enqueue(t, store.ModeInbox, "do the thing", "om_1")
	b := f.enqueue(t, store.ModeInbox, "and this", "om_2")

	got, err := f.ib.Drain(t.Context(), f.agent, inbox.DrainParams{Limit: 10})
	require.NoError(t, err)
	require.Len(t, got, 2)
	_, err = f.ib.Ack(t.Context(), f.agent, []int64{b.ID}, "")
	require.NoError(t, err)

	f.clock.Add(9 * time.Minute)
	got, err = f.ib.Drain(t.Context(), f.agent, inbox.DrainParams{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, got, "not yet timed out")
	counts, err := f.ib.Counts(t.Context(), f.agent)
	require.NoError(t, err)
	require.Equal(t, store.InboxCounts{Pending: 0, Delivered: 1}, counts)

	f.clock.Add(2 * time.Minute) // the agent crashed: a is unacked past its timeout
	counts, err = f.ib.Counts(t.Context(), f.agent)
	require.NoError(t, err)
	require.Equal(t, 1, counts.Pending, "a timed-out delivery counts as pending for should-run")
	got, err = f.ib.Drain(t.Context(), f.agent, inbox.DrainParams{Limit: 10})
	require.NoError(t, err)
	require.Equal(t, []int64{a.ID}, itemIDs(got))
	require.Equal(t, 2, got[0].Deliveries)

	acked, err := f.ib.Ack(t.Context(), f.agent, []int64{a.ID}, "")
	require.NoError(t, err)
	require.Equal(t, store.InboxAcked, acked[0].State)
	// Acking again is a no-op, not an error.
	_, err = f.ib.Ack(t.Context(), f.agent, []int64{a.ID}, "")
	require.NoError(t, err)

	f.clock.Add(time.Hour)
	got, err = f.ib.Drain(t.Context(), f.agent, inbox.DrainParams{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, got, "acked items never come back")

	// Another agent cannot ack items that are not in its inbox.
	_, err = f.ib.Ack(t.Context(), inbox.Agent{GoalID: "docs", AgentID: "claude"}, []int64{a.ID}, "")
	require.ErrorIs(t, err, store.ErrNotFound)
}

func TestRequeueSweepsEveryAgent(t *testing.T) {
	t.Parallel()
	f := setup(t, inbox.Options{AckTimeout: time.Minute})
	a := f.enqueue(t, store.ModeInbox, "x", "om_1")
	_, err := f.ib.Drain(t.Context(), f.agent, inbox.DrainParams{Limit: 10})
	require.NoError(t, err)
	f.clock.Add(2 * time.Minute)
	require.NoError(t, f.ib.Requeue(t.Context()))
	it, err := store.GetInboxItem(t.Context(), f.st.DB(), a.ID)
	require.NoError(t, err)
	require.Equal(t, store.InboxPending, it.State)
}

func TestBounds(t *testing.T) {
	t.Parallel()
	f := setup(t, inbox.Options{MaxPending: 2})
	f.enqueue(t, store.ModeInbox, strings.Repeat("字", 12000), "om_1") // exactly at the limit, in characters
	f.enqueue(t, store.ModeInbox, "two", "om_2")

	err := f.st.WithTx(t.Context(), func(tx *store.Tx) error {
		_, _, err := f.ib.Enqueue(t.Context(), tx, store.InboxInsert{GoalID: "docs", AgentID: "codex", Text: "three", Sender: "ou_m", SourceMessage: "om_3"})
		return err
	})
	require.ErrorIs(t, err, store.ErrFull)
	require.ErrorContains(t, err, "limit 2")

	err = f.ib.CheckText(strings.Repeat("a", 12001))
	require.ErrorIs(t, err, store.ErrInvalid)
	var se *store.Error
	require.ErrorAs(t, err, &se)
	require.Equal(t, "text", se.Field)

	items, err := store.ListInbox(t.Context(), f.st.DB(), "docs", "codex")
	require.NoError(t, err)
	require.Len(t, items, 2, "the refused message wrote nothing")

	// The same source message again is the same item, not a third one (and not "full").
	again := f.enqueue(t, store.ModeInbox, "two", "om_2")
	require.Equal(t, items[1].ID, again.ID)
}

func TestReplyLandsInSourceThreadOnce(t *testing.T) {
	t.Parallel()
	f := setup(t, inbox.Options{})
	it := f.enqueue(t, store.ModeInbox, "what is the status?", "om_question")

	r1, err := f.ib.Reply(t.Context(), f.agent, inbox.ReplyParams{ItemID: it.ID, Text: "all green"})
	require.NoError(t, err)
	require.True(t, r1.Created)
	r2, err := f.ib.Reply(t.Context(), f.agent, inbox.ReplyParams{ItemID: it.ID, Text: "all green"})
	require.NoError(t, err)
	require.False(t, r2.Created)
	require.Equal(t, r1.OutboxID, r2.OutboxID)

	rows, err := store.ListOutboxAfter(t.Context(), f.st.DB(), 0, 0)
	require.NoError(t, err)
	require.Len(t, rows, 1, "the same reply twice is one outbox row")
	row := rows[0]
	require.Equal(t, "text", row.Kind)
	require.Equal(t, "oc_chat", row.ReceiveID)
	require.Equal(t, "om_question", row.ReplyTo)
	require.True(t, row.ReplyInThread)
	require.Equal(t, "all green", row.Content)
	require.Equal(t, "docs", row.GoalID)
	require.Equal(t, "codex", row.AgentID)

	// An explicit key used again with another text is a conflict, not a second message.
	_, err = f.ib.Reply(t.Context(), f.agent, inbox.ReplyParams{ItemID: it.ID, Key: "k1", Text: "one"})
	require.NoError(t, err)
	_, err = f.ib.Reply(t.Context(), f.agent, inbox.ReplyParams{ItemID: it.ID, Key: "k1", Text: "two"})
	require.ErrorIs(t, err, store.ErrConflict)

	// Another agent may not answer this agent's item.
	_, err = f.ib.Reply(t.Context(), inbox.Agent{GoalID: "docs", AgentID: "claude"}, inbox.ReplyParams{ItemID: it.ID, Text: "me too"})
	require.ErrorIs(t, err, store.ErrNotFound)
	rows, err = store.ListOutboxAfter(t.Context(), f.st.DB(), 0, 0)
	require.NoError(t, err)
	require.Len(t, rows, 2)
}

// A steer is for one live turn: when that turn ends before the agent read it, it expires and
// the sender is told in the message's thread; it is never handed to a later turn.
func TestSteerExpiresWithItsTurn(t *testing.T) {
	t.Parallel()
	f := setup(t, inbox.Options{})
	ctx := t.Context()
	meta := store.Meta{Actor: "admin", Surface: "system"}
	turn, err := f.st.OpenTurn(ctx, store.OpenTurnParams{GoalID: "docs", AgentID: "codex", InstanceID: "t1", Lease: time.Hour, Meta: meta})
	require.NoError(t, err)
	var steer store.InboxItem
	err = f.st.WithTx(ctx, func(tx *store.Tx) error {
		steer, _, err = f.ib.Enqueue(t.Context(), tx, store.InboxInsert{
			GoalID: "docs", AgentID: "codex", Mode: store.ModeSteer, Text: "stop", Sender: "ou_member",
			SourceChat: "oc_chat", SourceMessage: "om_steer", SourceThread: "om_root", TurnID: turn.ID,
		})
		return err
	})
	require.NoError(t, err)
	queued := f.enqueue(t, store.ModeQueue, "later", "om_q")
	_, err = f.st.EndTurn(ctx, store.EndTurnParams{GoalID: "docs", AgentID: "codex", InstanceID: "t1", State: store.TurnOK, Meta: meta})
	require.NoError(t, err)

	got, err := f.ib.Drain(ctx, f.agent, inbox.DrainParams{Limit: 10})
	require.NoError(t, err)
	require.Equal(t, []int64{queued.ID}, itemIDs(got), "the stale steer is not handed to the next turn")
	it, err := store.GetInboxItem(ctx, f.st.DB(), steer.ID)
	require.NoError(t, err)
	require.Equal(t, store.InboxExpired, it.State)
	rows, err := store.ListOutboxAfter(ctx, f.st.DB(), 0, 0)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.Equal(t, "om_steer", rows[0].ReplyTo)
	require.True(t, rows[0].ReplyInThread)
	require.Contains(t, rows[0].Content, "/queue #docs/codex")

	require.NoError(t, f.ib.Requeue(ctx))
	rows, err = store.ListOutboxAfter(ctx, f.st.DB(), 0, 0)
	require.NoError(t, err)
	require.Len(t, rows, 1, "told once")
}
