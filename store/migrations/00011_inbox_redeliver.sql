-- Inbox redelivery (issue 3): a drained item that is not acked by redeliver_at goes back to
-- pending, so an agent that crashed mid-turn loses nothing. Readers that count waiting work
-- (should-run) may treat "delivered AND redeliver_at <= now()" as pending too.

-- +goose Up
ALTER TABLE inbox_item ADD COLUMN redeliver_at timestamptz;
CREATE INDEX inbox_item_redeliver ON inbox_item (redeliver_at) WHERE state = 'delivered';

-- +goose Down
DROP INDEX inbox_item_redeliver;
ALTER TABLE inbox_item DROP COLUMN redeliver_at;
