-- Issue 15: the run index. Turns and should-run decisions are read per goal, newest first
-- (GET /v1/goals/{goal}/turns and .../decisions, loopx runs, /runs). Each listed turn shows
-- how much evidence it recorded, read through evidence_turn (migration 00081).

-- +goose Up
CREATE INDEX turn_goal ON turn (goal_id, id DESC);
-- One entry per should-run answer: the index costs each decision one more index insert, and
-- saves every read of the index a scan of the whole ledger.
CREATE INDEX quota_ledger_decision ON quota_ledger (goal_id, id DESC) WHERE kind = 'tick_decision';

-- +goose Down
DROP INDEX IF EXISTS quota_ledger_decision;
DROP INDEX IF EXISTS turn_goal;
