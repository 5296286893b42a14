package bot_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"loopx/bot"
	"loopx/bot/sandbox"
	"loopx/cards"
	"loopx/change"
	"loopx/inbox"
	"loopx/router"
	"loopx/server/larkstore"
	"loopx/store"
	"loopx/store/storetest"
	"loopx/templates"
)

// testRouter stands in for router.Chat with the same contract, over the real database: the
// event id is recorded in lark_event in the transaction of the effect, a duplicate is a no-op
// returning nil, and an error commits nothing. A message's effect is an unrouted row plus an
// outbox reply; a card click approves a gate when an owner clicks.
type testRouter struct {
	st       *store.Store
	failNext atomic.Int32 // fail this many calls before doing anything
	calls    atomic.Int32
}

func (r *testRouter) HandleMessage(ctx context.Context, m router.Message) error {
	r.calls.Add(1)
	if r.failNext.Load() > 0 {
		r.failNext.Add(-1)
		return errors.New("injected router failure")
	}
	return r.st.WithTx(ctx, func(tx *store.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO lark_event (event_id, event_type) VALUES ($1, 'im.message.receive_v1') ON CONFLICT DO NOTHING`, m.EventID)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO unrouted (chat_id, message_id, sender, text, reason) VALUES ($1, $2, $3, $4, 'test')`,
			m.ChatID, m.MessageID, m.SenderID, m.Text); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO outbox (uuid, kind, receive_id, reply_to, content) VALUES ($1, 'text', $2, $3, $4)`,
			"reply-"+m.MessageID, m.ChatID, m.MessageID, "got: "+m.Text)
		return err
	})
}

func (r *testRouter) HandleCardAction(ctx context.Context, a router.CardAction) (router.CardResult, error) {
	r.calls.Add(1)
	var res router.CardResult
	err := r.st.WithTx(ctx, func(tx *store.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO lark_event (event_id, event_type) VALUES ($1, 'card.action.trigger') ON CONFLICT DO NOTHING`, a.EventID)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			res = router.CardResult{ToastKind: "info", Toast: "already handled"}
			return nil
		}
		gateID := fmt.Sprint(a.Value["gate"])
		var owners []string
		var status string
		if err := tx.QueryRow(ctx, `SELECT g.owners, gt.status FROM gate gt JOIN goal g ON g.id = gt.goal_id WHERE gt.id = $1::bigint`, gateID).Scan(&owners, &status); err != nil {
			return err
		}
		if !slices.Contains(owners, a.OperatorID) {
			_, err := tx.Exec(ctx, `INSERT INTO audit (actor, surface, action, target, allowed) VALUES ($1, 'card', 'gate.approve', $2, false)`, a.OperatorID, gateID)
			res = router.CardResult{ToastKind: "error", Toast: "Only an owner of this goal can answer this gate."}
			return err
		}
		if status != "open" {
			res = router.CardResult{ToastKind: "warning", Toast: "This gate is already " + status + "."}
			return nil
		}
		if _, err := tx.Exec(ctx, `UPDATE gate SET status = 'approved', answered_by = $2, answered_at = now() WHERE id = $1::bigint`, gateID, a.OperatorID); err != nil {
			return err
		}
		card, _ := json.Marshal(map[string]any{"schema": "2.0", "config": map[string]any{"update_multi": true},
			"body": map[string]any{"elements": []any{map[string]any{"tag": "markdown", "content": "Approved by " + a.OperatorID}}}})
		res = router.CardResult{ToastKind: "success", Toast: "Approved", Card: card}
		return nil
	})
	return res, err
}

const (
	testToken = "vt-test-token"
	testKey   = "ek-test-key"
	owner     = "ou_owner"
	stranger  = "ou_stranger"
)

type testBundle struct {
	t      *testing.T
	sb     *sandbox.Sandbox
	st     *store.Store
	rt     *testRouter
	h      bot.EventHandler // what intakes feed: rt, or the real router
	cfg    bot.Config
	intake *bot.Intake
	srvURL string
	// reg holds metrics, the series every intake of the env (and the real router's
	// OnDuplicate) counts into.
	reg     *prometheus.Registry
	metrics *bot.Metrics
}

type bundleOpts struct {
	transport string
	// realRouter feeds intakes to router.Chat instead of the test stand-in.
	realRouter bool
	noKey      bool // HTTP callbacks without an encrypt key (token only)
	sandbox    sandbox.Options
	store      store.Options // the store's options (a small file cap, ...)
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// setup starts a sandbox, a database, and one intake on the chosen transport.
func setup(t *testing.T, o bundleOpts) *testBundle {
	t.Helper()
	so := o.sandbox
	if so.AckBudget == 0 {
		// Lark's 3 s answer budget is not what these tests check (one push acknowledged, one
		// effect); on a busy machine a handler may take longer, and a push redelivered for
		// being slow would fail "acknowledged at the first attempt" for the wrong reason.
		so.AckBudget = settle
	}
	so.VerificationToken = testToken
	if !o.noKey {
		so.EncryptKey = testKey
	}
	sb, err := sandbox.New(so)
	require.NoError(t, err)
	sb.Start(t.Context())
	t.Cleanup(sb.Close)
	st := storetest.New(t, o.store)
	reg := prometheus.NewRegistry()
	e := &testBundle{t: t, sb: sb, st: st, rt: &testRouter{st: st}, reg: reg, metrics: bot.NewMetrics(reg)}
	e.h = e.rt
	if o.realRouter {
		chat, err := newChat(t, st, router.Options{BotOpenID: sb.BotOpenID(), Logger: quietLogger(), OnDuplicate: e.metrics.CountDuplicate})
		require.NoError(t, err)
		e.h = chat
	}
	e.cfg = bot.Config{AppID: sb.AppID(), AppSecret: sb.AppSecret(), VerificationToken: testToken,
		EncryptKey: so.EncryptKey, BaseURL: sb.URL(), Transport: o.transport}
	e.intake, e.srvURL = e.startIntake(o.transport)
	if o.transport == bot.TransportHTTP {
		require.NoError(t, sb.SetCallbackURLs(e.srvURL+"/lark/events", e.srvURL+"/lark/cards"))
	}
	return e
}

// startIntake starts one more intake (a replica) on the same database.
func (e *testBundle) startIntake(transport string) (*bot.Intake, string) {
	t := e.t
	cfg := e.cfg
	cfg.Transport = transport
	in, err := bot.NewIntake(cfg, e.h, bot.IntakeOptions{Logger: quietLogger(), Metrics: e.metrics, ClickFailures: clickFailures(t),
		WS: bot.WSOptions{Check: 50 * time.Millisecond, RestartBackoff: 50 * time.Millisecond}})
	require.NoError(t, err)
	if transport == bot.TransportHTTP {
		mux := http.NewServeMux()
		mux.Handle("POST /lark/events", in.EventsHandler())
		mux.Handle("POST /lark/cards", in.CardsHandler())
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		return in, srv.URL
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	done := make(chan error, 1)
	go func() { done <- in.RunWS(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(settle):
			t.Errorf("RunWS did not return within %s of cancel", settle)
		}
	})
	require.Eventually(t, in.Connected, settle, 10*time.Millisecond, "long connection not ready")
	return in, ""
}

// settle bounds how long a test waits for a state it polls for (a delivery, a sent row, a
// connection): it catches a stuck test, not a slow machine, so it is generous. Assertions
// about speed, where speed is the point, keep their own bounds.
const settle = 30 * time.Second

// drained waits until the outbox holds no row left to send: every reply the handled events
// produced has reached the sandbox, so a count of the chat's messages is final.
func (e *testBundle) drained() {
	e.t.Helper()
	require.Eventually(e.t, func() bool { return e.count(`SELECT count(*) FROM outbox WHERE state <> 'sent'`) == 0 },
		settle, 10*time.Millisecond, "the outbox was not drained")
}

// startSender runs one sender (a replica) until the test ends.
func (e *testBundle) startSender(name string, limits bot.RateLimits) *bot.Sender {
	t := e.t
	s, err := bot.NewSender(bot.NewClient(e.cfg, 5*time.Second), larkstore.Outbox{Store: e.st}, larkstore.Limiter{Store: e.st},
		bot.SenderOptions{Owner: name, Limits: limits, Logger: quietLogger(), RetryBase: 20 * time.Millisecond, Poll: 500 * time.Millisecond})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(settle):
			t.Errorf("sender did not stop within %s", settle)
		}
	})
	return s
}

// ownerSays posts text from the goal's owner, mentioning the bot, in the sandbox's default
// chat and waits until the intake acknowledged it.
func (e *testBundle) ownerSays(text string) *sandbox.Delivery {
	e.t.Helper()
	d, err := e.sb.UserSays(e.sb.DefaultChatID(), sandbox.ChatGroup, owner, text, sandbox.MentionBot())
	require.NoError(e.t, err)
	require.True(e.t, waitDelivery(e.t, d).Acked)
	return d
}

func (e *testBundle) count(sql string, args ...any) int {
	e.t.Helper()
	var n int
	require.NoError(e.t, e.st.DB().QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

func (e *testBundle) insertOutbox(kind, chat, content, uuid string) int64 {
	e.t.Helper()
	var id int64
	require.NoError(e.t, e.st.DB().QueryRow(context.Background(),
		`INSERT INTO outbox (uuid, kind, receive_id, content) VALUES ($1, $2, $3, $4) RETURNING id`, uuid, kind, chat, content).Scan(&id))
	return id
}

// counter reads the value of a counter series of the env's metrics with exactly these labels
// (0 when it was never counted).
func (e *testBundle) counter(name string, labels map[string]string) float64 {
	e.t.Helper()
	mf, err := e.reg.Gather()
	require.NoError(e.t, err)
	for _, f := range mf {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			if maps.Equal(got, labels) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func waitDelivery(t *testing.T, d *sandbox.Delivery) sandbox.DeliveryResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), settle)
	defer cancel()
	res, err := d.Wait(ctx)
	require.NoError(t, err)
	return res
}

// newChat builds the real router over st with the embedded templates and a default inbox, as
// loopx serve does.
// clickFailures are the toasts of a click the router could not answer, worded as serve words
// them.
func clickFailures(t testing.TB) router.ClickFailures {
	t.Helper()
	tpl, err := templates.New()
	require.NoError(t, err)
	return router.ClickFailureToasts(tpl, "en")
}

func newChat(t testing.TB, st *store.Store, opts router.Options) (*router.Chat, error) {
	t.Helper()
	tpl, err := templates.New()
	if err != nil {
		return nil, err
	}
	ib, err := inbox.New(st, inbox.Options{Templates: tpl})
	if err != nil {
		return nil, err
	}
	cs := cards.New(tpl, "en")
	k, err := change.New(st, change.Options{Templates: tpl, Cards: cs.Proposals.Update})
	if err != nil {
		return nil, err
	}
	opts.Templates, opts.Inbox, opts.Cards, opts.Changes = tpl, ib, cs, k
	return router.New(st, opts)
}
