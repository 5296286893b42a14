package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strconv"

	"github.com/spf13/cobra"

	"loopx/api"
)

// maxUpload is what the CLI reads of a file it uploads (the server applies its own cap).
const maxUpload = 100 << 20

func usageErr(err error) error { return usageError{err} }

// workCommands are `loopx agent stop|run|pause|resume` (the admin token): stop the live turn,
// fire the heartbeat now, hold and resume an agent — the same operations as the chat's /stop,
// /run, /pause #goal/agent and /resume #goal/agent.
func (a *app) workCommands() []*cobra.Command {
	var out []*cobra.Command
	for _, w := range []struct{ verb, path, short, example string }{
		{"stop", "stop", "Stop the agent's live turn now (a runner kills or cancels it; a host's next should-run ends it)",
			"loopx agent stop --goal-id demo --agent-id codex"},
		{"run", "run", "Fire the agent's heartbeat now (should-run and the quota still decide)",
			"loopx agent run --goal-id demo --agent-id codex"},
		{"pause", "hold", "Hold the agent: no turn starts for it until it is resumed",
			"loopx agent pause --goal-id demo --agent-id codex"},
		{"resume", "resume", "Resume a held agent (the breaker's or an owner's hold); its failures so far stop counting",
			"loopx agent resume --goal-id demo --agent-id codex"},
	} {
		var goal, agent string
		c := &cobra.Command{
			Use: w.verb, Short: w.short, Example: "  " + w.example, Args: cobra.NoArgs,
			RunE: func(c *cobra.Command, _ []string) error {
				return a.call(c, http.MethodPost, goalPath(goal, "agents", agent, w.path), nil, struct{}{}, nil)
			},
		}
		c.Flags().StringVar(&goal, "goal-id", "", "goal id")
		_ = c.MarkFlagRequired("goal-id")
		c.Flags().StringVar(&agent, "agent-id", "", "agent id")
		_ = c.MarkFlagRequired("agent-id")
		out = append(out, c)
	}
	return out
}

// progressCommand is `loopx progress`: a progress note on the agent's live turn, shown on the
// turn's live card in chat.
func (a *app) progressCommand() *cobra.Command {
	var goal, agent string
	var b api.ProgressBody
	c := &cobra.Command{
		Use:   "progress",
		Short: "Report what the live turn is doing (shown on its progress card in chat)",
		Long: `Report what the agent's live turn is doing: one short line, shown with the latest notes
on the turn's live progress card in the goal's chat (updated at most every 5 seconds). An exec
agent can also print a line starting with ::progress:: instead.`,
		Example: `  loopx progress --goal-id demo --agent-id codex --text "tests pass; writing the changelog"`,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return a.call(c, http.MethodPost, goalPath(goal, "agents", agent, "progress"), nil, b, nil)
		},
	}
	c.Flags().StringVar(&goal, "goal-id", "", "goal id")
	_ = c.MarkFlagRequired("goal-id")
	c.Flags().StringVar(&agent, "agent-id", "", "agent id")
	_ = c.MarkFlagRequired("agent-id")
	c.Flags().StringVar(&b.TurnInstanceID, "turn-instance-id", "", "the turn (default: the agent's live turn)")
	c.Flags().StringVar(&b.Text, "text", "", "what the turn is doing (one line, up to 500 characters)")
	_ = c.MarkFlagRequired("text")
	return c
}

// fileCommand is `loopx file`: list a goal's deliverables and download a file.
func (a *app) fileCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "file",
		Short: "List a goal's deliverables and download files",
		Example: `  loopx file list --goal-id demo
  loopx file get --file-id 12 --out report.pdf`,
	}
	var goal string
	list := &cobra.Command{
		Use:     "list",
		Short:   "List the files attached to a goal's evidence, newest first",
		Example: `  loopx file list --goal-id demo --format json`,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return a.call(c, http.MethodGet, goalPath(goal, "files"), nil, nil,
				printList("files", "file_id", "name", "size", "sha256", "evidence_id"))
		},
	}
	list.Flags().StringVar(&goal, "goal-id", "", "goal id")
	_ = list.MarkFlagRequired("goal-id")
	var id int64
	var out string
	get := &cobra.Command{
		Use:   "get",
		Short: "Download a file (a deliverable, or one a person sent with a message)",
		Long: `Download a file by its id (file_id in inbox drain, evidence list or file list). It is
written to --out, else to its own name in the current directory; its SHA-256 is checked.`,
		Example: `  loopx file get --file-id 12 --out /tmp/report.pdf`,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if id <= 0 {
				return usageErr(errors.New("--file-id must be a positive number"))
			}
			cl, err := a.newClient()
			if err != nil {
				return err
			}
			data, h, err := cl.Download(c.Context(), "/v1/files/"+strconv.FormatInt(id, 10), maxUpload)
			if err != nil {
				return err
			}
			name := out
			if name == "" {
				_, params, _ := mime.ParseMediaType(h.Get("Content-Disposition"))
				name = filepath.Base(params["filename"])
				if name == "" || name == "." || name == "/" {
					name = "file-" + strconv.FormatInt(id, 10)
				}
			}
			if err := os.WriteFile(name, data, 0o644); err != nil {
				return fmt.Errorf("write %s: %w", name, err)
			}
			raw, _ := json.Marshal(map[string]any{"file_id": id, "path": name, "size": len(data), "sha256": h.Get("X-Loopx-Sha256")})
			return a.show(raw, nil)
		},
	}
	get.Flags().Int64Var(&id, "file-id", 0, "the file's id")
	_ = get.MarkFlagRequired("file-id")
	get.Flags().StringVar(&out, "out", "", "where to write it (default: its name, here)")
	cmd.AddCommand(list, get)
	return cmd
}
