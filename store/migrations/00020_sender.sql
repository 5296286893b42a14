-- Bot sender (issue 4): who holds an outbox claim, the per-chat head index the ordered claim
-- uses, shared send-rate bookkeeping, and the wake-up notification on outbox insert.

-- +goose Up
ALTER TABLE outbox ADD COLUMN claimed_by text NOT NULL DEFAULT '';

-- The claim picks the oldest unfinished row of each chat; this keeps that lookup an index scan.
CREATE INDEX outbox_chat_head ON outbox (receive_id, id) WHERE state IN ('pending', 'sending');
CREATE INDEX outbox_failed ON outbox (id) WHERE state = 'failed';

-- Generic cell rate algorithm state per scope ('app' or 'chat:<id>'): tat is the theoretical
-- arrival time of the next send. Shared by every replica, so the limits hold across all of them.
CREATE TABLE send_rate (
    scope text PRIMARY KEY,
    tat   timestamptz NOT NULL
);

-- Wake the senders as soon as a transaction that wrote outbox rows commits (NOTIFY is delivered
-- at commit, and identical notifications in one transaction are folded into one).
-- +goose StatementBegin
CREATE FUNCTION outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('loopx_outbox', '');
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER outbox_notify AFTER INSERT ON outbox FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify();

-- +goose Down
DROP TRIGGER outbox_notify ON outbox;
DROP FUNCTION outbox_notify();
DROP TABLE send_rate;
DROP INDEX outbox_failed;
DROP INDEX outbox_chat_head;
ALTER TABLE outbox DROP COLUMN claimed_by;
