package store

import (
	"context"
	"time"
)

// TickSnapshot is everything the should-run decision reads, fetched by ReadTickSnapshot in
// one SQL statement.
type TickSnapshot struct {
	GoalFound  bool
	Goal       Goal
	AgentFound bool
	Agent      Agent
	// LiveTurn is the agent's live turn, nil when none. A live turn whose lease passed is
	// still live until ExpireTurns runs; Decide treats it as busy either way.
	LiveTurn *Turn
	// SpentSlots is the number of slot_spent rows in the rolling window ending now.
	SpentSlots int
	// OldestSpendAt is the oldest spend inside the window, nil when none.
	OldestSpendAt *time.Time
	// OpenGates are the goal's open gates, oldest first.
	OpenGates []Gate
	// Runnable are the highest-priority open todos this agent may work on (unclaimed, claimed
	// by it, or with an expired claim lease), at most 5, by priority then id.
	Runnable []Todo
	// BlockedGates are the open gates that block a todo this agent could otherwise work on.
	BlockedGates []int64
	// InboxPending and InboxSteer count pending, unexpired inbox items for the agent.
	InboxPending int
	InboxSteer   int
	// RecentProgress holds, newest first, whether each of the agent's last ended turns made
	// progress: at most Goal.StallTurns turns, only those started after the last answered
	// stall gate.
	RecentProgress []bool
	// HintIdentity and HintStep are the stored scheduler-hint progression.
	HintIdentity string
	HintStep     int
	// NextAction is the next action of the agent's latest refresh-state, "" when none.
	NextAction string
}

// ReadTickSnapshot reads the should-run snapshot for goal x agent at now in one statement.
// db may be a transaction.
func ReadTickSnapshot(ctx context.Context, db DB, goalID, agentID string, now time.Time) (TickSnapshot, error) {
	return TickSnapshot{}, errTodo
}
