package bot_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loopx/bot"
	"loopx/bot/sandbox"
	"loopx/cards"
	"loopx/change"
	"loopx/store"
	"loopx/templates"
)

// Acceptance with the real router over the Lark emulator, in English and in Chinese: the goal
// contract is set from chat by preview and Confirm; members read it; when the work is
// complete LoopX posts its own card to finish the goal, a stranger's click on it is refused,
// and the owner's Confirm finishes the goal and updates the card in place.
func TestRouterGoalContractOverTheEmulator(t *testing.T) {
	t.Parallel()
	words := map[string]map[string]string{
		"en": {"preview": "Change preview", "applied": "Change applied", "contract": "Acceptance criteria: 0 of 1 met",
			"holds": "- codex holds publish", "complete": "Every todo is finished: finish the goal?", "by": "Proposed by LoopX",
			"status": "Status: done since"},
		"zh": {"preview": "变更预览", "applied": "变更已生效", "contract": "验收标准：已满足 0 / 1 条",
			"holds": "- codex 拥有：publish", "complete": "所有待办都已完成：要把目标标记为已完成吗？", "by": "由 LoopX 提出",
			"status": "状态：已完成，"},
	}
	for _, lang := range []string{"en", "zh"} {
		t.Run(lang, func(t *testing.T) {
			t.Parallel()
			w := words[lang]
			e := setup(t, bundleOpts{transport: bot.TransportHTTP, realRouter: true})
			e.startSender("s1", bot.DefaultRateLimits)
			chat := e.seedGoal()
			ctx := t.Context()
			if lang == "zh" {
				e.ownerSays("/lang zh")
			}
			seen := len(e.sb.Chat(chat).BotMessages())
			// next waits for the bot's next message in the chat that contains want.
			next := func(want string) sandbox.Message {
				t.Helper()
				var got sandbox.Message
				require.Eventually(t, func() bool {
					msgs := e.sb.Chat(chat).BotMessages()
					for _, m := range msgs[seen:] {
						if strings.Contains(m.Content, want) {
							got, seen = m, len(msgs)
							return true
						}
					}
					return false
				}, settle, 10*time.Millisecond, "no bot message with %q", want)
				return got
			}
			confirm := func(card sandbox.Message) {
				t.Helper()
				res, err := e.sb.ClickButtonN(ctx, card.ID, owner, 1) // Confirm comes first
				require.NoError(t, err)
				require.Equal(t, "success", res.Toast.Type, res.Toast.Content)
				require.True(t, res.CardUpdated)
				m, _ := e.sb.Message(card.ID)
				require.Contains(t, m.Content, w["applied"])
			}

			e.ownerSays("/capability grant publish")
			confirm(next(w["preview"]))
			e.ownerSays("/capability #docs/codex grant publish")
			confirm(next(w["preview"]))
			e.ownerSays("/criteria add every page builds")
			confirm(next(w["preview"]))
			g, err := e.st.GetGoal(ctx, "docs")
			require.NoError(t, err)
			require.Equal(t, []string{"publish"}, g.Capabilities)
			require.Equal(t, []store.Criterion{{ID: "g1", Text: "every page builds"}}, g.Criteria)

			e.ownerSays("/contract")
			view := next(w["contract"])
			require.Contains(t, view.Content, w["holds"])
			require.Equal(t, "text", view.MsgType)

			// The work completes: evidence names the criterion, the todo is finished.
			todo, err := e.st.AddTodo(ctx, store.AddTodoParams{GoalID: "docs", Text: "build every page", Meta: setupMeta})
			require.NoError(t, err)
			agentMeta := store.Meta{Actor: "agent:docs/codex", Surface: "api"}
			_, err = e.st.AddEvidence(ctx, store.AddEvidenceParams{GoalID: "docs", AgentID: "codex", TodoID: todo.ID, Summary: "all pages build",
				Criteria: []string{"g1"}, Meta: agentMeta})
			require.NoError(t, err)
			done := store.TodoDone
			_, err = e.st.UpdateTodo(ctx, store.UpdateTodoParams{GoalID: "docs", TodoID: todo.ID, AgentID: "codex", Version: todo.Version,
				Status: &done, Meta: agentMeta})
			require.NoError(t, err)
			tpl, err := templates.New()
			require.NoError(t, err)
			cs := cards.New(tpl, "en")
			k, err := change.New(e.st, change.Options{Templates: tpl, Cards: cs.Proposals.Update, Announce: cs.Proposals.Announce, GateNotice: cs.Gates.Update})
			require.NoError(t, err)
			made, err := k.ProposeCompletion(ctx, "docs")
			require.NoError(t, err)
			require.True(t, made)
			card := next(w["complete"])
			require.Equal(t, "interactive", card.MsgType)
			require.Contains(t, card.Content, w["by"])

			res, err := e.sb.ClickButtonN(ctx, card.ID, stranger, 1)
			require.NoError(t, err)
			require.Equal(t, "error", res.Toast.Type)
			require.False(t, res.CardUpdated)
			g, err = e.st.GetGoal(ctx, "docs")
			require.NoError(t, err)
			require.Equal(t, store.GoalActive, g.Status)
			require.Equal(t, 1, e.count(`SELECT count(*) FROM audit WHERE actor = $1 AND NOT allowed AND goal_id = 'docs'`, stranger))

			confirm(card)
			g, err = e.st.GetGoal(ctx, "docs")
			require.NoError(t, err)
			require.Equal(t, store.GoalDone, g.Status)
			e.ownerSays("/status")
			next(w["status"])
		})
	}
}
