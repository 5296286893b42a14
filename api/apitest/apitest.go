// Package apitest builds the real HTTP API over a test's store, wired as `loopx serve` wires
// it (one template set, one card set, one change kernel, one inbox, one should-run service),
// for the tests of the API and of its clients (MCP, the CLI).
package apitest

import (
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"loopx/api"
	"loopx/cards"
	"loopx/change"
	"loopx/inbox"
	"loopx/quota"
	"loopx/store"
	"loopx/templates"
)

// Options are what a test may set; the rest is built as serve builds it.
type Options struct {
	AdminToken string // required
	Logger     *slog.Logger
	// Quota overrides the should-run service (nil: one over the store, announcing stall
	// gates with the gate cards).
	Quota *quota.Service
}

// Kit is the API and the parts it was built from.
type Kit struct {
	API       *api.Server
	Templates *templates.Set
	Cards     *cards.Set
	Changes   *change.Kernel
	Inbox     *inbox.Inbox
	Quota     *quota.Service
}

// New builds the API over st.
func New(t testing.TB, st *store.Store, opts Options) *Kit {
	t.Helper()
	tpl, err := templates.New()
	require.NoError(t, err)
	ib, err := inbox.New(st, inbox.Options{Templates: tpl})
	require.NoError(t, err)
	cs := cards.New(tpl, templates.DefaultLang)
	k, err := change.New(st, change.Options{Templates: tpl, Cards: cs.Proposals.Update})
	require.NoError(t, err)
	q := opts.Quota
	if q == nil {
		q = quota.NewService(st, tpl, quota.Options{GateNotice: cs.Gates.Ask})
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s, err := api.New(api.Options{
		Store: st, Quota: q, AdminToken: opts.AdminToken, Logger: logger, Registry: prometheus.NewRegistry(),
		Inbox: ib, Cards: cs, Templates: tpl, Changes: k,
	})
	require.NoError(t, err)
	return &Kit{API: s, Templates: tpl, Cards: cs, Changes: k, Inbox: ib, Quota: q}
}
