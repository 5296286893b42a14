package store

import (
	"context"
	"fmt"
)

// RecordTurnLog keeps a runner's log tail on a turn that ended by another path (spend-slot
// settles the turn while the agent process is still finishing). It only fills an empty
// tail, so it never overwrites what EndTurn recorded.
func (s *Store) RecordTurnLog(ctx context.Context, turnID int64, tail string) error {
	if r := []rune(tail); len(r) > 12000 {
		tail = string(r[len(r)-12000:])
	}
	if _, err := s.DB().Exec(ctx, `UPDATE turn SET log_tail = $2 WHERE id = $1 AND log_tail = ''`, turnID, tail); err != nil {
		return fmt.Errorf("record turn log: %w", mapErr(err))
	}
	return nil
}
