package store_test

import (
	"context"
	"errors"
	"fmt"
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
	err := s.Pool().QueryRow(t.Context(), `
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
				claims, err := s.ClaimOutbox(ctx, owner, 2, 30*time.Second)
				if !assertNoErr(t, err) {
					return
				}
				if len(claims) == 0 {
					st, err := s.OutboxStats(ctx)
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

	claims, err := s.ClaimOutbox(ctx, "a", 10, time.Minute)
	require.NoError(t, err)
	require.Len(t, claims, 1)
	require.Equal(t, first, claims[0].ID)

	again, err := s.ClaimOutbox(ctx, "b", 10, time.Minute)
	require.NoError(t, err)
	require.Empty(t, again, "the second row of a chat must wait for the first")

	// Only the holder may reschedule or fail the row.
	err = s.RescheduleOutbox(ctx, first, "b", 0, 0, "", true)
	require.ErrorIs(t, err, store.ErrConflict)
	require.NoError(t, s.RescheduleOutbox(ctx, first, "a", time.Hour, 99991400, "rate limited", false))

	again, err = s.ClaimOutbox(ctx, "b", 10, time.Minute)
	require.NoError(t, err)
	require.Empty(t, again, "a rescheduled head keeps its chat behind it")

	wait, ok, err := s.NextOutboxDue(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	require.Greater(t, wait, 50*time.Minute)
}

func TestClaimOutboxReclaimsExpiredLeaseAndRelease(t *testing.T) {
	t.Parallel()
	s := storetest.New(t, store.Options{})
	ctx := t.Context()
	id := insertOutbox(t, s, "text", "oc_y", "hello")

	claims, err := s.ClaimOutbox(ctx, "a", 1, time.Millisecond)
	require.NoError(t, err)
	require.Len(t, claims, 1)
	time.Sleep(20 * time.Millisecond)
	claims, err = s.ClaimOutbox(ctx, "b", 1, time.Minute)
	require.NoError(t, err)
	require.Len(t, claims, 1, "an expired claim is claimable again")
	require.Equal(t, id, claims[0].ID)

	n, err := s.ReleaseOutboxClaims(ctx, "b")
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	claims, err = s.ClaimOutbox(ctx, "c", 1, time.Minute)
	require.NoError(t, err)
	require.Len(t, claims, 1)
}

func TestMarkOutboxFailedIsVisible(t *testing.T) {
	t.Parallel()
	s := storetest.New(t, store.Options{})
	ctx := t.Context()
	id := insertOutbox(t, s, "text", "oc_z", "hi")
	insertOutbox(t, s, "text", "oc_other", "hi")
	claims, err := s.ClaimOutbox(ctx, "a", 5, time.Minute)
	require.NoError(t, err)
	require.Len(t, claims, 2)
	require.NoError(t, s.MarkOutboxFailed(ctx, id, "a", 230002, "bot is not in chat oc_z"))
	require.ErrorIs(t, s.MarkOutboxFailed(ctx, id, "a", 1, "x"), store.ErrConflict)

	fails, err := s.OutboxFailures(ctx, "oc_z", 10)
	require.NoError(t, err)
	require.Len(t, fails, 1)
	require.Equal(t, 230002, fails[0].Code)
	require.Contains(t, fails[0].Error, "not in chat")
	all, err := s.OutboxFailures(ctx, "", 10)
	require.NoError(t, err)
	require.Len(t, all, 1)

	counts, err := s.OutboxFailureCounts(ctx)
	require.NoError(t, err)
	require.Equal(t, map[int]int64{230002: 1}, counts)

	st, err := s.OutboxStats(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, st.Failed)
	require.EqualValues(t, 1, st.Sending)

	_, err = s.OutboxFailures(ctx, "", 0)
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
	require.NoError(t, s.Pool().QueryRow(ctx, `
INSERT INTO outbox (uuid, kind, receive_id, content, update_of) VALUES ('u-upd', 'card_update', 'oc_c', '{}', $1) RETURNING id`,
		card).Scan(&upd))
	claims, err := s.ClaimOutbox(ctx, "a", 5, time.Minute)
	require.NoError(t, err)
	require.Len(t, claims, 1)
	require.NoError(t, s.MarkOutboxSent(ctx, card, "om_card"))
	claims, err = s.ClaimOutbox(ctx, "a", 5, time.Minute)
	require.NoError(t, err)
	require.Len(t, claims, 1)
	require.Equal(t, upd, claims[0].ID)
	require.Equal(t, "om_card", claims[0].TargetMessage)
}

func TestTakeSendSlotHoldsRateAcrossCallers(t *testing.T) {
	t.Parallel()
	s := storetest.New(t, store.Options{})
	ctx := t.Context()
	scopes := []store.RateScope{
		{Scope: "chat:oc_r", Interval: 50 * time.Millisecond, Burst: 1},
		{Scope: "app", Interval: time.Millisecond, Burst: 10},
	}
	var mu sync.Mutex
	var granted []time.Time
	var wg sync.WaitGroup
	deadline := time.Now().Add(500 * time.Millisecond)
	for range 4 {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				wait, err := s.TakeSendSlot(ctx, scopes)
				if !assertNoErr(t, err) {
					return
				}
				if wait > 0 {
					time.Sleep(min(wait, 10*time.Millisecond))
					continue
				}
				mu.Lock()
				granted = append(granted, time.Now())
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	// 500 ms at one per 50 ms: about 10 grants, never two closer than the interval allows.
	require.GreaterOrEqual(t, len(granted), 8)
	require.LessOrEqual(t, len(granted), 11)

	_, err := s.TakeSendSlot(ctx, []store.RateScope{{Scope: "", Interval: time.Second, Burst: 1}})
	require.ErrorIs(t, err, store.ErrInvalid)
}

func TestTakeSendSlotReservesNothingWhenOneScopeIsFull(t *testing.T) {
	t.Parallel()
	s := storetest.New(t, store.Options{})
	ctx := t.Context()
	app := store.RateScope{Scope: "app", Interval: time.Hour, Burst: 1}
	wait, err := s.TakeSendSlot(ctx, []store.RateScope{app})
	require.NoError(t, err)
	require.Zero(t, wait)
	chat := store.RateScope{Scope: "chat:oc_q", Interval: time.Hour, Burst: 1}
	wait, err = s.TakeSendSlot(ctx, []store.RateScope{chat, app})
	require.NoError(t, err)
	require.Greater(t, wait, 50*time.Minute)
	// The chat slot taken before the app scope refused was rolled back.
	wait, err = s.TakeSendSlot(ctx, []store.RateScope{chat})
	require.NoError(t, err)
	require.Zero(t, wait)
}

func TestListenOutboxWakesOnInsert(t *testing.T) {
	t.Parallel()
	s := storetest.New(t, store.Options{})
	ctx := t.Context()
	woken := make(chan struct{}, 16)
	done := make(chan error, 1)
	lctx, cancel := context.WithCancel(ctx)
	go func() { done <- s.ListenOutbox(lctx, func() { woken <- struct{}{} }) }()
	<-woken // the initial wake after LISTEN
	start := time.Now()
	insertOutbox(t, s, "text", "oc_l", "ping")
	select {
	case <-woken:
		require.Less(t, time.Since(start), time.Second)
	case <-time.After(5 * time.Second):
		t.Fatal("no notification after an outbox insert")
	}
	cancel()
	require.NoError(t, <-done)
}

func TestPruneLarkEvents(t *testing.T) {
	t.Parallel()
	s := storetest.New(t, store.Options{})
	ctx := t.Context()
	_, err := s.Pool().Exec(ctx, `
INSERT INTO lark_event (event_id, event_type, received_at) VALUES
 ('old', 'im.message.receive_v1', now() - interval '8 days'),
 ('new', 'im.message.receive_v1', now() - interval '1 day')`)
	require.NoError(t, err)
	n, err := s.PruneLarkEvents(ctx, 7*24*time.Hour)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	var left []string
	rows, err := s.Pool().Query(ctx, `SELECT event_id FROM lark_event`)
	require.NoError(t, err)
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		left = append(left, id)
	}
	require.Equal(t, []string{"new"}, left)
	_, err = s.PruneLarkEvents(ctx, time.Minute)
	require.ErrorIs(t, err, store.ErrInvalid)
}
