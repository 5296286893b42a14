package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"loopx/server"
)

func (a *app) serveCommand() *cobra.Command {
	var sandbox bool
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the LoopX server: HTTP API, Lark bot, scheduler",
		Long: `Run the LoopX server on LOOPX_LISTEN (default ` + server.DefaultListen + `).

With no DATABASE_URL it starts a private PostgreSQL cluster under LOOPX_HOME/pg (from the
machine's PostgreSQL binaries) and stops it on exit. Migrations run at start under a
database lock, so replicas may start together. The admin token is LOOPX_ADMIN_TOKEN or,
when unset, one generated once and kept in LOOPX_HOME/admin-token (mode 0600).
With no LARK_APP_ID, or with --sandbox, the bot talks to the built-in Lark emulator.
While it runs, LOOPX_HOME/serving.json says where its API and sandbox listen (no secret), so
loopx commands and loopx chat on this machine find it on any port.

Every setting is read and checked before anything starts; a bad one stops serve (exit 2)
with the variable named. On/off settings take 1, true, yes, on or 0, false, no, off.

Environment: LOOPX_LISTEN, DATABASE_URL, LOOPX_HOME, LOOPX_ADMIN_TOKEN, LOOPX_ADMINS,
LOG_FORMAT (text|json), LOG_LEVEL (debug|info|warn|error), LOOPX_LANG (en|zh),
LOOPX_RECEIPT (reaction|reply), LOOPX_INBOX_ACK_TIMEOUT, LOOPX_INBOX_MAX_PENDING,
LOOPX_BOT, LOOPX_SCHEDULER, LOOPX_DEMO, LOOPX_WEB, LOOPX_WEB_URL, LOOPX_EXEC_SHELL (on/off),
LOOPX_JITTER_MAX, LOOPX_AGENT_URL, LOOPX_REPLICA, LOOPX_RETAIN_DECISIONS, LOOPX_RETAIN_LARK_EVENTS,
LOOPX_RETAIN_RECEIPTS, LOOPX_RETAIN_OUTBOX, LOOPX_RETAIN_INBOX, LOOPX_RETAIN_AUDIT,
LOOPX_RETAIN_RUNS, LOOPX_SANDBOX_ADDR, LOOPX_SANDBOX_TOKEN, LOOPX_SANDBOX_STATE,
LOOPX_SECRET_KEY, LOOPX_SECRET_KEY_PREVIOUS, LOOPX_PGBOUNCER (auto|transaction|off),
LARK_APP_ID, LARK_APP_SECRET, LARK_VERIFICATION_TOKEN, LARK_ENCRYPT_KEY, LARK_TRANSPORT (ws|http),
LARK_BASE_URL, LARK_BOT_OPEN_ID, LARK_CALLBACK_MAX_AGE. docs/operations.md describes each.`,
		Example: `  loopx serve
  DATABASE_URL=postgres://loopx@db/loopx LOOPX_ADMIN_TOKEN=$(openssl rand -hex 32) loopx serve
  loopx serve --sandbox`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := server.LoadConfig(a.getenv)
			if err != nil {
				return usageError{fmt.Errorf("load config: %w", err)}
			}
			cfg.Sandbox = cfg.Sandbox || sandbox
			cfg.Build = build()
			cfg.Logger = server.NewLogger(a.stderr, cfg.LogFormat, cfg.LogLevel)
			return server.Run(cmd.Context(), cfg)
		},
	}
	cmd.Flags().BoolVar(&sandbox, "sandbox", false, "talk to the built-in Lark emulator instead of Lark")
	return cmd
}
