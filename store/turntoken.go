package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// turnTokenPrefix marks per-turn tokens so logs and people can tell them from agent tokens.
const turnTokenPrefix = "lxt_"

// IssueTurnToken returns a new bearer token that acts as the turn's agent while the turn is
// live and until expires. Only its hash is stored; the token is returned once.
func (s *Store) IssueTurnToken(ctx context.Context, turn Turn, expires time.Time) (string, error) {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	token := turnTokenPrefix + hex.EncodeToString(b)
	if _, err := s.DB().Exec(ctx, `INSERT INTO turn_token (token_hash, goal_id, agent_id, turn_id, expires_at)
		VALUES ($1, $2, $3, $4, $5)`, HashToken(token), turn.GoalID, turn.AgentID, turn.ID, expires); err != nil {
		return "", fmt.Errorf("issue turn token: %w", mapErr(err))
	}
	return token, nil
}

// AgentByTurnToken finds the agent a per-turn token acts as. The token is valid while its
// turn is live and it has not expired; otherwise it is ErrNotFound, like an unknown token.
func (s *Store) AgentByTurnToken(ctx context.Context, hash []byte) (Agent, error) {
	a, err := scanAgent(s.DB().QueryRow(ctx, `SELECT `+prefixCols("a.", agentCols)+`
		FROM turn_token t JOIN turn u ON u.id = t.turn_id AND u.state = 'live'
		JOIN agent a ON a.goal_id = t.goal_id AND a.id = t.agent_id
		WHERE t.token_hash = $1 AND t.expires_at > now()`, hash))
	if errors.Is(err, pgx.ErrNoRows) {
		return Agent{}, Errorf(ErrNotFound, "token", "no agent has this token (a turn token ends with its turn)")
	}
	if err != nil {
		return Agent{}, fmt.Errorf("look up turn token: %w", mapErr(err))
	}
	return a, nil
}

// RevokeTurnTokens deletes the tokens of a turn once it has ended.
func (s *Store) RevokeTurnTokens(ctx context.Context, turnID int64) error {
	if _, err := s.DB().Exec(ctx, `DELETE FROM turn_token WHERE turn_id = $1`, turnID); err != nil {
		return fmt.Errorf("revoke turn tokens: %w", mapErr(err))
	}
	return nil
}

func prefixCols(prefix, cols string) string {
	out := make([]byte, 0, len(cols)+32)
	start := true
	for i := 0; i < len(cols); i++ {
		c := cols[i]
		if start && c != ' ' && c != '\t' && c != '\n' {
			out = append(out, prefix...)
			start = false
		}
		out = append(out, c)
		if c == ',' {
			start = true
		}
	}
	return string(out)
}
