package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loopx/store"
)

// Prune lets go of each kind of record after its window and keeps what still matters however
// old: an open gate's card, each agent's latest next action, a live turn, an unacknowledged
// inbox item, an unsent message.
func TestPruneKeepsWhatStillMatters(t *testing.T) {
	t.Parallel()
	st, _ := setup(t)
	ctx := t.Context()
	db := st.DB()
	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := db.Exec(ctx, sql, args...)
		require.NoError(t, err)
	}
	count := func(sql string, args ...any) int {
		t.Helper()
		var n int
		require.NoError(t, db.QueryRow(ctx, sql, args...).Scan(&n))
		return n
	}
	old := time.Now().Add(-40 * 24 * time.Hour)
	// Old rows of every kind, next to the ones that must stay.
	exec(`INSERT INTO quota_ledger (goal_id, agent_id, kind, created_at) VALUES
		('g', 'a', 'tick_decision', $1), ('g', 'a', 'state_refreshed', $1), ('g', 'a', 'state_refreshed', $1)`, old)
	exec(`INSERT INTO lark_event (event_id, event_type, received_at) VALUES ('ev-old', 'x', $1), ('ev-new', 'x', now())`, old)
	exec(`INSERT INTO receipt (key, request_hash, status, body, created_at) VALUES ('k-old', '\x00', 200, '{}', $1)`, old)
	exec(`INSERT INTO gate (goal_id, kind, question, options, status, created_at) VALUES
		('g', 'question', 'open one?', '{a}', 'open', $1), ('g', 'question', 'closed one?', '{a}', 'approved', $1)`, old)
	exec(`INSERT INTO outbox (uuid, kind, receive_id, content, state, gate_id, created_at)
		SELECT 'u-' || g.id, 'card', 'oc_1', '{}', 'sent', g.id, $1 FROM gate g WHERE g.goal_id = 'g'`, old)
	exec(`INSERT INTO outbox (uuid, kind, receive_id, content, state, created_at) VALUES
		('u-sent', 'text', 'oc_1', 'x', 'sent', $1), ('u-pending', 'text', 'oc_1', 'x', 'pending', $1)`, old)
	exec(`INSERT INTO inbox_item (goal_id, agent_id, mode, text, sender, state, created_at) VALUES
		('g', 'a', 'inbox', 'x', 'ou_1', 'acked', $1), ('g', 'a', 'inbox', 'y', 'ou_1', 'pending', $1)`, old)
	exec(`INSERT INTO unrouted (chat_id, message_id, sender, text, reason, created_at) VALUES ('oc_1', 'om_1', 'ou_1', 'x', 'no_match', $1)`, old)
	exec(`INSERT INTO audit (at, actor, surface, action, goal_id, target, allowed, detail) VALUES ($1, 'x', 'api', 'a', 'g', '', true, '{}')`, old)
	exec(`INSERT INTO turn (goal_id, agent_id, instance_id, state, lease_expires_at, started_at) VALUES
		('g', 'a', 'ended', 'ok', $1, $1), ('g', 'a', 'live', 'live', now() + interval '1 hour', $1)`, old)
	exec(`INSERT INTO quota_ledger (goal_id, agent_id, kind, turn_id, slots, created_at)
		SELECT 'g', 'a', 'slot_spent', id, 1, $1 FROM turn WHERE instance_id = 'ended'`, old)
	// An old stale proposal names its younger successor; both are past the window, and a
	// fresh one stays.
	exec(`INSERT INTO proposal (goal_id, kind, params, diff, goal_version, need, state, proposed_by, surface, expires_at, created_at) VALUES
		('g', 'goal.set', '{}', '[]', 1, 'owner', 'applied', 'ou_1', 'chat', $1, $1),
		('g', 'goal.set', '{}', '[]', 1, 'owner', 'preview_ready', 'ou_1', 'chat', now() + interval '10 minutes', now())`, old)
	exec(`INSERT INTO proposal (goal_id, kind, params, diff, goal_version, need, state, proposed_by, surface, expires_at, created_at, successor_id)
		SELECT 'g', 'goal.set', '{}', '[]', 0, 'owner', 'stale', 'ou_1', 'chat', $1::timestamptz, $1::timestamptz - interval '1 minute', min(id) FROM proposal`, old)

	// A window longer than the rows' age deletes nothing.
	long := 60 * 24 * time.Hour
	p, err := st.Prune(ctx, store.Retention{Decisions: long, LarkEvents: long, Receipts: long, Outbox: long,
		Inbox: long, Audit: long, Runs: long}, time.Now())
	require.NoError(t, err)
	require.Equal(t, store.Pruned{}, p)

	month := 30 * 24 * time.Hour
	p, err = st.Prune(ctx, store.Retention{Decisions: month, LarkEvents: month, Receipts: month, Outbox: month,
		Inbox: month, Audit: month, Runs: month}, time.Now())
	require.NoError(t, err)
	require.Equal(t, store.Pruned{Decisions: 2, LarkEvents: 1, Receipts: 1, Proposals: 2, Outbox: 2, Inbox: 1, Unrouted: 1,
		Audit: 1, Runs: 1, Spends: 1}, p)
	require.Equal(t, 1, count(`SELECT count(*) FROM proposal WHERE state = 'preview_ready'`), "the fresh proposal stays")

	require.Equal(t, 1, count(`SELECT count(*) FROM quota_ledger WHERE kind = 'state_refreshed'`), "the latest next action stays")
	require.Equal(t, 1, count(`SELECT count(*) FROM lark_event`))
	require.Equal(t, 2, count(`SELECT count(*) FROM outbox`), "the open gate's card and the unsent message stay")
	require.Equal(t, 1, count(`SELECT count(*) FROM outbox o JOIN gate g ON g.id = o.gate_id WHERE g.status = 'open'`))
	require.Equal(t, 1, count(`SELECT count(*) FROM inbox_item WHERE state = 'pending'`))
	require.Equal(t, 1, count(`SELECT count(*) FROM turn WHERE state = 'live'`))

	// Zero keeps a kind for ever.
	exec(`INSERT INTO audit (at, actor, surface, action, goal_id, target, allowed, detail) VALUES ($1, 'x', 'api', 'a', 'g', '', true, '{}')`, old)
	p, err = st.Prune(ctx, store.Retention{}, time.Now())
	require.NoError(t, err)
	require.Zero(t, p.Audit)
}
