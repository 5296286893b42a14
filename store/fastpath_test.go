package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loopx/store"
	"loopx/store/storetest"
)

var fastOpts = store.FastOptions{MaxPending: 3, Receipt: "OK"}

// boundFixture: chat "oc_one" bound to goal one (owner ou_o, member ou_m; agents a and the
// default b, binding without agent); "oc_named" bound to one/a by name; "oc_two" bound to
// goals one and two; "oc_pair" bound to goal pair, which has two agents and no default;
// "oc_gone" bound to goal one's agent "x", which does not exist; "oc_none" unbound.
func boundFixture(t *testing.T) *store.Store {
	t.Helper()
	st := storetest.New(t, store.Options{})
	ctx := t.Context()
	for _, g := range []store.CreateGoalParams{
		{ID: "one", Owners: []string{"ou_o"}, Members: []string{"ou_m"}, HeartbeatSpec: "@every 1h", Meta: sys},
		{ID: "two", Owners: []string{"ou_o"}, Meta: sys},
		{ID: "pair", Owners: []string{"ou_o"}, Meta: sys},
	} {
		_, err := st.CreateGoal(ctx, g)
		require.NoError(t, err)
	}
	for _, a := range []store.RegisterAgentParams{
		{GoalID: "one", AgentID: "a"}, {GoalID: "one", AgentID: "b", IsDefault: true},
		{GoalID: "two", AgentID: "solo"}, {GoalID: "pair", AgentID: "p1"}, {GoalID: "pair", AgentID: "p2"},
	} {
		a.Meta = sys
		_, err := st.RegisterAgent(ctx, a)
		require.NoError(t, err)
	}
	// The first agent of a goal becomes its default; pair is made to have none.
	_, err := st.DB().Exec(ctx, `UPDATE agent SET is_default = false WHERE goal_id = 'pair'`)
	require.NoError(t, err)
	for _, b := range [][3]string{
		{"oc_one", "one", ""}, {"oc_named", "one", "a"}, {"oc_two", "one", ""}, {"oc_two", "two", ""},
		{"oc_pair", "pair", ""}, {"oc_gone", "one", "x"}, {"oc_solo", "two", ""},
	} {
		_, err := st.DB().Exec(ctx, `INSERT INTO binding (chat_id, goal_id, agent_id, created_by) VALUES ($1, $2, $3, 'ou_o')`, b[0], b[1], b[2])
		require.NoError(t, err)
	}
	return st
}

func fastMsg(n int, chat, sender string) store.FastMessage {
	return store.FastMessage{EventID: fmt.Sprintf("ev_%d", n), ChatID: chat, MessageID: fmt.Sprintf("om_%d", n),
		Sender: sender, Mode: store.ModeInbox, Text: fmt.Sprintf("message %d", n)}
}

// EnqueueFast takes exactly the messages whose routing is the plain case, writes each one's
// item, audit row and receipt, and writes nothing at all for the others.
func TestEnqueueFastTakesOnlyThePlainCase(t *testing.T) {
	t.Parallel()
	st := boundFixture(t)
	ctx := t.Context()
	admin := fastMsg(5, "oc_pair", "ou_admin")
	admin.ChatID, admin.Admin = "oc_named", true
	msgs := []store.FastMessage{
		fastMsg(1, "oc_one", "ou_o"),     // owner, goal default agent b
		fastMsg(2, "oc_named", "ou_m"),   // member, the binding's agent a
		fastMsg(3, "oc_solo", "ou_o"),    // the goal's only agent
		fastMsg(4, "oc_one", "ou_stray"), // stranger: general path (refusal)
		admin,                            // admin of the service
		fastMsg(6, "oc_two", "ou_o"),     // two bindings: general path (ambiguous)
		fastMsg(7, "oc_pair", "ou_o"),    // two agents, no default: general path (which?)
		fastMsg(8, "oc_gone", "ou_o"),    // bound agent missing: general path
		fastMsg(9, "oc_none", "ou_o"),    // unbound: general path
		{EventID: "ev_10", ChatID: "oc_one", MessageID: "om_10", Sender: "ou_o", Mode: store.ModeQueue, Text: "queued"},
	}
	_, err := st.DB().Exec(ctx, `UPDATE schedule SET rearm = false`)
	require.NoError(t, err)
	taken, err := st.EnqueueFast(ctx, fastOpts, msgs)
	require.NoError(t, err)
	require.Equal(t, []bool{true, true, true, false, true, false, false, false, false, true}, taken)

	type row struct{ Goal, Agent, Mode, Text, Sender, Chat, Msg string }
	var items []row
	rows, err := st.DB().Query(ctx, `SELECT goal_id, agent_id, mode, text, sender, source_chat, source_message
		FROM inbox_item ORDER BY id`)
	require.NoError(t, err)
	for rows.Next() {
		var r row
		require.NoError(t, rows.Scan(&r.Goal, &r.Agent, &r.Mode, &r.Text, &r.Sender, &r.Chat, &r.Msg))
		items = append(items, r)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []row{
		{"one", "b", "inbox", "message 1", "ou_o", "oc_one", "om_1"},
		{"one", "a", "inbox", "message 2", "ou_m", "oc_named", "om_2"},
		{"two", "solo", "inbox", "message 3", "ou_o", "oc_solo", "om_3"},
		{"one", "a", "inbox", "message 5", "ou_admin", "oc_named", "om_5"},
		{"one", "b", "queue", "queued", "ou_o", "oc_one", "om_10"},
	}, items, "items in batch order, each routed as the general path would")

	require.Zero(t, countRows(t, st, `SELECT count(*) FROM lark_event`), "a taken message's item is its record; nothing else is written")
	var detail json.RawMessage
	var target, actor string
	require.NoError(t, st.DB().QueryRow(ctx, `SELECT actor, target, detail FROM audit
		WHERE action = 'chat.message' AND actor = 'ou_m'`).Scan(&actor, &target, &detail))
	var itemID int64
	require.NoError(t, st.DB().QueryRow(ctx, `SELECT id FROM inbox_item WHERE source_message = 'om_2'`).Scan(&itemID))
	require.Equal(t, fmt.Sprintf("inbox:%d", itemID), target)
	require.JSONEq(t, `{"agent_id":"a","mode":"inbox","session_id":""}`, string(detail))
	require.Equal(t, 5, countRows(t, st, `SELECT count(*) FROM audit WHERE action = 'chat.message' AND allowed`))
	require.Equal(t, 5, countRows(t, st, `SELECT count(*) FROM outbox WHERE kind = 'reaction' AND content = 'OK'
		AND dedupe_key = 'evt:' || replace(target_message, 'om_', 'ev_') || ':receipt'`), "one receipt per taken message")
	var rearmed []string
	require.NoError(t, st.DB().QueryRow(ctx, `SELECT coalesce(array_agg(goal_id || '/' || agent_id ORDER BY agent_id), '{}')
		FROM schedule WHERE rearm`).Scan(&rearmed))
	require.Equal(t, []string{"one/a", "one/b"}, rearmed,
		"new work rearms the heartbeats of the agents it is for (two/solo has no heartbeat)")
}

// A redelivered event, a message already in the inbox and a full inbox are all left to the
// general path, with nothing written.
func TestEnqueueFastLeavesRepeatsAndFullInboxes(t *testing.T) {
	t.Parallel()
	st := boundFixture(t)
	ctx := t.Context()
	first := []store.FastMessage{fastMsg(1, "oc_one", "ou_o"), fastMsg(2, "oc_one", "ou_o"), fastMsg(3, "oc_one", "ou_o")}
	taken, err := st.EnqueueFast(ctx, fastOpts, first)
	require.NoError(t, err)
	require.Equal(t, []bool{true, true, true}, taken)
	before := countRows(t, st, `SELECT (SELECT count(*) FROM lark_event) + (SELECT count(*) FROM inbox_item)
		+ (SELECT count(*) FROM audit) + (SELECT count(*) FROM outbox)`)

	sameMessageNewEvent := fastMsg(2, "oc_one", "ou_o")
	sameMessageNewEvent.EventID = "ev_other"
	full := fastMsg(4, "oc_one", "ou_o") // one/b holds MaxPending (3) items now
	otherAgent := fastMsg(5, "oc_named", "ou_o")
	taken, err = st.EnqueueFast(ctx, fastOpts, []store.FastMessage{first[0], sameMessageNewEvent, full, otherAgent})
	require.NoError(t, err)
	require.Equal(t, []bool{false, false, false, true}, taken)
	after := countRows(t, st, `SELECT (SELECT count(*) FROM lark_event) + (SELECT count(*) FROM inbox_item)
		+ (SELECT count(*) FROM audit) + (SELECT count(*) FROM outbox)`)
	require.Equal(t, before+3, after, "only the message for the other agent wrote its rows (item, audit, receipt)")

	// A message the general path handled (its key is recorded) and a message that is an item
	// of another agent already (its chat was bound elsewhere when it first came) are repeats.
	handled := fastMsg(6, "oc_one", "ou_o")
	_, err = st.DB().Exec(ctx, `INSERT INTO lark_event (event_id, event_type) VALUES ($1, 'im.message.receive_v1')`,
		store.MessageEventID(handled.MessageID))
	require.NoError(t, err)
	elsewhere := otherAgent
	elsewhere.ChatID, elsewhere.EventID = "oc_solo", "ev_rebound"
	taken, err = st.EnqueueFast(ctx, fastOpts, []store.FastMessage{handled, elsewhere})
	require.NoError(t, err)
	require.Equal(t, []bool{false, false}, taken)
	require.Equal(t, after+1, countRows(t, st, `SELECT (SELECT count(*) FROM lark_event) + (SELECT count(*) FROM inbox_item)
		+ (SELECT count(*) FROM audit) + (SELECT count(*) FROM outbox)`), "nothing written but the key inserted above")
}

// Within one batch the bound is exact: of five messages to an agent with room for three, the
// first three are taken.
func TestEnqueueFastKeepsTheInboxLimitWithinABatch(t *testing.T) {
	t.Parallel()
	st := boundFixture(t)
	var msgs []store.FastMessage
	for n := range 5 {
		msgs = append(msgs, fastMsg(n, "oc_one", "ou_o"))
	}
	msgs = append(msgs, fastMsg(9, "oc_named", "ou_o"))
	taken, err := st.EnqueueFast(t.Context(), fastOpts, msgs)
	require.NoError(t, err)
	require.Equal(t, []bool{true, true, true, false, false, true}, taken)
	require.Equal(t, 3, countRows(t, st, `SELECT count(*) FROM inbox_item WHERE agent_id = 'b'`))
}

// Bad input is refused before anything is written.
func TestEnqueueFastValidates(t *testing.T) {
	t.Parallel()
	st := boundFixture(t)
	ctx := t.Context()
	for name, m := range map[string]store.FastMessage{
		"no event":   {ChatID: "oc_one", MessageID: "om", Sender: "ou_o", Mode: "inbox", Text: "x"},
		"no message": {EventID: "e", ChatID: "oc_one", Sender: "ou_o", Mode: "inbox", Text: "x"},
		"no chat":    {EventID: "e", MessageID: "om", Sender: "ou_o", Mode: "inbox", Text: "x"},
		"steer":      {EventID: "e", ChatID: "oc_one", MessageID: "om", Sender: "ou_o", Mode: "steer", Text: "x"},
		"no text":    {EventID: "e", ChatID: "oc_one", MessageID: "om", Sender: "ou_o", Mode: "inbox"},
	} {
		_, err := st.EnqueueFast(ctx, fastOpts, []store.FastMessage{fastMsg(1, "oc_one", "ou_o"), m})
		require.ErrorIs(t, err, store.ErrInvalid, name)
	}
	_, err := st.EnqueueFast(ctx, store.FastOptions{}, []store.FastMessage{fastMsg(1, "oc_one", "ou_o")})
	require.ErrorIs(t, err, store.ErrInvalid)
	require.Zero(t, countRows(t, st, `SELECT count(*) FROM inbox_item`))
	require.Zero(t, countRows(t, st, `SELECT count(*) FROM lark_event`))
}

func countRows(t *testing.T, st *store.Store, sql string) int {
	t.Helper()
	var n int
	require.NoError(t, st.DB().QueryRow(context.Background(), sql).Scan(&n))
	return n
}

// The fast path's receipts notify no one (its process wakes its own sender), and the setting
// that quiets them lasts only for the batch's transaction: a reaction written afterwards
// notifies as before.
func TestEnqueueFastReceiptsAreQuiet(t *testing.T) {
	st := boundFixture(t)
	ctx := t.Context()
	woken := make(chan string, 16)
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- st.Listen(lctx, store.OutboxNotifyChannel, func(p string) { woken <- p }) }()
	defer func() { cancel(); <-done }()
	require.Empty(t, <-woken, "the initial wake after LISTEN")
	for i := range 3 {
		taken, err := st.EnqueueFast(ctx, fastOpts, []store.FastMessage{fastMsg(i+1, "oc_one", "ou_o")})
		require.NoError(t, err)
		require.Equal(t, []bool{true}, taken)
	}
	// Notifications arrive in commit order: a marker sent after the batches comes first only if
	// they sent none. A reaction written the ordinary way afterwards still notifies.
	next := func() string {
		select {
		case p := <-woken:
			return p
		case <-time.After(30 * time.Second):
			t.Fatal("no notification")
			return ""
		}
	}
	_, err := st.DB().Exec(ctx, `SELECT pg_notify($1, 'marker')`, store.OutboxNotifyChannel)
	require.NoError(t, err)
	require.Equal(t, "marker", next(), "a fast-path batch notified")
	_, err = st.DB().Exec(ctx, `INSERT INTO outbox (uuid, kind, receive_id, target_message, content) VALUES ('r-q', 'reaction', 'oc_one', 'om_1', 'OK')`)
	require.NoError(t, err)
	require.Equal(t, "reactions", next())
	var n int
	require.NoError(t, st.DB().QueryRow(ctx, `SELECT count(*) FROM outbox WHERE kind = 'reaction'`).Scan(&n))
	require.Equal(t, 4, n, "the batches queued their receipts")
}
