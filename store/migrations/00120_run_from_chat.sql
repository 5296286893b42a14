-- Running the work from chat (issue 23): failure cards and a breaker, /stop and /run, a live
-- progress card, files both ways, quiet digests.
--
-- Goal settings with a machine default: NULL means "the machine's default" (loopx serve's
-- LOOPX_BREAKER_FAILURES, LOOPX_PROGRESS_CARD, LOOPX_QUIET_DIGESTS), a value overrides it.
--
-- An agent is held (held_at) by the breaker after N failed or empty turns in a row, or by an
-- owner; should-run answers held until an owner resumes it (resumed_at: failures before it
-- no longer count).
--
-- A turn may be stopped by an owner (stop_requested_at): a runner kills its process or calls
-- its cancel URL, a host's next should-run answers stop; the turn ends as stopped. Its
-- progress notes (turn_note) and its cards in chat (turn_card, card_state) are worked by the
-- scheduler's turn-card sweep: card_state new (not looked at yet), live (a progress card is
-- shown), quiet (none is), done (the outcome was shown). Rows that existed before start done.
--
-- run_request: a heartbeat fired now (/run, [Retry now]), answered by a scheduler replica.
--
-- Files: content-addressed blobs (file_blob, SHA-256) stored in PostgreSQL (file_chunk) or in
-- an S3-compatible store; attachment links a blob to what it belongs to (an inbox item, a
-- reply to one, or evidence), which decides who may read it and how long it is kept. An
-- inbox item whose files are still being fetched from Lark waits in state fetching.

-- +goose Up
ALTER TABLE goal
    ADD COLUMN breaker_failures integer CHECK (breaker_failures BETWEEN 0 AND 100),
    ADD COLUMN progress_card boolean,
    ADD COLUMN quiet_digests boolean;

ALTER TABLE agent
    ADD COLUMN held_at timestamptz,
    ADD COLUMN held_reason text NOT NULL DEFAULT '' CHECK (held_reason IN ('', 'failures', 'owner')),
    ADD COLUMN held_by text NOT NULL DEFAULT '',
    ADD COLUMN held_failures integer NOT NULL DEFAULT 0,
    ADD COLUMN resumed_at timestamptz;

ALTER TABLE turn DROP CONSTRAINT turn_state_check;
ALTER TABLE turn ADD CONSTRAINT turn_state_check
    CHECK (state IN ('live', 'ok', 'failed', 'abandoned', 'stopped'));
ALTER TABLE turn
    ADD COLUMN via text NOT NULL DEFAULT '' CHECK (via IN ('', 'exec', 'webhook', 'mcp', 'cli', 'run')),
    ADD COLUMN stop_requested_at timestamptz,
    ADD COLUMN stop_requested_by text NOT NULL DEFAULT '',
    ADD COLUMN note_rev integer NOT NULL DEFAULT 0,
    ADD COLUMN card_state text NOT NULL DEFAULT 'done' CHECK (card_state IN ('new', 'live', 'quiet', 'done'));
ALTER TABLE turn ALTER COLUMN card_state SET DEFAULT 'new';
CREATE INDEX turn_card_work ON turn (id) WHERE card_state <> 'done';

CREATE TABLE turn_note (
    id bigserial PRIMARY KEY,
    turn_id bigint NOT NULL REFERENCES turn (id) ON DELETE CASCADE,
    text text NOT NULL CHECK (length(text) BETWEEN 1 AND 500),
    at timestamptz NOT NULL
);
CREATE INDEX turn_note_turn ON turn_note (turn_id, id DESC);

CREATE TABLE turn_card (
    turn_id bigint NOT NULL REFERENCES turn (id) ON DELETE CASCADE,
    receive_id_type text NOT NULL DEFAULT 'chat_id',
    receive_id text NOT NULL,
    outbox_id bigint NOT NULL,
    rev integer NOT NULL DEFAULT 0,
    shown_at timestamptz NOT NULL,
    PRIMARY KEY (turn_id, receive_id)
);
CREATE INDEX turn_card_chat ON turn_card (receive_id, shown_at);

CREATE TABLE run_request (
    id bigserial PRIMARY KEY,
    goal_id text NOT NULL,
    agent_id text NOT NULL,
    requested_by text NOT NULL,
    surface text NOT NULL,
    chat_id text NOT NULL DEFAULT '',
    reply_to text NOT NULL DEFAULT '',
    lang text NOT NULL DEFAULT '',
    state text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'done')),
    claimed_by text NOT NULL DEFAULT '',
    claimed_until timestamptz,
    outcome jsonb NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL,
    done_at timestamptz,
    FOREIGN KEY (goal_id, agent_id) REFERENCES agent (goal_id, id) ON DELETE CASCADE
);
CREATE INDEX run_request_pending ON run_request (id) WHERE state = 'pending';
CREATE INDEX run_request_age ON run_request USING brin (created_at);

CREATE TABLE file_blob (
    sha256 bytea PRIMARY KEY CHECK (length(sha256) = 32),
    size bigint NOT NULL CHECK (size >= 0),
    backend text NOT NULL CHECK (backend IN ('pg', 's3')),
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE file_chunk (
    sha256 bytea NOT NULL REFERENCES file_blob (sha256) ON DELETE CASCADE,
    seq integer NOT NULL CHECK (seq >= 0),
    data bytea NOT NULL,
    PRIMARY KEY (sha256, seq)
);

CREATE TABLE attachment (
    id bigserial PRIMARY KEY,
    goal_id text NOT NULL REFERENCES goal (id) ON DELETE CASCADE,
    inbox_item_id bigint REFERENCES inbox_item (id) ON DELETE CASCADE,
    reply_of bigint REFERENCES inbox_item (id) ON DELETE CASCADE,
    evidence_id bigint REFERENCES evidence (id) ON DELETE CASCADE,
    name text NOT NULL CHECK (length(name) BETWEEN 1 AND 255),
    mime text NOT NULL DEFAULT 'application/octet-stream' CHECK (length(mime) <= 200),
    kind text NOT NULL DEFAULT 'file' CHECK (kind IN ('image', 'file')),
    sha256 bytea REFERENCES file_blob (sha256),
    size bigint,
    state text NOT NULL DEFAULT 'stored' CHECK (state IN ('fetching', 'stored', 'failed')),
    lark_message text NOT NULL DEFAULT '',
    lark_key text NOT NULL DEFAULT '',
    attempts integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz,
    claimed_by text NOT NULL DEFAULT '',
    error text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL,
    CHECK (num_nonnulls(inbox_item_id, reply_of, evidence_id) = 1),
    CHECK (state <> 'stored' OR sha256 IS NOT NULL)
);
CREATE INDEX attachment_item ON attachment (inbox_item_id) WHERE inbox_item_id IS NOT NULL;
CREATE INDEX attachment_reply ON attachment (reply_of) WHERE reply_of IS NOT NULL;
CREATE INDEX attachment_evidence ON attachment (evidence_id) WHERE evidence_id IS NOT NULL;
CREATE INDEX attachment_fetch ON attachment (next_attempt_at, id) WHERE state = 'fetching';
CREATE INDEX attachment_blob ON attachment (sha256) WHERE sha256 IS NOT NULL;
CREATE INDEX attachment_age ON attachment USING brin (created_at);

ALTER TABLE inbox_item DROP CONSTRAINT inbox_item_state_check;
ALTER TABLE inbox_item ADD CONSTRAINT inbox_item_state_check
    CHECK (state IN ('fetching', 'pending', 'delivered', 'acked', 'expired'));

ALTER TABLE outbox DROP CONSTRAINT outbox_kind_check;
ALTER TABLE outbox ADD CONSTRAINT outbox_kind_check
    CHECK (kind IN ('text', 'card', 'card_update', 'reaction', 'file'));

ALTER TABLE digest ADD COLUMN quiet boolean NOT NULL DEFAULT false;

-- The scheduler's turn-card sweep wakes when a turn that still has card work opens, ends or
-- gets a progress note, and when someone asks for a heartbeat now.
-- +goose StatementBegin
CREATE FUNCTION loopx_schedule_wake_goal() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('loopx_schedule', NEW.goal_id);
    RETURN NULL;
END $$;
-- +goose StatementEnd
CREATE TRIGGER turn_card_wake AFTER INSERT OR UPDATE OF state, note_rev ON turn
    FOR EACH ROW WHEN (NEW.card_state <> 'done') EXECUTE FUNCTION loopx_schedule_wake_goal();
CREATE TRIGGER run_request_wake AFTER INSERT ON run_request
    FOR EACH ROW EXECUTE FUNCTION loopx_schedule_wake_goal();

-- +goose Down
DROP TRIGGER run_request_wake ON run_request;
DROP TRIGGER turn_card_wake ON turn;
DROP FUNCTION loopx_schedule_wake_goal();
ALTER TABLE digest DROP COLUMN quiet;
DELETE FROM outbox WHERE kind = 'file';
ALTER TABLE outbox DROP CONSTRAINT outbox_kind_check;
ALTER TABLE outbox ADD CONSTRAINT outbox_kind_check CHECK (kind IN ('text', 'card', 'card_update', 'reaction'));
UPDATE inbox_item SET state = 'pending' WHERE state = 'fetching';
ALTER TABLE inbox_item DROP CONSTRAINT inbox_item_state_check;
ALTER TABLE inbox_item ADD CONSTRAINT inbox_item_state_check
    CHECK (state IN ('pending', 'delivered', 'acked', 'expired'));
DROP TABLE attachment;
DROP TABLE file_chunk;
DROP TABLE file_blob;
DROP TABLE run_request;
DROP TABLE turn_card;
DROP TABLE turn_note;
DROP INDEX turn_card_work;
ALTER TABLE turn DROP COLUMN via, DROP COLUMN stop_requested_at, DROP COLUMN stop_requested_by,
    DROP COLUMN note_rev, DROP COLUMN card_state;
UPDATE turn SET state = 'failed' WHERE state = 'stopped';
ALTER TABLE turn DROP CONSTRAINT turn_state_check;
ALTER TABLE turn ADD CONSTRAINT turn_state_check CHECK (state IN ('live', 'ok', 'failed', 'abandoned'));
ALTER TABLE agent DROP COLUMN held_at, DROP COLUMN held_reason, DROP COLUMN held_by,
    DROP COLUMN held_failures, DROP COLUMN resumed_at;
ALTER TABLE goal DROP COLUMN breaker_failures, DROP COLUMN progress_card, DROP COLUMN quiet_digests;
