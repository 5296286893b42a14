-- The chat's rules in one place. Who may do what on a goal (loopx_role) and which agent a
-- message reaches (loopx_message_agent) were written twice: in Go for the router and in the
-- SQL of the chat fast path. Both now call these functions, so they cannot drift. loopx_role
-- is a single-expression SQL function, which the planner inlines; loopx_message_agent, with
-- its sub-selects, is not inlined as written here (migration 00082 makes it inlinable).

-- +goose Up
-- loopx_role: 'admin' (a service admin, LOOPX_ADMINS: may do everything), 'owner' (may steer,
-- pause, resume, change the budget and answer gates), 'member' (may message the goal's agents
-- and read its status) or 'stranger'. Owners are members.
-- +goose StatementBegin
CREATE FUNCTION loopx_role(owners text[], members text[], person text, is_admin boolean)
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN is_admin THEN 'admin'
        WHEN person <> '' AND person = ANY (owners) THEN 'owner'
        WHEN person <> '' AND person = ANY (members) THEN 'member'
        ELSE 'stranger'
    END
$$;
-- +goose StatementEnd

-- loopx_message_agent: the agent a message to goal $1 reaches: the one named ($2, when it
-- exists), else the goal's default agent, else its only agent; NULL when none applies (the
-- router then asks which).
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

-- +goose Down
DROP FUNCTION loopx_message_agent(text, text);
DROP FUNCTION loopx_role(text[], text[], text, boolean);
