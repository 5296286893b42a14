-- Chat state (issue 3): the agents' inbox, chat bindings, per-chat settings, unrouted
-- messages, and the outbox the bot sender drains.

-- +goose Up
CREATE TABLE inbox_item (
    id             bigserial PRIMARY KEY,
    goal_id        text NOT NULL,
    agent_id       text NOT NULL,
    session_id     text NOT NULL DEFAULT '',
    mode           text NOT NULL DEFAULT 'inbox' CHECK (mode IN ('inbox', 'queue', 'steer')),
    text           text NOT NULL CHECK (length(text) BETWEEN 1 AND 12000),
    sender         text NOT NULL,                  -- open_id
    source_chat    text NOT NULL DEFAULT '',
    source_message text NOT NULL DEFAULT '',
    source_thread  text NOT NULL DEFAULT '',       -- thread root message id
    state          text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'acked', 'expired')),
    turn_id        bigint,                          -- steer: the live turn it was addressed to
    deliveries     integer NOT NULL DEFAULT 0,
    delivered_at   timestamptz,
    acked_at       timestamptz,
    expires_at     timestamptz,
    created_at     timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (goal_id, agent_id) REFERENCES agent (goal_id, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX inbox_item_source ON inbox_item (source_message, goal_id, agent_id) WHERE source_message <> '';
CREATE INDEX inbox_item_pending ON inbox_item (goal_id, agent_id, id) WHERE state IN ('pending', 'delivered');

CREATE TABLE binding (
    chat_id     text NOT NULL,
    thread_root text NOT NULL DEFAULT '',          -- '' binds the whole chat
    goal_id     text NOT NULL REFERENCES goal (id) ON DELETE CASCADE,
    agent_id    text NOT NULL DEFAULT '',
    created_by  text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (chat_id, thread_root, goal_id)
);
CREATE INDEX binding_goal ON binding (goal_id);

CREATE TABLE chat_setting (
    chat_id    text PRIMARY KEY,
    lang       text NOT NULL CHECK (lang IN ('en', 'zh')),
    updated_by text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE unrouted (
    id         bigserial PRIMARY KEY,
    chat_id    text NOT NULL,
    message_id text NOT NULL,
    sender     text NOT NULL,
    text       text NOT NULL,
    reason     text NOT NULL,                      -- no_match | ambiguous | unknown_goal | unknown_agent | ...
    candidates text[] NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL DEFAULT now()
);

-- Everything the bot sends to Lark. Written in the transaction of the state change it reports.
CREATE TABLE outbox (
    id              bigserial PRIMARY KEY,
    uuid            text NOT NULL UNIQUE,          -- Lark's send dedupe key; stable per row
    dedupe_key      text UNIQUE,                   -- caller's idempotency (e.g. reply:<item>:<key>)
    kind            text NOT NULL CHECK (kind IN ('text', 'card', 'card_update', 'reaction')),
    receive_id_type text NOT NULL DEFAULT 'chat_id' CHECK (receive_id_type IN ('chat_id', 'open_id')),
    receive_id      text NOT NULL,                 -- chat id, or open_id for a direct message
    reply_to        text NOT NULL DEFAULT '',      -- Lark message id to reply to ('' = new message)
    reply_in_thread boolean NOT NULL DEFAULT false,
    update_of       bigint REFERENCES outbox (id), -- card_update: the card row whose message to patch
    target_message  text NOT NULL DEFAULT '',      -- reaction / patch target when known
    content         text NOT NULL,                 -- text, card JSON, or emoji type
    goal_id         text NOT NULL DEFAULT '',      -- what the message is about (thread routing)
    agent_id        text NOT NULL DEFAULT '',
    session_id      text NOT NULL DEFAULT '',
    gate_id         bigint,
    state           text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'sending', 'sent', 'failed')),
    attempts        integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    claimed_until   timestamptz,
    last_code       integer NOT NULL DEFAULT 0,
    last_error      text NOT NULL DEFAULT '',
    lark_message_id text NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL DEFAULT now(),
    sent_at         timestamptz
);
CREATE INDEX outbox_due ON outbox (next_attempt_at, id) WHERE state IN ('pending', 'sending');
CREATE INDEX outbox_lark_message ON outbox (lark_message_id) WHERE lark_message_id <> '';
CREATE INDEX outbox_gate ON outbox (gate_id) WHERE gate_id IS NOT NULL;

-- Lark event ids seen, written in the transaction of the event's effect, so a redelivery or
-- the same event on another replica has no second effect. Pruned after 7 days.
CREATE TABLE lark_event (
    event_id    text PRIMARY KEY,
    event_type  text NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX lark_event_age ON lark_event (received_at);

-- +goose Down
DROP TABLE lark_event, outbox, unrouted, chat_setting, binding, inbox_item CASCADE;
