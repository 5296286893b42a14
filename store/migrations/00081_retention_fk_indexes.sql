-- Retention (issue 16): deleting a row checks the rows that reference it through a foreign
-- key. Without an index on the referencing column each deleted row scans the whole
-- referencing table, so pruning a day of messages or turns took minutes. These indexes cover
-- the references the sweep deletes through: a card update's card (outbox.update_of), and a
-- turn's evidence and ledger rows (set to NULL when the turn goes).

-- +goose Up
CREATE INDEX outbox_update_of ON outbox (update_of) WHERE update_of IS NOT NULL;
CREATE INDEX evidence_turn ON evidence (turn_id) WHERE turn_id IS NOT NULL;
CREATE INDEX quota_ledger_turn ON quota_ledger (turn_id) WHERE turn_id IS NOT NULL;

-- +goose Down
DROP INDEX outbox_update_of, evidence_turn, quota_ledger_turn;
