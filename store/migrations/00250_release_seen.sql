-- The releases that have run on this database (issue 25): loopx serve and loopx migrate record
-- their version and the newest migration they know each time they start, so that an older
-- binary facing this schema can name the release that migrated it, and an operator can see
-- which releases ran here.

-- +goose Up
CREATE TABLE release_seen (
    version        text PRIMARY KEY,
    schema_version bigint NOT NULL,
    commit_id      text NOT NULL DEFAULT '',
    first_seen     timestamptz NOT NULL DEFAULT now(),
    last_seen      timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE release_seen;
