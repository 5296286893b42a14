package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"loopx/api"
	"loopx/api/client"
	"loopx/server"
)

func (a *app) versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print the loopx version",
		Example: `  loopx version --format json`,
		Args:    cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if a.format == "json" {
				writeJSONTo(a.stdout, map[string]string{"version": version, "go": runtime.Version()})
				return nil
			}
			fmt.Fprintf(a.stdout, "loopx %s (%s)\n", version, runtime.Version())
			return nil
		},
	}
}

func (a *app) migrateCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "Apply the database migrations (loopx serve also does this at start)",
		Long: `Apply every embedded migration not yet applied to DATABASE_URL (or the private cluster
under LOOPX_HOME when DATABASE_URL is unset), under a database lock.`,
		Example: `  DATABASE_URL=postgres://loopx@db/loopx loopx migrate`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := server.LoadConfig(a.getenv)
			if err != nil {
				return usageError{fmt.Errorf("load config: %w", err)}
			}
			cfg.Logger = server.NewLogger(a.stderr, cfg.LogFormat, cfg.LogLevel)
			cur, latest, err := server.Migrate(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			if a.format == "json" {
				writeJSONTo(a.stdout, map[string]int64{"current": cur, "latest": latest})
				return nil
			}
			fmt.Fprintf(a.stdout, "migrations applied: version %d (latest %d)\n", cur, latest)
			return nil
		},
	}
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
			code, _, err := get("/healthz")
			if err != nil {
				return unreachableError{fmt.Errorf("reach loopx server at %s: %w (is loopx serve running?)", base, err)}
			}
			checks = append(checks, check{Name: "server", OK: code == http.StatusOK,
				Detail: fmt.Sprintf("%s/healthz answered %d (address from %s)", base, code, cfg.ServerFrom)})

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
