-- Indexes the should-run snapshot reads through (issue 2).

-- +goose Up
-- The agent's latest refresh-state (next_action) without scanning tick_decision rows.
CREATE INDEX quota_ledger_refresh ON quota_ledger (goal_id, agent_id, id DESC) WHERE kind = 'state_refreshed';
-- Open gates that block a todo, joined from the todo side.
CREATE INDEX todo_blocked ON todo (goal_id) WHERE status = 'blocked';

-- +goose Down
DROP INDEX IF EXISTS todo_blocked;
DROP INDEX IF EXISTS quota_ledger_refresh;
