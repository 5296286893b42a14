package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loopx/store"
	"loopx/store/storetest"
)

func insertOutbox(t *testing.T, s *store.Store, kind, chat, content string) int64 {
	t.Helper()
	var id int64
	err := s.DB().QueryRow(t.Context(), `
INSERT INTO outbox (uuid, kind, receive_id, content) VALUES (gen_random_uuid()::text, $1, $2, $3) RETURNING id`,
		kind, chat, content).Scan(&id)
	require.NoError(t, err)
	return id
}

func TestClaimOutboxKeepsChatOrderAcrossSenders(t *testing.T) {
	t.Parallel()
	s := storetest.New(t, store.Options{})
	ctx := t.Context()
	const perChat = 30
	for i := range perChat {
		for _, chat := range []string{"oc_a", "oc_b", "oc_c"} {
			insertOutbox(t, s, "text", chat, fmt.Sprintf("%s-%03d", chat, i))
		}
	}
	var mu sync.Mutex
	sent := map[string][]string{}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			owner := fmt.Sprintf("w%d", w)
			for {
				claims, err := s.ClaimOutbox(ctx, store.OutboxMessages, owner, 2, 30*time.Second)
				if !assertNoErr(t, err) {
					return
				}
				if len(claims) == 0 {
					st, err := s.ReadOutboxStats(ctx)
					if !assertNoErr(t, err) || st.Pending+st.Sending == 0 {
						return
					}
					time.Sleep(time.Millisecond)
					continue
				}
				seen := map[string]bool{}
				for _, c := range claims {
					if seen[c.ReceiveID] {
						t.Errorf("two rows of %s claimed at once", c.ReceiveID)
					}
					seen[c.ReceiveID] = true
					mu.Lock()
					sent[c.ReceiveID] = append(sent[c.ReceiveID], c.Content)
					mu.Unlock()
					if !assertNoErr(t, s.MarkOutboxSent(ctx, c.ID, "om_"+c.UUID)) {
						return
					}
				}
			}
		})
	}
	wg.Wait()
	for _, chat := range []string{"oc_a", "oc_b", "oc_c"} {
		require.Len(t, sent[chat], perChat, chat)
		for i, c := range sent[chat] {
			require.Equal(t, fmt.Sprintf("%s-%03d", chat, i), c, "chat %s out of order", chat)
		}
	}
}

func assertNoErr(t *testing.T, err error) bool {
	if err != nil {
		t.Error(err)
		return false
	}
	return true
}

func TestClaimOutboxBlocksChatBehindClaimedOrRescheduledHead(t *testing.T) {
	t.Parallel()
	s := storetest.New(t, store.Options{})
	ctx := t.Context()
	first := insertOutbox(t, s, "text", "oc_x", "one")
	insertOutbox(t, s, "text", "oc_x", "two")

	claims, err := s.ClaimOutbox(ctx, store.OutboxMessages, "a", 10, time.Minute)
	require.NoError(t, err)
	require.Len(t, claims, 1)
	require.Equal(t, first, claims[0].ID)

	again, err := s.ClaimOutbox(ctx, store.OutboxMessages, "b", 10, time.Minute)
	require.NoError(t, err)
	require.Empty(t, again, "the second row of a chat must wait for the first")

	// Only the holder may reschedule or fail the row.
	err = s.RescheduleOutbox(ctx, first, "b", 0, 0, "", true)
	require.ErrorIs(t, err, store.ErrConflict)
	require.NoError(t, s.RescheduleOutbox(ctx, first, "a", time.Hour, 99991400, "rate limited", false))

	again, err = s.ClaimOutbox(ctx, store.OutboxMessages, "b", 10, time.Minute)
	require.NoError(t, err)
	require.Empty(t, again, "a rescheduled head keeps its chat behind it")

	wait, ok, err := s.NextOutboxDue(ctx, store.OutboxMessages)
	require.NoError(t, err)
	require.True(t, ok)
	require.Greater(t, wait, 50*time.Minute)
}

// Receipt reactions are their own lane: a chat's held-back head never delays them, the
// message lane never returns them, and a lapsed reaction claim is taken again (reclaimed, so
// the sender looks before it adds).
func TestClaimOutboxReactionLane(t *testing.T) {
	t.Parallel()
	s := storetest.New(t, store.Options{})
	ctx := t.Context()
	head := insertOutbox(t, s, "text", "oc_l", "reply")
	var r1, r2 int64
	for _, r := range []*int64{&r1, &r2} {
		require.NoError(t, s.DB().QueryRow(ctx, `
INSERT INTO outbox (uuid, kind, receive_id, target_message, content) VALUES (gen_random_uuid()::text, 'reaction', 'oc_l', 'om_x', 'OK') RETURNING id`).Scan(r))
	}
	msgs, err := s.ClaimOutbox(ctx, store.OutboxMessages, "a", 10, time.Minute)
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	require.Equal(t, head, msgs[0].ID, "the message lane holds no reaction")
	require.NoError(t, s.RescheduleOutbox(ctx, head, "a", time.Hour, 99991400, "rate limited", false))

	wait, ok, err := s.NextOutboxDue(ctx, store.OutboxReactions)
	require.NoError(t, err)
	require.True(t, ok)
	require.Zero(t, wait, "both reactions are due now, whatever their chat's head waits for")
	got, err := s.ClaimOutbox(ctx, store.OutboxReactions, "a", 1, time.Millisecond)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, r1, got[0].ID, "due order")
	require.False(t, got[0].Reclaimed)
	time.Sleep(20 * time.Millisecond)
	got, err = s.ClaimOutbox(ctx, store.OutboxReactions, "b", 5, time.Minute)
	require.NoError(t, err)
	reclaimed := map[int64]bool{}
	for _, c := range got {
		reclaimed[c.ID] = c.Reclaimed
	}
	require.Equal(t, map[int64]bool{r1: true, r2: false}, reclaimed, "the lapsed claim is taken again, marked reclaimed")
	_, ok, err = s.NextOutboxDue(ctx, store.OutboxReactions)
	require.NoError(t, err)
	require.True(t, ok, "claimed rows are due again when their claim lapses")
	for _, id := range []int64{r1, r2} {
		require.NoError(t, s.MarkOutboxSent(ctx, id, ""))
	}
	_, ok, err = s.NextOutboxDue(ctx, store.OutboxReactions)
	require.NoError(t, err)
	require.False(t, ok)
	_, err = s.ClaimOutbox(ctx, store.OutboxLane(7), "b", 5, time.Minute)
	require.ErrorIs(t, err, store.ErrInvalid)
}

func TestClaimOutboxReclaimsExpiredLeaseAndRelease(t *testing.T) {
	t.Parallel()
	s := storetest.New(t, store.Options{})
	ctx := t.Context()
	id := insertOutbox(t, s, "text", "oc_y", "hello")

	claims, err := s.ClaimOutbox(ctx, store.OutboxMessages, "a", 1, time.Millisecond)
	require.NoError(t, err)
	require.Len(t, claims, 1)
	time.Sleep(20 * time.Millisecond)
	claims, err = s.ClaimOutbox(ctx, store.OutboxMessages, "b", 1, time.Minute)
	require.NoError(t, err)
	require.Len(t, claims, 1, "an expired claim is claimable again")
	require.Equal(t, id, claims[0].ID)

	n, err := s.ReleaseOutboxClaims(ctx, "b")
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	claims, err = s.ClaimOutbox(ctx, store.OutboxMessages, "c", 1, time.Minute)
	require.NoError(t, err)
	require.Len(t, claims, 1)
}

func TestMarkOutboxFailedIsVisible(t *testing.T) {
	t.Parallel()
	s := storetest.New(t, store.Options{})
	ctx := t.Context()
	id := insertOutbox(t, s, "text", "oc_z", "hi")
	insertOutbox(t, s, "text", "oc_other", "hi")
	claims, err := s.ClaimOutbox(ctx, store.OutboxMessages, "a", 5, time.Minute)
	require.NoError(t, err)
	require.Len(t, claims, 2)
	require.NoError(t, s.MarkOutboxFailed(ctx, id, "a", 230002, "bot is not in chat oc_z"))
	require.ErrorIs(t, s.MarkOutboxFailed(ctx, id, "a", 1, "x"), store.ErrConflict)

	fails, err := s.ListOutboxFailures(ctx, "oc_z", 10)
	require.NoError(t, err)
	require.Len(t, fails, 1)
	require.Equal(t, 230002, fails[0].Code)
	require.Contains(t, fails[0].Error, "not in chat")
	all, err := s.ListOutboxFailures(ctx, "", 10)
	require.NoError(t, err)
	require.Len(t, all, 1)

	counts, err := s.CountOutboxFailures(ctx)
	require.NoError(t, err)
	require.Equal(t, map[int]int64{230002: 1}, counts)

	st, err := s.ReadOutboxStats(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, st.Failed)
	require.EqualValues(t, 1, st.Sending)

	_, err = s.ListOutboxFailures(ctx, "", 0)
	var se *store.Error
	require.True(t, errors.As(err, &se))
	require.Equal(t, "limit", se.Field)
}

func TestClaimResolvesCardUpdateTarget(t *testing.T) {
	t.Parallel()
	s := storetest.New(t, store.Options{})
	ctx := t.Context()
	card := insertOutbox(t, s, "card", "oc_c", `{"schema":"2.0"}`)
	var upd int64
	require.NoError(t, s.DB().QueryRow(ctx, `
INSERT INTO outbox (uuid, kind, receive_id, content, update_of) VALUES ('u-upd', 'card_update', 'oc_c', '{}', $1) RETURNING id`,
		card).Scan(&upd))
	claims, err := s.ClaimOutbox(ctx, store.OutboxMessages, "a", 5, time.Minute)
	require.NoError(t, err)
	require.Len(t, claims, 1)
	require.NoError(t, s.MarkOutboxSent(ctx, card, "om_card"))
	claims, err = s.ClaimOutbox(ctx, store.OutboxMessages, "a", 5, time.Minute)
	require.NoError(t, err)
	require.Len(t, claims, 1)
	require.Equal(t, upd, claims[0].ID)
	require.Equal(t, "om_card", claims[0].TargetMessage)
}

// Concurrent takers each book their own slot: the booked send times are spaced by the chat's
// interval, every booking is one call, and a taker that may not wait is told when instead.
func TestTakeSendSlotBooksSpacedSlotsAcrossCallers(t *testing.T) {
	t.Parallel()
	s := storetest.New(t, store.Options{})
	ctx := t.Context()
	// Booking needs no waiting, so the interval can be long: each booked time below is read on
	// this side after the answer arrived, and a busy machine delays that reading by up to
	// seconds (lock waits, scheduling); a 10 s interval keeps "never two in one interval"
	// checkable with that much room.
	const interval = 10 * time.Second
	const slack = 4 * time.Second
	scopes := []store.RateScope{
		{Scope: "chat:oc_r", Interval: interval, Burst: 1},
		{Scope: "app", Interval: time.Millisecond, Burst: 10},
	}
	var mu sync.Mutex
	var booked []time.Time
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 5 {
				wait, reserved, err := s.TakeSendSlot(ctx, scopes, time.Hour)
				if !assertNoErr(t, err) {
					return
				}
				if !reserved {
					t.Errorf("a slot %s away, within maxWait, was not booked", wait)
				}
				mu.Lock()
				booked = append(booked, time.Now().Add(wait))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Len(t, booked, 20)
	slices.SortFunc(booked, time.Time.Compare)
	// The wait is measured on the database clock and read here after the answer arrived (and
	// the goroutine ran again), so a booking may look a little late; never two in one interval.
	for i := 1; i < len(booked); i++ {
		require.Greater(t, booked[i].Sub(booked[i-1]), interval-slack, "bookings %d and %d", i-1, i)
	}
	require.Greater(t, booked[19].Sub(booked[0]), 19*interval-slack)

	// The chat is booked ~200 s ahead: a taker that may wait only 10 ms books nothing.
	wait, reserved, err := s.TakeSendSlot(ctx, scopes, 10*time.Millisecond)
	require.NoError(t, err)
	require.False(t, reserved)
	require.Greater(t, wait, 15*interval)

	_, _, err = s.TakeSendSlot(ctx, []store.RateScope{{Scope: "", Interval: time.Second, Burst: 1}}, 0)
	require.ErrorIs(t, err, store.ErrInvalid)
	_, _, err = s.TakeSendSlot(ctx, nil, 0)
	require.ErrorIs(t, err, store.ErrInvalid)
	_, _, err = s.TakeSendSlot(ctx, []store.RateScope{scopes[0], scopes[0]}, 0)
	require.ErrorIs(t, err, store.ErrInvalid)
}

func TestTakeSendSlotReservesNothingWhenOneScopeIsFull(t *testing.T) {
	t.Parallel()
	s := storetest.New(t, store.Options{})
	ctx := t.Context()
	app := store.RateScope{Scope: "app", Interval: time.Hour, Burst: 1}
	wait, reserved, err := s.TakeSendSlot(ctx, []store.RateScope{app}, 0)
	require.NoError(t, err)
	require.True(t, reserved)
	require.Zero(t, wait)
	chat := store.RateScope{Scope: "chat:oc_q", Interval: time.Hour, Burst: 1}
	wait, reserved, err = s.TakeSendSlot(ctx, []store.RateScope{chat, app}, time.Minute)
	require.NoError(t, err)
	require.False(t, reserved)
	require.Greater(t, wait, 50*time.Minute)
	// The chat's slot was not booked while the app's scope was full.
	wait, reserved, err = s.TakeSendSlot(ctx, []store.RateScope{chat}, 0)
	require.NoError(t, err)
	require.True(t, reserved)
	require.Zero(t, wait)
}

func TestListenOutboxWakesOnInsert(t *testing.T) {
	t.Parallel()
	s := storetest.New(t, store.Options{})
	ctx := t.Context()
	woken := make(chan string, 16)
	done := make(chan error, 1)
	lctx, cancel := context.WithCancel(ctx)
	go func() { done <- s.Listen(lctx, store.OutboxNotifyChannel, func(p string) { woken <- p }) }()
	require.Empty(t, <-woken, "the initial wake after LISTEN concerns every lane")
	wait := func() string {
		select {
		case p := <-woken:
			return p
		case <-time.After(30 * time.Second):
			t.Fatal("no notification after an outbox insert")
			return ""
		}
	}
	start := time.Now()
	insertOutbox(t, s, "text", "oc_l", "ping")
	require.Equal(t, "messages", wait(), "the notification names the lane")
	// Promptness is the point of a notification; the bound has room for a busy machine (on a
	// quiet one it takes milliseconds).
	require.Less(t, time.Since(start), 5*time.Second)
	_, err := s.DB().Exec(ctx, `INSERT INTO outbox (uuid, kind, receive_id, target_message, content) VALUES ('r-l', 'reaction', 'oc_l', 'om_l', 'OK')`)
	require.NoError(t, err)
	require.Equal(t, "reactions", wait())
	// A statement writing both kinds wakes both lanes.
	_, err = s.DB().Exec(ctx, `INSERT INTO outbox (uuid, kind, receive_id, target_message, content)
VALUES ('r-2', 'reaction', 'oc_l', 'om_l', 'OK'), ('t-2', 'text', 'oc_l', '', 'hi')`)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"messages", "reactions"}, []string{wait(), wait()})
	cancel()
	require.NoError(t, <-done)
}
