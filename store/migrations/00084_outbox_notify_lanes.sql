-- The outbox wake-up names its lane (issue 16): 'messages' when the statement wrote a message,
-- card or card update, 'reactions' when it wrote a receipt. A chat message's transaction
-- writes only its receipt, so it no longer wakes the message lane, whose every wake-up was a
-- claim and a due-time query that found nothing. Each lane's notification is coalesced as in
-- migration 00021, under its own advisory lock.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    messages boolean;
    reactions boolean;
BEGIN
    SELECT bool_or(kind <> 'reaction'), bool_or(kind = 'reaction') INTO messages, reactions FROM new_rows;
    IF messages AND pg_try_advisory_xact_lock(hashtext('loopx'), hashtext('outbox_notify')) THEN
        PERFORM pg_notify('loopx_outbox', 'messages');
    END IF;
    IF reactions AND pg_try_advisory_xact_lock(hashtext('loopx'), hashtext('outbox_notify_reactions')) THEN
        PERFORM pg_notify('loopx_outbox', 'reactions');
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
DROP TRIGGER outbox_notify ON outbox;
CREATE TRIGGER outbox_notify AFTER INSERT ON outbox REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify();

-- +goose Down
DROP TRIGGER outbox_notify ON outbox;
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF pg_try_advisory_xact_lock(hashtext('loopx'), hashtext('outbox_notify')) THEN
        PERFORM pg_notify('loopx_outbox', '');
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER outbox_notify AFTER INSERT ON outbox FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify();
