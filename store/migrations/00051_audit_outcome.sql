-- Every audit row says how the attempt ended: ok (a change), or why it was not done:
-- refused (the state or the role does not allow it), forbidden (a token used outside its
-- scope), conflict (stale version, key reused, claim held), full (a bound was reached).
-- The filters of `loopx audit` (actor, action, outcome, time) read these indexes.

-- +goose Up
ALTER TABLE audit ADD COLUMN outcome text NOT NULL DEFAULT 'ok'
    CHECK (outcome IN ('ok', 'refused', 'forbidden', 'conflict', 'full'));
UPDATE audit SET outcome = 'refused' WHERE NOT allowed;
CREATE INDEX audit_actor ON audit (actor, id);
CREATE INDEX audit_action ON audit (action, id);
CREATE INDEX audit_at ON audit (at);

-- +goose Down
DROP INDEX audit_at;
DROP INDEX audit_action;
DROP INDEX audit_actor;
ALTER TABLE audit DROP COLUMN outcome;
