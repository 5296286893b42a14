-- Typed change proposals (issue 14): a protected change (budget, pause/resume, schedules,
-- owners and members, stall guard, an agent's runner, work mode and default flag) is first a
-- stored proposal with its normalized parameters, the diff of every field, its effects, the
-- goal version it was computed against and an expiry; confirming it applies the change only
-- at that version. The workspace's live pages listen on loopx_workspace.

-- +goose Up
CREATE TABLE proposal (
    id           bigserial PRIMARY KEY,
    goal_id      text NOT NULL REFERENCES goal (id) ON DELETE CASCADE,
    agent_id     text NOT NULL DEFAULT '',            -- agent.set: the agent changed
    kind         text NOT NULL CHECK (kind IN ('goal.set', 'goal.pause', 'goal.resume', 'agent.set')),
    params       jsonb NOT NULL,                      -- normalized parameters
    diff         jsonb NOT NULL,                      -- [{field, before, after}]
    effects      jsonb NOT NULL DEFAULT '[]',         -- [{code, args}], rendered in words per language
    goal_version bigint NOT NULL,                     -- the version the diff was computed against
    need         text NOT NULL CHECK (need IN ('owner', 'admin')), -- who may propose and confirm
    state        text NOT NULL DEFAULT 'preview_ready'
                 CHECK (state IN ('preview_ready', 'applied', 'stale', 'cancelled', 'expired', 'refused')),
    proposed_by  text NOT NULL,
    surface      text NOT NULL,                       -- where it was proposed
    decided_by   text NOT NULL DEFAULT '',            -- who confirmed, cancelled (or tried, for refused)
    decided_at   timestamptz,
    reason       text NOT NULL DEFAULT '',            -- refused / stale / expired: why
    successor_id bigint REFERENCES proposal (id),     -- stale: the fresh proposal
    applied_version bigint,                           -- applied: the goal version after
    expires_at   timestamptz NOT NULL,
    created_at   timestamptz NOT NULL
);
CREATE INDEX proposal_goal ON proposal (goal_id, id);
CREATE INDEX proposal_ready ON proposal (goal_id, id) WHERE state = 'preview_ready';

-- The chat cards that show a proposal, updated in place when it settles.
CREATE TABLE proposal_card (
    proposal_id bigint NOT NULL REFERENCES proposal (id) ON DELETE CASCADE,
    outbox_id   bigint NOT NULL REFERENCES outbox (id) ON DELETE CASCADE,
    PRIMARY KEY (proposal_id, outbox_id)
);

-- The workspace is a surface of its own in the audit.
ALTER TABLE audit DROP CONSTRAINT audit_surface_check;
ALTER TABLE audit ADD CONSTRAINT audit_surface_check
    CHECK (surface IN ('api', 'chat', 'card', 'scheduler', 'system', 'web'));

-- Live pages: a change to what the workspace shows NOTIFYs loopx_workspace with the goal id.
-- PostgreSQL folds equal notifications of one transaction into one.
-- +goose StatementBegin
CREATE FUNCTION loopx_workspace_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM pg_notify('loopx_workspace', OLD.goal_id);
    ELSE
        PERFORM pg_notify('loopx_workspace', NEW.goal_id);
    END IF;
    RETURN NULL;
END $$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE FUNCTION loopx_workspace_notify_goal() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('loopx_workspace', NEW.id);
    RETURN NULL;
END $$;
-- +goose StatementEnd
CREATE TRIGGER workspace_goal AFTER INSERT OR UPDATE ON goal
    FOR EACH ROW EXECUTE FUNCTION loopx_workspace_notify_goal();
CREATE TRIGGER workspace_gate AFTER INSERT OR UPDATE ON gate
    FOR EACH ROW EXECUTE FUNCTION loopx_workspace_notify();
CREATE TRIGGER workspace_proposal AFTER INSERT OR UPDATE ON proposal
    FOR EACH ROW EXECUTE FUNCTION loopx_workspace_notify();
CREATE TRIGGER workspace_todo AFTER INSERT OR UPDATE ON todo
    FOR EACH ROW EXECUTE FUNCTION loopx_workspace_notify();
CREATE TRIGGER workspace_turn AFTER INSERT OR UPDATE OF state ON turn
    FOR EACH ROW EXECUTE FUNCTION loopx_workspace_notify();
CREATE TRIGGER workspace_agent AFTER INSERT OR UPDATE OR DELETE ON agent
    FOR EACH ROW EXECUTE FUNCTION loopx_workspace_notify();

-- +goose Down
DROP TRIGGER workspace_agent ON agent;
DROP TRIGGER workspace_turn ON turn;
DROP TRIGGER workspace_todo ON todo;
DROP TRIGGER workspace_proposal ON proposal;
DROP TRIGGER workspace_gate ON gate;
DROP TRIGGER workspace_goal ON goal;
DROP FUNCTION loopx_workspace_notify_goal();
DROP FUNCTION loopx_workspace_notify();
ALTER TABLE audit DROP CONSTRAINT audit_surface_check;
ALTER TABLE audit ADD CONSTRAINT audit_surface_check
    CHECK (surface IN ('api', 'chat', 'card', 'scheduler', 'system'));
DROP TABLE proposal_card, proposal;
