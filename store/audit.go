package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Audit is one row of who did what; refusals are recorded with Allowed false.
type Audit struct {
	ID      int64           `json:"id"`
	At      time.Time       `json:"at"`
	Actor   string          `json:"actor"`
	Surface string          `json:"surface"`
	Action  string          `json:"action"`
	GoalID  string          `json:"goal_id"`
	Target  string          `json:"target"`
	Allowed bool            `json:"allowed"`
	Detail  json.RawMessage `json:"detail"`

	skip bool // NoAudit: an operation with nothing to record
}

// ListAuditParams filters ListAudit.
type ListAuditParams struct {
	GoalID  string
	Limit   int
	AfterID int64
}

// InsertAudit writes one audit row in the caller's transaction. A zero At means now().
func InsertAudit(ctx context.Context, db DB, a Audit) error {
	if a.Detail == nil {
		a.Detail = json.RawMessage(`{}`)
	}
	var at any = a.At
	if a.At.IsZero() {
		at = nil
	}
	_, err := db.Exec(ctx, `
		INSERT INTO audit (at, actor, surface, action, goal_id, target, allowed, detail)
		VALUES (coalesce($1, now()), $2, $3, $4, $5, $6, $7, $8)`,
		at, a.Actor, a.Surface, a.Action, a.GoalID, a.Target, a.Allowed, a.Detail)
	if err != nil {
		return fmt.Errorf("insert audit: %w", mapErr(err))
	}
	return nil
}

// ListAudit lists a goal's audit rows ("" = all goals), oldest first.
func (s *Store) ListAudit(ctx context.Context, p ListAuditParams) ([]Audit, error) {
	if p.GoalID != "" {
		if err := checkID("goal_id", p.GoalID); err != nil {
			return nil, err
		}
	}
	n, err := listLimit(p.Limit)
	if err != nil {
		return nil, err
	}
	return queryAudit(ctx, s.DB(), `
		SELECT id, at, actor, surface, action, goal_id, target, allowed, detail FROM audit
		WHERE ($1 = '' OR goal_id = $1) AND id > $2 ORDER BY id LIMIT $3`, p.GoalID, p.AfterID, n)
}

// queryAudit runs an audit SELECT (the columns of Audit, in order) and scans every row.
func queryAudit(ctx context.Context, db DB, sql string, args ...any) ([]Audit, error) {
	rows, err := db.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("list audit: %w", mapErr(err))
	}
	return collect(rows, "list audit", scanAudit)
}

func scanAudit(row pgx.Row) (Audit, error) {
	var a Audit
	err := row.Scan(&a.ID, &a.At, &a.Actor, &a.Surface, &a.Action, &a.GoalID, &a.Target, &a.Allowed, &a.Detail)
	return a, err
}

// ListChatAudit lists audit rows with id > afterID, oldest first (goalID "" = all goals).
func ListChatAudit(ctx context.Context, db DB, goalID string, afterID int64) ([]Audit, error) {
	return queryAudit(ctx, db, `
		SELECT id, at, actor, surface, action, goal_id, target, allowed, detail
		FROM audit WHERE id > $1 AND ($2 = '' OR goal_id = $2) ORDER BY id LIMIT 1000`, afterID, goalID)
}

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
