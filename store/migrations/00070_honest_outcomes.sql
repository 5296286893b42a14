-- Issue 15: outcomes that say what happened.
--   - A heartbeat of a poll agent starts nothing: LoopX only records that a turn is due, and
--     the host learns it at its next poll. Such a fire is 'due', not 'ran'.
--   - A gate answered with an option other than approve or reject (say "later") is
--     'answered': the option is the answer, and it is neither an approval nor a rejection.
--     Gates answered that way before this migration were stored as 'approved' with the option
--     in answer; they become 'answered'. (Their todos were reopened then, as an answered gate
--     reopens them now.)

-- +goose Up
-- Only widening the sets: existing rows satisfy the new checks, so they are added without a
-- scan of the table and validated afterwards under a lighter lock.
ALTER TABLE tick DROP CONSTRAINT tick_outcome_check,
    ADD CONSTRAINT tick_outcome_check CHECK (outcome IN ('ran', 'due', 'skipped', 'missed')) NOT VALID;
ALTER TABLE tick VALIDATE CONSTRAINT tick_outcome_check;
ALTER TABLE gate DROP CONSTRAINT gate_status_check,
    ADD CONSTRAINT gate_status_check CHECK (status IN ('open', 'approved', 'rejected', 'answered', 'cancelled')) NOT VALID;
ALTER TABLE gate VALIDATE CONSTRAINT gate_status_check;
UPDATE gate SET status = 'answered'
WHERE kind = 'question' AND status = 'approved' AND answer IS NOT NULL AND answer <> 'approve';

-- +goose Down
UPDATE gate SET status = 'approved' WHERE status = 'answered';
UPDATE tick SET outcome = 'ran' WHERE outcome = 'due';
ALTER TABLE gate DROP CONSTRAINT gate_status_check,
    ADD CONSTRAINT gate_status_check CHECK (status IN ('open', 'approved', 'rejected', 'cancelled'));
ALTER TABLE tick DROP CONSTRAINT tick_outcome_check,
    ADD CONSTRAINT tick_outcome_check CHECK (outcome IN ('ran', 'skipped', 'missed'));
