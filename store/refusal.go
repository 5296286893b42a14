package store

import (
	"context"
	"encoding/json"
	"fmt"
)

// RefusalParams describes a refused request for AuditRefusal.
type RefusalParams struct {
	Action string // what was attempted, e.g. "answer gate"
	GoalID string
	Target string // what it was aimed at, e.g. the API route
	Reason string // why it was refused, as told to the caller
}

// AuditRefusal records a request refused before any operation ran (an API token used outside
// its scope): one audit row with allowed=false. Refusals that an operation itself decides are
// audited by that operation.
func (s *Store) AuditRefusal(ctx context.Context, m Meta, p RefusalParams) error {
	detail, err := json.Marshal(map[string]string{"refused": p.Reason})
	if err != nil {
		return fmt.Errorf("encode refusal: %w", err)
	}
	return InsertAudit(ctx, s.DB(), Audit{
		At: s.now(), Actor: m.Actor, Surface: m.Surface, Action: p.Action,
		GoalID: p.GoalID, Target: p.Target, Allowed: false, Detail: detail,
	})
}
