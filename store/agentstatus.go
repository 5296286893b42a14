package store

import (
	"context"
	"fmt"
)

// Reads for an agent's status page (`loopx status`, the goal_status MCP tool): its latest
// turn and what that turn recorded. Read-only; each is one statement on db.

// GetLatestTurn returns the agent's most recent turn, live or ended, or ErrNotFound when it
// never had one.
func GetLatestTurn(ctx context.Context, db DB, goalID, agentID string) (Turn, error) {
	t, err := scanTurn(db.QueryRow(ctx, `SELECT `+turnCols+` FROM turn
		WHERE goal_id = $1 AND agent_id = $2 ORDER BY id DESC LIMIT 1`, goalID, agentID))
	if err != nil {
		return Turn{}, fmt.Errorf("read latest turn: %w", mapErr(err))
	}
	return t, nil
}

// ListTurnEvidence returns the evidence recorded on a turn, oldest first, at most limit rows.
func ListTurnEvidence(ctx context.Context, db DB, goalID string, turnID int64, limit int) ([]Evidence, error) {
	if limit <= 0 {
		return nil, Errorf(ErrInvalid, "limit", "must be positive, got %d", limit)
	}
	rows, err := db.Query(ctx, `SELECT `+evidenceCols+` FROM evidence
		WHERE goal_id = $1 AND turn_id = $2 ORDER BY id LIMIT $3`, goalID, turnID, limit)
	if err != nil {
		return nil, fmt.Errorf("read turn evidence: %w", mapErr(err))
	}
	return collect(rows, "read turn evidence", scanEvidence)
}
