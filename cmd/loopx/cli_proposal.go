package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"loopx/api"
	"loopx/api/client"
)

// proposalBody turns goal set's flags into a change preview request.
func proposalBody(b api.GoalBody) api.ProposalBody {
	return api.ProposalBody{Kind: "goal.set", Goal: b.Change()}
}

// previewChange posts a proposal and prints it: the diff, the effects and how to confirm.
func (a *app) previewChange(cmd *cobra.Command, goal string, body api.ProposalBody) error {
	return a.call(cmd, http.MethodPost, goalPath(goal, "proposals"), nil, body, printProposal)
}

func printProposal(w io.Writer, raw json.RawMessage) error {
	var p api.ProposalAnswer
	if err := json.Unmarshal(raw, &p); err != nil {
		return fmt.Errorf("decode proposal: %w", err)
	}
	writeProposal(w, p)
	if p.State == "preview_ready" {
		fmt.Fprintf(w, "confirm: loopx proposal confirm p%d   (before %s)\n", p.ID, p.ExpiresAt.UTC().Format("15:04 UTC"))
	}
	return nil
}

func writeProposal(w io.Writer, p api.ProposalAnswer) {
	if p.GoalID == "" {
		fmt.Fprintf(w, "p%d · machine defaults · %s (defaults version %d)\n", p.ID, p.State, p.GoalVersion)
	} else {
		fmt.Fprintf(w, "p%d · #%s · %s · %s (goal version %d)\n", p.ID, p.GoalID, p.Kind, p.State, p.GoalVersion)
	}
	for _, d := range p.Diff {
		fmt.Fprintf(w, "  %s: %s → %s\n", d.Field, orDash(d.Before), orDash(d.After))
	}
	for _, e := range p.EffectsText {
		fmt.Fprintf(w, "  • %s\n", e)
	}
	if p.Reason != "" {
		fmt.Fprintf(w, "  %s\n", p.Reason)
	}
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// parseProposalID accepts p12 or 12.
// proposalPath is where proposal p is confirmed or cancelled: under its goal, or, for a
// change of the machine defaults, on its own.
func proposalPath(p api.ProposalAnswer, verb string) string {
	if p.GoalID == "" {
		return "/v1/proposals/" + strconv.FormatInt(p.ID, 10) + "/" + verb
	}
	return goalPath(p.GoalID, "proposals", strconv.FormatInt(p.ID, 10), verb)
}

func parseProposalID(s string) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimPrefix(strings.ToLower(s), "p"), 10, 64)
	if err != nil || n <= 0 {
		return 0, usageError{fmt.Errorf("%q is not a proposal id (p12 or 12)", s)}
	}
	return n, nil
}

func (a *app) proposalCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "proposal",
		Short: "Show, confirm or cancel a previewed change",
		Long: `A protected change (budget, pause/resume, schedules, owners and members, stall guard, the
contract, done, reopen and replan, an agent's runner, work mode, default flag and
capabilities, the machine defaults) previewed with --preview (or in chat or the
workspace) is a proposal. Confirming applies it only if the goal is still at the version it
was computed against; otherwise the answer is "stale" with a fresh proposal to confirm.`,
		Example: `  loopx goal set --goal-id demo --allowed-slots 50 --preview
  loopx proposal confirm p12`,
	}
	lookup := func(c *cobra.Command, arg string) (api.ProposalAnswer, error) {
		id, err := parseProposalID(arg)
		if err != nil {
			return api.ProposalAnswer{}, err
		}
		cl, err := a.newClient()
		if err != nil {
			return api.ProposalAnswer{}, err
		}
		var p api.ProposalAnswer
		err = cl.DoJSON(c.Context(), client.Request{Method: http.MethodGet, Path: "/v1/proposals/" + strconv.FormatInt(id, 10)}, &p)
		return p, err
	}
	show := &cobra.Command{
		Use: "show ID", Short: "Show a proposal", Args: cobra.ExactArgs(1), Example: "  loopx proposal show p12",
		RunE: func(c *cobra.Command, args []string) error {
			id, err := parseProposalID(args[0])
			if err != nil {
				return err
			}
			return a.call(c, http.MethodGet, "/v1/proposals/"+strconv.FormatInt(id, 10), nil, nil, printProposal)
		},
	}
	settle := func(verb, short string) *cobra.Command {
		return &cobra.Command{
			Use: verb + " ID", Short: short, Args: cobra.ExactArgs(1), Example: "  loopx proposal " + verb + " p12",
			RunE: func(c *cobra.Command, args []string) error {
				p, err := lookup(c, args[0])
				if err != nil {
					return err
				}
				cl, err := a.newClient()
				if err != nil {
					return err
				}
				raw, err := cl.Do(c.Context(), client.Request{Method: http.MethodPost, Body: struct{}{}, IdempotencyKey: a.key(),
					Path: proposalPath(p, verb)})
				if err != nil {
					return err
				}
				var res api.ResultAnswer
				if err := json.Unmarshal(raw, &res); err != nil {
					return fmt.Errorf("decode answer: %w", err)
				}
				if err := a.show(raw, func(w io.Writer, _ json.RawMessage) error {
					writeProposal(w, res.Proposal)
					if res.Unchanged {
						fmt.Fprintf(w, "nothing done: the proposal was already %s\n", res.Proposal.State)
					}
					if res.Fresh != nil {
						fmt.Fprintln(w, "fresh proposal:")
						writeProposal(w, *res.Fresh)
						fmt.Fprintf(w, "confirm: loopx proposal confirm p%d\n", res.Fresh.ID)
					}
					return nil
				}); err != nil {
					return err
				}
				want := map[string]string{"confirm": "applied", "cancel": "cancelled"}[verb]
				if res.Proposal.State != want && !(res.Unchanged && verb == "cancel") {
					return fmt.Errorf("proposal p%d is %s, not %s", res.Proposal.ID, res.Proposal.State, want)
				}
				return nil
			},
		}
	}
	cmd.AddCommand(show, settle("confirm", "Apply a proposal (only at the goal version it was computed against)"),
		settle("cancel", "Withdraw a proposal"))
	return cmd
}
