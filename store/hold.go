package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Why an agent is held.
const (
	HeldFailures = "failures" // the breaker: failed or empty turns in a row
	HeldOwner    = "owner"    // an owner paused the agent
)

// AgentNotice renders the outbox rows that announce a change of an agent's hold (the
// breaker card, or its update), inside the operation's transaction.
type AgentNotice func(ctx context.Context, db DB, before, after Agent, by string) ([]OutboxInsert, error)

// HoldParams holds an agent on an owner's word: no heartbeat opens a turn for it, and
// should-run answers held, until an owner resumes it.
type HoldParams struct {
	GoalID  string
	AgentID string
	Notice  AgentNotice `json:"-"`
	Meta    Meta        `json:"-"`
}

// ResumeParams resumes a held agent.
type ResumeParams struct {
	GoalID  string
	AgentID string
	Notice  AgentNotice `json:"-"`
	Meta    Meta        `json:"-"`
}

// HoldResult is an agent before and after a hold or resume; Changed is false when it was
// already so (nothing was written).
type HoldResult struct {
	Agent   Agent `json:"agent"`
	Changed bool  `json:"changed"`
	Before  Agent `json:"-"`
}

func checkAgentRef(goalID, agentID string) error {
	if err := checkID("goal_id", goalID); err != nil {
		return err
	}
	return checkID("agent_id", agentID)
}

// HoldAgent holds an agent for an owner (Meta.Actor). Holding a held agent changes nothing.
func (s *Store) HoldAgent(ctx context.Context, p HoldParams) (HoldResult, error) {
	if err := checkAgentRef(p.GoalID, p.AgentID); err != nil {
		return HoldResult{}, err
	}
	return Do(ctx, s, "agent.hold", p.Meta, p, func(tx *Tx, now time.Time) (HoldResult, Audit, error) {
		before, err := getAgentForUpdate(ctx, tx, p.GoalID, p.AgentID)
		if err != nil {
			return HoldResult{}, Audit{}, err
		}
		if before.HeldAt != nil {
			return HoldResult{Agent: before, Before: before}, NoAudit(), nil
		}
		after, _, err := HoldAgentTx(ctx, tx, p.GoalID, p.AgentID, HeldOwner, p.Meta.Actor, 0, now)
		if err != nil {
			return HoldResult{}, Audit{}, err
		}
		if err := notice(ctx, tx, p.Notice, before, after, p.Meta.Actor); err != nil {
			return HoldResult{}, Audit{}, err
		}
		return HoldResult{Agent: after, Changed: true, Before: before}, Audit{GoalID: p.GoalID,
			Target: AgentTarget(p.GoalID, p.AgentID), Detail: auditDetail(map[string]any{"reason": HeldOwner})}, nil
	})
}

// HoldAgentTx holds the agent in the caller's transaction unless it is held already (then
// held is false and nothing changes): the breaker's path, which audits and announces itself.
func HoldAgentTx(ctx context.Context, db DB, goalID, agentID, reason, by string, failures int, now time.Time) (Agent, bool, error) {
	a, err := scanAgent(db.QueryRow(ctx, `UPDATE agent SET held_at = $3, held_reason = $4, held_by = $5, held_failures = $6
		WHERE goal_id = $1 AND id = $2 AND held_at IS NULL RETURNING `+agentCols, goalID, agentID, now, reason, by, failures))
	if errors.Is(err, pgx.ErrNoRows) {
		cur, err := getAgent(ctx, db, goalID, agentID)
		return cur, false, err
	}
	if err != nil {
		return Agent{}, false, fmt.Errorf("hold agent: %w", mapErr(err))
	}
	return a, true, nil
}

// ResumeAgent ends an agent's hold (an owner's resume, Meta.Actor): its failures so far no
// longer count towards the breaker, and its heartbeat is re-armed. An agent that is not held
// is ErrRefused (audited).
func (s *Store) ResumeAgent(ctx context.Context, p ResumeParams) (HoldResult, error) {
	if err := checkAgentRef(p.GoalID, p.AgentID); err != nil {
		return HoldResult{}, err
	}
	return Do(ctx, s, "agent.resume", p.Meta, p, func(tx *Tx, now time.Time) (HoldResult, Audit, error) {
		before, err := getAgentForUpdate(ctx, tx, p.GoalID, p.AgentID)
		if err != nil {
			return HoldResult{}, Audit{}, err
		}
		if before.HeldAt == nil {
			return HoldResult{}, Audit{}, because(ReasonNotHeld, refuse(ErrRefused, "agent_id",
				fmt.Sprintf("agent %s of goal %s is not held; there is nothing to resume", p.AgentID, p.GoalID),
				p.GoalID, AgentTarget(p.GoalID, p.AgentID), nil))
		}
		after, err := scanAgent(tx.QueryRow(ctx, `UPDATE agent SET held_at = NULL, held_reason = '', held_by = '',
			held_failures = 0, resumed_at = $3 WHERE goal_id = $1 AND id = $2 RETURNING `+agentCols, p.GoalID, p.AgentID, now))
		if err != nil {
			return HoldResult{}, Audit{}, fmt.Errorf("resume agent: %w", mapErr(err))
		}
		// The heartbeat was held by should-run's stop_until_explicit_resume: this is that resume.
		if _, err := tx.Exec(ctx, `UPDATE schedule SET held = false, rearm = true, updated_at = now()
			WHERE goal_id = $1 AND agent_id = $2 AND kind = 'heartbeat' AND (held OR NOT rearm)`, p.GoalID, p.AgentID); err != nil {
			return HoldResult{}, Audit{}, fmt.Errorf("resume agent's heartbeat: %w", mapErr(err))
		}
		if _, err := tx.Exec(ctx, `SELECT pg_notify('loopx_schedule', $1)`, p.GoalID); err != nil {
			return HoldResult{}, Audit{}, fmt.Errorf("wake scheduler: %w", mapErr(err))
		}
		if err := notice(ctx, tx, p.Notice, before, after, p.Meta.Actor); err != nil {
			return HoldResult{}, Audit{}, err
		}
		return HoldResult{Agent: after, Changed: true, Before: before}, Audit{GoalID: p.GoalID,
			Target: AgentTarget(p.GoalID, p.AgentID), Detail: auditDetail(map[string]any{
				"was_held": before.HeldReason, "held_at": before.HeldAt, "failures": before.HeldFailures})}, nil
	})
}

func notice(ctx context.Context, db DB, n AgentNotice, before, after Agent, by string) error {
	if n == nil {
		return nil
	}
	rows, err := n(ctx, db, before, after, by)
	if err != nil {
		return fmt.Errorf("render agent notice: %w", err)
	}
	_, err = InsertOutboxAll(ctx, db, rows)
	return err
}

func getAgentForUpdate(ctx context.Context, db DB, goalID, agentID string) (Agent, error) {
	a, err := scanAgent(db.QueryRow(ctx, `SELECT `+agentCols+` FROM agent WHERE goal_id = $1 AND id = $2 FOR NO KEY UPDATE`, goalID, agentID))
	if errors.Is(err, pgx.ErrNoRows) {
		return Agent{}, Errorf(ErrNotFound, "agent_id", "no agent %q on goal %q", agentID, goalID)
	}
	if err != nil {
		return Agent{}, fmt.Errorf("read agent: %w", mapErr(err))
	}
	return a, nil
}

// FailuresInRow counts the agent's ended turns, newest first, that failed, were abandoned
// or ended ok without progress (nothing produced), up to the first one that made progress;
// only turns started after its last resume count, and stopped turns are passed over.
func FailuresInRow(ctx context.Context, db DB, goalID, agentID string) (int, error) {
	var n int
	err := db.QueryRow(ctx, `
		WITH mark AS (SELECT coalesce(resumed_at, '-infinity'::timestamptz) AS at FROM agent WHERE goal_id = $1 AND id = $2),
		ended AS (
			SELECT t.id, (t.state IN ('failed', 'abandoned') OR (t.state = 'ok' AND NOT t.progress)) AS bad
			FROM turn t, mark WHERE t.goal_id = $1 AND t.agent_id = $2 AND t.state NOT IN ('live', 'stopped')
			  AND t.started_at > mark.at
			ORDER BY t.id DESC LIMIT 101)
		SELECT count(*) FROM ended WHERE id > coalesce((SELECT max(id) FROM ended WHERE NOT bad), 0)`,
		goalID, agentID).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count failures in a row: %w", mapErr(err))
	}
	return n, nil
}

// ListHeldAgents lists the goal's held agents.
func ListHeldAgents(ctx context.Context, db DB, goalID string) ([]Agent, error) {
	rows, err := db.Query(ctx, `SELECT `+agentCols+` FROM agent WHERE goal_id = $1 AND held_at IS NOT NULL ORDER BY id`, goalID)
	if err != nil {
		return nil, fmt.Errorf("list held agents: %w", mapErr(err))
	}
	return collect(rows, "list held agents", scanAgent)
}

// GetAgentIn reads one agent through db (a caller's transaction).
func GetAgentIn(ctx context.Context, db DB, goalID, agentID string) (Agent, error) {
	return getAgent(ctx, db, goalID, agentID)
}
