-- At most one open stall gate per goal, enforced by the database: concurrent should-runs on a
-- goal that just stalled used to open one gate (and one owner card) each. Gates opened by
-- that race before this migration are withdrawn, keeping the oldest, so the index can be
-- built; their cards stay as they were (they answer "already cancelled" when clicked).

-- +goose Up
UPDATE gate g SET status = 'cancelled', answered_at = now(), card_version = card_version + 1,
       next_reminder_at = NULL
WHERE g.kind = 'stall' AND g.status = 'open'
  AND EXISTS (SELECT 1 FROM gate o WHERE o.goal_id = g.goal_id AND o.kind = 'stall'
              AND o.status = 'open' AND o.id < g.id);
CREATE UNIQUE INDEX gate_one_open_stall ON gate (goal_id) WHERE kind = 'stall' AND status = 'open';

-- +goose Down
DROP INDEX gate_one_open_stall;
