package bot_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loopx/bot"
	"loopx/cards"
	"loopx/inbox"
	"loopx/scheduler"
	"loopx/store"
	"loopx/templates"
)

// hostile is Lark mention and link syntax an agent writes into its questions, options,
// todos and replies, and an owner into a comment.
var hostile = []string{
	`<at user_id="all"></at>`,
	`[approve here](https://evil.example/phish)`,
	`<at id=all></at><font color='red'>now</font>`,
	`<link url="https://evil.example">docs</link> ![x](img_v2_x)`,
}

var (
	e2eTag     = regexp.MustCompile(`(?i)</?(at|a|b|i|u|s|font|link|text_tag|person|img)\b`)
	e2eLink    = regexp.MustCompile(`\[[^\[\]\n]*\]\(`)
	ownerAt    = regexp.MustCompile(`<at (user_id="` + owner + `"|id=` + owner + `)></at>`)
	evilTarget = regexp.MustCompile(`evil\.example|img_v2_x`)
)

// shownStrings lists the strings a message shows: a text's text, or every string of a card
// but its callback values.
func shownStrings(msgType, content string) []string {
	var v any
	if err := json.Unmarshal([]byte(content), &v); err != nil {
		return []string{content}
	}
	var out []string
	var walk func(any)
	walk = func(x any) {
		switch y := x.(type) {
		case string:
			out = append(out, y)
		case []any:
			for _, e := range y {
				walk(e)
			}
		case map[string]any:
			for k, e := range y {
				if k != "value" {
					walk(e)
				}
			}
		}
	}
	walk(v)
	return out
}

// An agent's markup, through every path that shows it in Lark (the gate card and its update,
// /gates, the answer reply, the reminder, the digest, the agent's inbox reply), in English and
// Chinese, reaches the Lark emulator as text: no mention but of the owner, no link.
func TestAgentMarkupReachesLarkAsText(t *testing.T) {
	t.Parallel()
	e := setup(t, bundleOpts{transport: bot.TransportHTTP, realRouter: true})
	e.startSender("s1", bot.DefaultRateLimits)
	chat := e.seedGoal()
	ctx := t.Context()
	tpl, err := templates.New()
	require.NoError(t, err)
	cs := cards.New(tpl, "en")
	ib, err := inbox.New(e.st, inbox.Options{Templates: tpl})
	require.NoError(t, err)
	rem, err := scheduler.NewReminders(scheduler.ReminderConfig{Store: e.st, Templates: tpl})
	require.NoError(t, err)
	dig, err := scheduler.NewDigests(scheduler.DigestConfig{Store: e.st, Cards: cs})
	require.NoError(t, err)
	agentMeta := store.Meta{Actor: store.AgentActor("docs", "codex"), Surface: "api"}

	sent := 0
	for _, lang := range []string{"en", "zh"} {
		e.ownerSays("/lang " + lang)
		for i, h := range hostile {
			todo, err := e.st.AddTodo(ctx, store.AddTodoParams{GoalID: "docs", Text: "todo " + h, Meta: agentMeta})
			require.NoError(t, err)
			_, err = e.st.AddEvidence(ctx, store.AddEvidenceParams{GoalID: "docs", AgentID: "codex", TodoID: todo.ID,
				Summary: "evidence " + h, Meta: agentMeta})
			require.NoError(t, err)
			asked, err := e.st.AskGate(ctx, store.AskGateParams{GoalID: "docs", AgentID: "codex", Question: "question " + h,
				Options: []string{"approve", "option " + h}, TodoID: todo.ID, Notice: cs.Gates.Ask, Meta: agentMeta})
			require.NoError(t, err)
			kept, err := e.st.AskGate(ctx, store.AskGateParams{GoalID: "docs", AgentID: "codex", Question: "kept " + h,
				Notice: cs.Gates.Ask, Meta: agentMeta})
			require.NoError(t, err)
			e.ownerSays("/gates")
			e.ownerSays(fmt.Sprintf("/approve g%d comment %s", asked.ID, h))

			// The reminder of the gate still open, due now.
			_, err = rem.Sweep(ctx, time.Now().Add(24*time.Hour))
			require.NoError(t, err)
			require.NoError(t, e.st.WithTx(ctx, func(tx *store.Tx) error {
				_, err := dig.Report(ctx, tx, scheduler.ReportParams{GoalID: "docs", ChatID: chat, Lang: lang, Now: time.Now().Add(time.Duration(i+1) * time.Second)})
				return err
			}))
			_, err = e.st.CancelGate(ctx, store.CancelGateParams{GoalID: "docs", GateID: kept.ID, AgentID: "codex", Notice: cs.Gates.Update, Meta: agentMeta})
			require.NoError(t, err)

			// The agent answers a person's message in the chat.
			d := e.ownerSays("please summarise")
			var itemID int64
			require.Eventually(t, func() bool {
				return e.st.DB().QueryRow(ctx, `SELECT id FROM inbox_item WHERE source_message = $1`, d.MessageID).Scan(&itemID) == nil
			}, 10*time.Second, 20*time.Millisecond)
			_, err = ib.Reply(ctx, inbox.Agent{GoalID: "docs", AgentID: "codex"}, inbox.ReplyParams{ItemID: itemID, Text: "reply " + h, CallKey: fmt.Sprintf("r-%s-%d", lang, i)})
			require.NoError(t, err)
			sent++
		}
	}
	require.Eventually(t, func() bool {
		return e.count(`SELECT count(*) FROM outbox WHERE state <> 'sent'`) == 0
	}, 60*time.Second, 50*time.Millisecond, "every message reached Lark")

	// Every chat the bot wrote to: the group, and the owner's direct chat (reminders).
	kinds := map[string]int{}
	seen := 0
	for _, c := range e.sb.Chats() {
		for _, m := range e.sb.Chat(c.ID).BotMessages() {
			kinds[m.MsgType]++
			for _, s := range shownStrings(m.MsgType, m.Content) {
				rest := ownerAt.ReplaceAllString(s, "")
				require.Empty(t, e2eTag.FindAllString(rest, -1), "a tag reached Lark in %s message %s of %s: %s", m.MsgType, m.ID, c.ID, s)
				require.Empty(t, e2eLink.FindAllString(rest, -1), "a link reached Lark in %s message %s of %s: %s", m.MsgType, m.ID, c.ID, s)
			}
			// The agent's words are there, inert: the test looked at what it meant to.
			seen += len(evilTarget.FindAllString(m.Content, -1))
		}
	}
	require.Positive(t, seen)
	require.Equal(t, len(hostile)*2, sent)
	require.Positive(t, kinds["text"])
	require.Positive(t, kinds["interactive"])
}
