-- Per-turn agent tokens (issue 5): the scheduler hands a runner a token that acts as the
-- agent, only while its turn is live and at most until expires_at. The agent's own token is
-- stored hashed and cannot be handed out; rotating it per turn would break the agent's host.

-- +goose Up
CREATE TABLE turn_token (
    token_hash bytea PRIMARY KEY,                  -- sha256 of the token
    goal_id    text NOT NULL,
    agent_id   text NOT NULL,
    turn_id    bigint NOT NULL REFERENCES turn (id) ON DELETE CASCADE,
    expires_at timestamptz NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (goal_id, agent_id) REFERENCES agent (goal_id, id) ON DELETE CASCADE
);
CREATE INDEX turn_token_turn ON turn_token (turn_id);

-- +goose Down
DROP TABLE turn_token;
