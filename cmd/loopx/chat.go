package main

import (
	"errors"
	"io"
	"os"

	"github.com/spf13/cobra"

	"loopx/bot/sandbox"
)

// chatCommand is `loopx chat`, the terminal client of the Lark sandbox: how a newcomer meets
// the product without a Lark app.
func (a *app) chatCommand() *cobra.Command {
	var as, chat string
	cmd := &cobra.Command{
		Use:   "chat",
		Short: "Talk to the bot in the Lark sandbox from the terminal",
		Long: `Talk to the LoopX bot through the built-in Lark sandbox (loopx serve --sandbox, which is
also what loopx serve runs when no LARK_APP_ID is set).

You type as a sandbox user (the demo owner by default) in a sandbox chat; the bot's messages
and cards appear as text, card buttons numbered. Your own commands:
  /click <msg#> <button#>   click a card button
  /thread <msg#> <text>     reply in a message's thread     /reply <msg#> <text>  plain reply
  /as <open_id>             speak as another user (try a stranger: /as ou_stranger)
  /chat <chat_id> [p2p|group], /dm, /chats, /? (help), /quit
Any other line, slash commands included (/help, /status, /approve ...), goes to the bot.

Card markdown is shown styled on a terminal (plain when the output is a pipe, or with
NO_COLOR set).

Environment: LOOPX_SANDBOX_URL (default: the sandbox of the loopx serve running with this
LOOPX_HOME, wherever it listens, else ` + sandbox.DefaultSandboxURL + `), LOOPX_SANDBOX_TOKEN (the
sandbox's control token, when it has one).`,
		Example: `  loopx chat
  loopx chat --as ou_stranger
  loopx chat --chat oc_team`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := a.settings()
			if cfg.sandboxErr != nil {
				return cfg.sandboxErr
			}
			err := sandbox.RunChat(cmd.Context(), sandbox.ChatOptions{
				URL:   cfg.Sandbox,
				Token: cfg.SandboxToken,
				As:    as,
				Chat:  chat,
				Color: isTerminal(a.stdout) && a.getenv("NO_COLOR") == "" && a.getenv("TERM") != "dumb",
			}, a.stdin, a.stdout)
			if err == nil {
				return nil
			}
			var ce *sandbox.ControlError
			if errors.As(err, &ce) && ce.Status < 500 {
				return usageError{err}
			}
			return unreachableError{err}
		},
	}
	cmd.Flags().StringVar(&as, "as", "", "open_id to speak as (default: the sandbox's demo owner)")
	cmd.Flags().StringVar(&chat, "chat", "", "chat id to join (default: the sandbox's demo group chat)")
	return cmd
}

// isTerminal reports whether w is a character device (a terminal), where ANSI styles show.
func isTerminal(w io.Writer) bool {
	f, isFile := w.(*os.File)
	if !isFile {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
