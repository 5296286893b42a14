package project

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"loopx/api"
	"loopx/api/client"
	"loopx/store"
)

// ReadStatus reads the agent's status from the server.
func ReadStatus(ctx context.Context, c *client.Client, conn Connection) (api.Status, error) {
	var st api.Status
	err := c.DoJSON(ctx, client.Request{Method: http.MethodGet, Path: client.GoalPath(conn.GoalID, "status"),
		Query: url.Values{"agent_id": {conn.AgentID}}}, &st)
	return st, err
}

// RenderStatus writes the status screen: what needs a person first, then the live turn, the
// next heartbeat, quota and inbox, then the last turn's evidence.
func RenderStatus(w io.Writer, root string, conn Connection, st api.Status, now time.Time) {
	title := ""
	if st.Goal.Title != "" {
		title = " (" + st.Goal.Title + ")"
	}
	fmt.Fprintf(w, "LoopX: goal %s%s, agent %s, %s\n", st.Goal.ID, title, conn.AgentID, conn.ServerURL)
	if root != "" {
		fmt.Fprintf(w, "project %s: connected\n", root)
	}

	fmt.Fprintln(w, "\nNeeds you")
	n := st.NeedsYou
	quiet := true
	line := func(format string, args ...any) {
		quiet = false
		fmt.Fprintf(w, "  - "+format+"\n", args...)
	}
	for _, g := range n.OpenGates {
		what := "the whole goal waits"
		if g.TodoID != 0 {
			what = fmt.Sprintf("todo %d waits", g.TodoID)
		}
		line("gate %d from %s: %s [%s] (%s; answer on its card in chat, or /approve %d)", g.ID, cmpOr(g.AgentID, "loopx"),
			oneLine(g.Question, 100), strings.Join(g.Options, " / "), what, g.ID)
	}
	if n.Paused {
		line("the goal is paused: %s", st.Decision.Message)
	}
	if n.Stalled {
		line("stalled: %s", st.Decision.Message)
	}
	if n.NoOwners {
		line("the goal has no owner, so nobody can answer its gates: loopx goal set --goal-id %s --owner <open_id>", st.Goal.ID)
	}
	if n.FailedSends > 0 {
		last := ""
		if len(n.RecentFailures) > 0 {
			f := n.RecentFailures[0]
			last = fmt.Sprintf(" (latest: %s to %s, Lark code %d: %s)", f.Kind, f.ReceiveID, f.Code, oneLine(f.Error, 80))
		}
		line("%d message(s) failed to send to Lark%s; loopx doctor bot checks the app", n.FailedSends, last)
	}
	if n.MissedFires24h > 0 {
		line("%d heartbeat(s) missed in the last 24 h (the server was down)", n.MissedFires24h)
	}
	if quiet {
		fmt.Fprintln(w, "  nothing")
	}

	d := st.Decision
	fmt.Fprintln(w, "\nNow")
	fmt.Fprintf(w, "  should-run  %s (%s): %s\n", d.Decision, d.State, cmpOr(d.Message, d.Reason))
	if st.LiveTurn != nil {
		t := st.LiveTurn
		fmt.Fprintf(w, "  live turn   %s since %s, lease until %s%s\n", t.InstanceID, clock(t.StartedAt, now), clock(t.LeaseExpiresAt, now), todoOf(t))
	} else {
		fmt.Fprintln(w, "  live turn   none")
	}
	switch hb := st.Heartbeat; {
	case hb == nil:
		fmt.Fprintln(w, "  heartbeat   none: the host drives the loop (should_run each turn)")
	case hb.Held:
		fmt.Fprintf(w, "  heartbeat   %s %s, held until an owner resumes the goal\n", hb.Spec, hb.TZ)
	case hb.NextFireAt != nil:
		fmt.Fprintf(w, "  heartbeat   next %s (%s %s)\n", clock(*hb.NextFireAt, now), hb.Spec, hb.TZ)
	default:
		fmt.Fprintf(w, "  heartbeat   %s %s, not armed yet\n", hb.Spec, hb.TZ)
	}
	q := d.Quota
	fmt.Fprintf(w, "  quota       %d of %d turns left in %d h", max(q.AllowedSlots-q.SpentSlots, 0), q.AllowedSlots, q.WindowHours)
	if q.NextEligibleAt != nil {
		fmt.Fprintf(w, " (next turn free %s)", clock(*q.NextEligibleAt, now))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  inbox       %d waiting", st.Inbox.Pending)
	if st.Inbox.Steer > 0 {
		fmt.Fprintf(w, " (%d steering the live turn)", st.Inbox.Steer)
	}
	if st.Inbox.Delivered > 0 {
		fmt.Fprintf(w, ", %d drained and not acknowledged", st.Inbox.Delivered)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  next        %s, every %d min\n", HintText(d.SchedulerHint.Action), d.SchedulerHint.IntervalMinutes)

	if t := st.LastTurn; t != nil {
		ended := "live"
		if t.EndedAt != nil {
			ended = t.State + ", ended " + clock(*t.EndedAt, now)
			if t.Outcome != "" {
				ended += ": " + oneLine(t.Outcome, 60)
			}
		}
		fmt.Fprintf(w, "\nLast turn %s (%s), started %s%s\n", t.InstanceID, ended, clock(t.StartedAt, now), todoOf(t))
		if len(st.LastTurnEvidence) == 0 {
			fmt.Fprintln(w, "  no evidence recorded")
		}
		for _, e := range st.LastTurnEvidence {
			ref := ""
			if e.Ref != "" {
				ref = " (" + oneLine(e.Ref, 80) + ")"
			}
			fmt.Fprintf(w, "  - %s: %s%s\n", e.Kind, oneLine(e.Summary, 100), ref)
		}
	} else {
		fmt.Fprintln(w, "\nNo turn yet: in the host, run the loopx command (see loopx hosts status), or loopx quota should-run.")
	}
}

func todoOf(t *store.Turn) string {
	if t.TodoID == 0 {
		return ""
	}
	return fmt.Sprintf(", todo %d", t.TodoID)
}

// clock prints a time in local time, with the date when it is not today.
func clock(t, now time.Time) string {
	t, now = t.Local(), now.Local()
	if t.Year() == now.Year() && t.YearDay() == now.YearDay() {
		return t.Format("15:04:05")
	}
	return t.Format("2006-01-02 15:04")
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

func cmpOr(v ...string) string {
	for _, s := range v {
		if s != "" {
			return s
		}
	}
	return ""
}
