package server

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"

	"loopx/api"
	"loopx/bot"
	"loopx/cards"
	"loopx/change"
	"loopx/inbox"
	"loopx/quota"
	"loopx/scheduler"
	"loopx/store"
	"loopx/store/devpg"
	"loopx/templates"
)

// ShutdownGrace bounds a graceful stop after SIGINT/SIGTERM.
const ShutdownGrace = 5 * time.Second

// component is one long-running part of `loopx serve`. run returns nil only after ctx is
// done; an earlier return stops the process.
type component struct {
	name string
	run  func(ctx context.Context) error
}

// deps is what wiring functions get to build their components. They may register HTTP
// handlers on mux (before the listener starts) and metrics on registry.
type deps struct {
	cfg      Config
	logger   *slog.Logger
	store    *store.Store
	quota    *quota.Service
	mux      *http.ServeMux
	registry *prometheus.Registry
	now      func() time.Time
	// schedulerNow is the clock of the scheduler and of the schedule fires it records: now,
	// or in process-level tests an accelerated clock (LOOPX_TEST_CLOCK). scale is how much
	// faster it runs.
	schedulerNow   func() time.Time
	schedulerScale float64
	// Built once and shared by every area, so replies, cards, inbox bounds and digests agree
	// on every surface.
	templates *templates.Set
	inbox     *inbox.Inbox
	cards     *cards.Set
	digests   *scheduler.Digests
	// changes is the change kernel (proposals) chat, the API and the workspace share.
	changes *change.Kernel
	// ready holds the readiness checks areas add (the Lark link); /readyz reports them all.
	// Filled while wiring, read only after the listener starts.
	ready []readyCheck
	// sandboxURL is where the Lark sandbox listens when the bot wiring started it; recorded
	// under LOOPX_HOME with the API's address (recordServing).
	sandboxURL string
	// lark is the bot's Lark client when the bot runs (the workspace signs people in with
	// Lark through it); nil otherwise.
	lark *bot.Client
}

// readyCheck is one part of /readyz: ok, or what is wrong.
type readyCheck struct {
	name  string
	check func(ctx context.Context) error
}

// wireFunc builds the components of one area; it returns none when the area is off.
type wireFunc func(ctx context.Context, d *deps) ([]component, error)

// wirings lists the areas `loopx serve` runs besides the HTTP listener. Each area adds one
// line here and a wire_<area>.go file of its own.
func wirings() []wireFunc {
	return []wireFunc{
		wireBot,
		wireScheduler,
		wireInbox,
		wireMaintenance,
		wireMCP,
		wireWeb,
	}
}

// Run runs `loopx serve` until ctx is done or a component fails: it takes the home's lock,
// opens (or starts) the database, migrates it, builds every part once and runs them.
func Run(ctx context.Context, cfg Config) error {
	logger := cmp.Or(cfg.Logger, NewLogger(os.Stderr, cfg.LogFormat, cfg.LogLevel))
	unlock, err := LockHome(cfg, "serve")
	if err != nil {
		return err
	}
	defer unlock()
	dbURL, stopDB, err := openDatabase(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer stopDB()
	opened, err := store.OpenWith(ctx, withPoolSize(dbURL, defaultPoolSize), store.OpenOptions{Pooler: cfg.PgBouncer})
	if err != nil {
		return fmt.Errorf("connect to database: %w", err)
	}
	pool := opened.Pool
	defer pool.Close()
	if opened.TransactionPooling {
		logger.Warn("the database is reached through a pooler in transaction mode (PgBouncer): notifications are polled, migrations take a transaction lock, statements are not prepared by name",
			"detected", opened.Detected)
	}
	if err := store.Migrate(ctx, pool); err != nil {
		return fmt.Errorf("migrate: %w", newerSchemaError(cfg.Build, err))
	}
	if err := store.RecordRelease(ctx, pool, cfg.Build.Version, cfg.Build.Commit); err != nil {
		return err
	}
	token, err := AdminToken(cfg)
	if err != nil {
		return err
	}
	keys, err := secretKeyring(cfg)
	if err != nil {
		return err
	}

	now := time.Now
	blobs, err := blobStore(ctx, cfg.Files)
	if err != nil {
		return err
	}
	st := store.New(pool, store.Options{Now: now, Keyring: keys, TransactionPooling: opened.TransactionPooling,
		MaxFileBytes: cfg.Files.MaxBytes, Blobs: blobs})
	if seeded, err := st.SeedMachineDefaults(ctx, cfg.DefaultsSeed); err != nil {
		return err
	} else if cfg.DefaultsSeed != (store.DefaultsSeed{}) && !seeded {
		logger.Warn("the machine defaults were changed by an admin: LOOPX_BREAKER_FAILURES, LOOPX_PROGRESS_CARD and LOOPX_QUIET_DIGESTS are ignored (loopx defaults show)")
	}
	if n, err := st.SealPlaintextSecrets(ctx); err != nil {
		return fmt.Errorf("seal runner secrets kept in clear: %w", err)
	} else if n > 0 {
		logger.Info("sealed runner secrets that were kept in clear", "agents", n)
	}
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	d, err := newDeps(cfg, logger, st, registry, now)
	if err != nil {
		return err
	}
	apiServer, err := api.New(api.Options{
		Store: st, Quota: d.quota, AdminToken: token, Logger: logger.With("component", "api"),
		Registry: registry, Now: now, Cards: d.cards, Templates: d.templates, Inbox: d.inbox, Changes: d.changes,
	})
	if err != nil {
		return err
	}
	d.mux.Handle("/v1/", apiServer)
	d.mux.HandleFunc("GET /healthz", healthz(cfg.Build))
	d.mux.Handle("GET /metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{Registry: registry}))
	d.mux.HandleFunc("GET /readyz", readyz(d))
	var comps []component
	for _, wire := range wirings() {
		cs, err := wire(ctx, d)
		if err != nil {
			return fmt.Errorf("wire components: %w", err)
		}
		comps = append(comps, cs...)
	}
	lis, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on LOOPX_LISTEN %s: %w", cfg.Listen, err)
	}
	comps = append(comps, httpComponent(lis, d.mux, logger))
	if cfg.TestProfile != "" {
		plis, err := net.Listen("tcp", cfg.TestProfile)
		if err != nil {
			lis.Close()
			return fmt.Errorf("listen on LOOPX_TEST_PPROF %s: %w", cfg.TestProfile, err)
		}
		logger.Warn("Go profiles are served for a benchmark", "address", plis.Addr().String())
		comps = append(comps, profileComponent(plis, logger))
	}
	// Clients on this machine find the server (and its sandbox) by LOOPX_HOME from now on;
	// the record goes first at a stop, before the listener and the database.
	defer recordServing(d, lis)()

	g, gctx := errgroup.WithContext(ctx)
	for _, c := range comps {
		g.Go(func() error { return untilDone(gctx, c) })
	}
	logger.InfoContext(ctx, "loopx serving", "version", cfg.Build.Version, "commit", cfg.Build.Commit,
		"date", cfg.Build.Date, "schema", cfg.Build.Schema, "listen", lis.Addr().String(),
		"sandbox", cfg.Sandbox, "home", cfg.Home)
	err = g.Wait()
	if ctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled)) {
		logger.Info("loopx stopped")
		return nil
	}
	return err
}

// MigrateOptions are the extra steps of `loopx migrate`.
type MigrateOptions struct {
	// AfterRestore: the database was just restored from a backup; prepare what the backup
	// left queued (store.AfterRestore) once the migrations are applied.
	AfterRestore bool
}

// MigrateResult is what Migrate did.
type MigrateResult struct {
	Current int64                `json:"current"`
	Latest  int64                `json:"latest"`
	Restore *store.RestoreReport `json:"after_restore,omitempty"`
}

// Migrate applies every migration not yet applied to the database of cfg (the private
// cluster when DATABASE_URL is unset), under the home's lock and a database lock, and returns
// the schema version reached and the latest one. A database migrated by a newer release is
// refused, with the way back.
func Migrate(ctx context.Context, cfg Config, opts MigrateOptions) (MigrateResult, error) {
	var res MigrateResult
	err := withDatabase(ctx, cfg, "migrate", func(db store.Opened) error {
		pool := db.Pool
		if err := store.Migrate(ctx, pool); err != nil {
			return newerSchemaError(cfg.Build, err)
		}
		if err := store.RecordRelease(ctx, pool, cfg.Build.Version, cfg.Build.Commit); err != nil {
			return err
		}
		if opts.AfterRestore {
			r, err := store.AfterRestore(ctx, pool)
			if err != nil {
				return err
			}
			res.Restore = &r
		}
		var err error
		res.Current, res.Latest, err = store.MigrationStatus(ctx, pool)
		return err
	})
	return res, err
}

// MigrateDown undoes the given applied migrations (newest first) with this binary's down
// sections: the way back for an older release that refuses the database. Every server on the
// database must be stopped first.
func MigrateDown(ctx context.Context, cfg Config, versions []int64) (undone []int64, err error) {
	err = withDatabase(ctx, cfg, "migrate", func(db store.Opened) error {
		undone, err = store.MigrateDown(ctx, db.Pool, versions)
		return err
	})
	return undone, err
}

// withDatabase runs fn on the database of cfg under the home's lock (held as what), with the
// private cluster started for it when DATABASE_URL is unset.
func withDatabase(ctx context.Context, cfg Config, what string, fn func(db store.Opened) error) error {
	logger := cmp.Or(cfg.Logger, NewLogger(os.Stderr, cfg.LogFormat, cfg.LogLevel))
	unlock, err := LockHome(cfg, what)
	if err != nil {
		return err
	}
	defer unlock()
	url, stopDB, err := openDatabase(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer stopDB()
	opened, err := store.OpenWith(ctx, url, store.OpenOptions{Pooler: cfg.PgBouncer})
	if err != nil {
		return fmt.Errorf("connect to database: %w", err)
	}
	defer opened.Pool.Close()
	return fn(opened)
}

// healthz answers that the process is up, and which build it is.
func healthz(b Build) http.HandlerFunc {
	body, _ := json.Marshal(struct {
		Status string `json:"status"`
		Build
	}{"ok", b})
	body = append(body, '\n')
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}
}

// newDeps builds what every area shares, once: templates, the inbox, the gate card renderer,
// report digests and the quota service.
func newDeps(cfg Config, logger *slog.Logger, st *store.Store, registry *prometheus.Registry, now func() time.Time) (*deps, error) {
	tpl, err := templates.New()
	if err != nil {
		return nil, fmt.Errorf("load templates: %w", err)
	}
	ibOpts := cfg.Inbox
	ibOpts.Now, ibOpts.DefaultLang, ibOpts.Templates = now, cfg.Lang, tpl
	ibOpts.Logger = logger.With("component", "inbox")
	ib, err := inbox.New(st, ibOpts)
	if err != nil {
		return nil, fmt.Errorf("create inbox: %w", err)
	}
	cs := cards.New(tpl, cfg.Lang)
	digests, err := scheduler.NewDigests(scheduler.DigestConfig{Store: st, Cards: cs})
	if err != nil {
		return nil, fmt.Errorf("create digests: %w", err)
	}
	changes, err := change.New(st, change.Options{Templates: tpl, Cards: cs.Proposals.Update,
		Announce: cs.Proposals.Announce, GateNotice: cs.Gates.Update})
	if err != nil {
		return nil, fmt.Errorf("create change kernel: %w", err)
	}
	schedNow, scale := now, 1.0
	if c := cfg.Scheduler.TestClock; c.Scale > 0 {
		logger.Warn("the scheduler runs on an accelerated test clock", "epoch", c.Epoch, "scale", c.Scale)
		schedNow, scale = func() time.Time {
			return c.Epoch.Add(time.Duration(float64(time.Since(c.Anchor)) * c.Scale))
		}, c.Scale
	}
	return &deps{
		cfg: cfg, logger: logger, store: st, mux: http.NewServeMux(), registry: registry, now: now,
		schedulerNow: schedNow, schedulerScale: scale,
		templates: tpl, inbox: ib, cards: cs, digests: digests, changes: changes,
		// A stall gate opened by should-run is announced like any gate: a card in the goal's
		// chats, rendered inside the should-run's transaction.
		// A goal whose work is complete is proposed for finishing once, to its owners.
		quota: quota.NewService(st, tpl, quota.Options{Now: now, GateNotice: cs.Gates.Ask,
			Complete: func(ctx context.Context, goalID string) {
				if _, err := changes.ProposeCompletion(ctx, goalID); err != nil {
					logger.Warn("could not propose finishing the goal", "goal", goalID, "err", err)
				}
			}}),
	}, nil
}

// untilDone runs c and turns an early nil return into an error, so errgroup stops the rest.
func untilDone(ctx context.Context, c component) error {
	err := c.run(ctx)
	if err == nil && ctx.Err() == nil {
		return fmt.Errorf("%s stopped unexpectedly", c.name)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("%s: %w", c.name, err)
	}
	return nil
}

func httpComponent(lis net.Listener, h http.Handler, logger *slog.Logger) component {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	return component{name: "http", run: func(ctx context.Context) error {
		errc := make(chan error, 1)
		go func() { errc <- srv.Serve(lis) }()
		select {
		case err := <-errc:
			return err
		case <-ctx.Done():
		}
		// Stop taking requests, let in-flight ones finish within the grace.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownGrace-time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			_ = srv.Close()
		}
		if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}}
}

// readyz answers 200 when the database answers, its migrations are current and every check an
// area added (the Lark link: connected, or the sandbox) passes.
func readyz(d *deps) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
		defer cancel()
		type answer struct {
			Status     string `json:"status"`
			Database   string `json:"database"`
			Migrations struct {
				Current int64 `json:"current"`
				Latest  int64 `json:"latest"`
			} `json:"migrations"`
			Checks map[string]string `json:"checks,omitempty"`
		}
		var a answer
		status := http.StatusOK
		a.Status, a.Database = "ok", "ok"
		if err := d.store.Ping(ctx); err != nil {
			status, a.Status, a.Database = http.StatusServiceUnavailable, "unavailable", "unreachable"
		} else if cur, latest, err := d.store.MigrationStatus(ctx); err != nil {
			status, a.Status = http.StatusServiceUnavailable, "unavailable"
		} else {
			a.Migrations.Current, a.Migrations.Latest = cur, latest
			if cur < latest {
				status, a.Status = http.StatusServiceUnavailable, "migrations pending"
			}
		}
		for _, c := range d.ready {
			if a.Checks == nil {
				a.Checks = map[string]string{}
			}
			a.Checks[c.name] = "ok"
			if err := c.check(ctx); err != nil {
				a.Checks[c.name] = err.Error()
				if status == http.StatusOK {
					status, a.Status = http.StatusServiceUnavailable, "unavailable"
				}
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(a)
	}
}

// defaultPoolSize is the connection pool of `loopx serve` unless DATABASE_URL sets
// pool_max_conns. pgx's own default (4 on a 2-core machine) is too small once the bot's
// LISTEN connection, the sender, the scheduler and concurrent API requests share it.
const defaultPoolSize = 20

// withPoolSize adds pool_max_conns to a URL-form database URL that has none. Key/value
// connection strings are left as they are.
func withPoolSize(dbURL string, n int) string {
	u, err := url.Parse(dbURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return dbURL
	}
	q := u.Query()
	if q.Has("pool_max_conns") {
		return dbURL
	}
	q.Set("pool_max_conns", strconv.Itoa(n))
	u.RawQuery = q.Encode()
	return u.String()
}

// openDatabase returns the database URL: DATABASE_URL, or a private cluster under
// LOOPX_HOME/pg started now and stopped by the returned func.
func openDatabase(ctx context.Context, cfg Config, logger *slog.Logger) (string, func(), error) {
	if cfg.DatabaseURL != "" {
		return string(cfg.DatabaseURL), func() {}, nil
	}
	opts := devpg.Options{Dir: filepath.Join(cfg.Home, "pg"), Logger: logger.With("component", "devpg")}
	// Say where the cluster is before anything else: as root it may not be under LOOPX_HOME.
	where, moved, err := devpg.Locate(opts)
	if err != nil {
		return "", nil, fmt.Errorf("locate the private database: %w", err)
	}
	logger.InfoContext(ctx, "private database", "cluster_dir", where, "under_loopx_home", !moved,
		"start_over", "loopx reset --sandbox")
	// The cluster must outlive the shutdown of everything that uses it, so it is not tied to
	// ctx: the returned stop func runs last.
	c, err := devpg.Start(context.WithoutCancel(ctx), opts)
	if err != nil {
		return "", nil, fmt.Errorf("start the private database (set DATABASE_URL to use your own): %w", err)
	}
	return c.URL(), func() {
		if err := c.Stop(); err != nil {
			logger.Error("stop private database", "err", err)
		}
	}, nil
}
