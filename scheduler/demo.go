package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"loopx/store"
)

// DemoGoalID is the goal SeedDemo creates. Its id hashes to a small jitter (13 s), so the
// first turn starts within a minute or so of the server.
const DemoGoalID = "demo-release"

// DemoParams says who owns the demo and how its agent runs.
type DemoParams struct {
	Owner  string // open_id of the demo owner (the sandbox user)
	ChatID string // chat the goal is bound to ("" = none)
	// Argv runs the demo agent, e.g. ["/bin/sh", "examples/demo-agent.sh"].
	Argv []string
	// Env is added to the agent's environment (LOOPX_BIN: the loopx binary to call).
	Env map[string]string
}

// SeedDemo creates, once, a demo goal with a one-minute heartbeat, an exec agent running
// the bundled script, two todos (the first needs an owner's approval; the second has an
// acceptance criterion, like the goal), and a binding to the sandbox chat. Once both todos
// are finished and evidenced, LoopX proposes finishing the goal to its owner. It returns false when the demo goal exists already (another replica or
// an earlier start seeded it).
func SeedDemo(ctx context.Context, st *store.Store, p DemoParams) (bool, error) {
	if p.Owner == "" || len(p.Argv) == 0 {
		return false, errors.New("seed demo: Owner and Argv are required")
	}
	if _, err := st.GetGoal(ctx, DemoGoalID); err == nil {
		return false, nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return false, fmt.Errorf("seed demo: %w", err)
	}
	meta := store.Meta{Actor: store.ActorSystem, Surface: "system"}
	_, err := st.CreateGoal(ctx, store.CreateGoalParams{
		ID:    DemoGoalID,
		Title: "Demo: write and publish the release notes",
		Objective: "Draft release notes for the next version from the merged changes, ask the owner " +
			"before publishing them, then publish. Answer anyone who writes to the agent.",
		Owners: []string{p.Owner}, HeartbeatSpec: "* * * * *", ReportSpec: "0 9 * * *",
		Criteria: []store.Criterion{{ID: "g1", Text: "the release notes are published"}}, Meta: meta,
	})
	if errors.Is(err, store.ErrConflict) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("seed demo goal: %w", err)
	}
	cfg, err := json.Marshal(map[string]any{"argv": p.Argv, "env": p.Env, "timeout": "2m"})
	if err != nil {
		return false, fmt.Errorf("seed demo agent: %w", err)
	}
	if _, err := st.RegisterAgent(ctx, store.RegisterAgentParams{GoalID: DemoGoalID, AgentID: "writer",
		Runner: store.RunnerExec, RunnerConfig: cfg, IsDefault: true, Meta: meta}); err != nil {
		return false, fmt.Errorf("seed demo agent: %w", err)
	}
	for _, t := range []struct {
		text     string
		prio     int
		criteria []store.Criterion
	}{
		{"Draft the release notes and ask the owner before publishing them", 1, nil},
		{"Publish the release notes", 2, []store.Criterion{{ID: "c1", Text: "the notes are at a link the team can open"}}},
	} {
		if _, err := st.AddTodo(ctx, store.AddTodoParams{GoalID: DemoGoalID, Text: t.text, Priority: &t.prio,
			Criteria: t.criteria, Meta: meta}); err != nil {
			return false, fmt.Errorf("seed demo todo: %w", err)
		}
	}
	if p.ChatID != "" {
		if err := st.WithTx(ctx, func(tx *store.Tx) error {
			return store.Bind(ctx, tx, store.Binding{ChatID: p.ChatID, GoalID: DemoGoalID, AgentID: "writer", CreatedBy: p.Owner})
		}); err != nil {
			return false, fmt.Errorf("seed demo binding: %w", err)
		}
	}
	return true, nil
}
