package store

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// RateScope is one limit a send must fit: at most one send per Interval on average, with bursts
// of up to Burst sends.
type RateScope struct {
	Scope    string // "app", "chat:<id>"
	Interval time.Duration
	Burst    int
}

// TakeSendSlot books one send in every scope at once (generic cell rate algorithm over the
// send_rate table, on the database clock, so all replicas share the budget): the earliest time
// that fits every scope, wait from now. When wait is at most maxWait the slot is reserved and the
// caller sends after waiting (reserved = true); otherwise nothing is booked and wait says when
// to come back. One call, one round trip: the caller never polls for its slot.
func (s *Store) TakeSendSlot(ctx context.Context, scopes []RateScope, maxWait time.Duration) (wait time.Duration, reserved bool, err error) {
	if len(scopes) == 0 {
		return 0, false, Errorf(ErrInvalid, "scope", "at least one rate scope is required")
	}
	names, intervals, taus := make([]string, len(scopes)), make([]int64, len(scopes)), make([]int64, len(scopes))
	for i, sc := range scopes {
		if sc.Scope == "" || sc.Interval <= 0 || sc.Burst < 1 {
			return 0, false, Errorf(ErrInvalid, "scope", "rate scope %q needs a name, a positive interval and a burst of at least 1", sc.Scope)
		}
		if slices.Contains(names[:i], sc.Scope) {
			return 0, false, Errorf(ErrInvalid, "scope", "rate scope %q is given twice; one booking covers each scope once", sc.Scope)
		}
		names[i], intervals[i], taus[i] = sc.Scope, sc.Interval.Microseconds(), (sc.Interval * time.Duration(sc.Burst-1)).Microseconds()
	}
	var waitUS int64
	err = s.DB().QueryRow(ctx, `SELECT wait_us, reserved FROM loopx_take_send_slot($1, $2, $3, $4)`,
		names, intervals, taus, max(maxWait, 0).Microseconds()).Scan(&waitUS, &reserved)
	if err != nil {
		return 0, false, fmt.Errorf("take send slot: %w", mapErr(err))
	}
	return time.Duration(waitUS) * time.Microsecond, reserved, nil
}

// PruneSendRates drops the rate state of scopes idle for an hour: a scope's state only
// matters while its theoretical arrival time is ahead of now.
func (s *Store) PruneSendRates(ctx context.Context) (int64, error) {
	tag, err := s.DB().Exec(ctx, `DELETE FROM send_rate WHERE tat < now() - interval '1 hour'`)
	if err != nil {
		return 0, fmt.Errorf("prune send rates: %w", mapErr(err))
	}
	return tag.RowsAffected(), nil
}
