package router_test

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loopx/inbox"
	"loopx/quota"
	"loopx/router"
	"loopx/store"
)

func TestGateLifecycle(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	todo, err := e.st.AddTodo(ctx, store.AddTodoParams{GoalID: "docs", Text: "publish the site", Meta: setupMeta})
	require.NoError(t, err)
	_, err = e.st.ClaimTodo(ctx, store.ClaimTodoParams{GoalID: "docs", TodoID: todo.ID, AgentID: "codex", Meta: setupMeta})
	require.NoError(t, err)

	// Ask: one card to the bound chat, mentioning the owners, buttons carrying gate + version.
	g := e.askGate("Publish to prod?", todo.ID)
	rows := e.outbox()
	require.Len(t, rows, 1)
	card := rows[0]
	require.Equal(t, "card", card.Kind)
	require.Equal(t, room, card.ReceiveID)
	require.Equal(t, g.ID, card.GateID)
	require.Contains(t, card.Content, `\u003cat id=`+owner)
	require.Contains(t, card.Content, "Publish to prod?")
	require.Contains(t, card.Content, "publish the site", "the blocked work is shown")
	require.NoError(t, e.st.MarkOutboxSent(ctx, card.ID, "om_card"))

	svc := quota.NewService(e.st, e.tpl, quota.Options{Now: e.clk.Now})
	d, err := svc.ShouldRun(ctx, quota.ShouldRunParams{GoalID: "docs", AgentID: "codex"})
	require.NoError(t, err)
	require.Equal(t, quota.StateWaiting, d.State, "the gate blocks the only todo")

	approve := buttonValue(t, card.Content, "approve")
	click := func(ev, who string, value map[string]any) router.CardResult {
		t.Helper()
		res, err := e.chat.HandleCardAction(ctx, router.CardAction{EventID: ev, OperatorID: who, ChatID: room, MessageID: "om_card", Value: value})
		require.NoError(t, err)
		return res
	}

	// A member's click changes nothing, is audited, and the toast says why.
	res := click("cb_1", member, approve)
	require.Equal(t, "error", res.ToastKind)
	require.Contains(t, res.Toast, "owners")
	require.Nil(t, res.Card)
	require.Empty(t, e.outbox())
	ref := e.refusals()
	require.Equal(t, "card.gate.answer", ref[len(ref)-1].Action)
	require.Equal(t, member, ref[len(ref)-1].Actor)

	// The owner's click answers it: card updated in place, gate approved, should-run unblocked.
	res = click("cb_2", owner, approve)
	require.Equal(t, "success", res.ToastKind)
	require.NotNil(t, res.Card)
	require.True(t, json.Valid(res.Card))
	require.Contains(t, string(res.Card), "Approved")
	require.NotContains(t, string(res.Card), `"callback"`, "no buttons on an answered card")
	rows = e.outbox()
	require.Len(t, rows, 1)
	require.Equal(t, "card_update", rows[0].Kind)
	require.Equal(t, card.ID, rows[0].UpdateOf)
	upd, err := store.GetOutbox(ctx, e.st.DB(), rows[0].ID)
	require.NoError(t, err)
	require.Equal(t, g.ID, upd.GateID)
	gate, err := e.st.GetGate(ctx, "docs", g.ID)
	require.NoError(t, err)
	require.Equal(t, store.GateApproved, gate.Status)
	require.Equal(t, owner, gate.AnsweredBy)
	d, err = svc.ShouldRun(ctx, quota.ShouldRunParams{GoalID: "docs", AgentID: "codex"})
	require.NoError(t, err)
	require.NotEqual(t, quota.StateWaiting, d.State)
	require.Empty(t, d.Gates.Blocking)

	// The same event again: "already handled", nothing written.
	res = click("cb_2", owner, approve)
	require.Equal(t, "info", res.ToastKind)
	require.Contains(t, res.Toast, "Already handled")
	// A second click (new event) on the answered gate: nothing changes.
	reject := buttonValue(t, card.Content, "reject")
	res = click("cb_3", owner, reject)
	require.Equal(t, "warning", res.ToastKind)
	require.Contains(t, res.Toast, "approved")
	require.Empty(t, e.outbox())
	gate, err = e.st.GetGate(ctx, "docs", g.ID)
	require.NoError(t, err)
	require.Equal(t, store.GateApproved, gate.Status)

	// An outdated card: a newer card of an open gate exists (a re-post bumped the version).
	g2 := e.askGate("Also the blog?", 0)
	c2 := e.outbox()[0]
	_, err = e.st.DB().Exec(ctx, `UPDATE gate SET card_version = card_version + 1 WHERE id = $1`, g2.ID) // what a re-posted card does
	require.NoError(t, err)
	res = click("cb_4", owner, buttonValue(t, c2.Content, "approve"))
	require.Equal(t, "warning", res.ToastKind)
	require.Contains(t, res.Toast, "out of date")
	require.Empty(t, e.outbox())
	gate, err = e.st.GetGate(ctx, "docs", g2.ID)
	require.NoError(t, err)
	require.Equal(t, store.GateOpen, gate.Status)

	// /reject by text answers it once, with the comment; the card is updated in place.
	require.NoError(t, e.st.MarkOutboxSent(ctx, c2.ID, "om_card2"))
	m := e.say(owner, "／reject g"+itoa(g2.ID)+" not this week")
	rows = e.outbox()
	require.Len(t, rows, 2)
	require.Equal(t, "card_update", rows[0].Kind)
	require.Equal(t, c2.ID, rows[0].UpdateOf)
	require.Contains(t, rows[0].Content, "not this week")
	require.Equal(t, m.MessageID, rows[1].ReplyTo)
	require.Contains(t, rows[1].Content, "rejected")
	gate, err = e.st.GetGate(ctx, "docs", g2.ID)
	require.NoError(t, err)
	require.Equal(t, store.GateRejected, gate.Status)
	require.Equal(t, "not this week", gate.Comment)
	again := e.say(owner, "/approve g"+itoa(g2.ID))
	require.Contains(t, e.oneReply(again).Content, "already rejected")
}

func TestGateCardGoesToOwnersWhenUnbound(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	g, err := e.st.AskGate(ctx, store.AskGateParams{
		GoalID: "infra", AgentID: "ops", Question: "Reboot?", Notice: e.cards.Gates.Ask,
		Meta: store.Meta{Actor: "agent:infra/ops", Surface: "api"},
	})
	require.NoError(t, err)
	rows := e.outbox()
	require.Len(t, rows, 1)
	require.Equal(t, "open_id", rows[0].ReceiveIDType)
	require.Equal(t, owner, rows[0].ReceiveID)
	require.Equal(t, g.ID, rows[0].GateID)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// should-run counts an item drained but not acked in time as pending again, so an agent that
// crashed mid-turn is woken for it.
func TestShouldRunSeesTimedOutDeliveries(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *config) { c.Inbox.AckTimeout = 10 * time.Minute })
	ctx := t.Context()
	e.say(member, "#docs are you there?")
	svc := quota.NewService(e.st, e.tpl, quota.Options{Now: e.clk.Now})
	d, err := svc.ShouldRun(ctx, quota.ShouldRunParams{GoalID: "docs", AgentID: "codex"})
	require.NoError(t, err)
	require.Equal(t, 1, d.Inbox.Pending)

	_, err = e.ib.Drain(ctx, inboxAgent("docs", "codex"), inbox.DrainParams{Limit: 10})
	require.NoError(t, err)
	d, err = svc.ShouldRun(ctx, quota.ShouldRunParams{GoalID: "docs", AgentID: "codex"})
	require.NoError(t, err)
	require.Equal(t, 0, d.Inbox.Pending, "taken, not yet due again")

	e.clk.Add(11 * time.Minute)
	d, err = svc.ShouldRun(ctx, quota.ShouldRunParams{GoalID: "docs", AgentID: "codex"})
	require.NoError(t, err)
	require.Equal(t, 1, d.Inbox.Pending, "not acked in time: pending again")
}
