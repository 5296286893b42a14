package store

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Agent runner kinds.
const (
	RunnerExec    = "exec"
	RunnerWebhook = "webhook"
	RunnerPoll    = "poll"
)

// Agent is a registered peer of a goal. Its token is never stored, only its sha256.
type Agent struct {
	GoalID       string          `json:"goal_id"`
	ID           string          `json:"agent_id"`
	Runner       string          `json:"runner"` // exec | webhook | poll
	RunnerConfig json.RawMessage `json:"runner_config,omitempty"`
	WorkMode     string          `json:"work_mode"` // active | monitor_only
	IsDefault    bool            `json:"is_default"`
	CreatedAt    time.Time       `json:"created_at"`
	// HeldAt is set while the agent is held: no turn starts for it until an owner resumes it
	// (hold.go). HeldReason says who held it: "failures" (the breaker, after HeldFailures
	// failed or empty turns in a row) or "owner" (HeldBy). ResumedAt is the last resume:
	// failures before it no longer count.
	HeldAt       *time.Time `json:"held_at,omitempty"`
	HeldReason   string     `json:"held_reason,omitempty"`
	HeldBy       string     `json:"held_by,omitempty"`
	HeldFailures int        `json:"held_failures,omitempty"`
	ResumedAt    *time.Time `json:"resumed_at,omitempty"`
	// Capabilities are what the goal's owners granted this agent (a subset of the goal's);
	// a todo that requires one it lacks cannot be claimed by it.
	Capabilities []string `json:"capabilities"`
	// ReplanAcked is the newest replan decision the agent acknowledged (0: none); a newer one
	// is announced in its should-run until it does.
	ReplanAcked int64 `json:"replan_acked,omitempty"`
	// Secrets lists the runner secrets that are set (names and when they changed; values
	// are never read back). RunnerConfig never holds them.
	Secrets []SecretInfo `json:"secrets,omitempty"`
}

// RegisteredAgent is an agent with its bearer token, returned once by RegisterAgent and
// RotateAgentToken. A replay of either under its idempotency key returns Token "" (the token
// is never stored in clear); rotate again to get a new one.
type RegisteredAgent struct {
	Agent
	Token string `json:"token,omitempty"`
}

// RegisterAgentParams registers an agent on a goal and issues its token.
type RegisterAgentParams struct {
	GoalID       string
	AgentID      string
	Runner       string          // exec | webhook | poll; "" = poll
	RunnerConfig json.RawMessage // JSON object; nil = {}
	WorkMode     string          // active | monitor_only; "" = active
	IsDefault    bool            // becomes the goal's default agent (the previous one stops being it)
	Meta         Meta            `json:"-"`
}

// AgentRef names an agent for token rotation.
type AgentRef struct {
	GoalID  string
	AgentID string
	Meta    Meta `json:"-"`
}

// tokenPrefix marks LoopX agent tokens so a leaked one is recognisable in logs and scanners.
const tokenPrefix = "lxa_"

const agentCols = `goal_id, id, runner, runner_config, work_mode, is_default, created_at, held_at, held_reason,
	held_by, held_failures, resumed_at, capabilities, replan_acked`

func scanAgent(row pgx.Row) (Agent, error) {
	var a Agent
	err := row.Scan(&a.GoalID, &a.ID, &a.Runner, &a.RunnerConfig, &a.WorkMode, &a.IsDefault, &a.CreatedAt,
		&a.HeldAt, &a.HeldReason, &a.HeldBy, &a.HeldFailures, &a.ResumedAt, &a.Capabilities, &a.ReplanAcked)
	return a, err
}

// HashToken returns the sha256 stored for a bearer token.
func HashToken(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// newToken returns a fresh token: 32 random bytes, hex, with the LoopX prefix.
func newToken() string { return tokenPrefix + kernelHex(32) }

func (r RegisteredAgent) receiptBody() any { return r.Agent }

// RegisterAgent registers an agent on a goal and returns it with its token, shown this once.
// The goal's first agent becomes its default. An agent id already registered is ErrConflict.
func (s *Store) RegisterAgent(ctx context.Context, p RegisterAgentParams) (RegisteredAgent, error) {
	if err := checkID("goal_id", p.GoalID); err != nil {
		return RegisteredAgent{}, err
	}
	if err := checkID("agent_id", p.AgentID); err != nil {
		return RegisteredAgent{}, err
	}
	runner := strOr(p.Runner, RunnerPoll)
	if err := checkOneOf("runner", runner, RunnerExec, RunnerWebhook, RunnerPoll); err != nil {
		return RegisteredAgent{}, err
	}
	mode := strOr(p.WorkMode, "active")
	if err := checkOneOf("work_mode", mode, "active", "monitor_only"); err != nil {
		return RegisteredAgent{}, err
	}
	if err := CheckRunnerSettings(runner, p.RunnerConfig); err != nil {
		return RegisteredAgent{}, err
	}
	cfg, secrets, err := splitSecrets(runner, p.RunnerConfig)
	if err != nil {
		return RegisteredAgent{}, err
	}
	return Do(ctx, s, "agent.register", p.Meta, p, func(tx *Tx, now time.Time) (RegisteredAgent, Audit, error) {
		if _, err := getGoal(ctx, tx, p.GoalID, true); err != nil {
			return RegisteredAgent{}, Audit{}, err
		}
		var hasDefault bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM agent WHERE goal_id = $1 AND is_default)`, p.GoalID).Scan(&hasDefault); err != nil {
			return RegisteredAgent{}, Audit{}, fmt.Errorf("read default agent: %w", mapErr(err))
		}
		isDefault := p.IsDefault || !hasDefault
		if p.IsDefault && hasDefault {
			if _, err := tx.Exec(ctx, `UPDATE agent SET is_default = false WHERE goal_id = $1 AND is_default`, p.GoalID); err != nil {
				return RegisteredAgent{}, Audit{}, fmt.Errorf("clear default agent: %w", mapErr(err))
			}
		}
		token := newToken()
		a, err := scanAgent(tx.QueryRow(ctx, `
			INSERT INTO agent (goal_id, id, runner, runner_config, work_mode, is_default, token_hash, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
			ON CONFLICT (goal_id, id) DO NOTHING
			RETURNING `+agentCols,
			p.GoalID, p.AgentID, runner, cfg, mode, isDefault, HashToken(token), now))
		if errors.Is(err, pgx.ErrNoRows) {
			return RegisteredAgent{}, Audit{}, Errorf(ErrConflict, "agent_id",
				"agent %q is already registered on goal %q; rotate its token to get a new one", p.AgentID, p.GoalID)
		}
		if err != nil {
			return RegisteredAgent{}, Audit{}, fmt.Errorf("insert agent: %w", mapErr(err))
		}
		if _, err := s.writeSecrets(ctx, tx, a.GoalID, a.ID, secrets, now); err != nil {
			return RegisteredAgent{}, Audit{}, err
		}
		for _, name := range secretNames(secrets) {
			a.Secrets = append(a.Secrets, SecretInfo{Name: name, Set: true, ChangedAt: now})
		}
		return RegisteredAgent{Agent: a, Token: token},
			Audit{GoalID: a.GoalID, Target: AgentTarget(a.GoalID, a.ID), Detail: auditDetail(map[string]any{
				"runner": a.Runner, "runner_config": a.RunnerConfig, "secrets_set": secretNames(secrets)})}, nil
	})
}

// RotateAgentToken replaces an agent's token; the old one stops working at commit.
func (s *Store) RotateAgentToken(ctx context.Context, p AgentRef) (RegisteredAgent, error) {
	if err := checkID("goal_id", p.GoalID); err != nil {
		return RegisteredAgent{}, err
	}
	if err := checkID("agent_id", p.AgentID); err != nil {
		return RegisteredAgent{}, err
	}
	return Do(ctx, s, "agent.rotate_token", p.Meta, p, func(tx *Tx, now time.Time) (RegisteredAgent, Audit, error) {
		token := newToken()
		a, err := scanAgent(tx.QueryRow(ctx, `
			UPDATE agent SET token_hash = $3 WHERE goal_id = $1 AND id = $2 RETURNING `+agentCols,
			p.GoalID, p.AgentID, HashToken(token)))
		if errors.Is(err, pgx.ErrNoRows) {
			return RegisteredAgent{}, Audit{}, Errorf(ErrNotFound, "agent_id", "no agent %q on goal %q", p.AgentID, p.GoalID)
		}
		if err != nil {
			return RegisteredAgent{}, Audit{}, fmt.Errorf("rotate token: %w", mapErr(err))
		}
		return RegisteredAgent{Agent: a, Token: token}, Audit{GoalID: a.GoalID, Target: AgentTarget(a.GoalID, a.ID)}, nil
	})
}

// GetAgent returns one agent; unknown is ErrNotFound naming agent_id.
func (s *Store) GetAgent(ctx context.Context, goalID, agentID string) (Agent, error) {
	if err := checkID("goal_id", goalID); err != nil {
		return Agent{}, err
	}
	if err := checkID("agent_id", agentID); err != nil {
		return Agent{}, err
	}
	return getAgent(ctx, s.DB(), goalID, agentID)
}

func getAgent(ctx context.Context, db DB, goalID, agentID string) (Agent, error) {
	a, err := scanAgent(db.QueryRow(ctx, `SELECT `+agentCols+` FROM agent WHERE goal_id = $1 AND id = $2`, goalID, agentID))
	if errors.Is(err, pgx.ErrNoRows) {
		return Agent{}, Errorf(ErrNotFound, "agent_id", "no agent %q on goal %q; register it first", agentID, goalID)
	}
	if err != nil {
		return Agent{}, fmt.Errorf("read agent: %w", mapErr(err))
	}
	return a, nil
}

// ListAgents lists a goal's agents by id.
func (s *Store) ListAgents(ctx context.Context, goalID string) ([]Agent, error) {
	if err := checkID("goal_id", goalID); err != nil {
		return nil, err
	}
	return ListAgents(ctx, s.DB(), goalID)
}

// ListAgents lists a goal's agents by id, through db, each with the names of its runner
// secrets that are set (never their values).
func ListAgents(ctx context.Context, db DB, goalID string) ([]Agent, error) {
	rows, err := db.Query(ctx, `SELECT `+agentCols+` FROM agent WHERE goal_id = $1 ORDER BY id`, goalID)
	if err != nil {
		return nil, fmt.Errorf("list agents: %w", mapErr(err))
	}
	as, err := collect(rows, "list agents", scanAgent)
	if err != nil {
		return nil, err
	}
	secrets, err := listSecretInfo(ctx, db, goalID, "")
	if err != nil {
		return nil, err
	}
	for i := range as {
		as[i].Secrets = secrets[as[i].ID]
	}
	return as, nil
}

// AgentByToken finds the agent a bearer token belongs to. An unknown token is ErrNotFound;
// the token itself never appears in the error.
func (s *Store) AgentByToken(ctx context.Context, token string) (Agent, error) {
	if token == "" {
		return Agent{}, Errorf(ErrNotFound, "token", "no agent has this token")
	}
	if len(token) > len(turnTokenPrefix) && token[:len(turnTokenPrefix)] == turnTokenPrefix {
		return s.AgentByTurnToken(ctx, HashToken(token)) // per-turn token (scheduler runners)
	}
	return s.AgentByTokenHash(ctx, HashToken(token))
}

// AgentByTokenHash finds the agent whose stored token hash is hash.
func (s *Store) AgentByTokenHash(ctx context.Context, hash []byte) (Agent, error) {
	a, err := scanAgent(s.DB().QueryRow(ctx, `SELECT `+agentCols+` FROM agent WHERE token_hash = $1`, hash))
	if errors.Is(err, pgx.ErrNoRows) {
		return Agent{}, Errorf(ErrNotFound, "token", "no agent has this token")
	}
	if err != nil {
		return Agent{}, fmt.Errorf("look up token: %w", mapErr(err))
	}
	return a, nil
}
