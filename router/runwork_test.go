package router_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"loopx/router"
	"loopx/store"
)

// /status and /gates in a direct chat that names no goal answer with an overview of the
// sender's goals, what needs them first, with a button to open each; a message that needs a
// goal still asks which.
func TestOverviewInADirectChat(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	g, err := e.st.AskGate(ctx, store.AskGateParams{GoalID: "infra", AgentID: "ops", Question: "Rotate the key?", Meta: setupMeta})
	require.NoError(t, err)
	_, err = e.st.HoldAgent(ctx, store.HoldParams{GoalID: "docs", AgentID: "claude", Meta: store.Meta{Actor: owner, Surface: "chat"}})
	require.NoError(t, err)
	e.outbox()
	dm := func(who, text string) store.OutboxRecord {
		m := e.send(router.Message{ChatID: "oc_p2p_" + who, ChatType: router.ChatP2P, SenderID: who, Text: text}, false)
		rows := e.outbox()
		require.Len(t, rows, 1)
		require.Equal(t, m.MessageID, rows[0].ReplyTo)
		return rows[0]
	}
	status := dm(owner, "/status")
	require.Equal(t, "card", status.Kind)
	require.Contains(t, status.Content, "Your goals (2)")
	infra, docs := strings.Index(status.Content, "#infra"), strings.Index(status.Content, "#docs")
	require.Greater(t, docs, 0)
	require.Less(t, infra, docs, "the goal whose gate waits for the owner comes first")
	require.Contains(t, status.Content, "1 open gate waits for an owner")
	require.Contains(t, status.Content, "held: claude")
	require.Contains(t, status.Content, `"kind":"web"`, "a button to open each goal")

	_, err = e.st.AskGate(ctx, store.AskGateParams{GoalID: "infra", AgentID: "ops", Question: "Restart the cluster?", Meta: setupMeta})
	require.NoError(t, err)
	gates := dm(owner, "/gates")
	require.Contains(t, gates.Content, "Your open gates (2)", "the gates are counted, not their goals")
	require.Contains(t, gates.Content, "2 open gates wait for an owner")
	require.Contains(t, gates.Content, "g"+strings.TrimPrefix(store.GateTarget(g.ID), "gate:")+" (ops): Rotate the key?")
	require.NotContains(t, gates.Content, "#docs", "only goals with open gates")

	member := dm(member, "/status")
	require.Contains(t, member.Content, "Your goals (1)")
	require.Contains(t, member.Content, "member")
	strangerReply := dm(stranger, "/status")
	require.Contains(t, strangerReply.Content, "not an owner or member of any goal")

	// A command that needs a goal keeps asking for one.
	todo := dm(owner, "/todo write it")
	require.Contains(t, todo.Content, "which goal")
	// In a group the goal still comes from the binding.
	grp := e.oneReply(e.say(owner, "/status"))
	require.Contains(t, grp.Content, "#docs — Docs site")
}

// /stop, /run, /pause and /resume of one agent are for owners; the answers say what happened.
func TestStopRunPauseResumeFromChat(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	refused := e.oneReply(e.say(member, "/stop #docs/codex"))
	require.Contains(t, refused.Content, "Sorry")
	none := e.oneReply(e.say(owner, "/stop #docs/codex"))
	require.Contains(t, none.Content, "codex on #docs has no live turn to stop")

	_, err := e.st.OpenTurn(ctx, store.OpenTurnParams{GoalID: "docs", AgentID: "codex", InstanceID: "t-1", Meta: setupMeta})
	require.NoError(t, err)
	stop := e.oneReply(e.say(owner, "/stop #docs/codex"))
	require.Contains(t, stop.Content, "Stopping the turn of codex on #docs")
	live, err := store.GetLiveTurn(ctx, e.st.DB(), "docs", "codex", e.clk.Now())
	require.NoError(t, err)
	require.NotNil(t, live.StopRequestedAt)
	require.Equal(t, owner, live.StopRequestedBy)

	m := e.say(owner, "/run #docs/claude")
	rows := e.outbox()
	require.Len(t, rows, 1)
	require.Equal(t, "reaction", rows[0].Kind, "the receipt; a scheduler answers with what should-run decided")
	var n int
	require.NoError(t, e.st.DB().QueryRow(ctx, `SELECT count(*) FROM run_request WHERE goal_id = 'docs' AND agent_id = 'claude'
		AND chat_id = $1 AND reply_to = $2`, room, m.MessageID).Scan(&n))
	require.Equal(t, 1, n)

	paused := e.oneReply(e.say(owner, "/pause #docs/claude"))
	require.Contains(t, paused.Content, "claude on #docs is held")
	status := e.oneReply(e.say(owner, "/status"))
	require.Contains(t, status.Content, "Agent claude: held by")
	resumed := e.oneReply(e.say(owner, "/resume #docs/claude"))
	require.Contains(t, resumed.Content, "claude on #docs runs again")
	again := e.oneReply(e.say(owner, "/resume #docs/claude"))
	require.Contains(t, again.Content, "claude on #docs is not held")
	runs := e.oneReply(e.say(owner, "/runs"))
	require.NotContains(t, runs.Content, "Held:")
}

// A message with an image and no words reaches the agent named by its files, once its files
// are fetched; a caption with an address routes it.
func TestMessagesWithFiles(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	m := e.send(router.Message{SenderID: owner, Text: "", Files: []router.File{{Key: "img_1", Kind: "image"}}}, true)
	rows := e.outbox()
	require.Len(t, rows, 1)
	require.Equal(t, "reaction", rows[0].Kind)
	items, err := store.ListInbox(ctx, e.st.DB(), "docs", "codex", store.InboxFetching)
	require.NoError(t, err)
	require.Len(t, items, 1, "the item waits for its file")
	require.Equal(t, "📎 image", items[0].Text)
	require.Equal(t, m.MessageID, items[0].SourceMessage)
	pending, err := store.ListInbox(ctx, e.st.DB(), "docs", "codex", store.InboxPending)
	require.NoError(t, err)
	require.Empty(t, pending, "not handed out while fetching")

	e.send(router.Message{SenderID: owner, Text: "#docs/claude the spec",
		Files: []router.File{{Key: "file_1", Kind: "file", Name: "spec.pdf"}}}, true)
	items, err = store.ListInbox(ctx, e.st.DB(), "docs", "claude", store.InboxFetching)
	require.NoError(t, err)
	require.Len(t, items, 1)
	require.Equal(t, "the spec", items[0].Text)
	var name string
	require.NoError(t, e.st.DB().QueryRow(ctx, `SELECT name FROM attachment WHERE inbox_item_id = $1`, items[0].ID).Scan(&name))
	require.Equal(t, "spec.pdf", name)
}

// A stranger's click on a turn card is refused and audited; an owner's [Pause agent] holds
// the agent and the card shows who did it.
func TestTurnCardClicks(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	turn, err := e.st.OpenTurn(ctx, store.OpenTurnParams{GoalID: "docs", AgentID: "codex", InstanceID: "t-9", Meta: setupMeta})
	require.NoError(t, err)
	_, err = e.st.EndTurn(ctx, store.EndTurnParams{GoalID: "docs", AgentID: "codex", InstanceID: "t-9", State: store.TurnFailed,
		Outcome: "exit status 1", LogTail: "boom", Meta: setupMeta})
	require.NoError(t, err)
	value := map[string]any{"kind": "turn", "action": "pause", "goal_id": "docs", "agent_id": "codex", "turn_id": float64(turn.ID)}
	res, err := e.chat.HandleCardAction(ctx, router.CardAction{EventID: "ev_click_1", OperatorID: stranger, ChatID: room, MessageID: "om_card", Value: value})
	require.NoError(t, err)
	require.Equal(t, "error", res.ToastKind)
	require.Empty(t, res.Card)
	a, err := e.st.GetAgent(ctx, "docs", "codex")
	require.NoError(t, err)
	require.Nil(t, a.HeldAt)

	res, err = e.chat.HandleCardAction(ctx, router.CardAction{EventID: "ev_click_2", OperatorID: owner, ChatID: room, MessageID: "om_card", Value: value})
	require.NoError(t, err)
	require.Equal(t, "success", res.ToastKind)
	require.Equal(t, "Agent held: no turn starts until it is resumed", res.Toast)
	var card map[string]any
	require.NoError(t, json.Unmarshal(res.Card, &card))
	require.Contains(t, string(res.Card), "Agent held")
	require.NotContains(t, string(res.Card), `"action":"retry"`, "the buttons are gone")
	a, err = e.st.GetAgent(ctx, "docs", "codex")
	require.NoError(t, err)
	require.NotNil(t, a.HeldAt)
	require.Equal(t, store.HeldOwner, a.HeldReason)
}
