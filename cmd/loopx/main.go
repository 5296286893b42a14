package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"loopx/api"
	"loopx/api/client"
	"loopx/hosts/project"
	"loopx/server"
	"loopx/store"
)

// Release builds (make release) set these with -ldflags "-X main.version=... -X main.commit=...
// -X main.date=..."; other builds leave them empty and server.NewBuild reads Go's VCS stamp.
var version, commit, date string

// build describes this binary (server.Build): `loopx version`, doctor, serve.
func build() server.Build { return server.NewBuild(version, commit, date) }

// Exit codes of the CLI: the table of error kinds (store.ErrorKinds) gives each API error
// its code; the CLI's own failures (flags, a server that does not answer) use the same ones.
const (
	exitOK          = store.ExitOK
	exitRefused     = store.ExitRefused     // refused by the state or not allowed: conflict, refused, full, forbidden
	exitUsage       = store.ExitUsage       // bad flags or input, unknown goal
	exitUnreachable = store.ExitUnreachable // the server could not be reached or failed
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr))
}

// app is what every command shares: the process's environment and the global flags.
type app struct {
	getenv func(string) string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer

	format  string // --format
	idemKey string // --idempotency-key

	dir       string          // the working folder; "" = the process's
	randomKey string          // this invocation's Idempotency-Key when --idempotency-key is not given
	resolved  *clientSettings // where and as whom to call: app.settings, read once
	conn      struct {
		read, found bool
		root        string
		c           project.Connection
		err         error
	}
}

// run executes one loopx command and returns its exit code.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	a := &app{getenv: getenv, stdin: stdin, stdout: stdout, stderr: stderr}
	root := a.rootCommand()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	return a.report(err)
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "loopx",
		Short: "LoopX: durable state and scheduling for long-horizon AI agents, steered from Lark",
		Long: `loopx is both the server (loopx serve) and its client.

The client talks to the server's HTTP API at LOOPX_URL (default: the project's connection
in .loopx/, else the loopx serve running with this LOOPX_HOME, wherever LOOPX_LISTEN put it,
else http://` + server.DefaultListen + `) with the bearer token LOOPX_TOKEN (default: the admin
token that loopx serve keeps under LOOPX_HOME, when the server is this machine's; else the
token loopx connect stored for the project's agent).

Exit codes: 0 ok, 1 refused by the state, 2 usage or validation error, 3 server unreachable.`,
		Example: `  loopx serve
  loopx goal create --goal-id demo --title "Demo" --owner ou_123
  loopx quota should-run --goal-id demo --agent-id codex --format json`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&a.format, "format", "text", "output format: text or json")
	root.PersistentFlags().StringVar(&a.idemKey, "idempotency-key", "", "Idempotency-Key for a mutating call (default: a new random key per invocation; reuse one to retry safely)")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	// Flags left out take the goal and agent of the project's connection (.loopx/).
	root.PersistentPreRunE = func(c *cobra.Command, _ []string) error { return a.fillFromConnection(c) }
	// One line per command group; other areas add theirs here (inbox, chat).
	for _, c := range []*cobra.Command{
		a.serveCommand(),
		a.migrateCommand(),
		a.secretsCommand(),
		a.versionCommand(),
		a.doctorCommand(),
		a.resetCommand(),
		a.goalCommand(),
		a.agentCommand(),
		a.todoCommand(),
		a.gateCommand(),
		a.evidenceCommand(),
		a.quotaCommand(),
		a.refreshStateCommand(),
		a.auditCommand(),
		a.runsCommand(),
		a.chatCommand(),
		a.inboxCommand(),
		a.mcpCommand(),
		a.connectCommand(),
		a.statusCommand(),
		a.hostsCommand(),
		a.hookCommand(),
		a.permissionsCommand(),
		a.proposalCommand(),
		a.progressCommand(),
		a.fileCommand(),
		a.dashboardCommand(),
		a.defaultsCommand(),
		a.ackCommand(),
	} {
		if c.HasSubCommands() && c.RunE == nil {
			c.RunE = groupRunE
		}
		root.AddCommand(c)
	}
	return root
}

// groupRunE answers a command group called without a known subcommand: help, or a usage
// error (exit 2) naming the unknown subcommand.
func groupRunE(c *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError{fmt.Errorf("unknown command %q for %q; see %s --help", args[0], c.CommandPath(), c.CommandPath())}
	}
	return c.Help()
}

// usageError marks bad flags or arguments (exit 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// unreachableError marks a server that did not answer (exit 3).
type unreachableError struct{ err error }

func (e unreachableError) Error() string { return e.err.Error() }
func (e unreachableError) Unwrap() error { return e.err }

// report prints err for a person (stderr) and, with --format json, as a JSON error body on
// stdout for programs; it returns the exit code.
func (a *app) report(err error) int {
	var ae *api.Error
	if errors.As(err, &ae) {
		if a.format == "json" {
			writeJSONTo(a.stdout, api.ErrorBody{Error: ae})
		}
		msg := ae.Message
		if ae.Field != "" {
			msg = ae.Field + ": " + msg
		}
		fmt.Fprintf(a.stderr, "loopx: %s (%s)\n", msg, ae.Code)
		return exitCodeFor(ae)
	}
	fmt.Fprintf(a.stderr, "loopx: %v\n", err)
	var ue usageError
	var ne unreachableError
	var pe *project.UsageError
	switch {
	case errors.As(err, &ue), errors.As(err, &pe):
		return exitUsage
	case errors.As(err, &ne), errors.Is(err, client.ErrUnreachable):
		return exitUnreachable
	}
	// cobra reports unknown commands and bad arguments as plain errors.
	if isCobraUsage(err) {
		return exitUsage
	}
	return exitRefused
}

// exitCodeFor is the exit code the table of error kinds gives an API error (a code this
// build does not know is judged by its status).
func exitCodeFor(e *api.Error) int {
	return store.KindOfAnswer(e.Code, e.Status).Exit
}

func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "accepts ", "requires ", "invalid argument", "required flag"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}
