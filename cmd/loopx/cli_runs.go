package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/spf13/cobra"
)

// runsCommand reads the run index: a goal's turns and its recorded should-run decisions,
// newest first, with the API's filters and cursor paging.
// printTurn prints one turn: its fields (the log tail among them), then each handoff it ended
// with.
func printTurn(w io.Writer, raw json.RawMessage) error {
	var t struct {
		Handoffs []struct {
			ID        int64      `json:"handoff_id"`
			From      string     `json:"from_agent"`
			To        string     `json:"to_agent"`
			Kind      string     `json:"kind"`
			Done      string     `json:"done"`
			Next      string     `json:"next"`
			Questions string     `json:"questions"`
			Evidence  []int64    `json:"evidence_ids"`
			AckedAt   *time.Time `json:"acked_at"`
		} `json:"handoffs"`
	}
	if err := json.Unmarshal(raw, &t); err != nil {
		return fmt.Errorf("decode turn: %w", err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return fmt.Errorf("decode turn: %w", err)
	}
	delete(fields, "handoffs")
	rest, err := json.Marshal(fields)
	if err != nil {
		return err
	}
	if err := printFields(w, rest); err != nil {
		return err
	}
	for _, h := range t.Handoffs {
		state := "waiting to be acknowledged"
		if h.AckedAt != nil {
			state = "acknowledged " + h.AckedAt.UTC().Format("2006-01-02 15:04 UTC")
		}
		fmt.Fprintf(w, "handoff %d · %s → %s · %s · %s\n", h.ID, orDash(h.From), h.To, h.Kind, state)
		for _, l := range [][2]string{{"done", h.Done}, {"next", h.Next}, {"questions", h.Questions}} {
			if l[1] != "" {
				fmt.Fprintf(w, "  %s: %s\n", l[0], l[1])
			}
		}
		if len(h.Evidence) > 0 {
			fmt.Fprintf(w, "  evidence: %v\n", h.Evidence)
		}
	}
	return nil
}

func (a *app) runsCommand() *cobra.Command {
	var goal, agent, state, since, until, cursor string
	var limit int
	filters := func() (url.Values, error) {
		q := url.Values{}
		for k, v := range map[string]string{"agent_id": agent, "state": state, "cursor": cursor} {
			if v != "" {
				q.Set(k, v)
			}
		}
		for flag, v := range map[string]string{"since": since, "until": until} {
			if v == "" {
				continue
			}
			at, err := timeFlag(flag, v, time.Now())
			if err != nil {
				return nil, err
			}
			q.Set(flag, at)
		}
		if limit != 0 {
			q.Set("limit", strconv.Itoa(limit))
		}
		return q, nil
	}
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "List a goal's turns, newest first: state, todo, evidence, outcome",
		Long: `List a goal's turns (the run index), newest first: the agent, when it started, its
state (live, ok, failed, abandoned), the todo it worked on, the evidence it recorded, whether
it was counted against the quota, and its outcome. When more turns remain, the last line gives the --cursor
for the next page. "loopx runs decisions" lists the should-run answers instead, and
"loopx runs show" one turn with its log tail.

--since and --until take an RFC 3339 time or a duration back from now (24h, 90m).`,
		Example: `  loopx runs --goal-id demo
  loopx runs --goal-id demo --agent-id codex --state failed,abandoned --since 24h
  loopx runs --goal-id demo --limit 20 --cursor 118 --format json`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			q, err := filters()
			if err != nil {
				return err
			}
			return a.call(c, http.MethodGet, goalPath(goal, "turns"), q, nil,
				printPage("turns", "turn_id", "agent_id", "state", "started_at", "todo_id", "evidence", "spent", "outcome"))
		},
	}
	fs := cmd.PersistentFlags()
	fs.StringVar(&goal, "goal-id", "", "goal id")
	_ = cmd.MarkPersistentFlagRequired("goal-id")
	fs.StringVar(&agent, "agent-id", "", "only this agent's")
	fs.StringVar(&state, "state", "", "comma-separated states (turns: live, ok, failed, abandoned, stopped; decisions: paused, busy, throttled, inbox, waiting, idle, stalled, eligible, held, stop)")
	fs.StringVar(&since, "since", "", "from this time on (RFC 3339, or a duration back from now such as 24h)")
	fs.StringVar(&until, "until", "", "before this time (RFC 3339, or a duration back from now)")
	fs.IntVar(&limit, "limit", 0, "rows per page (1-200; default 50)")
	fs.StringVar(&cursor, "cursor", "", "the next page: the cursor the previous page printed")

	var verdict string
	decisions := &cobra.Command{
		Use:   "decisions",
		Short: "List a goal's recorded should-run decisions, newest first",
		Example: `  loopx runs decisions --goal-id demo --decision skip --since 24h
  loopx runs decisions --goal-id demo --agent-id codex --state throttled,waiting`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			q, err := filters()
			if err != nil {
				return err
			}
			if verdict != "" {
				q.Set("decision", verdict)
			}
			return a.call(c, http.MethodGet, goalPath(goal, "decisions"), q, nil,
				printPage("decisions", "decision_id", "at", "agent_id", "decision", "state", "reason", "turn_instance_id"))
		},
	}
	decisions.Flags().StringVar(&verdict, "decision", "", "run or skip")

	var turn int64
	show := &cobra.Command{
		Use:     "show",
		Short:   "Show one turn with its log tail and the handoff it ended with",
		Example: `  loopx runs show --goal-id demo --turn-id 42`,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return a.call(c, http.MethodGet, goalPath(goal, "turns", strconv.FormatInt(turn, 10)), nil, nil, printTurn)
		},
	}
	show.Flags().Int64Var(&turn, "turn-id", 0, "turn id (the turn_id column of loopx runs)")
	_ = show.MarkFlagRequired("turn-id")

	cmd.AddCommand(decisions, show)
	return cmd
}

// timeFlag reads --since/--until: an RFC 3339 time, or a duration back from now.
func timeFlag(flag, v string, now time.Time) (string, error) {
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d).UTC().Format(time.RFC3339), nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t.UTC().Format(time.RFC3339), nil
	}
	return "", usageError{fmt.Errorf("--%s: %q is neither an RFC 3339 time (2026-12-02T09:00:00Z) nor a duration (24h)", flag, v)}
}

// printPage prints one page of a list answer like printList, then the cursor of the next
// page when there is one.
func printPage(key string, cols ...string) func(io.Writer, json.RawMessage) error {
	list := printList(key, cols...)
	return func(w io.Writer, raw json.RawMessage) error {
		var page map[string]json.RawMessage
		if err := json.Unmarshal(raw, &page); err != nil {
			return fmt.Errorf("decode answer: %w", err)
		}
		rows, err := json.Marshal(map[string]json.RawMessage{key: page[key]})
		if err != nil {
			return fmt.Errorf("decode answer: %w", err)
		}
		if err := list(w, rows); err != nil {
			return err
		}
		var next string
		if c, ok := page["next_cursor"]; ok && json.Unmarshal(c, &next) == nil && next != "" {
			fmt.Fprintf(w, "more: --cursor %s\n", next)
		}
		return nil
	}
}
