-- Tick retention (issue 5): the scheduler prunes ticks older than its retention, oldest first.

-- +goose Up
CREATE INDEX tick_age ON tick (fire_at);

-- +goose Down
DROP INDEX tick_age;
