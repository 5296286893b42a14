-- The fast path's receipts wake no other process (issue 27). A message the fast path takes is
-- committed by the process that received it, whose sender is woken in process; the
-- notification told every replica's sender, and PostgreSQL, of each such commit (at one
-- sender a notification per message, each a signal to every listening backend). A
-- transaction that sets loopx.quiet_reactions to on (set_config(..., true): for that
-- transaction only) writes its reactions without the 'reactions' notification; other
-- replicas find them at their next look. Every other writer notifies as before.

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
    IF reactions AND coalesce(current_setting('loopx.quiet_reactions', true), '') <> 'on'
       AND pg_try_advisory_xact_lock(hashtext('loopx'), hashtext('outbox_notify_reactions')) THEN
        PERFORM pg_notify('loopx_outbox', 'reactions');
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose Down
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
