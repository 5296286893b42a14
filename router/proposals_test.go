package router_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"loopx/router"
	"loopx/store"
)

func click(t *testing.T, e *testBundle, event, who, card, action string) router.CardResult {
	t.Helper()
	res, err := e.chat.HandleCardAction(t.Context(), router.CardAction{
		EventID: event, OperatorID: who, ChatID: room, MessageID: "om_preview", Value: buttonValue(t, card, action),
	})
	require.NoError(t, err)
	return res
}

func TestBudgetIsPreviewedThenConfirmed(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.say(owner, "/budget #docs 50")
	rows := e.outbox()
	require.Len(t, rows, 1)
	card := rows[0].Content
	require.Equal(t, "card", rows[0].Kind)
	require.Contains(t, card, "Change preview · p1 · #docs")
	require.Contains(t, card, "turns per window: 24 (default) → 50")
	require.Contains(t, card, "quota 24 of 24 left in 24 h → 50 of 50 in 24 h")
	require.Contains(t, card, "owners may confirm")
	require.Equal(t, 24, e.goal("docs").AllowedSlots, "nothing applies before Confirm")

	// A stranger's and a member's clicks are refused with a toast; nothing changes.
	for i, who := range []string{stranger, member} {
		res := click(t, e, "cb_x"+itoa(int64(i)), who, card, "confirm")
		require.Equal(t, "error", res.ToastKind)
		require.Equal(t, "Only owners of the goal can confirm this", res.Toast)
		require.Nil(t, res.Card)
	}
	require.Equal(t, 24, e.goal("docs").AllowedSlots)
	require.Len(t, e.refusals(), 2)

	res := click(t, e, "cb_ok", owner, card, "confirm")
	require.Equal(t, "success", res.ToastKind)
	require.Equal(t, "Applied", res.Toast)
	require.Contains(t, string(res.Card), "Change applied · p1 · #docs")
	require.Contains(t, unescape(res.Card), "**Receipt** · proposed by <at id=ou_owner></at> · confirmed by <at id=ou_owner></at>")
	require.NotContains(t, string(res.Card), `"action":"confirm"`, "the buttons are gone")
	require.Equal(t, 50, e.goal("docs").AllowedSlots)
	updates := e.outbox()
	require.Len(t, updates, 1, "the posted card is updated in place")
	require.Equal(t, "card_update", updates[0].Kind)
	require.Equal(t, rows[0].ID, updates[0].UpdateOf)

	// A second click does nothing.
	res = click(t, e, "cb_again", owner, card, "confirm")
	require.Equal(t, "info", res.ToastKind)
	require.Equal(t, "Already applied; nothing more to do", res.Toast)
	require.Nil(t, res.Card)
	require.Empty(t, e.outbox())
	g := e.goal("docs")
	require.Equal(t, int64(2), g.Version)
}

func TestStaleProposalCardOffersAFreshOne(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.say(owner, "/pause #docs")
	card := e.outbox()[0].Content
	w := 48
	_, err := e.st.UpdateGoal(t.Context(), store.UpdateGoalParams{GoalID: "docs", WindowHours: &w, Meta: setupMeta})
	require.NoError(t, err)
	res := click(t, e, "cb_stale", owner, card, "confirm")
	require.Equal(t, "warning", res.ToastKind)
	require.Contains(t, res.Toast, "nothing was applied")
	require.Contains(t, string(res.Card), "Change went stale · p1")
	require.Contains(t, string(res.Card), "The same change computed anew is p2.")
	require.Equal(t, store.GoalActive, e.goal("docs").Status)
	rows := e.outbox()
	var fresh string
	for _, r := range rows {
		if r.Kind == "card" {
			fresh = r.Content
		}
	}
	require.Contains(t, fresh, "Change preview · p2 · #docs")
	res = click(t, e, "cb_fresh", owner, fresh, "confirm")
	require.Equal(t, "success", res.ToastKind)
	require.Equal(t, store.GoalStopped, e.goal("docs").Status)
	e.outbox()

	// Cancel from the card.
	e.say(owner, "/resume #docs")
	card = e.outbox()[0].Content
	res = click(t, e, "cb_cancel", owner, card, "cancel")
	require.Equal(t, "info", res.ToastKind)
	require.Contains(t, unescape(res.Card), "Cancelled by <at id=ou_owner></at>")
	require.Equal(t, store.GoalStopped, e.goal("docs").Status)
}

func TestProtectedCommandsPropose(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.say(owner, "/schedule #docs heartbeat 30 9 * * 1-5 Asia/Shanghai")
	card := e.outbox()[0].Content
	require.Contains(t, card, "heartbeat schedule: — (default) → 30 9 * * 1-5")
	require.Contains(t, card, "heartbeat time zone: UTC (default) → Asia/Shanghai")
	require.True(t, confirmCard(e, card))
	g := e.goal("docs")
	require.Equal(t, "30 9 * * 1-5", g.HeartbeatSpec)
	require.Equal(t, "Asia/Shanghai", g.HeartbeatTZ)

	e.send(router.Message{SenderID: owner, Text: "@_user_1 /owners #docs add @_user_2",
		Mentions: []router.Mention{{Key: "@_user_2", OpenID: "ou_ann", Name: "Ann"}}}, true)
	card = e.outbox()[0].Content
	require.Contains(t, card, "owners: ou_owner → ou_owner, ou_ann")
	require.Contains(t, card, "ou_ann may change the goal, pause it and answer its gates")
	require.True(t, confirmCard(e, card))
	require.Equal(t, []string{owner, "ou_ann"}, e.goal("docs").Owners)

	e.say(owner, "/stall #docs off")
	card = e.outbox()[0].Content
	require.Contains(t, card, "the stall guard is off")

	e.say(owner, "/owners #docs add nobody")
	reply := e.outbox()[0].Content
	require.Contains(t, reply, `"nobody" is not a person`)

	// A member is refused before anything is proposed, as before.
	e.say(member, "/budget #docs 3")
	rows := e.outbox()
	require.Len(t, rows, 1)
	require.True(t, strings.HasPrefix(rows[0].Content, "Sorry, only owners"))
	list, err := store.ListProposals(t.Context(), e.st.DB(), "docs", "", 0)
	require.NoError(t, err)
	require.Len(t, list, 3)
}

func TestWebSignInLink(t *testing.T) {
	t.Parallel()
	var issued []store.SignInParams
	e := setup(t, func(c *config) {
		c.Router.SignInLink = func(_ context.Context, _ store.DB, p store.SignInParams) (string, error) {
			issued = append(issued, p)
			return "http://127.0.0.1:7377/web/signin?t=tok" + p.OpenID, nil
		}
	})
	e.say(member, "/web")
	require.Contains(t, e.outbox()[0].Content, "Send /web to me in a direct chat")
	require.Empty(t, issued)
	e.send(router.Message{ChatID: "oc_dm", ChatType: router.ChatP2P, SenderID: member, Text: "/web"}, false)
	rows := e.outbox()
	require.Len(t, rows, 1)
	require.Contains(t, rows[0].Content, "http://127.0.0.1:7377/web/signin?t=tokou_member")
	require.Equal(t, []store.SignInParams{{OpenID: member}}, issued, "a chat with no /lang leaves the language to the person's choice")

	// "Open in workspace" on a gate card: the link lands on that gate, in the card's language.
	res, err := e.chat.HandleCardAction(t.Context(), router.CardAction{
		EventID: "cb_web_1", OperatorID: owner, ChatID: room, MessageID: "om_gate",
		Value: map[string]any{"kind": "web", "goal_id": "docs", "gate_id": float64(7)},
	})
	require.NoError(t, err)
	require.Equal(t, "success", res.ToastKind)
	require.Len(t, issued, 2)
	require.Equal(t, store.SignInParams{OpenID: owner, Lang: "en", Next: "/web/goals/docs#gate-7"}, issued[1])

	// "Open in workspace" on a turn card lands on that turn's page.
	res, err = e.chat.HandleCardAction(t.Context(), router.CardAction{
		EventID: "cb_web_2", OperatorID: owner, ChatID: room, MessageID: "om_turn",
		Value: map[string]any{"kind": "web", "goal_id": "docs", "turn_id": float64(12)},
	})
	require.NoError(t, err)
	require.Equal(t, "success", res.ToastKind)
	require.Len(t, issued, 3)
	require.Equal(t, "/web/goals/docs/turns/12", issued[2].Next)
}

func unescape(card []byte) string {
	return strings.NewReplacer(`\u003c`, "<", `\u003e`, ">").Replace(string(card))
}
