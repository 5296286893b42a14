package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// RunRequest is a heartbeat someone asked to fire now (/run, [Retry now], the workspace, the
// API): a scheduler replica claims it, asks should-run (so the quota and every other rule
// still apply), starts the turn when the answer is run, and answers in the chat it came from.
type RunRequest struct {
	ID          int64           `json:"run_id"`
	GoalID      string          `json:"goal_id"`
	AgentID     string          `json:"agent_id"`
	RequestedBy string          `json:"requested_by"`
	Surface     string          `json:"surface"`
	ChatID      string          `json:"chat_id,omitempty"`  // where to answer; "" = nowhere
	ReplyTo     string          `json:"reply_to,omitempty"` // the message to answer
	Lang        string          `json:"lang,omitempty"`
	State       string          `json:"state"` // pending | done
	Outcome     json.RawMessage `json:"outcome,omitempty"`
	CreatedAt   time.Time       `json:"created_at"`
	DoneAt      *time.Time      `json:"done_at,omitempty"`
	// Runner is the agent's runner kind (filled in by ClaimRunRequests).
	Runner string `json:"-"`
}

// RunParams asks to fire an agent's heartbeat now.
type RunParams struct {
	GoalID  string
	AgentID string
	ChatID  string
	ReplyTo string
	Lang    string
	Meta    Meta `json:"-"`
}

const runRequestCols = `r.id, r.goal_id, r.agent_id, r.requested_by, r.surface, r.chat_id, r.reply_to, r.lang, r.state,
	r.outcome, r.created_at, r.done_at`

func scanRunRequest(row pgx.Row) (RunRequest, error) {
	var r RunRequest
	err := row.Scan(&r.ID, &r.GoalID, &r.AgentID, &r.RequestedBy, &r.Surface, &r.ChatID, &r.ReplyTo, &r.Lang,
		&r.State, &r.Outcome, &r.CreatedAt, &r.DoneAt)
	return r, err
}

// RequestRun records a heartbeat to fire now for the agent (audited as agent.run); the
// scheduler is woken by the insert. An unknown agent is ErrNotFound.
func (s *Store) RequestRun(ctx context.Context, p RunParams) (RunRequest, error) {
	if err := checkAgentRef(p.GoalID, p.AgentID); err != nil {
		return RunRequest{}, err
	}
	if err := CheckLarkIDs(map[string]string{"chat_id": p.ChatID, "reply_to": p.ReplyTo}); err != nil {
		return RunRequest{}, err
	}
	return Do(ctx, s, "agent.run", p.Meta, p, func(tx *Tx, now time.Time) (RunRequest, Audit, error) {
		if _, err := getAgent(ctx, tx, p.GoalID, p.AgentID); err != nil {
			return RunRequest{}, Audit{}, err
		}
		r, err := scanRunRequest(tx.QueryRow(ctx, `INSERT INTO run_request AS r (goal_id, agent_id, requested_by, surface,
			chat_id, reply_to, lang, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING `+runRequestCols,
			p.GoalID, p.AgentID, p.Meta.Actor, p.Meta.Surface, p.ChatID, p.ReplyTo, p.Lang, now))
		if err != nil {
			return RunRequest{}, Audit{}, fmt.Errorf("record run request: %w", mapErr(err))
		}
		return r, Audit{GoalID: p.GoalID, Target: AgentTarget(p.GoalID, p.AgentID),
			Detail: auditDetail(map[string]any{"run_id": r.ID})}, nil
	})
}

// RequestRunTx records a heartbeat to fire now inside the caller's transaction (a card
// click, which audits itself).
func RequestRunTx(ctx context.Context, db DB, p RunParams, now time.Time) (RunRequest, error) {
	r, err := scanRunRequest(db.QueryRow(ctx, `INSERT INTO run_request AS r (goal_id, agent_id, requested_by, surface,
		chat_id, reply_to, lang, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING `+runRequestCols,
		p.GoalID, p.AgentID, p.Meta.Actor, p.Meta.Surface, p.ChatID, p.ReplyTo, p.Lang, now))
	if err != nil {
		return RunRequest{}, fmt.Errorf("record run request: %w", mapErr(err))
	}
	return r, nil
}

// ClaimRunRequests claims up to limit pending run requests for owner until now+lease (one
// statement); a claim that lapsed (its replica died) is claimed again and replays.
func (s *Store) ClaimRunRequests(ctx context.Context, owner string, now time.Time, lease time.Duration, limit int) ([]RunRequest, error) {
	rows, err := s.DB().Query(ctx, `WITH picked AS (
			SELECT id FROM run_request WHERE state = 'pending' AND (claimed_until IS NULL OR claimed_until <= $1)
			ORDER BY id LIMIT $3 FOR UPDATE SKIP LOCKED
		), claimed AS (
			UPDATE run_request c SET claimed_by = $4, claimed_until = $2 FROM picked WHERE c.id = picked.id RETURNING c.*
		)
		SELECT `+runRequestCols+`, a.runner FROM claimed r JOIN agent a ON a.goal_id = r.goal_id AND a.id = r.agent_id
		ORDER BY r.id`, now, now.Add(lease), limit, owner)
	if err != nil {
		return nil, fmt.Errorf("claim run requests: %w", mapErr(err))
	}
	return collect(rows, "claim run requests", func(row pgx.Row) (RunRequest, error) {
		var r RunRequest
		err := row.Scan(&r.ID, &r.GoalID, &r.AgentID, &r.RequestedBy, &r.Surface, &r.ChatID, &r.ReplyTo, &r.Lang,
			&r.State, &r.Outcome, &r.CreatedAt, &r.DoneAt, &r.Runner)
		return r, err
	})
}

// FinishRunRequest settles a claimed run request with its outcome in the caller's
// transaction. It reports false when owner no longer holds the claim (another replica took
// it over and answers it).
func FinishRunRequest(ctx context.Context, db DB, id int64, owner string, outcome any, now time.Time) (bool, error) {
	b, err := json.Marshal(outcome)
	if err != nil {
		return false, fmt.Errorf("encode run outcome: %w", err)
	}
	tag, err := db.Exec(ctx, `UPDATE run_request SET state = 'done', outcome = $3, done_at = $4, claimed_until = NULL
		WHERE id = $1 AND claimed_by = $2 AND state = 'pending'`, id, owner, b, now)
	if err != nil {
		return false, fmt.Errorf("finish run request: %w", mapErr(err))
	}
	return tag.RowsAffected() == 1, nil
}

// GetRunRequest reads one run request.
func (s *Store) GetRunRequest(ctx context.Context, id int64) (RunRequest, error) {
	r, err := scanRunRequest(s.DB().QueryRow(ctx, `SELECT `+runRequestCols+` FROM run_request r WHERE r.id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return RunRequest{}, Errorf(ErrNotFound, "run_id", "no run request %d", id)
	}
	if err != nil {
		return RunRequest{}, fmt.Errorf("read run request: %w", mapErr(err))
	}
	return r, nil
}

// HasPendingRunRequests tells the scheduler whether a run request waits.
func (s *Store) HasPendingRunRequests(ctx context.Context, now time.Time) (bool, error) {
	var ok bool
	err := s.DB().QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM run_request WHERE state = 'pending'
		AND (claimed_until IS NULL OR claimed_until <= $1))`, now).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("look for run requests: %w", mapErr(err))
	}
	return ok, nil
}
