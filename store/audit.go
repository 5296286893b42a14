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
	ID      int64     `json:"id"`
	At      time.Time `json:"at"`
	Actor   string    `json:"actor"`
	Surface string    `json:"surface"`
	Action  string    `json:"action"`
	GoalID  string    `json:"goal_id"`
	Target  string    `json:"target"`
	Allowed bool      `json:"allowed"`
	// Outcome is how the attempt ended: ok, or refused, forbidden, conflict, full. Empty
	// means ok when Allowed, else refused.
	Outcome string          `json:"outcome"`
	Detail  json.RawMessage `json:"detail"`

	skip bool // NoAudit: an operation with nothing to record
}

// Audit outcomes.
const (
	OutcomeOK        = "ok"
	OutcomeRefused   = "refused"
	OutcomeForbidden = "forbidden"
	OutcomeConflict  = "conflict"
	OutcomeFull      = "full"
)

// ListAuditParams filters ListAudit; zero fields do not filter.
type ListAuditParams struct {
	GoalID  string
	Actor   string
	Action  string
	Outcome string
	Since   time.Time // at or after
	Until   time.Time // before
	Limit   int
	AfterID int64
}

// InsertAudit writes one audit row in the caller's transaction. A zero At means now().
func InsertAudit(ctx context.Context, db DB, a Audit) error {
	if a.Detail == nil {
		a.Detail = json.RawMessage(`{}`)
	}
	if a.Outcome == "" {
		a.Outcome = OutcomeOK
		if !a.Allowed {
			a.Outcome = OutcomeRefused
		}
	}
	var at any = a.At
	if a.At.IsZero() {
		at = nil
	}
	_, err := db.Exec(ctx, `
		INSERT INTO audit (at, actor, surface, action, goal_id, target, allowed, detail, outcome)
		VALUES (coalesce($1, now()), $2, $3, $4, $5, $6, $7, $8, $9)`,
		at, a.Actor, a.Surface, a.Action, a.GoalID, a.Target, a.Allowed, a.Detail, a.Outcome)
	if err != nil {
		return fmt.Errorf("insert audit: %w", mapErr(err))
	}
	return nil
}

// ListAudit lists audit rows, oldest first, filtered by goal, actor, action, outcome and
// time (each optional).
func (s *Store) ListAudit(ctx context.Context, p ListAuditParams) ([]Audit, error) {
	if p.GoalID != "" {
		if err := checkID("goal_id", p.GoalID); err != nil {
			return nil, err
		}
	}
	if p.Outcome != "" {
		if err := checkOneOf("outcome", p.Outcome, OutcomeOK, OutcomeRefused, OutcomeForbidden, OutcomeConflict, OutcomeFull); err != nil {
			return nil, err
		}
	}
	for f, v := range map[string]string{"actor": p.Actor, "action": p.Action} {
		if err := checkText(f, v, 200, false); err != nil {
			return nil, err
		}
	}
	if !p.Since.IsZero() && !p.Until.IsZero() && !p.Until.After(p.Since) {
		return nil, Errorf(ErrInvalid, "until", "must be after since")
	}
	n, err := listLimit(p.Limit)
	if err != nil {
		return nil, err
	}
	var since, until any
	if !p.Since.IsZero() {
		since = p.Since
	}
	if !p.Until.IsZero() {
		until = p.Until
	}
	return queryAudit(ctx, s.DB(), `
		SELECT `+auditCols+` FROM audit
		WHERE ($1 = '' OR goal_id = $1) AND id > $2
		  AND ($4 = '' OR actor = $4) AND ($5 = '' OR action = $5) AND ($6 = '' OR outcome = $6)
		  AND ($7::timestamptz IS NULL OR at >= $7) AND ($8::timestamptz IS NULL OR at < $8)
		ORDER BY id LIMIT $3`, p.GoalID, p.AfterID, n, p.Actor, p.Action, p.Outcome, since, until)
}

const auditCols = `id, at, actor, surface, action, goal_id, target, allowed, outcome, detail`

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
	err := row.Scan(&a.ID, &a.At, &a.Actor, &a.Surface, &a.Action, &a.GoalID, &a.Target, &a.Allowed, &a.Outcome, &a.Detail)
	return a, err
}

// ListChatAudit lists audit rows with id > afterID, oldest first (goalID "" = all goals).
func ListChatAudit(ctx context.Context, db DB, goalID string, afterID int64) ([]Audit, error) {
	return queryAudit(ctx, db, `
		SELECT `+auditCols+`
		FROM audit WHERE id > $1 AND ($2 = '' OR goal_id = $2) ORDER BY id LIMIT 1000`, afterID, goalID)
}

// RefusalParams describes a refused request for AuditRefusal.
type RefusalParams struct {
	Action string // what was attempted, e.g. "answer gate"
	GoalID string
	Target string // what it was aimed at, e.g. the API route
	Reason string // why it was refused, as told to the caller
	// Detail adds facts to the row's detail (beside "refused"): a source, a count.
	Detail map[string]any
}

// AuditRefusal records a request refused before any operation ran (an API token used outside
// its scope): one audit row with allowed=false. Refusals that an operation itself decides are
// audited by that operation.
func (s *Store) AuditRefusal(ctx context.Context, m Meta, p RefusalParams) error {
	d := map[string]any{"refused": p.Reason}
	for k, v := range p.Detail {
		d[k] = v
	}
	detail, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("encode refusal: %w", err)
	}
	return InsertAudit(ctx, s.DB(), Audit{
		At: s.now(), Actor: m.Actor, Surface: m.Surface, Action: p.Action,
		GoalID: p.GoalID, Target: p.Target, Allowed: false, Outcome: OutcomeForbidden, Detail: detail,
	})
}
