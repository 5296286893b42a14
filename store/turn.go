package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
)

// Turn states.
const (
	TurnLive      = "live"
	TurnOK        = "ok"
	TurnFailed    = "failed"
	TurnAbandoned = "abandoned"
	TurnStopped   = "stopped" // ended on an owner's /stop
)

// Outcomes LoopX itself writes on a turn (an agent's own outcome is its words); the surfaces
// say these in the reader's language (cards.Outcome).
const (
	OutcomeSpent   = "settled"              // SpendSlot ended the live turn: the state says it
	OutcomeKilled  = "process group killed" // an exec runner killed the agent's processes
	OutcomeExpired = "lease expired"        // the lease ran out (ExpireTurns' SQL writes it)
)

// HaltedBy is the outcome of a turn an owner stopped (before any detail the runner adds).
func HaltedBy(by string) string { return "halted by " + by }

// Turn is one bounded slice of work by one agent, held by a lease. At most one turn per
// goal x agent is live.
type Turn struct {
	ID             int64      `json:"turn_id"`
	GoalID         string     `json:"goal_id"`
	AgentID        string     `json:"agent_id"`
	InstanceID     string     `json:"turn_instance_id"`
	SessionID      string     `json:"session_id"`
	TodoID         int64      `json:"todo_id,omitempty"`
	Action         string     `json:"action"`
	State          string     `json:"state"`
	Progress       bool       `json:"progress"`
	LeaseExpiresAt time.Time  `json:"lease_expires_at"`
	StartedAt      time.Time  `json:"started_at"`
	EndedAt        *time.Time `json:"ended_at,omitempty"`
	Outcome        string     `json:"outcome"`
	LogTail        string     `json:"log_tail"`
	// Via is how the turn was opened: exec or webhook (a runner), mcp or cli (a host), run
	// (a heartbeat fired now); "" when not known.
	Via string `json:"via,omitempty"`
	// StopRequestedAt is set when an owner asked to stop the live turn (StopRequestedBy).
	StopRequestedAt *time.Time `json:"stop_requested_at,omitempty"`
	StopRequestedBy string     `json:"stop_requested_by,omitempty"`
	// CardState and NoteRev are the turn-card sweep's bookkeeping (turncards.go).
	CardState string `json:"-"`
	NoteRev   int    `json:"-"`
}

// OpenTurnParams opens a turn with a lease.
type OpenTurnParams struct {
	GoalID     string
	AgentID    string
	InstanceID string // "" = generated
	SessionID  string
	TodoID     int64
	Action     string
	Lease      time.Duration // 0 = 30 minutes
	Via        string        // exec | webhook | mcp | cli | run; "" = not known
	Meta       Meta          `json:"-"`
}

// EndTurnParams ends a live turn.
type EndTurnParams struct {
	GoalID     string
	AgentID    string
	InstanceID string
	State      string // ok | failed | stopped
	Outcome    string
	LogTail    string // the last 12,000 characters are kept
	Meta       Meta   `json:"-"`
}

// RenewTurnParams extends the lease of a live turn.
type RenewTurnParams struct {
	GoalID     string
	AgentID    string
	InstanceID string
	Lease      time.Duration // from now; 0 = DefaultTurnLease
	Meta       Meta          `json:"-"`
}

// DefaultTurnLease is the lease of a turn opened without one.
const DefaultTurnLease = 30 * time.Minute

const turnCols = `id, goal_id, agent_id, instance_id, session_id, coalesce(todo_id, 0), action, state, progress,
	lease_expires_at, started_at, ended_at, outcome, log_tail, via, stop_requested_at, stop_requested_by,
	card_state, note_rev`

func scanTurn(row pgx.Row) (Turn, error) {
	var t Turn
	err := row.Scan(&t.ID, &t.GoalID, &t.AgentID, &t.InstanceID, &t.SessionID, &t.TodoID, &t.Action, &t.State,
		&t.Progress, &t.LeaseExpiresAt, &t.StartedAt, &t.EndedAt, &t.Outcome, &t.LogTail, &t.Via,
		&t.StopRequestedAt, &t.StopRequestedBy, &t.CardState, &t.NoteRev)
	return t, err
}

func checkOpenTurn(p OpenTurnParams) error {
	if err := checkID("goal_id", p.GoalID); err != nil {
		return err
	}
	if err := checkID("agent_id", p.AgentID); err != nil {
		return err
	}
	if err := checkInstanceID("turn_instance_id", p.InstanceID); err != nil {
		return err
	}
	if err := checkText("session_id", p.SessionID, 200, false); err != nil {
		return err
	}
	if err := checkText("action", p.Action, 100, false); err != nil {
		return err
	}
	if err := checkOneOf("via", p.Via, "", "exec", "webhook", "mcp", "cli", "run"); err != nil {
		return err
	}
	if p.Lease < 0 || p.Lease > 24*time.Hour {
		return Errorf(ErrInvalid, "lease", "must be between 0 (the default, %s) and 24h", DefaultTurnLease)
	}
	return nil
}

// OpenTurn opens a live turn with a lease. A second live turn for the same goal x agent, or a
// reused instance id, is ErrConflict. A live turn whose lease has passed is ended as abandoned
// first.
func (s *Store) OpenTurn(ctx context.Context, p OpenTurnParams) (Turn, error) {
	if err := checkOpenTurn(p); err != nil {
		return Turn{}, err
	}
	return Do(ctx, s, "turn.open", p.Meta, p, func(tx *Tx, now time.Time) (Turn, Audit, error) {
		t, err := OpenTurnTx(ctx, tx, p, now)
		if err != nil {
			return Turn{}, Audit{}, err
		}
		return t, Audit{GoalID: t.GoalID, Target: TurnTarget(t.ID), Detail: auditDetail(map[string]any{
			"agent_id": t.AgentID, "turn_instance_id": t.InstanceID, "todo_id": t.TodoID,
		})}, nil
	})
}

// OpenTurnTx opens a turn inside the caller's transaction without audit or receipt (should-run
// --begin-turn records its own). Conflicts are reported without aborting the transaction.
func OpenTurnTx(ctx context.Context, tx DB, p OpenTurnParams, now time.Time) (Turn, error) {
	if err := checkOpenTurn(p); err != nil {
		return Turn{}, err
	}
	lease := p.Lease
	if lease == 0 {
		lease = DefaultTurnLease
	}
	instance := p.InstanceID
	if instance == "" {
		instance = "t-" + kernelHex(8)
	}
	if _, err := getAgent(ctx, tx, p.GoalID, p.AgentID); err != nil {
		return Turn{}, err
	}
	var todoID any
	if p.TodoID != 0 {
		if _, err := getTodo(ctx, tx, p.GoalID, p.TodoID, false); err != nil {
			return Turn{}, err
		}
		todoID = p.TodoID
	}
	if _, err := tx.Exec(ctx, `
		UPDATE turn SET state = 'abandoned', ended_at = $3, outcome = 'lease expired'
		WHERE goal_id = $1 AND agent_id = $2 AND state = 'live' AND lease_expires_at <= $3`,
		p.GoalID, p.AgentID, now); err != nil {
		return Turn{}, fmt.Errorf("abandon expired turn: %w", mapErr(err))
	}
	t, err := scanTurn(tx.QueryRow(ctx, `
		INSERT INTO turn (goal_id, agent_id, instance_id, session_id, todo_id, action, lease_expires_at, started_at, via)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
		ON CONFLICT DO NOTHING
		RETURNING `+turnCols,
		p.GoalID, p.AgentID, instance, p.SessionID, todoID, p.Action, now.Add(lease), now, p.Via))
	if err == nil {
		return t, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return Turn{}, fmt.Errorf("insert turn: %w", mapErr(err))
	}
	var liveID int64
	var liveInstance string
	err = tx.QueryRow(ctx, `SELECT id, instance_id FROM turn WHERE goal_id = $1 AND agent_id = $2 AND state = 'live'`,
		p.GoalID, p.AgentID).Scan(&liveID, &liveInstance)
	if err == nil {
		return Turn{}, Errorf(ErrConflict, "agent_id",
			"agent %q already has a live turn (%s); end it or wait for its lease to expire", p.AgentID, liveInstance)
	}
	return Turn{}, Errorf(ErrConflict, "turn_instance_id", "turn instance id %q was already used", instance)
}

// EndTurn ends a live turn as ok or failed, keeping the last 12,000 characters of its log.
func (s *Store) EndTurn(ctx context.Context, p EndTurnParams) (Turn, error) {
	if err := checkID("goal_id", p.GoalID); err != nil {
		return Turn{}, err
	}
	if err := checkID("agent_id", p.AgentID); err != nil {
		return Turn{}, err
	}
	if p.InstanceID == "" {
		return Turn{}, Errorf(ErrInvalid, "turn_instance_id", "is required")
	}
	if err := checkInstanceID("turn_instance_id", p.InstanceID); err != nil {
		return Turn{}, err
	}
	if err := checkOneOf("state", p.State, TurnOK, TurnFailed, TurnStopped); err != nil {
		return Turn{}, err
	}
	if err := checkText("outcome", p.Outcome, 2000, false); err != nil {
		return Turn{}, err
	}
	logTail := keepTail(strings.ToValidUTF8(strings.ReplaceAll(p.LogTail, "\x00", ""), "\uFFFD"), MaxText)
	return Do(ctx, s, "turn.end", p.Meta, p, func(tx *Tx, now time.Time) (Turn, Audit, error) {
		t, err := getTurn(ctx, tx, p.GoalID, p.AgentID, p.InstanceID, true)
		if err != nil {
			return Turn{}, Audit{}, err
		}
		if t.State != TurnLive {
			return Turn{}, Audit{}, Errorf(ErrRefused, "turn_instance_id", "turn %s already ended (%s)", t.InstanceID, t.State)
		}
		out, err := endTurnTx(ctx, tx, t.ID, p.State, p.Outcome, logTail, now)
		if err != nil {
			return Turn{}, Audit{}, err
		}
		return out, Audit{GoalID: out.GoalID, Target: TurnTarget(out.ID), Detail: auditDetail(map[string]any{
			"state": out.State, "outcome": out.Outcome,
		})}, nil
	})
}

func endTurnTx(ctx context.Context, db DB, id int64, state, outcome, logTail string, now time.Time) (Turn, error) {
	out, err := scanTurn(db.QueryRow(ctx, `
		UPDATE turn SET state = $2, outcome = $3, log_tail = CASE WHEN $4 = '' THEN log_tail ELSE $4 END, ended_at = $5
		WHERE id = $1 RETURNING `+turnCols, id, state, outcome, logTail, now))
	if err != nil {
		return Turn{}, fmt.Errorf("end turn: %w", mapErr(err))
	}
	return out, nil
}

// keepTail keeps the last n characters of s.
func keepTail(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[len(r)-n:])
}

func getTurn(ctx context.Context, db DB, goalID, agentID, instance string, forUpdate bool) (Turn, error) {
	q := `SELECT ` + turnCols + ` FROM turn WHERE goal_id = $1 AND agent_id = $2 AND instance_id = $3`
	if forUpdate {
		q += ` FOR NO KEY UPDATE` // ids never change; rows referencing this one need not wait
	}
	t, err := scanTurn(db.QueryRow(ctx, q, goalID, agentID, instance))
	if errors.Is(err, pgx.ErrNoRows) {
		return Turn{}, Errorf(ErrNotFound, "turn_instance_id", "no turn %q of agent %q on goal %q", instance, agentID, goalID)
	}
	if err != nil {
		return Turn{}, fmt.Errorf("read turn: %w", mapErr(err))
	}
	return t, nil
}

// GetTurn returns one turn by its instance id.
func (s *Store) GetTurn(ctx context.Context, goalID, agentID, instanceID string) (Turn, error) {
	if err := checkID("goal_id", goalID); err != nil {
		return Turn{}, err
	}
	if err := checkID("agent_id", agentID); err != nil {
		return Turn{}, err
	}
	return getTurn(ctx, s.DB(), goalID, agentID, instanceID, false)
}

// ExpireTurns ends every live turn whose lease has passed as abandoned, audits each, and
// returns them. The scheduler calls it periodically; should-run already ignores them.
func (s *Store) ExpireTurns(ctx context.Context) ([]Turn, error) {
	now := s.now()
	var out []Turn
	err := s.WithTx(ctx, func(tx *Tx) error {
		rows, err := tx.Query(ctx, `
			UPDATE turn SET state = 'abandoned', ended_at = $1, outcome = 'lease expired'
			WHERE state = 'live' AND lease_expires_at <= $1
			RETURNING `+turnCols, now)
		if err != nil {
			return fmt.Errorf("expire turns: %w", mapErr(err))
		}
		defer rows.Close()
		for rows.Next() {
			t, err := scanTurn(rows)
			if err != nil {
				return fmt.Errorf("expire turns: %w", mapErr(err))
			}
			out = append(out, t)
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("expire turns: %w", mapErr(err))
		}
		for _, t := range out {
			if err := InsertAudit(ctx, tx, Audit{At: now, Actor: ActorSystem, Surface: "system", Action: "turn.expire",
				GoalID: t.GoalID, Target: TurnTarget(t.ID), Allowed: true,
				Detail: auditDetail(map[string]any{"agent_id": t.AgentID, "turn_instance_id": t.InstanceID})}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// RenewTurn extends a live turn's lease to now + Lease. A turn that has ended, or whose lease
// has already passed, is ErrRefused: the agent must begin a new turn.
func (s *Store) RenewTurn(ctx context.Context, p RenewTurnParams) (Turn, error) {
	if err := checkID("goal_id", p.GoalID); err != nil {
		return Turn{}, err
	}
	if err := checkID("agent_id", p.AgentID); err != nil {
		return Turn{}, err
	}
	if p.InstanceID == "" {
		return Turn{}, Errorf(ErrInvalid, "turn_instance_id", "is required")
	}
	if err := checkInstanceID("turn_instance_id", p.InstanceID); err != nil {
		return Turn{}, err
	}
	if p.Lease < 0 || p.Lease > 24*time.Hour {
		return Turn{}, Errorf(ErrInvalid, "lease", "must be between 0 (the default, %s) and 24h", DefaultTurnLease)
	}
	lease := p.Lease
	if lease == 0 {
		lease = DefaultTurnLease
	}
	return Do(ctx, s, "turn.renew", p.Meta, p, func(tx *Tx, now time.Time) (Turn, Audit, error) {
		t, err := getTurn(ctx, tx, p.GoalID, p.AgentID, p.InstanceID, true)
		if err != nil {
			return Turn{}, Audit{}, err
		}
		if t.State != TurnLive || !t.LeaseExpiresAt.After(now) {
			return Turn{}, Audit{}, Errorf(ErrRefused, "turn_instance_id", "turn %s is no longer live; begin a new turn", t.InstanceID)
		}
		out, err := scanTurn(tx.QueryRow(ctx, `UPDATE turn SET lease_expires_at = $2 WHERE id = $1 RETURNING `+turnCols, t.ID, now.Add(lease)))
		if err != nil {
			return Turn{}, Audit{}, fmt.Errorf("renew turn: %w", mapErr(err))
		}
		return out, Audit{GoalID: out.GoalID, Target: TurnTarget(out.ID), Detail: auditDetail(map[string]any{"lease_expires_at": out.LeaseExpiresAt})}, nil
	})
}

// GetLiveTurn returns, through db, the agent's live turn whose lease has not passed at now,
// or ErrNotFound. Steering needs one.
func GetLiveTurn(ctx context.Context, db DB, goalID, agentID string, now time.Time) (Turn, error) {
	t, err := scanTurn(db.QueryRow(ctx, `SELECT `+turnCols+` FROM turn
		WHERE goal_id = $1 AND agent_id = $2 AND state = 'live' AND lease_expires_at > $3`, goalID, agentID, now))
	if err != nil {
		return Turn{}, fmt.Errorf("find live turn: %w", mapErr(err))
	}
	return t, nil
}
