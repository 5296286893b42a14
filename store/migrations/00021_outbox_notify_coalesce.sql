-- Coalesce the outbox wake-up (issue 4). A transaction that NOTIFYs takes a cluster-wide lock
-- at commit and holds it through the WAL flush, so with a NOTIFY in every transaction that
-- writes an outbox row, those commits run one at a time: the ingest benchmark could not hold
-- 200 events/s. Now only one of the transactions in flight at a time notifies (it holds a
-- transaction advisory lock); the others skip. The senders recheck shortly after every wake-up,
-- which picks up rows that committed just after the notifying transaction.

-- +goose Up
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

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('loopx_outbox', '');
    RETURN NULL;
END
$$;
-- +goose StatementEnd
