-- Lean ticks (issue 27): the tick table was the largest at its plateau (20.5 KB per goal-day
-- at 10,000 goals). A tick row now keeps a summary of the should-run answer (quota.Summary,
-- written by the scheduler), the fire-time index the retention sweep reads becomes a BRIN
-- index (rows arrive in fire order; a range summary per block is enough to find old ones),
-- and the (goal_id, fire_at) index goes: a goal's ticks are read through its schedules and
-- the unique (schedule_id, fire_at) index.
-- Migrations 00150-00159: performance, third round.

-- +goose Up
DROP INDEX tick_age;
CREATE INDEX tick_age ON tick USING brin (fire_at);
DROP INDEX tick_goal;

-- +goose Down
DROP INDEX tick_age;
CREATE INDEX tick_age ON tick (fire_at);
CREATE INDEX tick_goal ON tick (goal_id, fire_at);
