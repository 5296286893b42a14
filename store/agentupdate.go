package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// UpdateAgentParams changes an agent's runner settings or work mode. RunnerConfig, when
// given, replaces the settings; the secrets in it are set (a value equal to the stored one
// changes nothing), and secrets it leaves out are kept unless named in UnsetSecrets, so a
// webhook's URL can change without sending its secret again.
type UpdateAgentParams struct {
	GoalID       string
	AgentID      string
	RunnerConfig json.RawMessage
	UnsetSecrets []string // "secret", "env.NAME"
	WorkMode     *string
	Meta         Meta `json:"-"`
}

// UpdateAgent applies p and audits what changed field by field, secrets redacted.
func (s *Store) UpdateAgent(ctx context.Context, p UpdateAgentParams) (Agent, error) {
	if err := checkID("goal_id", p.GoalID); err != nil {
		return Agent{}, err
	}
	if err := checkID("agent_id", p.AgentID); err != nil {
		return Agent{}, err
	}
	if p.WorkMode != nil {
		if err := checkOneOf("work_mode", *p.WorkMode, "active", "monitor_only"); err != nil {
			return Agent{}, err
		}
	}
	if err := checkJSONObject("runner_config", p.RunnerConfig); err != nil {
		return Agent{}, err
	}
	return Do(ctx, s, "agent.update", p.Meta, p, func(tx *Tx, now time.Time) (Agent, Audit, error) {
		before, err := scanAgent(tx.QueryRow(ctx, `SELECT `+agentCols+` FROM agent WHERE goal_id = $1 AND id = $2 FOR UPDATE`, p.GoalID, p.AgentID))
		if errors.Is(err, pgx.ErrNoRows) {
			return Agent{}, Audit{}, Errorf(ErrNotFound, "agent_id", "no agent %q on goal %q; register it first", p.AgentID, p.GoalID)
		}
		if err != nil {
			return Agent{}, Audit{}, fmt.Errorf("read agent: %w", mapErr(err))
		}
		infos, err := listSecretInfo(ctx, tx, p.GoalID, p.AgentID)
		if err != nil {
			return Agent{}, Audit{}, err
		}
		wasSet := map[string]bool{}
		for _, i := range infos[p.AgentID] {
			wasSet[i.Name] = true
		}
		for _, n := range p.UnsetSecrets {
			if !wasSet[n] {
				return Agent{}, Audit{}, Errorf(ErrInvalid, "unset_secrets", "%q is not a secret set on agent %s/%s", clip(n), p.GoalID, p.AgentID)
			}
		}
		after := before
		if p.WorkMode != nil {
			after.WorkMode = *p.WorkMode
		}
		public := before.RunnerConfig
		var given map[string]string
		if p.RunnerConfig != nil || len(p.UnsetSecrets) > 0 {
			kept, err := s.openSecrets(ctx, tx, p.GoalID, p.AgentID, true)
			if err != nil {
				return Agent{}, Audit{}, err
			}
			for _, n := range p.UnsetSecrets {
				delete(kept, n)
			}
			newPublic := before.RunnerConfig
			if p.RunnerConfig != nil {
				newPublic, given = stripSecrets(before.Runner, p.RunnerConfig)
			}
			full := maps.Clone(kept)
			maps.Copy(full, given)
			merged, err := mergeSecrets(before.Runner, newPublic, full)
			if err != nil {
				return Agent{}, Audit{}, err
			}
			if err := CheckRunnerSettings(before.Runner, merged); err != nil {
				return Agent{}, Audit{}, err
			}
			if public, _, err = splitSecrets(before.Runner, merged); err != nil {
				return Agent{}, Audit{}, err
			}
		}
		after.RunnerConfig = public
		if _, err := tx.Exec(ctx, `UPDATE agent SET runner_config = $3, work_mode = $4 WHERE goal_id = $1 AND id = $2`,
			p.GoalID, p.AgentID, public, after.WorkMode); err != nil {
			return Agent{}, Audit{}, fmt.Errorf("update agent: %w", mapErr(err))
		}
		changed, err := s.writeSecrets(ctx, tx, p.GoalID, p.AgentID, given, now)
		if err != nil {
			return Agent{}, Audit{}, err
		}
		if len(p.UnsetSecrets) > 0 {
			if _, err := tx.Exec(ctx, `DELETE FROM agent_secret WHERE goal_id = $1 AND agent_id = $2 AND name = ANY ($3)`,
				p.GoalID, p.AgentID, p.UnsetSecrets); err != nil {
				return Agent{}, Audit{}, fmt.Errorf("unset runner secrets: %w", mapErr(err))
			}
		}
		diff := map[string]Change{}
		for k, c := range changes(before.RunnerConfig, public) {
			diff["runner_config."+k] = c
		}
		if before.WorkMode != after.WorkMode {
			diff["work_mode"] = Change{Before: before.WorkMode, After: after.WorkMode}
		}
		maps.Copy(diff, secretChanges(wasSet, changed, slices.Sorted(slices.Values(p.UnsetSecrets))))
		now2, err := listSecretInfo(ctx, tx, p.GoalID, p.AgentID)
		if err != nil {
			return Agent{}, Audit{}, err
		}
		after.Secrets = now2[p.AgentID]
		return after, Audit{GoalID: p.GoalID, Target: AgentTarget(p.GoalID, p.AgentID),
			Detail: auditDetail(map[string]any{"changes": diff})}, nil
	})
}
