package router

import (
	"context"
	"fmt"
	"time"

	"loopx/cards"
	"loopx/quota"
	"loopx/store"
)

// statusTimeLayout is how /status, /runs and /report show a time (in a named zone).
const statusTimeLayout = "2006-01-02 15:04"

// Agent states /status shows. They come from the read-only should-run decision (quota.Peek over the
// same snapshot should-run reads), except that a live turn always shows as working: that is
// what the agent is doing, whatever the goal's state. "paused" is the word /pause uses.
const (
	agentWorking     = "working"      // a live turn: its todo and how long it has run
	agentPaused      = "paused"       // the goal is paused (/pause): no turn starts
	agentBudgetZero  = "budget_zero"  // the goal's budget is 0 turns: no turn starts
	agentThrottled   = "throttled"    // the window's turns are spent: until the next one frees
	agentDue         = "due"          // messages wait: the next heartbeat (or poll) replies
	agentMonitorOnly = "monitor_only" // only messages wake it
	agentWaiting     = "waiting"      // an owner gate blocks its work
	agentIdle        = "idle"         // no open todo it may work on
	agentStalled     = "stalled"      // turns without progress: the owner is asked
	agentReady       = "ready"        // the next heartbeat starts a turn on a todo
	agentHeld        = "held"         // the breaker or an owner holds it: no turn starts until resumed
	agentStopping    = "stopping"     // an owner stopped its live turn; it is ending
	agentDone        = "done"         // the goal is done: nothing runs until an owner reopens it
)

// zoneOf loads an IANA zone, falling back to UTC when it is empty or does not load.
func zoneOf(tz string) (*time.Location, string) {
	loc, err := time.LoadLocation(tz)
	if err != nil || tz == "" {
		return time.UTC, "UTC"
	}
	return loc, tz
}

// agentStates is the per-agent part of /status: each agent's state in words (from its
// should-run snapshot, read in the chat transaction), its inbox and its next heartbeat (from
// scheds, the goal's schedules).
func (h *handling) agentStates(ctx context.Context, goal store.Goal, scheds []store.Schedule, now time.Time) ([]map[string]any, error) {
	agents, err := store.ListAgents(ctx, h.tx, goal.ID)
	if err != nil {
		return nil, err
	}
	loc, zone := zoneOf(goal.HeartbeatTZ)
	rows := []map[string]any{}
	for _, a := range agents {
		d, snap, err := quota.Peek(ctx, h.st, goal.ID, a.ID, now)
		if err != nil {
			return nil, err
		}
		counts, err := store.CountInbox(ctx, h.tx, goal.ID, a.ID, now)
		if err != nil {
			return nil, err
		}
		row := map[string]any{
			"ID": a.ID, "Default": a.IsDefault, "Pending": counts.Pending, "Steer": counts.Steer,
			"TodoID": int64(0), "TodoText": "", "ElapsedH": 0, "ElapsedM": 0, "Until": "", "Gates": []string{},
			"StallTurns": goal.StallTurns, "Zone": zone, "Heartbeat": "", "HeartbeatZone": "", "HeartbeatHeld": false,
			"GoalID": goal.ID, "HeldReason": "", "HeldFailures": 0, "HeldBy": "", "IdleWhy": "",
			"Handoff": nil, "Replan": int64(0),
		}
		pendingWork(row, d)
		if err := h.describeAgent(ctx, row, d, snap, now, loc); err != nil {
			return nil, err
		}
		for _, sc := range scheds {
			if sc.Kind != store.ScheduleHeartbeat || sc.AgentID != a.ID || !sc.Enabled {
				continue
			}
			hloc, hzone := zoneOf(sc.TZ)
			switch {
			case sc.Held:
				row["HeartbeatHeld"] = true
			case !sc.NextFireAt.IsZero():
				row["Heartbeat"], row["HeartbeatZone"] = sc.NextFireAt.In(hloc).Format(statusTimeLayout), hzone
			}
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// describeAgent fills in row's State and the facts its words need.
func (h *handling) describeAgent(ctx context.Context, row map[string]any, d quota.Decision, snap store.ShouldRunSnapshot, now time.Time, loc *time.Location) error {
	todo := func(id int64) error {
		if id == 0 {
			return nil
		}
		text, err := store.GetTodoText(ctx, h.tx, id)
		row["TodoID"], row["TodoText"] = id, text
		return err
	}
	if statusHeld(row, d, snap) {
		if t := snap.LiveTurn; t != nil {
			return todo(t.TodoID)
		}
		return nil
	}
	if t := snap.LiveTurn; t != nil {
		row["State"] = agentWorking
		mins := max(0, int(now.Sub(t.StartedAt)/time.Minute))
		row["ElapsedH"], row["ElapsedM"] = mins/60, mins%60
		return todo(t.TodoID)
	}
	switch {
	case d.State == quota.StatePaused && d.Reason == "quota_zero":
		row["State"] = agentBudgetZero
	case d.State == quota.StatePaused:
		row["State"] = agentPaused
	case d.State == quota.StateThrottled:
		row["State"] = agentThrottled
		if at := d.Quota.NextEligibleAt; at != nil {
			row["Until"] = at.In(loc).Format(statusTimeLayout)
		}
	case d.State == quota.StateInbox:
		row["State"] = agentDue
	case d.Reason == "monitor_only":
		row["State"] = agentMonitorOnly
	case d.State == quota.StateWaiting:
		row["State"] = agentWaiting
		gates := make([]string, len(d.Gates.Blocking))
		for i, id := range d.Gates.Blocking {
			gates[i] = cards.ShortGate(id)
		}
		row["Gates"] = gates
	case d.State == quota.StateStalled:
		row["State"] = agentStalled
	case d.State == quota.StateEligible:
		row["State"] = agentReady
		if d.SelectedTodo != nil {
			return todo(d.SelectedTodo.ID)
		}
	case d.State == quota.StateIdle:
		row["State"] = agentIdle
		if d.Reason == "missing_capability" || d.Reason == "work_complete" {
			row["IdleWhy"] = d.Reason
		}
	case d.State == quota.StateDone:
		row["State"] = agentDone
	default:
		return fmt.Errorf("describe agent %s: unexpected should-run state %q", snap.Agent.ID, d.State)
	}
	return nil
}

// nextReport is when the goal's report schedule (among scheds) fires next and in which zone
// it is shown ("" when none is scheduled or armed yet).
func nextReport(scheds []store.Schedule) (at, zone string) {
	for _, sc := range scheds {
		if sc.Kind == store.ScheduleReport && sc.Enabled && !sc.NextFireAt.IsZero() {
			loc, zone := zoneOf(sc.TZ)
			return sc.NextFireAt.In(loc).Format(statusTimeLayout), zone
		}
	}
	return "", ""
}

// pendingWork fills in what waits for the agent besides its todos: the oldest handoff it has
// not acknowledged (and how many more), and a replan it has not read yet.
func pendingWork(row map[string]any, d quota.Decision) {
	if c := d.Continuation; c != nil {
		row["Handoff"] = map[string]any{"From": c.From, "By": c.CreatedBy, "TodoID": c.TodoID, "Kind": c.Kind,
			"Next": c.Next, "Done": c.Done, "More": d.ContinuationsPending - 1}
	}
	if oc := d.ObjectiveChanged; oc != nil {
		row["Replan"] = oc.GoalVersion
	}
}
