-- Scheduler (issue 5): schedules derived from goals and agents, one tick row per
-- (schedule, fire time), report digests.
--
-- Schedule rows are kept in step with goal and agent rows by triggers, in the same
-- transaction as the change, so no replica has to reconcile and no change is lost between
-- two loops. The triggers cannot do cron arithmetic; they mark the row `rearm` and NOTIFY
-- `loopx_schedule`, and the scheduler loop (Go, robfig/cron) computes next_fire_at.

-- +goose Up
CREATE TABLE schedule (
    id           bigserial PRIMARY KEY,
    goal_id      text NOT NULL REFERENCES goal (id) ON DELETE CASCADE,
    agent_id     text NOT NULL DEFAULT '',          -- heartbeat: the agent; '' for the report
    kind         text NOT NULL CHECK (kind IN ('heartbeat', 'report')),
    spec         text NOT NULL DEFAULT '',
    tz           text NOT NULL DEFAULT 'UTC',
    enabled      boolean NOT NULL DEFAULT true,     -- false: spec '' (no schedule) or agent gone
    held         boolean NOT NULL DEFAULT false,    -- stop_until_explicit_resume; cleared on resume
    rearm        boolean NOT NULL DEFAULT true,     -- spec, zone or state changed: recompute the next fire
    next_fire_at timestamptz,                       -- the cron fire time the next tick will carry
    next_run_at  timestamptz,                       -- next_fire_at + the goal's jitter: when to act
    last_fire_at timestamptz,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (goal_id, kind, agent_id)
);
CREATE INDEX schedule_due ON schedule (next_run_at) WHERE enabled AND NOT held AND NOT rearm;
CREATE INDEX schedule_rearm ON schedule (id) WHERE rearm AND enabled;

-- One row per (schedule, fire time): a second replica, a retry or a restart cannot fire the
-- same time twice. outcome: ran (the agent was woken / the digest written), skipped (reason),
-- missed (the fire time passed while no replica ran; recorded, never replayed).
CREATE TABLE tick (
    id           bigserial PRIMARY KEY,
    schedule_id  bigint NOT NULL REFERENCES schedule (id) ON DELETE CASCADE,
    goal_id      text NOT NULL,
    agent_id     text NOT NULL DEFAULT '',
    kind         text NOT NULL,
    fire_at      timestamptz NOT NULL,
    run_at       timestamptz NOT NULL,              -- fire_at + jitter
    outcome      text NOT NULL CHECK (outcome IN ('ran', 'skipped', 'missed')),
    reason       text NOT NULL DEFAULT '',
    catch_up     boolean NOT NULL DEFAULT false,    -- the one tick run after downtime
    decision     jsonb NOT NULL DEFAULT '{}',       -- the should-run answer, verbatim
    turn_id      bigint,
    next_fire_at timestamptz,                       -- the fire planned after this one (gap audit)
    replica      text NOT NULL DEFAULT '',
    decided_at   timestamptz NOT NULL,
    UNIQUE (schedule_id, fire_at)
);
CREATE INDEX tick_goal ON tick (goal_id, fire_at);

-- One digest per (goal, window end): the unique key makes a second replica or a restart a
-- no-op. Manual /report digests share the cursor, so the next scheduled one starts after it.
CREATE TABLE digest (
    id           bigserial PRIMARY KEY,
    goal_id      text NOT NULL REFERENCES goal (id) ON DELETE CASCADE,
    window_start timestamptz NOT NULL,
    window_end   timestamptz NOT NULL,
    trigger      text NOT NULL CHECK (trigger IN ('schedule', 'manual')),
    requested_by text NOT NULL DEFAULT '',
    lang         text NOT NULL DEFAULT 'en',
    facts        jsonb NOT NULL DEFAULT '{}',
    created_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (goal_id, window_end)
);

-- +goose StatementBegin
CREATE FUNCTION loopx_schedule_sync_goal() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE'
       AND NEW.heartbeat_spec IS NOT DISTINCT FROM OLD.heartbeat_spec
       AND NEW.heartbeat_tz IS NOT DISTINCT FROM OLD.heartbeat_tz
       AND NEW.report_spec IS NOT DISTINCT FROM OLD.report_spec
       AND NEW.report_tz IS NOT DISTINCT FROM OLD.report_tz
       AND NEW.status IS NOT DISTINCT FROM OLD.status
       AND NEW.allowed_slots IS NOT DISTINCT FROM OLD.allowed_slots
       AND NEW.window_hours IS NOT DISTINCT FROM OLD.window_hours THEN
        RETURN NEW;
    END IF;
    -- A changed spec, zone, status or budget is an explicit resume: clear the hold.
    UPDATE schedule SET spec = NEW.heartbeat_spec, tz = NEW.heartbeat_tz,
           enabled = NEW.heartbeat_spec <> '', held = false, rearm = true, updated_at = now()
     WHERE goal_id = NEW.id AND kind = 'heartbeat';
    INSERT INTO schedule (goal_id, kind, agent_id, spec, tz, enabled)
    VALUES (NEW.id, 'report', '', NEW.report_spec, NEW.report_tz, NEW.report_spec <> '')
    ON CONFLICT (goal_id, kind, agent_id) DO UPDATE
       SET spec = EXCLUDED.spec, tz = EXCLUDED.tz, enabled = EXCLUDED.enabled,
           held = false, rearm = true, updated_at = now();
    PERFORM pg_notify('loopx_schedule', NEW.id);
    RETURN NEW;
END $$;
-- +goose StatementEnd

CREATE TRIGGER schedule_sync_goal AFTER INSERT OR UPDATE ON goal
    FOR EACH ROW EXECUTE FUNCTION loopx_schedule_sync_goal();

-- +goose StatementBegin
CREATE FUNCTION loopx_schedule_sync_agent() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    g goal%ROWTYPE;
BEGIN
    IF TG_OP = 'DELETE' THEN
        UPDATE schedule SET enabled = false, updated_at = now()
         WHERE goal_id = OLD.goal_id AND kind = 'heartbeat' AND agent_id = OLD.id;
        RETURN OLD;
    END IF;
    SELECT * INTO g FROM goal WHERE id = NEW.goal_id;
    INSERT INTO schedule (goal_id, kind, agent_id, spec, tz, enabled)
    VALUES (NEW.goal_id, 'heartbeat', NEW.id, g.heartbeat_spec, g.heartbeat_tz, g.heartbeat_spec <> '')
    ON CONFLICT (goal_id, kind, agent_id) DO UPDATE
       SET spec = EXCLUDED.spec, tz = EXCLUDED.tz, enabled = EXCLUDED.enabled,
           held = false, rearm = true, updated_at = now();
    PERFORM pg_notify('loopx_schedule', NEW.goal_id);
    RETURN NEW;
END $$;
-- +goose StatementEnd

CREATE TRIGGER schedule_sync_agent AFTER INSERT OR DELETE ON agent
    FOR EACH ROW EXECUTE FUNCTION loopx_schedule_sync_agent();

-- Work arriving for an agent whose heartbeat is backed off (not held) pulls the next fire in:
-- the loop recomputes it from now, so a message or a new todo does not wait out a 120-minute
-- backoff. An overdue fire is kept as it is (it still gets its tick or its missed row).
-- +goose StatementBegin
CREATE FUNCTION loopx_schedule_wake() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_TABLE_NAME = 'inbox_item' THEN
        UPDATE schedule SET rearm = true
         WHERE goal_id = NEW.goal_id AND kind = 'heartbeat' AND agent_id = NEW.agent_id
           AND enabled AND NOT held AND NOT rearm;
    ELSE
        UPDATE schedule SET rearm = true
         WHERE goal_id = NEW.goal_id AND kind = 'heartbeat' AND enabled AND NOT held AND NOT rearm;
    END IF;
    IF FOUND THEN
        PERFORM pg_notify('loopx_schedule', NEW.goal_id);
    END IF;
    RETURN NEW;
END $$;
-- +goose StatementEnd

CREATE TRIGGER schedule_wake_inbox AFTER INSERT ON inbox_item
    FOR EACH ROW EXECUTE FUNCTION loopx_schedule_wake();
CREATE TRIGGER schedule_wake_todo AFTER INSERT ON todo
    FOR EACH ROW EXECUTE FUNCTION loopx_schedule_wake();
CREATE TRIGGER schedule_wake_gate AFTER UPDATE OF status ON gate
    FOR EACH ROW WHEN (OLD.status = 'open' AND NEW.status <> 'open')
    EXECUTE FUNCTION loopx_schedule_wake();

-- +goose Down
DROP TRIGGER IF EXISTS schedule_wake_gate ON gate;
DROP TRIGGER IF EXISTS schedule_wake_todo ON todo;
DROP TRIGGER IF EXISTS schedule_wake_inbox ON inbox_item;
DROP TRIGGER IF EXISTS schedule_sync_agent ON agent;
DROP TRIGGER IF EXISTS schedule_sync_goal ON goal;
DROP FUNCTION IF EXISTS loopx_schedule_wake, loopx_schedule_sync_agent, loopx_schedule_sync_goal;
DROP TABLE digest, tick, schedule CASCADE;
