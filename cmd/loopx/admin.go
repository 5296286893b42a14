package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"loopx/api"
	"loopx/api/client"
	"loopx/server"
	"loopx/store"
)

func (a *app) versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the loopx version, commit, build date and the database schema it knows",
		Long: `Print which loopx this is: the release version (dev for a build that is not a release), the
commit it was built from and that commit's time, the Go release and platform, and the newest
database migration it knows (its schema version; docs/deploy.md says which versions may run
side by side).`,
		Example: `  loopx version
  loopx version --format json`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			b := build()
			if a.format == "json" {
				writeJSONTo(a.stdout, b)
				return nil
			}
			fmt.Fprintf(a.stdout, "loopx %s\n", b)
			return nil
		},
	}
}

func (a *app) migrateCommand() *cobra.Command {
	var afterRestore bool
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply the database migrations (loopx serve also does this at start)",
		Long: `Apply every embedded migration not yet applied to DATABASE_URL (or the private cluster
under LOOPX_HOME when DATABASE_URL is unset), under a database lock.

A database migrated by a newer release is refused: the message names both schema versions and
the way back (restore the backup, or loopx migrate down with the newer binary).

With --after-restore, run once on a database just restored from a backup, before any server
starts on it: every receipt queued in the backup is looked up in Lark before it is added (the
original servers may have sent it after the backup), claims of the original servers are
released, and what is queued is reported (docs/deploy.md, Backups and restore).`,
		Example: `  DATABASE_URL=postgres://loopx@db/loopx loopx migrate
  DATABASE_URL=postgres://loopx@db/loopx_restored loopx migrate --after-restore`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.serverConfig()
			if err != nil {
				return err
			}
			res, err := server.Migrate(cmd.Context(), cfg, server.MigrateOptions{AfterRestore: afterRestore})
			if err != nil {
				return err
			}
			if a.format == "json" {
				writeJSONTo(a.stdout, res)
				return nil
			}
			fmt.Fprintf(a.stdout, "migrations applied: version %d (latest %d)\n", res.Current, res.Latest)
			if r := res.Restore; r != nil {
				fmt.Fprintf(a.stdout, "after the restore: %d queued receipt(s) will be looked up before they are added, %d claim(s) released\n",
					r.ReactionsToCheck, r.ClaimsReleased)
				total := 0
				for _, n := range r.Queued {
					total += n
				}
				if total > 0 {
					fmt.Fprintf(a.stdout, "queued to send: %d (oldest from %s); a message Lark accepted less than an hour before "+
						"is not shown twice, an older one may be\n", total, r.OldestQueued.UTC().Format(time.RFC3339))
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&afterRestore, "after-restore", false, "the database was just restored from a backup: prepare what it left queued")
	cmd.AddCommand(a.migrateDownCommand())
	return cmd
}

func (a *app) migrateDownCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "down VERSION...",
		Short: "Undo applied migrations, so that an older release runs on the database again",
		Long: `Undo the named migrations with this binary's down sections, newest first, each in a
transaction of its own. An older loopx refusing the database names the versions to give.
Stop every server on the database first. What the newer release kept in the tables and
columns those migrations added is lost; a restore of the backup taken before the upgrade is
the other way back.`,
		Example: `  DATABASE_URL=postgres://loopx@db/loopx loopx migrate down 250`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var versions []int64
			for _, arg := range args {
				v, err := strconv.ParseInt(arg, 10, 64)
				if err != nil || v <= 0 {
					return usageError{fmt.Errorf("%q is not a migration version (a positive number, e.g. 250)", arg)}
				}
				versions = append(versions, v)
			}
			cfg, err := a.serverConfig()
			if err != nil {
				return err
			}
			undone, err := server.MigrateDown(cmd.Context(), cfg, versions)
			if a.format == "json" && err == nil {
				writeJSONTo(a.stdout, map[string]any{"undone": undone})
			} else if len(undone) > 0 {
				fmt.Fprintf(a.stdout, "migrations undone: %v\n", undone)
			}
			var se *store.Error
			if errors.As(err, &se) {
				return usageError{err}
			}
			return err
		},
	}
}

// serverConfig loads the server's settings as loopx serve would, for the commands that work
// on its database directly (migrate).
func (a *app) serverConfig() (server.Config, error) {
	cfg, err := server.LoadConfig(a.getenv)
	if err != nil {
		return cfg, usageError{fmt.Errorf("load config: %w", err)}
	}
	cfg.Build = build()
	cfg.Logger = server.NewLogger(a.stderr, cfg.LogFormat, cfg.LogLevel)
	return cfg, nil
}

// check is one line of `loopx doctor`.
type check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// doctorEnv is what a doctor check reads: this machine's environment (the server's settings,
// as loopx serve would load them here) and the client settings (the server being checked).
type doctorEnv struct {
	getenv func(string) string
	client *clientSettings
}

// doctorHooks are extra checks other areas add (one line each), e.g. the Lark connection.
func doctorHooks() []func(ctx context.Context, e doctorEnv) check {
	return []func(ctx context.Context, e doctorEnv) check{
		settingsCheck, privateDatabaseCheck,
		larkAppCheck, larkLinkCheck, larkOutboxCheck,
	}
}

func (a *app) doctorCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "doctor",
		Short: "Check the server, database, migrations, token and Lark settings",
		Long: `Check, through the server the other commands call (LOOPX_URL, else the project's
connection, else the loopx serve running with this LOOPX_HOME, else http://` + server.DefaultListen + `):
the server answers; its database is reachable and its migrations are current; the token
(LOOPX_TOKEN, else the local admin token or the connected agent's) is valid; and the Lark
settings are present (or the server runs the sandbox), its Lark link is up and no message to
Lark was given up on. Exits 0 when every check passes, 1 when one fails, 3 when the server
cannot be reached.`,
		Example: `  loopx doctor
  LOOPX_URL=https://loopx.example LOOPX_TOKEN=... loopx doctor --format json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			// The server is asked first: an unreachable server exits 3 whatever the token.
			cfg := a.settings()
			base, err := a.serverURL()
			if err != nil {
				return err
			}
			var checks []check
			hc := &http.Client{Timeout: 5 * time.Second}
			get := func(path string) (int, []byte, error) {
				resp, err := hc.Get(base + path)
				if err != nil {
					return 0, nil, err
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
				return resp.StatusCode, b, nil
			}
			code, hz, err := get("/healthz")
			if err != nil {
				return unreachableError{fmt.Errorf("reach loopx server at %s: %w (is loopx serve running?)", base, err)}
			}
			checks = append(checks, check{Name: "server", OK: code == http.StatusOK,
				Detail: fmt.Sprintf("%s/healthz answered %d (address from %s)", base, code, cfg.ServerFrom)},
				versionCheck(hz))

			code, body, err := get("/readyz")
			var rz struct {
				Database   string `json:"database"`
				Migrations struct {
					Current int64 `json:"current"`
					Latest  int64 `json:"latest"`
				} `json:"migrations"`
			}
			if err == nil {
				_ = json.Unmarshal(body, &rz)
			}
			checks = append(checks,
				check{Name: "database", OK: err == nil && rz.Database == "ok", Detail: "database " + cmp.Or(rz.Database, "unknown")},
				check{Name: "migrations", OK: err == nil && code == http.StatusOK && rz.Migrations.Current == rz.Migrations.Latest,
					Detail: fmt.Sprintf("version %d of %d", rz.Migrations.Current, rz.Migrations.Latest)})

			tok := check{Name: "token"}
			if c, err := a.newClient(); err != nil {
				tok.Detail = err.Error()
			} else if raw, err := c.Do(ctx, client.Request{Method: http.MethodGet, Path: "/v1/whoami"}); err != nil {
				tok.Detail = err.Error()
			} else {
				tok.OK, tok.Detail = true, "valid: "+strings.TrimSpace(string(raw))+" (from "+cfg.TokenFrom+")"
			}
			checks = append(checks, tok)
			if tok.OK {
				checks = append(checks, a.diagnosticChecks(ctx)...)
			}
			for _, h := range doctorHooks() {
				checks = append(checks, h(ctx, doctorEnv{getenv: a.getenv, client: cfg}))
			}

			failed := 0
			for _, ch := range checks {
				if !ch.OK {
					failed++
				}
			}
			if a.format == "json" {
				writeJSONTo(a.stdout, map[string]any{"ok": failed == 0, "checks": checks})
			} else {
				for _, ch := range checks {
					mark := "ok  "
					if !ch.OK {
						mark = "FAIL"
					}
					fmt.Fprintf(a.stdout, "%s %-11s %s\n", mark, ch.Name, ch.Detail)
				}
			}
			if failed > 0 {
				return fmt.Errorf("doctor: %d of %d checks failed", failed, len(checks))
			}
			return nil
		},
	}
}

// versionCheck names the server's build (from its /healthz) and this binary's. Different
// builds are not a failure: a CLI may be older or newer than the server it calls.
func versionCheck(healthz []byte) check {
	var srv server.Build
	mine := build()
	if err := json.Unmarshal(healthz, &srv); err != nil || srv.Version == "" {
		return check{Name: "version", OK: true, Detail: "the server does not say its version (a release before versions were reported); this loopx " + mine.String()}
	}
	d := "server " + srv.String()
	if srv.Version != mine.Version || srv.Commit != mine.Commit {
		d += "; this loopx " + mine.String()
	} else {
		d += ", the same as this loopx"
	}
	return check{Name: "version", OK: true, Detail: d}
}

// settingsCheck loads the server's settings from this environment as `loopx serve` would,
// and names every variable that is wrong.
func settingsCheck(_ context.Context, e doctorEnv) check {
	cfg, err := server.LoadConfig(e.getenv)
	switch {
	case err != nil:
		return check{Name: "settings", Detail: err.Error()}
	case cfg.Sandbox:
		return check{Name: "settings", OK: true, Detail: "no LARK_APP_ID: the server runs the sandbox Lark emulator (loopx chat)"}
	}
	return check{Name: "settings", OK: true, Detail: "Lark app " + cfg.Lark.AppID + " configured"}
}

// diagnosticChecks asks the server (GET /v1/diagnostics, admin token) about what only it can
// see: runner secrets its key cannot open, and a pooler in transaction mode before the
// database.
func (a *app) diagnosticChecks(ctx context.Context) []check {
	c, err := a.newClient()
	if err != nil {
		return nil
	}
	raw, err := c.Do(ctx, client.Request{Method: http.MethodGet, Path: "/v1/diagnostics"})
	if err != nil {
		var ae *api.Error
		if errors.As(err, &ae) && ae.Code == api.CodeForbidden {
			return []check{{Name: "secrets", OK: true, Detail: "not checked: an agent token cannot read diagnostics (use the admin token)"}}
		}
		return []check{{Name: "secrets", Detail: "read diagnostics: " + err.Error()}}
	}
	var d api.Diagnostics
	if err := json.Unmarshal(raw, &d); err != nil {
		return []check{{Name: "secrets", Detail: "decode diagnostics: " + err.Error()}}
	}
	sec := check{Name: "secrets", OK: len(d.UnreadableSecrets) == 0,
		Detail: "every runner secret opens with key " + d.SecretKeyID}
	if !sec.OK {
		var names []string
		for _, u := range d.UnreadableSecrets {
			names = append(names, fmt.Sprintf("%s/%s %s (sealed with key %s)", u.GoalID, u.AgentID, u.Name, u.KeyID))
		}
		sec.Detail = fmt.Sprintf("%d runner secret(s) set but unreadable with key %s (a wrong LOOPX_SECRET_KEY?): %s; "+
			"restore the key (or give it as LOOPX_SECRET_KEY_PREVIOUS) or set them again with loopx agent update",
			len(names), d.SecretKeyID, strings.Join(names, ", "))
	}
	pool := check{Name: "pooler", OK: true, Detail: "no pooler in transaction mode between the server and PostgreSQL"}
	if d.TransactionPooling {
		pool.Detail = "PgBouncer (or another pooler) in transaction mode before PostgreSQL: notifications are polled, " +
			"migrations take a transaction lock, statements are not prepared by name"
	}
	return []check{sec, pool}
}
