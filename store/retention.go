package store

import (
	"context"
	"fmt"
	"time"
)

// Retention says how long each kind of record is kept once it has done its work. Rows that
// still matter are never pruned, however old: an open gate's cards, a card that a later
// update still patches, the latest next action of each agent, a live turn, an unacknowledged
// inbox item, an unsent message.
type Retention struct {
	// Decisions: should-run records (tick_decision ledger rows) and superseded next actions.
	// Schedule fires (the tick table) follow the same setting; PruneTicks takes their cutoff
	// in the scheduler's time.
	Decisions time.Duration
	// LarkEvents: processed Lark event ids. Lark redelivers for about 7 hours.
	LarkEvents time.Duration
	// Receipts: idempotency receipts; a retry after this is a new call.
	Receipts time.Duration
	// Outbox: messages sent or given up on.
	Outbox time.Duration
	// Inbox: acknowledged and expired inbox items, and messages routed nowhere.
	Inbox time.Duration
	// Audit: the audit trail.
	Audit time.Duration
	// Runs: ended turns and the slots they spent (always longer than a quota window), with
	// their progress notes and cards, and the heartbeats fired now once answered.
	Runs time.Duration
	// Files: deliverables attached to evidence (the evidence itself is kept). Files that
	// came with an inbox item, or with a reply to one, go with that item (Inbox). A file's
	// content is deleted once no file refers to it (PruneFiles).
	Files time.Duration
}

// DefaultRetention keeps records long enough for every use LoopX has of them: Lark stops
// redelivering after about 7 hours, a weekly report reads a week of decisions, a person
// replies in a bot message's thread within days, and the audit trail is kept a year.
func DefaultRetention() Retention {
	day := 24 * time.Hour
	return Retention{Decisions: 14 * day, LarkEvents: 7 * day, Receipts: 7 * day, Outbox: 14 * day,
		Inbox: 14 * day, Audit: 365 * day, Runs: 90 * day, Files: 90 * day}
}

// Pruned counts the rows one Prune deleted, by kind.
type Pruned struct {
	Decisions, LarkEvents, Receipts, Proposals, Outbox, Inbox, Unrouted, Audit, Runs, Spends int64
	RunRequests, Files                                                                       int64
}

// pruneBatch bounds one DELETE, so a large backlog never holds its locks long.
const pruneBatch = 5000

// Prune deletes what r lets go of at now, batch after batch. Each kind is pruned on its own
// (a failure stops the sweep; what was deleted stays deleted), and every statement is
// idempotent, so replicas may sweep at once.
func (s *Store) Prune(ctx context.Context, r Retention, now time.Time) (Pruned, error) {
	var p Pruned
	for _, k := range []struct {
		what  string
		keep  time.Duration
		count *int64
		sql   string
	}{
		// Should-run records; of the next actions, every one but each agent's latest.
		{"decisions", r.Decisions, &p.Decisions, `DELETE FROM quota_ledger WHERE id IN (
			SELECT q.id FROM quota_ledger q WHERE q.created_at < $1
			  AND (q.kind = 'tick_decision'
			       OR (q.kind = 'state_refreshed' AND q.id < (SELECT max(l.id) FROM quota_ledger l
			           WHERE l.goal_id = q.goal_id AND l.agent_id = q.agent_id AND l.kind = 'state_refreshed')))
			LIMIT $2)`},
		{"lark events", r.LarkEvents, &p.LarkEvents, `DELETE FROM lark_event WHERE event_id IN (
			SELECT event_id FROM lark_event WHERE received_at < $1 LIMIT $2)`},
		{"receipts", r.Receipts, &p.Receipts, `DELETE FROM receipt WHERE key IN (
			SELECT key FROM receipt WHERE created_at < $1 LIMIT $2)`},
		// Change proposals live for minutes; past the receipts' window each is settled or
		// expired, and the audit keeps what was applied. Oldest first: a stale proposal
		// names its younger successor, so it goes no later than that one.
		{"proposals", r.Receipts, &p.Proposals, `DELETE FROM proposal WHERE id IN (
			SELECT id FROM proposal WHERE created_at < $1 ORDER BY id LIMIT $2)`},
		// Sent or failed messages, but not a card of an open gate (its update needs the Lark
		// message id), nor a card a younger update still points at.
		{"outbox", r.Outbox, &p.Outbox, `DELETE FROM outbox WHERE id IN (
			SELECT o.id FROM outbox o WHERE o.created_at < $1 AND o.state IN ('sent', 'failed')
			  AND NOT EXISTS (SELECT 1 FROM gate g WHERE g.id = o.gate_id AND g.status = 'open')
			  AND NOT EXISTS (SELECT 1 FROM outbox u WHERE u.update_of = o.id AND u.created_at >= $1)
			LIMIT $2)`},
		{"inbox", r.Inbox, &p.Inbox, `DELETE FROM inbox_item WHERE id IN (
			SELECT id FROM inbox_item WHERE created_at < $1 AND state IN ('acked', 'expired') LIMIT $2)`},
		{"unrouted", r.Inbox, &p.Unrouted, `DELETE FROM unrouted WHERE id IN (
			SELECT id FROM unrouted WHERE created_at < $1 LIMIT $2)`},
		{"audit", r.Audit, &p.Audit, `DELETE FROM audit WHERE id IN (
			SELECT id FROM audit WHERE at < $1 LIMIT $2)`},
		{"spends", r.Runs, &p.Spends, `DELETE FROM quota_ledger WHERE id IN (
			SELECT id FROM quota_ledger WHERE created_at < $1 AND kind IN ('slot_spent', 'slot_voided') LIMIT $2)`},
		{"runs", r.Runs, &p.Runs, `DELETE FROM turn WHERE id IN (
			SELECT id FROM turn WHERE started_at < $1 AND state <> 'live' LIMIT $2)`},
		{"run requests", r.Runs, &p.RunRequests, `DELETE FROM run_request WHERE id IN (
			SELECT id FROM run_request WHERE created_at < $1 AND state = 'done' LIMIT $2)`},
		{"files", r.Files, &p.Files, `DELETE FROM attachment WHERE id IN (
			SELECT id FROM attachment WHERE created_at < $1 AND evidence_id IS NOT NULL LIMIT $2)`},
	} {
		if k.keep <= 0 {
			continue // kept for ever
		}
		for {
			tag, err := s.DB().Exec(ctx, k.sql, now.Add(-k.keep), pruneBatch)
			if err != nil {
				return p, fmt.Errorf("prune %s: %w", k.what, mapErr(err))
			}
			*k.count += tag.RowsAffected()
			if tag.RowsAffected() < pruneBatch {
				break
			}
		}
	}
	return p, nil
}
