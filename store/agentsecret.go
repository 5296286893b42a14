package store

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// SecretInfo says that a runner secret is set and when its value last changed; its value is
// never read back through any surface but the runner.
type SecretInfo struct {
	Name      string    `json:"name"` // "secret" (webhook) or "env.NAME" (exec)
	Set       bool      `json:"set"`
	ChangedAt time.Time `json:"changed_at"`
}

// UnreadableSecret names a stored runner secret the server's keys cannot open.
type UnreadableSecret struct {
	GoalID  string `json:"goal_id"`
	AgentID string `json:"agent_id"`
	Name    string `json:"name"`
	KeyID   string `json:"key_id"` // the key that sealed it (an id, never a key)
}

// writeSecrets seals and upserts secrets of an agent; a value equal to the stored one keeps
// its changed_at. It returns the names whose value changed.
func (s *Store) writeSecrets(ctx context.Context, db DB, goalID, agentID string, secrets map[string]string, now time.Time) ([]string, error) {
	if len(secrets) == 0 {
		return nil, nil
	}
	old, err := s.openSecrets(ctx, db, goalID, agentID, true)
	if err != nil {
		return nil, err
	}
	var changed []string
	for _, name := range slices.Sorted(maps.Keys(secrets)) {
		v := secrets[name]
		if prev, ok := old[name]; ok && prev == v {
			continue
		}
		sealed, keyID := s.keys.seal(secretAAD(goalID, agentID, name), v)
		if _, err := db.Exec(ctx, `
			INSERT INTO agent_secret (goal_id, agent_id, name, sealed, key_id, changed_at)
			VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT (goal_id, agent_id, name) DO UPDATE
			SET sealed = excluded.sealed, key_id = excluded.key_id, changed_at = excluded.changed_at`,
			goalID, agentID, name, sealed, keyID, now); err != nil {
			return nil, fmt.Errorf("store runner secret: %w", mapErr(err))
		}
		changed = append(changed, name)
	}
	return changed, nil
}

// openSecrets reads and opens an agent's secrets. With lenient, a secret the keys cannot
// open is left out (it is about to be overwritten or reported); otherwise it is an error
// naming it.
func (s *Store) openSecrets(ctx context.Context, db DB, goalID, agentID string, lenient bool) (map[string]string, error) {
	rows, err := db.Query(ctx, `SELECT name, sealed, key_id FROM agent_secret WHERE goal_id = $1 AND agent_id = $2`, goalID, agentID)
	if err != nil {
		return nil, fmt.Errorf("read runner secrets: %w", mapErr(err))
	}
	type row struct {
		name, keyID string
		sealed      []byte
	}
	rs, err := collect(rows, "read runner secrets", func(r pgx.Row) (row, error) {
		var x row
		err := r.Scan(&x.name, &x.sealed, &x.keyID)
		return x, err
	})
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(rs))
	for _, r := range rs {
		v, err := s.keys.open(secretAAD(goalID, agentID, r.name), r.sealed, r.keyID)
		if err != nil {
			if lenient {
				continue
			}
			return nil, &Error{Kind: ErrSecretUnreadable, Field: "runner_config." + r.name,
				Msg: fmt.Sprintf("runner secret %s of agent %s/%s was sealed with key %s, which this server does not hold (LOOPX_SECRET_KEY); set it again or restore the key", r.name, goalID, agentID, r.keyID)}
		}
		out[r.name] = v
	}
	return out, nil
}

// listSecretInfo reads the secret names of a goal's agents (agentID "" = all of them).
func listSecretInfo(ctx context.Context, db DB, goalID, agentID string) (map[string][]SecretInfo, error) {
	rows, err := db.Query(ctx, `SELECT agent_id, name, changed_at FROM agent_secret
		WHERE goal_id = $1 AND ($2 = '' OR agent_id = $2) ORDER BY agent_id, name`, goalID, agentID)
	if err != nil {
		return nil, fmt.Errorf("list runner secrets: %w", mapErr(err))
	}
	type row struct {
		agent string
		info  SecretInfo
	}
	rs, err := collect(rows, "list runner secrets", func(r pgx.Row) (row, error) {
		var x row
		x.info.Set = true
		err := r.Scan(&x.agent, &x.info.Name, &x.info.ChangedAt)
		return x, err
	})
	if err != nil {
		return nil, err
	}
	out := map[string][]SecretInfo{}
	for _, r := range rs {
		out[r.agent] = append(out[r.agent], r.info)
	}
	return out, nil
}

// RunnerConfig returns an agent's runner settings with its secrets opened, for the runner
// that wakes it and for nothing else. A secret the server's keys cannot open is an error
// (ErrSecretUnreadable) naming it.
func (s *Store) RunnerConfig(ctx context.Context, goalID, agentID string) (json.RawMessage, error) {
	a, err := getAgent(ctx, s.DB(), goalID, agentID)
	if err != nil {
		return nil, err
	}
	secrets, err := s.openSecrets(ctx, s.DB(), goalID, agentID, false)
	if err != nil {
		return nil, err
	}
	return mergeSecrets(a.Runner, a.RunnerConfig, secrets)
}

// SecretKeyID names the key this Store seals secrets with (an id, never the key).
func (s *Store) SecretKeyID() string { return s.keys.PrimaryID() }

// ListUnreadableSecrets lists every stored runner secret the server's keys cannot open (a
// wrong LOOPX_SECRET_KEY, or a rotation that lost a key); `loopx doctor` names them.
func (s *Store) ListUnreadableSecrets(ctx context.Context) ([]UnreadableSecret, error) {
	rows, err := s.DB().Query(ctx, `SELECT goal_id, agent_id, name, key_id, sealed FROM agent_secret ORDER BY goal_id, agent_id, name`)
	if err != nil {
		return nil, fmt.Errorf("list runner secrets: %w", mapErr(err))
	}
	var out []UnreadableSecret
	for rows.Next() {
		var u UnreadableSecret
		var sealed []byte
		if err := rows.Scan(&u.GoalID, &u.AgentID, &u.Name, &u.KeyID, &sealed); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read runner secret: %w", mapErr(err))
		}
		if _, err := s.keys.open(secretAAD(u.GoalID, u.AgentID, u.Name), sealed, u.KeyID); err != nil {
			out = append(out, u)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list runner secrets: %w", mapErr(err))
	}
	return out, nil
}

// ReencryptSecrets seals every runner secret again under the primary key, in one
// transaction, opening each with any key of the keyring (the rotation of `loopx secrets
// rotate-key`). A secret no key opens stops it with nothing changed, naming the secret.
// It returns how many rows it sealed again.
func (s *Store) ReencryptSecrets(ctx context.Context) (int, error) {
	n := 0
	err := s.WithTx(ctx, func(tx *Tx) error {
		rows, err := tx.Query(ctx, `SELECT goal_id, agent_id, name, key_id, sealed FROM agent_secret ORDER BY 1, 2, 3 FOR UPDATE`)
		if err != nil {
			return fmt.Errorf("lock runner secrets: %w", mapErr(err))
		}
		type row struct {
			u      UnreadableSecret
			sealed []byte
		}
		rs, err := collect(rows, "read runner secrets", func(r pgx.Row) (row, error) {
			var x row
			err := r.Scan(&x.u.GoalID, &x.u.AgentID, &x.u.Name, &x.u.KeyID, &x.sealed)
			return x, err
		})
		if err != nil {
			return err
		}
		for _, r := range rs {
			if r.u.KeyID == s.keys.PrimaryID() {
				continue
			}
			aad := secretAAD(r.u.GoalID, r.u.AgentID, r.u.Name)
			v, err := s.keys.open(aad, r.sealed, r.u.KeyID)
			if err != nil {
				return &Error{Kind: ErrSecretUnreadable, Field: "runner_config." + r.u.Name,
					Msg: fmt.Sprintf("runner secret %s of agent %s/%s was sealed with key %s, which no key given opens; give that key as LOOPX_SECRET_KEY_PREVIOUS", r.u.Name, r.u.GoalID, r.u.AgentID, r.u.KeyID)}
			}
			sealed, keyID := s.keys.seal(aad, v)
			if _, err := tx.Exec(ctx, `UPDATE agent_secret SET sealed = $4, key_id = $5 WHERE goal_id = $1 AND agent_id = $2 AND name = $3`,
				r.u.GoalID, r.u.AgentID, r.u.Name, sealed, keyID); err != nil {
				return fmt.Errorf("seal runner secret again: %w", mapErr(err))
			}
			n++
		}
		return nil
	})
	return n, err
}

// SealPlaintextSecrets moves secrets still kept in clear in agent.runner_config (written
// before secrets were sealed) into agent_secret, sealed, and strips them from the settings.
// `loopx serve` runs it at every start; it returns how many agents it changed.
func (s *Store) SealPlaintextSecrets(ctx context.Context) (int, error) {
	n := 0
	err := s.WithTx(ctx, func(tx *Tx) error {
		rows, err := tx.Query(ctx, `SELECT `+agentCols+` FROM agent
			WHERE (runner = 'webhook' AND runner_config ? 'secret') OR (runner = 'exec' AND runner_config ? 'env')
			FOR UPDATE`)
		if err != nil {
			return fmt.Errorf("find runner secrets in clear: %w", mapErr(err))
		}
		as, err := collect(rows, "find runner secrets in clear", scanAgent)
		if err != nil {
			return err
		}
		for _, a := range as {
			public, secrets, err := splitSecrets(a.Runner, a.RunnerConfig)
			if err != nil {
				// Settings that never worked stay as they are, but the secret still leaves.
				public, secrets = stripSecrets(a.Runner, a.RunnerConfig)
			}
			if _, err := s.writeSecrets(ctx, tx, a.GoalID, a.ID, secrets, s.now()); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE agent SET runner_config = $3 WHERE goal_id = $1 AND id = $2`, a.GoalID, a.ID, public); err != nil {
				return fmt.Errorf("strip runner secrets: %w", mapErr(err))
			}
			n++
		}
		return nil
	})
	return n, err
}

// stripSecrets removes the secret members of settings that do not parse: the "secret" of a
// webhook, the string values of an exec agent's "env".
func stripSecrets(runner string, raw json.RawMessage) (json.RawMessage, map[string]string) {
	var m map[string]any
	secrets := map[string]string{}
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return json.RawMessage(`{}`), secrets
	}
	if v, ok := m["secret"].(string); ok && runner == RunnerWebhook {
		secrets["secret"] = v
	}
	if env, ok := m["env"].(map[string]any); ok && runner == RunnerExec {
		for k, v := range env {
			if sv, ok := v.(string); ok && isEnvName(k) {
				secrets["env."+k] = sv
			}
		}
	}
	delete(m, "secret")
	delete(m, "env")
	b, _ := json.Marshal(m)
	return b, secrets
}

// secretNames lists the names of secrets for an audit detail (values never).
func secretNames(secrets map[string]string) []string {
	return slices.Sorted(maps.Keys(secrets))
}
