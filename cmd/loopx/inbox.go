package main

import (
	"errors"
	"net/http"
	"net/url"

	"github.com/spf13/cobra"

	"loopx/api"
)

// inboxCommand is `loopx inbox`: what people wrote to an agent from chat, for the agent to
// take (drain), confirm once its effect is written (ack) and answer in the original
// conversation (reply).
func (a *app) inboxCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "inbox",
		Short: "Drain, acknowledge and answer the messages people sent an agent",
		Example: `  loopx inbox drain --goal-id demo --agent-id codex --format json
  loopx inbox ack   --goal-id demo --agent-id codex --item 41 --item 42
  loopx inbox reply --goal-id demo --agent-id codex --item 41 --text "done: see PR 12"`,
	}
	var goal, agent string
	flags := func(c *cobra.Command) {
		c.Flags().StringVar(&goal, "goal-id", "", "goal id")
		_ = c.MarkFlagRequired("goal-id")
		c.Flags().StringVar(&agent, "agent-id", "", "agent id (an agent token may use only its own)")
		_ = c.MarkFlagRequired("agent-id")
	}
	path := func(rest ...string) string {
		return goalPath(goal, append([]string{"agents", agent, "inbox"}, rest...)...)
	}

	var drain api.DrainBody
	drainCmd := &cobra.Command{
		Use:   "drain",
		Short: "Take the pending messages: steer first, then oldest first (they become delivered)",
		Long: `Take the pending messages, steer items first, then oldest first. They become delivered;
acknowledge each with "loopx inbox ack" once its effect is written. An item not acknowledged
within the server's ack timeout is handed out again, so a crash mid-turn loses nothing.`,
		Example: `  loopx inbox drain --goal-id demo --agent-id codex --limit 20 --format json`,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return a.call(c, http.MethodPost, path("drain"), nil, drain,
				printList("items", "item_id", "mode", "sender", "deliveries", "text"))
		},
	}
	flags(drainCmd)
	drainCmd.Flags().StringVar(&drain.SessionID, "session-id", "", "only this session's items (and those for no session)")
	drainCmd.Flags().IntVar(&drain.Limit, "limit", 0, "at most this many items (default 50, at most 200)")

	var ack api.AckBody
	ackCmd := &cobra.Command{
		Use:     "ack",
		Short:   "Acknowledge drained messages after their effect is written",
		Example: `  loopx inbox ack --goal-id demo --agent-id codex --item 41 --item 42`,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return a.call(c, http.MethodPost, path("ack"), nil, ack,
				printList("items", "item_id", "state", "text"))
		},
	}
	flags(ackCmd)
	ackCmd.Flags().Int64SliceVar(&ack.ItemIDs, "item", nil, "item id to acknowledge; repeat or comma-separate")
	_ = ackCmd.MarkFlagRequired("item")

	var reply api.ReplyBody
	var replyFile string
	replyCmd := &cobra.Command{
		Use:   "reply",
		Short: "Answer a message in its conversation (same chat, in its thread)",
		Long: `Answer a message in the conversation it came from: the same chat, in the thread of the
source message. The same reply to the same item is sent once (pass --key to send another
text as a separate reply).`,
		Example: `  loopx inbox reply --goal-id demo --agent-id codex --item 41 --text "merged, thanks"`,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if replyFile != "" {
				f, err := api.FileBodyOf(replyFile, maxUpload)
				if err != nil {
					return usageErr(err)
				}
				reply.File = f
			} else if reply.Text == "" {
				return usageErr(errors.New("--text is required (or --file to send a file back)"))
			}
			return a.call(c, http.MethodPost, path("reply"), nil, reply, nil)
		},
	}
	flags(replyCmd)
	replyCmd.Flags().Int64Var(&reply.ItemID, "item", 0, "the inbox item to answer")
	_ = replyCmd.MarkFlagRequired("item")
	replyCmd.Flags().StringVar(&reply.Text, "text", "", "the answer (up to 12,000 characters)")
	replyCmd.Flags().StringVar(&replyFile, "file", "", "a file to send back to the chat (an image shows as one), after the text if any")
	replyCmd.Flags().StringVar(&reply.Key, "key", "", "reply key; the same item and key are sent once (default: derived from the text)")

	statusCmd := &cobra.Command{
		Use:     "status",
		Short:   "Count the agent's waiting messages (what should-run reports as inbox)",
		Example: `  loopx inbox status --goal-id demo --agent-id codex`,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return a.call(c, http.MethodGet, path(), url.Values{}, nil, nil)
		},
	}
	flags(statusCmd)

	cmd.AddCommand(drainCmd, ackCmd, replyCmd, statusCmd)
	return cmd
}
