package quota

import (
	"context"
	"errors"
	"time"

	"loopx/store"
)

// Service answers should-run against the store and records each answer.
type Service struct {
	st         *store.Store
	now        func() time.Time
	gateNotice func(store.Gate) ([]store.OutboxInsert, error)
}

// Options configures a Service.
type Options struct {
	// Now is the clock; nil means the store's clock.
	Now func() time.Time
	// GateNotice renders the outbox rows announcing a stall gate (the gate card). Nil: the
	// gate is opened without a notice.
	GateNotice func(store.Gate) ([]store.OutboxInsert, error)
}

// NewService returns a Service over st.
func NewService(st *store.Store, opts Options) *Service {
	now := opts.Now
	if now == nil {
		now = st.Now
	}
	return &Service{st: st, now: now, gateNotice: opts.GateNotice}
}

// Decide is the pure should-run decision over a snapshot, with the hint progression.
func Decide(in Input, now time.Time) Decision { return Decision{} }

// ShouldRun reads the snapshot in one statement, decides, and records the decision (a
// tick_decision ledger row, the hint progression, a stall gate or a turn when due) in one
// transaction.
func (s *Service) ShouldRun(ctx context.Context, p ShouldRunParams) (Decision, error) {
	return Decision{}, errors.New("not implemented yet")
}
