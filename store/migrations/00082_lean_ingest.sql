-- The chat's ingest, leaner (issue 16).
--
-- loopx_message_agent becomes a table function. As a scalar SQL function with sub-selects
-- the planner cannot inline it: every statement calling it parsed and planned its body
-- again at run time, which was a third of the fast path's cost. A single-SELECT table
-- function called in FROM is inlined into the calling statement like a view.
--
-- A message event is recorded once, under its message key (msg:<message_id>), and only on
-- the general path: the inbox item the fast path writes carries the message id under a
-- unique index, which already proves the message was handled. The audit's time index is the
-- BRIN index of migration 00080 alone, and lark_event's age index becomes BRIN too: both
-- tables are written in time order, and a B-tree on the time column cost every insert an
-- index entry that only the hourly prune and a rare audit filter read.

-- +goose Up
DROP FUNCTION loopx_message_agent(text, text);
-- +goose StatementBegin
CREATE FUNCTION loopx_message_agent(goal_id text, named text)
RETURNS TABLE (agent_id text) LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN $2 <> '' THEN (SELECT a.id FROM agent a WHERE a.goal_id = $1 AND a.id = $2)
        ELSE coalesce(
            (SELECT a.id FROM agent a WHERE a.goal_id = $1 AND a.is_default),
            (SELECT min(a.id) FROM agent a WHERE a.goal_id = $1 HAVING count(*) = 1))
    END
$$;
-- +goose StatementEnd
DROP INDEX audit_at;
DROP INDEX lark_event_age;
CREATE INDEX lark_event_age ON lark_event USING brin (received_at);

-- +goose Down
DROP INDEX lark_event_age;
CREATE INDEX lark_event_age ON lark_event (received_at);
CREATE INDEX audit_at ON audit (at);
DROP FUNCTION loopx_message_agent(text, text);
-- +goose StatementBegin
CREATE FUNCTION loopx_message_agent(goal_id text, named text)
RETURNS text LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN $2 <> '' THEN (SELECT a.id FROM agent a WHERE a.goal_id = $1 AND a.id = $2)
        ELSE coalesce(
            (SELECT a.id FROM agent a WHERE a.goal_id = $1 AND a.is_default),
            (SELECT min(a.id) FROM agent a WHERE a.goal_id = $1 HAVING count(*) = 1))
    END
$$;
-- +goose StatementEnd
