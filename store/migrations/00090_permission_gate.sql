-- Permission gates (issue 21): a host's permission prompt (run this tool?) asked of the
-- goal's owners as a gate, answered from Lark or the workspace, denied when nobody answers
-- by expires_at; and each goal's rules for them.

-- +goose Up
ALTER TABLE gate DROP CONSTRAINT gate_kind_check;
ALTER TABLE gate ADD CONSTRAINT gate_kind_check CHECK (kind IN ('question', 'stall', 'permission'));
ALTER TABLE gate ADD COLUMN request jsonb;          -- a permission gate's request: host, tool, summary, folder, turn
ALTER TABLE gate ADD COLUMN expires_at timestamptz; -- a permission gate nobody answered by then is denied

-- Earlier answers "allow for this turn" of one agent, looked up by turn and tool.
CREATE INDEX gate_permission_turn ON gate (goal_id, agent_id, (request->>'turn'), (request->>'tool'))
    WHERE kind = 'permission' AND answer = 'allow_turn';

CREATE TABLE permission_policy (
    goal_id         text PRIMARY KEY REFERENCES goal (id) ON DELETE CASCADE,
    timeout_seconds integer NOT NULL DEFAULT 600 CHECK (timeout_seconds BETWEEN 10 AND 86400),
    allow_tools     text[] NOT NULL DEFAULT '{}', -- tools run without asking ("Bash", "mcp__github__*")
    deny_tools      text[] NOT NULL DEFAULT '{}', -- tools denied without asking; deny wins
    updated_at      timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE permission_policy;
DROP INDEX gate_permission_turn;
DELETE FROM gate WHERE kind = 'permission';
ALTER TABLE gate DROP COLUMN expires_at;
ALTER TABLE gate DROP COLUMN request;
ALTER TABLE gate DROP CONSTRAINT gate_kind_check;
ALTER TABLE gate ADD CONSTRAINT gate_kind_check CHECK (kind IN ('question', 'stall'));
