-- The goal contract (issue 22): scope, capabilities and acceptance criteria; machine defaults
-- that goals inherit unless they override them; completion with verification; handoffs with a
-- typed continuation; replans with a trail of decisions.
-- Migrations 00160-00169: the goal contract.
--
-- Machine defaults are one row, changed only through the change kernel (a defaults.set
-- proposal an admin confirms). A goal inherits every setting it does not override:
--   * the settings older releases read as NOT NULL columns of goal (window_hours,
--     allowed_slots, stall_turns, the heartbeat and report schedules and zones, lang) keep a
--     value in their column: the goal's own when the field is in goal.overrides, else the
--     machine default, written there by the kernel whenever the default changes (so every
--     reader, trigger and older replica reads the effective value from the goal row);
--   * the settings added since (breaker_failures, progress_card, quiet_digests, the reminder
--     ladder) are NULL when the goal follows the default, and the permission gate's limit
--     follows it unless the goal's permission policy set one (timeout_set).
--
-- Existing goals keep every value they have: a value other than the built-in default becomes
-- an override, a value equal to it follows the machine default (which starts at the same
-- built-in value), so nothing changes at upgrade.

-- +goose Up
CREATE TABLE machine_defaults (
    id                      boolean PRIMARY KEY DEFAULT true CHECK (id),
    window_hours            integer NOT NULL DEFAULT 24 CHECK (window_hours BETWEEN 1 AND 720),
    allowed_slots           integer NOT NULL DEFAULT 24 CHECK (allowed_slots BETWEEN 0 AND 100000),
    stall_turns             integer NOT NULL DEFAULT 3 CHECK (stall_turns BETWEEN 0 AND 100),
    heartbeat_spec          text NOT NULL DEFAULT '',
    heartbeat_tz            text NOT NULL DEFAULT 'UTC',
    report_spec             text NOT NULL DEFAULT '',
    report_tz               text NOT NULL DEFAULT 'UTC',
    lang                    text NOT NULL DEFAULT 'en' CHECK (lang IN ('en', 'zh')),
    reminder_minutes        integer[] NOT NULL DEFAULT '{30,60,120}'
                            CHECK (cardinality(reminder_minutes) BETWEEN 1 AND 10),
    reminder_escalate_after integer NOT NULL DEFAULT 3 CHECK (reminder_escalate_after BETWEEN 1 AND 100),
    permission_timeout_seconds integer NOT NULL DEFAULT 600 CHECK (permission_timeout_seconds BETWEEN 10 AND 86400),
    breaker_failures        integer NOT NULL DEFAULT 3 CHECK (breaker_failures BETWEEN 0 AND 100),
    progress_card           boolean NOT NULL DEFAULT true,
    quiet_digests           boolean NOT NULL DEFAULT true,
    version                 bigint NOT NULL DEFAULT 1,
    updated_by              text NOT NULL DEFAULT '', -- '' until an admin changes them
    updated_at              timestamptz NOT NULL DEFAULT now()
);
INSERT INTO machine_defaults DEFAULT VALUES;

ALTER TABLE goal
    ADD COLUMN overrides text[] NOT NULL DEFAULT '{}',
    ADD COLUMN reminder_minutes integer[] CHECK (cardinality(reminder_minutes) BETWEEN 1 AND 10),
    ADD COLUMN reminder_escalate_after integer CHECK (reminder_escalate_after BETWEEN 1 AND 100),
    ADD COLUMN scope_editable text[] NOT NULL DEFAULT '{}',
    ADD COLUMN scope_protected text[] NOT NULL DEFAULT '{}',
    ADD COLUMN scope_notes text NOT NULL DEFAULT '' CHECK (length(scope_notes) <= 4000),
    ADD COLUMN capabilities text[] NOT NULL DEFAULT '{}',
    ADD COLUMN criteria jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(criteria) = 'array');

UPDATE goal SET overrides = array_remove(ARRAY[
        CASE WHEN window_hours <> 24 THEN 'window_hours' END,
        CASE WHEN allowed_slots <> 24 THEN 'allowed_slots' END,
        CASE WHEN stall_turns <> 3 THEN 'stall_turns' END,
        CASE WHEN heartbeat_spec <> '' THEN 'heartbeat_spec' END,
        CASE WHEN heartbeat_tz <> 'UTC' THEN 'heartbeat_tz' END,
        CASE WHEN report_spec <> '' THEN 'report_spec' END,
        CASE WHEN report_tz <> 'UTC' THEN 'report_tz' END,
        CASE WHEN lang <> 'en' THEN 'lang' END], NULL);

ALTER TABLE agent
    ADD COLUMN capabilities text[] NOT NULL DEFAULT '{}',
    -- the newest replan decision this agent acknowledged (0: none)
    ADD COLUMN replan_acked bigint NOT NULL DEFAULT 0;

ALTER TABLE todo
    ADD COLUMN criteria jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(criteria) = 'array'),
    ADD COLUMN requires text[] NOT NULL DEFAULT '{}';

ALTER TABLE evidence ADD COLUMN criteria text[] NOT NULL DEFAULT '{}';
-- should-run and every finish check read which criteria evidence met, a goal's or a todo's
CREATE INDEX evidence_criteria ON evidence (goal_id, todo_id) WHERE cardinality(criteria) > 0;

ALTER TABLE permission_policy ADD COLUMN timeout_set boolean NOT NULL DEFAULT true;

-- An owner's waiver of an acceptance criterion (of a todo, or of the goal when todo_id is NULL):
-- the criterion counts as met without evidence, and the waiver says who and why.
CREATE TABLE criterion_waiver (
    id         bigserial PRIMARY KEY,
    goal_id    text NOT NULL REFERENCES goal (id) ON DELETE CASCADE,
    todo_id    bigint REFERENCES todo (id) ON DELETE CASCADE,
    criterion  text NOT NULL,
    reason     text NOT NULL DEFAULT '' CHECK (length(reason) <= 2000),
    waived_by  text NOT NULL,
    created_at timestamptz NOT NULL
);
CREATE UNIQUE INDEX criterion_waiver_once ON criterion_waiver (goal_id, coalesce(todo_id, 0), criterion);

-- A handoff: what a turn did, what is next and for whom, with the evidence it rests on. The
-- receiver's should-run carries it as its continuation until the receiver acknowledges it.
CREATE TABLE handoff (
    id           bigserial PRIMARY KEY,
    goal_id      text NOT NULL REFERENCES goal (id) ON DELETE CASCADE,
    todo_id      bigint REFERENCES todo (id) ON DELETE SET NULL,
    turn_id      bigint REFERENCES turn (id) ON DELETE SET NULL,
    from_agent   text NOT NULL DEFAULT '',  -- '' when a person handed the todo over
    to_agent     text NOT NULL,
    kind         text NOT NULL CHECK (kind IN ('resume', 'review', 'verify', 'answer_gate')),
    done         text NOT NULL DEFAULT '' CHECK (length(done) <= 4000),
    next         text NOT NULL DEFAULT '' CHECK (length(next) <= 4000),
    questions    text NOT NULL DEFAULT '' CHECK (length(questions) <= 4000),
    evidence_ids bigint[] NOT NULL DEFAULT '{}',
    gate_id      bigint REFERENCES gate (id) ON DELETE SET NULL,
    created_by   text NOT NULL,
    created_at   timestamptz NOT NULL,
    acked_at     timestamptz,
    acked_by     text NOT NULL DEFAULT ''
);
CREATE INDEX handoff_pending ON handoff (goal_id, to_agent, id) WHERE acked_at IS NULL;
CREATE INDEX handoff_todo ON handoff (todo_id, id);
CREATE INDEX handoff_turn ON handoff (turn_id) WHERE turn_id IS NOT NULL;

-- The trail of a goal's decisions: a replan (the objective changed), done, reopened. Written
-- in the transaction that applied the change; never updated.
CREATE TABLE goal_decision (
    id             bigserial PRIMARY KEY,
    goal_id        text NOT NULL REFERENCES goal (id) ON DELETE CASCADE,
    kind           text NOT NULL CHECK (kind IN ('replan', 'done', 'reopen')),
    proposal_id    bigint REFERENCES proposal (id) ON DELETE SET NULL,
    goal_version   bigint NOT NULL,   -- the goal's version after the change
    before         text NOT NULL DEFAULT '',
    after          text NOT NULL DEFAULT '',
    reason         text NOT NULL DEFAULT '' CHECK (length(reason) <= 2000),
    detail         jsonb NOT NULL DEFAULT '{}', -- todos cancelled or reopened, criteria waived, ...
    proposed_by    text NOT NULL,
    decided_by     text NOT NULL,
    created_at     timestamptz NOT NULL
);
CREATE INDEX goal_decision_goal ON goal_decision (goal_id, id);

-- Proposals of the new kinds; a change of the machine defaults belongs to no goal.
ALTER TABLE proposal ALTER COLUMN goal_id DROP NOT NULL;
ALTER TABLE proposal DROP CONSTRAINT proposal_kind_check;
ALTER TABLE proposal ADD CONSTRAINT proposal_kind_check CHECK (kind IN (
    'goal.set', 'goal.pause', 'goal.resume', 'agent.set', 'goal.done', 'goal.reopen', 'goal.replan', 'defaults.set'));
ALTER TABLE proposal ADD CONSTRAINT proposal_goal_check CHECK ((kind = 'defaults.set') = (goal_id IS NULL));
-- At most one ready proposal to finish a goal (the one LoopX makes when the work is complete,
-- or an owner's).
CREATE UNIQUE INDEX proposal_one_ready_done ON proposal (goal_id)
    WHERE kind = 'goal.done' AND state = 'preview_ready';

-- A done goal's schedules stop; reopening it (status active again) re-arms them.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION loopx_schedule_sync_goal() RETURNS trigger LANGUAGE plpgsql AS $$
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
           enabled = NEW.heartbeat_spec <> '' AND NEW.status <> 'done', held = false, rearm = true, updated_at = now()
     WHERE goal_id = NEW.id AND kind = 'heartbeat';
    INSERT INTO schedule (goal_id, kind, agent_id, spec, tz, enabled)
    VALUES (NEW.id, 'report', '', NEW.report_spec, NEW.report_tz, NEW.report_spec <> '' AND NEW.status <> 'done')
    ON CONFLICT (goal_id, kind, agent_id) DO UPDATE
       SET spec = EXCLUDED.spec, tz = EXCLUDED.tz, enabled = EXCLUDED.enabled,
           held = false, rearm = true, updated_at = now();
    PERFORM pg_notify('loopx_schedule', NEW.id);
    RETURN NEW;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION loopx_schedule_sync_agent() RETURNS trigger LANGUAGE plpgsql AS $$
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
    VALUES (NEW.goal_id, 'heartbeat', NEW.id, g.heartbeat_spec, g.heartbeat_tz, g.heartbeat_spec <> '' AND g.status <> 'done')
    ON CONFLICT (goal_id, kind, agent_id) DO UPDATE
       SET spec = EXCLUDED.spec, tz = EXCLUDED.tz, enabled = EXCLUDED.enabled,
           held = false, rearm = true, updated_at = now();
    PERFORM pg_notify('loopx_schedule', NEW.goal_id);
    RETURN NEW;
END $$;
-- +goose StatementEnd

UPDATE schedule s SET enabled = false, updated_at = now()
  FROM goal g WHERE g.id = s.goal_id AND g.status = 'done' AND s.enabled;

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION loopx_schedule_sync_agent() RETURNS trigger LANGUAGE plpgsql AS $$
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

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION loopx_schedule_sync_goal() RETURNS trigger LANGUAGE plpgsql AS $$
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

DROP INDEX proposal_one_ready_done;
DELETE FROM proposal WHERE kind IN ('goal.done', 'goal.reopen', 'goal.replan', 'defaults.set');
ALTER TABLE proposal DROP CONSTRAINT proposal_goal_check;
ALTER TABLE proposal DROP CONSTRAINT proposal_kind_check;
ALTER TABLE proposal ADD CONSTRAINT proposal_kind_check CHECK (kind IN ('goal.set', 'goal.pause', 'goal.resume', 'agent.set'));
ALTER TABLE proposal ALTER COLUMN goal_id SET NOT NULL;
DROP TABLE goal_decision;
DROP TABLE handoff;
DROP TABLE criterion_waiver;
ALTER TABLE permission_policy DROP COLUMN timeout_set;
ALTER TABLE evidence DROP COLUMN criteria;
ALTER TABLE todo DROP COLUMN requires, DROP COLUMN criteria;
ALTER TABLE agent DROP COLUMN replan_acked, DROP COLUMN capabilities;
ALTER TABLE goal
    DROP COLUMN criteria, DROP COLUMN capabilities, DROP COLUMN scope_notes, DROP COLUMN scope_protected,
    DROP COLUMN scope_editable, DROP COLUMN reminder_escalate_after, DROP COLUMN reminder_minutes,
    DROP COLUMN overrides;
DROP TABLE machine_defaults;
