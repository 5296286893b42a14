-- Core state (issue 2): goals, agents, turns, todos, gates, evidence, the quota ledger,
-- audit and idempotency receipts.

-- +goose Up
CREATE TABLE goal (
    id             text PRIMARY KEY CHECK (id ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
    title          text NOT NULL DEFAULT '' CHECK (length(title) <= 200),
    objective      text NOT NULL DEFAULT '' CHECK (length(objective) <= 12000),
    owners         text[] NOT NULL DEFAULT '{}',   -- Lark open_ids who may steer and answer gates
    members        text[] NOT NULL DEFAULT '{}',   -- Lark open_ids who may message agents and read
    status         text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'stopped', 'done')),
    window_hours   integer NOT NULL DEFAULT 24 CHECK (window_hours BETWEEN 1 AND 720),
    allowed_slots  integer NOT NULL DEFAULT 24 CHECK (allowed_slots >= 0),
    heartbeat_spec text NOT NULL DEFAULT '',       -- robfig/cron spec; '' = no heartbeat
    heartbeat_tz   text NOT NULL DEFAULT 'UTC',
    report_spec    text NOT NULL DEFAULT '',
    report_tz      text NOT NULL DEFAULT 'UTC',
    lang           text NOT NULL DEFAULT 'en' CHECK (lang IN ('en', 'zh')),
    stall_turns    integer NOT NULL DEFAULT 3 CHECK (stall_turns >= 0), -- 0 = no stall guard
    version        bigint NOT NULL DEFAULT 1,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE agent (
    goal_id       text NOT NULL REFERENCES goal (id) ON DELETE CASCADE,
    id            text NOT NULL CHECK (id ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
    runner        text NOT NULL DEFAULT 'poll' CHECK (runner IN ('exec', 'webhook', 'poll')),
    runner_config jsonb NOT NULL DEFAULT '{}',
    work_mode     text NOT NULL DEFAULT 'active' CHECK (work_mode IN ('active', 'monitor_only')),
    is_default    boolean NOT NULL DEFAULT false,
    token_hash    bytea,                           -- sha256 of the agent's bearer token
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (goal_id, id)
);
CREATE UNIQUE INDEX agent_one_default ON agent (goal_id) WHERE is_default;
CREATE UNIQUE INDEX agent_token ON agent (token_hash) WHERE token_hash IS NOT NULL;

CREATE TABLE todo (
    id               bigserial PRIMARY KEY,
    goal_id          text NOT NULL REFERENCES goal (id) ON DELETE CASCADE,
    role             text NOT NULL DEFAULT 'agent' CHECK (role IN ('agent', 'user')),
    text             text NOT NULL CHECK (length(text) BETWEEN 1 AND 12000),
    priority         smallint NOT NULL DEFAULT 2 CHECK (priority BETWEEN 0 AND 4),
    status           text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'blocked', 'done', 'cancelled')),
    claimed_by       text,                         -- agent id; never silently overwritten
    claimed_at       timestamptz,
    lease_expires_at timestamptz,
    blocked_by_gate  bigint,                       -- gate that blocks this todo
    created_by       text NOT NULL DEFAULT '',
    version          bigint NOT NULL DEFAULT 1,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    done_at          timestamptz
);
CREATE INDEX todo_runnable ON todo (goal_id, priority, id) WHERE status = 'open';
CREATE INDEX todo_goal ON todo (goal_id, id);

CREATE TABLE turn (
    id               bigserial PRIMARY KEY,
    goal_id          text NOT NULL,
    agent_id         text NOT NULL,
    instance_id      text NOT NULL,                -- the host's --turn-instance-id (or generated)
    session_id       text NOT NULL DEFAULT '',
    todo_id          bigint REFERENCES todo (id) ON DELETE SET NULL,
    action           text NOT NULL DEFAULT '',     -- effective_action of the decision that opened it
    state            text NOT NULL DEFAULT 'live' CHECK (state IN ('live', 'ok', 'failed', 'abandoned')),
    progress         boolean NOT NULL DEFAULT false, -- a todo moved or evidence was added during the turn
    lease_expires_at timestamptz NOT NULL,
    started_at       timestamptz NOT NULL DEFAULT now(),
    ended_at         timestamptz,
    outcome          text NOT NULL DEFAULT '',
    log_tail         text NOT NULL DEFAULT '',
    FOREIGN KEY (goal_id, agent_id) REFERENCES agent (goal_id, id) ON DELETE CASCADE,
    UNIQUE (goal_id, agent_id, instance_id)
);
-- At most one live turn per goal x agent.
CREATE UNIQUE INDEX turn_one_live ON turn (goal_id, agent_id) WHERE state = 'live';
CREATE INDEX turn_recent ON turn (goal_id, agent_id, id DESC);

CREATE TABLE gate (
    id               bigserial PRIMARY KEY,
    goal_id          text NOT NULL REFERENCES goal (id) ON DELETE CASCADE,
    agent_id         text NOT NULL DEFAULT '',     -- who asked; '' for system gates
    kind             text NOT NULL DEFAULT 'question' CHECK (kind IN ('question', 'stall')),
    question         text NOT NULL CHECK (length(question) BETWEEN 1 AND 12000),
    options          text[] NOT NULL DEFAULT '{approve,reject}',
    todo_id          bigint REFERENCES todo (id) ON DELETE SET NULL, -- blocked todo; NULL = whole goal
    status           text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'approved', 'rejected', 'cancelled')),
    answered_by      text,
    answer           text,
    comment          text,
    answered_at      timestamptz,
    card_version     integer NOT NULL DEFAULT 1,   -- bumped on every card update; older clicks are stale
    reminders        integer NOT NULL DEFAULT 0,
    next_reminder_at timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX gate_open ON gate (goal_id) WHERE status = 'open';
ALTER TABLE todo ADD FOREIGN KEY (blocked_by_gate) REFERENCES gate (id) ON DELETE SET NULL;

CREATE TABLE evidence (
    id         bigserial PRIMARY KEY,
    goal_id    text NOT NULL REFERENCES goal (id) ON DELETE CASCADE,
    agent_id   text NOT NULL,
    todo_id    bigint REFERENCES todo (id) ON DELETE SET NULL,
    turn_id    bigint REFERENCES turn (id) ON DELETE SET NULL,
    kind       text NOT NULL DEFAULT 'note' CHECK (kind IN ('link', 'command', 'note', 'artifact')),
    summary    text NOT NULL CHECK (length(summary) BETWEEN 1 AND 12000),
    ref        text NOT NULL DEFAULT '' CHECK (length(ref) <= 2000),
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX evidence_goal ON evidence (goal_id, id);

-- Append-only. Spent slots are summed over the rolling window, never kept as a counter.
CREATE TABLE quota_ledger (
    id         bigserial PRIMARY KEY,
    goal_id    text NOT NULL REFERENCES goal (id) ON DELETE CASCADE,
    agent_id   text NOT NULL DEFAULT '',
    kind       text NOT NULL CHECK (kind IN ('slot_spent', 'slot_voided', 'state_refreshed', 'tick_decision')),
    turn_id    bigint REFERENCES turn (id) ON DELETE SET NULL,
    todo_id    bigint,
    slots      integer NOT NULL DEFAULT 0,
    detail     jsonb NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX quota_ledger_one_spend ON quota_ledger (turn_id) WHERE kind = 'slot_spent';
CREATE INDEX quota_ledger_spent ON quota_ledger (goal_id, created_at) WHERE kind = 'slot_spent';

-- Scheduler hint progression per goal x agent: the step advances while the decision's
-- identity stays the same and resets when it changes.
CREATE TABLE hint_state (
    goal_id    text NOT NULL,
    agent_id   text NOT NULL,
    identity   text NOT NULL,
    step       integer NOT NULL DEFAULT 0,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (goal_id, agent_id),
    FOREIGN KEY (goal_id, agent_id) REFERENCES agent (goal_id, id) ON DELETE CASCADE
);

-- Who did what, from which surface; refusals included.
CREATE TABLE audit (
    id         bigserial PRIMARY KEY,
    at         timestamptz NOT NULL DEFAULT now(),
    actor      text NOT NULL,                      -- open_id, 'agent:<goal>/<agent>', 'admin', 'system'
    surface    text NOT NULL CHECK (surface IN ('api', 'chat', 'card', 'scheduler', 'system')),
    action     text NOT NULL,
    goal_id    text NOT NULL DEFAULT '',
    target     text NOT NULL DEFAULT '',
    allowed    boolean NOT NULL,
    detail     jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX audit_goal ON audit (goal_id, id);

-- Idempotency: key -> stored result. A replay returns the body; another request under the
-- same key (different hash) is refused.
CREATE TABLE receipt (
    key          text PRIMARY KEY,                 -- scope-qualified Idempotency-Key
    request_hash bytea NOT NULL,
    status       integer NOT NULL,
    body         jsonb NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX receipt_age ON receipt (created_at);

-- +goose Down
DROP TABLE receipt, audit, hint_state, quota_ledger, evidence, gate, turn, todo, agent, goal CASCADE;
