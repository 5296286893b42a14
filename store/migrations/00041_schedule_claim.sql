-- Schedules are claimed for firing instead of locked for the whole batch: the scheduler asks
-- should-run for each claimed heartbeat outside any transaction (each should-run is a
-- transaction of its own), so no batch transaction waits on the pool for a second connection.
-- claimed_by names the claimant; next_run_at holds the claim's lapse meanwhile.

-- +goose Up
ALTER TABLE schedule ADD COLUMN claimed_by text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE schedule DROP COLUMN claimed_by;
