-- Two send lanes (issue 16). Receipt reactions leave the per-chat order: a reaction targets a
-- message that already exists, so nothing is gained by sending it in commit order with the
-- chat's replies, and a burst of receipts (Lark takes 1,000 reactions a minute from an app)
-- queued ahead of a reply made the reply wait minutes. The message lane keeps the per-chat
-- head index without reactions; the reaction lane claims by due time.
--
-- The old outbox_due index (every unsent row by due time) served no query since the claim
-- became per-chat heads: it is replaced by the reaction lane's, and lapsed claims (few rows,
-- both lanes) get their own.

-- +goose Up
DROP INDEX outbox_chat_head;
CREATE INDEX outbox_chat_head ON outbox (receive_id, id)
    WHERE state IN ('pending', 'sending') AND kind <> 'reaction';
DROP INDEX outbox_due;
CREATE INDEX outbox_reaction_due ON outbox (next_attempt_at, id)
    WHERE state = 'pending' AND kind = 'reaction';
CREATE INDEX outbox_claimed ON outbox (claimed_until) WHERE state = 'sending';

-- +goose Down
DROP INDEX outbox_claimed;
DROP INDEX outbox_reaction_due;
CREATE INDEX outbox_due ON outbox (next_attempt_at, id) WHERE state IN ('pending', 'sending');
DROP INDEX outbox_chat_head;
CREATE INDEX outbox_chat_head ON outbox (receive_id, id) WHERE state IN ('pending', 'sending');
