package router_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"loopx/quota"
	"loopx/router"
	"loopx/store"
)

// The stall guard's gate is LoopX's own question with LoopX's own options, stored in the
// goal's language when it opens. A Chinese chat on an English goal reads it in Chinese (the
// card, its buttons, /gates, the card once answered), an English chat on the same goal in
// English, and the answer is matched by the option's value whatever the label says.
func TestStallGateReadsInEachChatsLanguage(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	const english = "oc_english" // a second group on the same goal, in English
	e.send(router.Message{ChatID: english, ChatType: router.ChatGroup, SenderID: owner, Text: "@_user_1 /bind #docs"}, true)
	e.say(owner, "/lang zh")
	require.Equal(t, "en", e.goal("docs").Lang, "an English goal")
	_, err := e.st.AddTodo(ctx, store.AddTodoParams{GoalID: "docs", Text: "write the index", Meta: setupMeta})
	require.NoError(t, err)
	e.outbox()

	// Three turns without progress: should-run opens the stall gate and announces it.
	svc := quota.NewService(e.st, e.tpl, quota.Options{Now: e.clk.Now, GateNotice: e.cards.Gates.Ask})
	for i := range 3 {
		id := fmt.Sprintf("t%d", i)
		d, err := svc.ShouldRun(ctx, quota.ShouldRunParams{GoalID: "docs", AgentID: "codex", BeginTurn: true, TurnInstanceID: id})
		require.NoError(t, err)
		require.True(t, d.ShouldRun, d.State)
		_, err = e.st.EndTurn(ctx, store.EndTurnParams{GoalID: "docs", AgentID: "codex", InstanceID: id, State: store.TurnOK, Meta: setupMeta})
		require.NoError(t, err)
	}
	d, err := svc.ShouldRun(ctx, quota.ShouldRunParams{GoalID: "docs", AgentID: "codex"})
	require.NoError(t, err)
	require.Equal(t, quota.StateStalled, d.State)
	gate, err := e.st.GetGate(ctx, "docs", d.Gates.Open[0])
	require.NoError(t, err)
	require.Equal(t, "no progress in 3 turns: continue or pause?", gate.Question, "stored as LoopX said it, in the goal's language")

	cards := map[string]string{}
	for _, r := range e.outbox() {
		require.Equal(t, "card", r.Kind)
		cards[r.ReceiveID] = shownOf(t, r)
		require.NoError(t, e.st.MarkOutboxSent(ctx, r.ID, "om_card_"+r.ReceiveID))
	}
	require.Len(t, cards, 2)
	require.Contains(t, cards[room], "连续 3 轮没有进展：继续还是暂停？")
	require.Contains(t, cards[room], "继续")
	require.Contains(t, cards[room], "暂停目标")
	require.NotContains(t, cards[room], "no progress")
	require.Empty(t, englishIn(cards[room]), cards[room])
	require.Contains(t, cards[english], "no progress in 3 turns: continue or pause?")
	require.Contains(t, cards[english], "Pause the goal")

	// /gates in each chat, in its language.
	e.say(owner, "/gates")
	gates := shownOf(t, e.outbox()[0])
	require.Contains(t, gates, "连续 3 轮没有进展：继续还是暂停？")
	require.Contains(t, gates, "选项：继续、暂停目标")
	require.Empty(t, englishIn(gates), gates)
	e.send(router.Message{ChatID: english, SenderID: owner, Text: "/gates"}, true)
	require.Contains(t, shownOf(t, e.outbox()[0]), "options: Continue, Pause the goal")

	// The Chinese card's 暂停目标 button carries the stored value: the gate is answered with
	// pause, which stops the goal, and both cards update, each in its chat's language.
	var zhCard string
	rows, err := store.ListGateCards(ctx, e.st.DB(), gate.ID)
	require.NoError(t, err)
	for _, c := range rows {
		if c.ReceiveID == room {
			zhCard = c.Content
		}
	}
	pause := buttonValue(t, zhCard, store.StallPause)
	res, err := e.chat.HandleCardAction(ctx, router.CardAction{EventID: "cb_stall", OperatorID: owner, ChatID: room,
		MessageID: "om_card_" + room, Value: pause})
	require.NoError(t, err)
	require.Equal(t, "success", res.ToastKind)
	require.Equal(t, "已拒绝", res.Toast)
	answered, err := e.st.GetGate(ctx, "docs", gate.ID)
	require.NoError(t, err)
	require.Equal(t, store.StallPause, answered.Answer)
	require.Equal(t, store.GateRejected, answered.Status)
	require.Equal(t, store.GoalStopped, e.goal("docs").Status)
	updates := map[string]string{}
	for _, r := range e.outbox() {
		if r.Kind == "card_update" {
			updates[r.ReceiveID] = shownOf(t, r)
		}
	}
	require.Contains(t, updates[room], "连续 3 轮没有进展：继续还是暂停？")
	require.Contains(t, updates[room], "回答：暂停目标")
	require.Empty(t, englishIn(updates[room]), updates[room])
	require.Contains(t, updates[english], "Answer: Pause the goal")
}
