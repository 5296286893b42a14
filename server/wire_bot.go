package server

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"loopx/bot"
	"loopx/bot/sandbox"
	"loopx/router"
	"loopx/scheduler"
	"loopx/server/larkstore"
	"loopx/store"
)

// wireBot runs the Lark side of `loopx serve`: the chat router behind the event intake (WS
// long connection, or /lark/events and /lark/cards on the serve listener), the outbox sender,
// and in sandbox mode the Lark emulator itself (old lark_event rows are pruned by
// wire_maintenance.go). It also serves GET /readyz/lark and registers the bot's metrics.
// LOOPX_BOT=off leaves all of it out.
func wireBot(ctx context.Context, d *deps) ([]component, error) {
	if !d.cfg.Bot {
		d.logger.Info("lark bot off (LOOPX_BOT=off)")
		return nil, nil
	}
	logger := d.logger.With("component", "bot")
	var comps []component
	var cfg bot.Config
	var botOpenID string
	if d.cfg.Sandbox {
		sb, c, err := startSandbox(d)
		if err != nil {
			return nil, err
		}
		comps = append(comps, component{name: "lark-sandbox", run: sb.Run})
		cfg, botOpenID = c, sb.BotOpenID()
		d.sandboxURL = sb.URL()
	} else {
		cfg = d.cfg.Lark.BotConfig() // validated by LoadConfig
	}

	client := bot.NewClient(cfg, 10*time.Second)
	d.lark = client
	if botOpenID == "" {
		var err error
		if botOpenID, err = lookupBotOpenID(ctx, d, client); err != nil {
			return nil, err
		}
	}

	metrics := bot.NewMetrics(d.registry)
	registerOutboxGauges(d)
	limits := bot.DefaultRateLimits
	limits.Minute = d.cfg.Lark.TestMinute // 0 outside time-scaled tests: a minute
	sender, err := bot.NewSender(client, larkstore.Outbox{Store: d.store}, larkstore.Limiter{Store: d.store}, bot.SenderOptions{
		Owner: d.cfg.Replica + "/" + randomHex(3), Logger: logger, Metrics: metrics, Now: d.now,
		Limits: limits,
		// Leave the http component a second of the shutdown grace after the last send.
		Grace: ShutdownGrace - 2*time.Second,
	})
	if err != nil {
		return nil, err
	}
	chat, err := router.New(d.store, router.Options{
		BotOpenID: botOpenID, Admins: d.cfg.Admins, Now: d.now, Templates: d.templates,
		DefaultLang: d.cfg.Lang, Receipt: d.cfg.Receipt, Inbox: d.inbox,
		Logger: d.logger.With("component", "router"), OnDuplicate: metrics.CountDuplicate,
		// The sender looks at once at what an event queued, before the outbox notification
		// arrives; a message the fast path took queued only its receipt reaction.
		OnCommit: func(_ context.Context, q router.Queued) {
			if q.Messages {
				sender.WakeLane(bot.LaneMessages)
			}
			if q.Reactions {
				sender.WakeLane(bot.LaneReactions)
			}
		},
		Changes: d.changes, Cards: d.cards, SignInLink: signInLinks(d), TurnURL: turnURLs(d),
		Advice: func(code int) string { hint, _ := bot.Advice(code); return hint },
		Report: func(ctx context.Context, db store.DB, req router.ReportRequest) (bool, error) {
			// The digest queues itself (deduplicated per digest and chat), in the chat's
			// transaction.
			res, err := d.digests.Report(ctx, db, scheduler.ReportParams{GoalID: req.GoalID, RequestedBy: req.RequestedBy,
				ChatID: req.ChatID, ReplyTo: req.ReplyTo, Lang: req.Lang, Now: d.now()})
			return len(res.Outbox) > 0, err
		},
	})
	if err != nil {
		return nil, fmt.Errorf("create chat router: %w", err)
	}

	intake, err := bot.NewIntake(cfg, chat, bot.IntakeOptions{Logger: logger, Metrics: metrics, Now: d.now,
		MaxCallbackAge: d.cfg.Lark.CallbackMaxAge, ClickFailures: router.ClickFailureToasts(d.templates, d.cfg.Lang)})
	if err != nil {
		return nil, err
	}

	if cfg.Transport == bot.TransportHTTP {
		d.mux.Handle("POST /lark/events", intake.EventsHandler())
		d.mux.Handle("POST /lark/cards", intake.CardsHandler())
	} else {
		comps = append(comps, component{name: "lark-ws", run: intake.RunWS})
	}
	d.mux.HandleFunc("GET /readyz/lark", larkReady(cfg, d.cfg.Sandbox, intake))
	d.ready = append(d.ready, readyCheck{name: "lark", check: func(context.Context) error {
		if cfg.Transport == bot.TransportWS && !intake.Connected() {
			return errors.New("lark long connection down")
		}
		return nil
	}})
	comps = append(comps, component{name: "outbox-sender", run: sender.Run})
	fetch, err := fetcher(d, client)
	if err != nil {
		return nil, err
	}
	comps = append(comps, fetch)
	logger.Info("lark bot wired", "transport", cfg.Transport, "sandbox", d.cfg.Sandbox, "base_url", cfg.BaseURL, "bot_open_id", botOpenID)
	return comps, nil
}

// startSandbox creates the Lark emulator on LOOPX_SANDBOX_ADDR (default sandbox.ServeAddr)
// and returns the bot settings that point at it. `loopx chat` on this machine finds it
// wherever it listens, through the serve's record under LOOPX_HOME (Serving).
func startSandbox(d *deps) (*sandbox.Sandbox, bot.Config, error) {
	// The emulator authenticates HTTP callbacks like Lark: fresh secrets per run.
	token, key := randomHex(16), randomHex(16)
	opts := sandbox.Options{
		Addr:              cmp.Or(d.cfg.SandboxAddr, sandbox.ServeAddr),
		VerificationToken: token,
		EncryptKey:        key,
		ControlToken:      string(d.cfg.SandboxToken),
		Logger:            d.logger.With("component", "sandbox"),
		StateDir:          d.cfg.SandboxState,
	}
	sb, err := sandbox.New(opts)
	if err != nil && d.cfg.SandboxAddr == "" {
		// Another local server holds the default port: take any free one rather than fail.
		// loopx chat finds it through this serve's record under LOOPX_HOME; the log says
		// where, for LOOPX_SANDBOX_URL elsewhere.
		opts.Addr = "127.0.0.1:0"
		sb, err = sandbox.New(opts)
		if err == nil {
			d.logger.Warn("the default sandbox port is taken; using another (loopx chat with this LOOPX_HOME finds it; elsewhere set LOOPX_SANDBOX_URL)", "url", sb.URL())
		}
	}
	if err != nil {
		return nil, bot.Config{}, fmt.Errorf("start the lark sandbox (LOOPX_SANDBOX_ADDR): %w", err)
	}
	if opts.StateDir != "" {
		d.logger.Info("the lark sandbox keeps its chats across restarts", "dir", opts.StateDir)
	}
	cfg := bot.Config{AppID: sb.AppID(), AppSecret: sb.AppSecret(), VerificationToken: token, EncryptKey: key,
		BaseURL: sb.URL(), Transport: cmp.Or(d.cfg.Lark.Transport, bot.TransportWS)}
	if cfg.Transport == bot.TransportHTTP {
		base := "http://" + loopbackAddr(d.cfg.Listen)
		if err := sb.SetCallbackURLs(base+"/lark/events", base+"/lark/cards"); err != nil {
			return nil, bot.Config{}, fmt.Errorf("point the sandbox at /lark/events: %w", err)
		}
	}
	return sb, cfg, nil
}

// lookupBotOpenID asks Lark who the bot is (the router tells mentions of it apart);
// LARK_BOT_OPEN_ID skips the call.
func lookupBotOpenID(ctx context.Context, d *deps, client *bot.Client) (string, error) {
	if id := d.cfg.Lark.BotOpenID; id != "" {
		return id, nil
	}
	var last error
	for attempt := range 5 {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		id, name, err := client.BotInfo(cctx)
		cancel()
		if err == nil && id != "" {
			d.logger.Info("lark bot identified", "open_id", id, "name", name)
			return id, nil
		}
		last = err
		if ctx.Err() != nil {
			break
		}
		time.Sleep(time.Duration(attempt+1) * time.Second)
	}
	return "", fmt.Errorf("ask Lark for the bot's identity (check LARK_APP_ID, LARK_APP_SECRET, LARK_BASE_URL and that the app has the bot feature; or set LARK_BOT_OPEN_ID): %w", last)
}

// larkReady answers whether the Lark side can take events: the long connection is up, or the
// callbacks are mounted, or the sandbox is in use.
func larkReady(cfg bot.Config, sandboxed bool, in *bot.Intake) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		a := struct {
			Status    string `json:"status"`
			Transport string `json:"transport"`
			Sandbox   bool   `json:"sandbox"`
			Connected bool   `json:"connected"`
		}{Status: "ok", Transport: cfg.Transport, Sandbox: sandboxed, Connected: true}
		status := http.StatusOK
		if cfg.Transport == bot.TransportWS {
			a.Connected = in.Connected()
			if !a.Connected {
				status, a.Status = http.StatusServiceUnavailable, "lark long connection down"
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(a)
	}
}

// registerOutboxGauges exposes inbox depth and outbox backlog, read from the database at scrape
// time so every replica reports the shared truth.
func registerOutboxGauges(d *deps) {
	query := func(f func(ctx context.Context) (float64, error)) func() float64 {
		return func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			v, err := f(ctx)
			if err != nil {
				return -1
			}
			return v
		}
	}
	d.registry.MustRegister(newFailedRowsCollector(d.store),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "loopx_inbox_depth", Help: "Inbox items not yet acknowledged by their agent."},
			query(func(ctx context.Context) (float64, error) {
				n, err := d.store.CountPendingInbox(ctx)
				return float64(n), err
			})),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "loopx_outbox_pending", Help: "Outbox rows not yet sent (pending or being sent)."},
			query(func(ctx context.Context) (float64, error) {
				st, err := d.store.ReadOutboxStats(ctx)
				return float64(st.Pending + st.Sending), err
			})),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "loopx_outbox_oldest_pending_seconds", Help: "Age of the oldest unsent outbox row: the sender's lag."},
			query(func(ctx context.Context) (float64, error) {
				st, err := d.store.ReadOutboxStats(ctx)
				return st.OldestPending.Seconds(), err
			})),
	)
}

// failedRowsCollector reports loopx_outbox_failed_rows{code}, read from the database at scrape
// time so every replica reports the shared truth; `loopx doctor` reads it.
type failedRowsCollector struct {
	st   *store.Store
	desc *prometheus.Desc
}

func newFailedRowsCollector(st *store.Store) failedRowsCollector {
	return failedRowsCollector{st: st, desc: prometheus.NewDesc("loopx_outbox_failed_rows",
		"Outbox rows given up on, by Lark code (0: refused before sending), over all replicas.", []string{"code"}, nil)}
}

func (c failedRowsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c failedRowsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	counts, err := c.st.CountOutboxFailures(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	for code, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), strconv.Itoa(code))
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
