package bot_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loopx/bot"
	"loopx/bot/sandbox"
	"loopx/cards"
	"loopx/store"
	"loopx/templates"
)

var setupMeta = store.Meta{Actor: "admin", Surface: "system"}

// seedGoal creates goal docs (owned by owner) with default agent codex and binds the sandbox's
// group chat to it through the chat itself.
func (e *testBundle) seedGoal() string {
	t := e.t
	ctx := t.Context()
	_, err := e.st.CreateGoal(ctx, store.CreateGoalParams{ID: "docs", Title: "Docs", Owners: []string{owner}, Meta: setupMeta})
	require.NoError(t, err)
	_, err = e.st.RegisterAgent(ctx, store.RegisterAgentParams{GoalID: "docs", AgentID: "codex", IsDefault: true, Meta: setupMeta})
	require.NoError(t, err)
	chat := e.sb.DefaultChatID()
	d, err := e.sb.UserSays(chat, sandbox.ChatGroup, owner, "/bind #docs", sandbox.MentionBot())
	require.NoError(t, err)
	require.True(t, waitDelivery(t, d).Acked)
	require.Equal(t, 1, e.count(`SELECT count(*) FROM binding WHERE chat_id = $1 AND goal_id = 'docs'`, chat))
	return chat
}

// Acceptance with the real router: a mention in a bound group → one inbox item and one
// receipt; the same event again, and on a second intake, → still one of each.
func TestRouterMentionInBoundGroupOnce(t *testing.T) {
	t.Parallel()
	for _, tr := range []string{bot.TransportHTTP, bot.TransportWS} {
		t.Run(tr, func(t *testing.T) {
			t.Parallel()
			e := setup(t, bundleOpts{transport: tr, realRouter: true})
			e.startSender("s1", bot.DefaultRateLimits)
			chat := e.seedGoal()
			_, secondURL := e.startIntake(bot.TransportHTTP)

			d, err := e.sb.UserSays(chat, sandbox.ChatGroup, owner, "please refresh the changelog", sandbox.MentionBot())
			require.NoError(t, err)
			require.True(t, waitDelivery(t, d).Acked)
			require.Equal(t, 1, e.count(`SELECT count(*) FROM inbox_item WHERE goal_id = 'docs' AND agent_id = 'codex' AND source_message = $1`, d.MessageID))
			receipt := func() int {
				m, ok := e.sb.Message(d.MessageID)
				require.True(t, ok)
				return len(m.Reactions)
			}
			require.Eventually(t, func() bool { return receipt() == 1 }, settle, 10*time.Millisecond, "the receipt reaction")

			again := waitDelivery(t, e.sb.Redeliver(d))
			require.True(t, again.Acked)
			status, _, err := e.sb.PushHTTP(t.Context(), secondURL+"/lark/events", d.Payload)
			require.NoError(t, err)
			require.Equal(t, 200, status)

			require.Equal(t, 1, e.count(`SELECT count(*) FROM inbox_item WHERE source_message = $1`, d.MessageID))
			// The inbox item is the message's only record: no lark_event row beside it.
			require.Zero(t, e.count(`SELECT count(*) FROM lark_event WHERE event_id IN ($1, 'msg:' || $2)`, d.EventID, d.MessageID))
			// Both repeats are counted as duplicates, by the transport that carried them.
			dup := func(transport string) float64 {
				return e.counter("loopx_lark_events_duplicate_total", map[string]string{"transport": transport, "kind": "message"})
			}
			want := map[string]float64{bot.TransportHTTP: 1, bot.TransportWS: 0}
			want[tr]++
			require.Equal(t, want, map[string]float64{bot.TransportHTTP: dup(bot.TransportHTTP), bot.TransportWS: dup(bot.TransportWS)})
			e.drained() // a second receipt, if a repeat queued one, has been sent by now
			require.Equal(t, 1, receipt(), "one receipt only")
			require.Zero(t, e.count(`SELECT count(*) FROM outbox WHERE state <> 'sent'`))
		})
	}
}

// Acceptance with the real router: the gate card an agent's question produces; a stranger's
// click is refused with a toast and changes nothing; the owner's Approve approves the gate and
// updates the card in place.
func TestRouterGateCardApproveOverBothTransports(t *testing.T) {
	t.Parallel()
	for _, tr := range []string{bot.TransportHTTP, bot.TransportWS} {
		t.Run(tr, func(t *testing.T) {
			t.Parallel()
			e := setup(t, bundleOpts{transport: tr, realRouter: true})
			e.startSender("s1", bot.DefaultRateLimits)
			chat := e.seedGoal()
			ctx := t.Context()
			tpl, err := templates.New()
			require.NoError(t, err)
			gate, err := e.st.AskGate(ctx, store.AskGateParams{GoalID: "docs", AgentID: "codex", Question: "Publish the release notes?",
				Notice: cards.New(tpl, "en").Gates.Ask, Meta: store.Meta{Actor: "agent:docs/codex", Surface: "api"}})
			require.NoError(t, err)
			var card sandbox.Message
			require.Eventually(t, func() bool {
				for _, m := range e.sb.Chat(chat).BotMessages() {
					if m.MsgType == "interactive" {
						card = m
						return true
					}
				}
				return false
			}, settle, 10*time.Millisecond, "the gate card reached the chat")
			require.Contains(t, card.Content, "Publish the release notes?")
			before := len(e.sb.Chat(chat).BotMessages())

			res, err := e.sb.ClickButtonN(ctx, card.ID, stranger, 1)
			require.NoError(t, err)
			require.NotEmpty(t, res.Toast.Content, "a refusal toast")
			require.NotEqual(t, "success", res.Toast.Type)
			require.False(t, res.CardUpdated)
			require.Equal(t, 1, e.count(`SELECT count(*) FROM gate WHERE id = $1 AND status = 'open'`, gate.ID))

			res, err = e.sb.ClickButtonN(ctx, card.ID, owner, 1) // Approve comes first
			require.NoError(t, err)
			require.Equal(t, "success", res.Toast.Type, res.Toast.Content)
			require.True(t, res.CardUpdated, "the card is replaced in place")
			require.Equal(t, 1, e.count(`SELECT count(*) FROM gate WHERE id = $1 AND status = 'approved' AND answered_by = $2`, gate.ID, owner))
			m, _ := e.sb.Message(card.ID)
			require.NotEqual(t, card.Content, m.Content)
			e.drained() // a second card, if the click queued one, has been sent by now
			for _, bm := range e.sb.Chat(chat).BotMessages()[before:] {
				require.NotEqual(t, "interactive", bm.MsgType, "no second card was posted")
			}
		})
	}
}
