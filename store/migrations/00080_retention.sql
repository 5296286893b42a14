-- Retention (issue 16): the maintenance sweep deletes old rows by age. BRIN indexes on the
-- append-only age columns make those deletes find their rows without a full scan, at almost no
-- cost to the writes of the hot paths (a BRIN index summarises ranges of pages, and rows
-- appended to a range not yet summarised cost nothing).

-- +goose Up
CREATE INDEX audit_age ON audit USING brin (at);
CREATE INDEX outbox_age ON outbox USING brin (created_at);
CREATE INDEX inbox_item_age ON inbox_item USING brin (created_at);
CREATE INDEX quota_ledger_age ON quota_ledger USING brin (created_at);
CREATE INDEX unrouted_age ON unrouted USING brin (created_at);
CREATE INDEX turn_age ON turn USING brin (started_at);

-- +goose Down
DROP INDEX audit_age, outbox_age, inbox_item_age, quota_ledger_age, unrouted_age, turn_age;
