-- Runner secrets (a webhook's signing secret, the values of an exec agent's env) leave
-- agent.runner_config: they are kept here sealed (AES-256-GCM under the server's secret key,
-- bound to the agent and the secret's name), never in clear. key_id names the key that
-- sealed a row (the first 8 bytes of its sha256, hex), so a server holding another key can
-- say which secrets it cannot read. changed_at moves only when the value changes, not when
-- the key is rotated.

-- +goose Up
CREATE TABLE agent_secret (
    goal_id    text NOT NULL,
    agent_id   text NOT NULL,
    name       text NOT NULL CHECK (name ~ '^(secret|env\.[A-Za-z_][A-Za-z0-9_]{0,127})$'),
    sealed     bytea NOT NULL,
    key_id     text NOT NULL,
    changed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (goal_id, agent_id, name),
    FOREIGN KEY (goal_id, agent_id) REFERENCES agent (goal_id, id) ON DELETE CASCADE
);

-- +goose Down
DROP TABLE agent_secret;
