package bot_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loopx/bot"
	"loopx/bot/sandbox"
	"loopx/cards"
	"loopx/quota"
	"loopx/scheduler"
	"loopx/store"
	"loopx/templates"
)

// The other paths agent and person text takes to Lark, beside those of
// TestAgentMarkupReachesLarkAsText: a goal's title and a todo in the /status reply, a
// person's todo in /todo's answer and a bad person in /owners' refusal, the proposal card,
// the permission card (the host's tool summary and folder) and /gates listing it, the live
// progress card (a note), the failure card (the outcome and the log tail), the breaker card,
// /runs (outcomes and todos), the direct chat's overview, and the refusal naming a file a
// person sent. In English and Chinese, every message the emulator holds shows no mention but
// of the owner and no link.
func TestMarkupReachesLarkAsTextOnEveryOtherPath(t *testing.T) {
	t.Parallel()
	e := setup(t, bundleOpts{transport: bot.TransportHTTP, realRouter: true, store: store.Options{MaxFileBytes: 1 << 10}})
	e.startSender("s1", bot.DefaultRateLimits)
	e.startFetcher("f1")
	ctx := t.Context()
	tpl, err := templates.New()
	require.NoError(t, err)
	cs := cards.New(tpl, "en")
	// The scheduler's clock runs an hour ahead at each look, so a card may change at every
	// sweep (a chat's cards are spaced by CardRefresh).
	var hours atomic.Int64
	clock := func() time.Time { return time.Now().Add(time.Duration(hours.Add(1)) * time.Hour) }
	sched, err := scheduler.New(scheduler.Config{Store: e.st, Decider: quota.NewService(e.st, tpl, quota.Options{}),
		Cards: cs, Now: clock, Logger: quietLogger()})
	require.NoError(t, err)
	bad := strings.Join(hostile, " ")
	admin := store.Meta{Actor: store.ActorAdmin, Surface: "api"}

	// say sends text as the owner in chat and waits until the bot's answer to it reached
	// the emulator.
	say := func(chat string, typ sandbox.ChatType, text string) {
		t.Helper()
		var opts []sandbox.SayOption
		if typ == sandbox.ChatGroup {
			opts = append(opts, sandbox.MentionBot())
		}
		d, err := e.sb.UserSays(chat, typ, owner, text, opts...)
		require.NoError(t, err)
		require.True(t, waitDelivery(t, d).Acked)
		answered(t, e, chat, d.MessageID, text)
	}

	for _, lang := range templates.Languages() {
		goal, chat, dm := "docs-"+lang, "oc_markup_"+lang, "oc_dm_"+lang
		agentMeta := store.Meta{Actor: store.AgentActor(goal, "codex"), Surface: "api"}
		_, err := e.st.CreateGoal(ctx, store.CreateGoalParams{ID: goal, Title: "title " + bad, Owners: []string{owner}, Meta: admin})
		require.NoError(t, err)
		_, err = e.st.RegisterAgent(ctx, store.RegisterAgentParams{GoalID: goal, AgentID: "codex", IsDefault: true, Meta: admin})
		require.NoError(t, err)
		say(chat, sandbox.ChatGroup, "/bind #"+goal)
		say(chat, sandbox.ChatGroup, "/lang "+lang)
		todo, err := e.st.AddTodo(ctx, store.AddTodoParams{GoalID: goal, Text: "todo " + bad, Meta: agentMeta})
		require.NoError(t, err)

		say(chat, sandbox.ChatGroup, "/status #"+goal)
		say(chat, sandbox.ChatGroup, "/todo #"+goal+" mine "+bad)
		say(chat, sandbox.ChatGroup, "/owners #"+goal+" add "+hostile[0])
		say(chat, sandbox.ChatGroup, "/stall #"+goal+" 5")

		// A host's permission prompt, asked of the owners as a card, then listed by /gates.
		_, err = e.st.AskPermission(ctx, store.AskPermissionParams{GoalID: goal, AgentID: "codex",
			Notice: cs.Gates.Ask, Meta: agentMeta,
			Request: store.PermissionRequest{Host: "claude-code", Tool: "Bash", Summary: "rm -rf / " + bad, Folder: "/src/" + bad, Turn: "t-x"}})
		require.NoError(t, err)
		say(chat, sandbox.ChatGroup, "/gates #"+goal)

		// A turn with a progress card and a note, then three failed turns: failure cards,
		// then the breaker holds the agent and says so.
		for i, via := range []string{"mcp", "cli", "cli"} {
			instance := fmt.Sprintf("t-%s-%d", lang, i)
			_, err := e.st.OpenTurn(ctx, store.OpenTurnParams{GoalID: goal, AgentID: "codex", InstanceID: instance, TodoID: todo.ID, Via: via, Meta: agentMeta})
			require.NoError(t, err)
			_, err = e.st.AddTurnNote(ctx, store.TurnNoteParams{GoalID: goal, AgentID: "codex", InstanceID: instance, Text: "note " + bad, Meta: agentMeta})
			require.NoError(t, err)
			_, err = sched.TurnCards(ctx)
			require.NoError(t, err)
			_, err = e.st.EndTurn(ctx, store.EndTurnParams{GoalID: goal, AgentID: "codex", InstanceID: instance, State: store.TurnFailed,
				Outcome: "outcome " + bad, LogTail: "log\n" + bad, Meta: agentMeta})
			require.NoError(t, err)
			_, err = sched.TurnCards(ctx)
			require.NoError(t, err)
		}
		say(chat, sandbox.ChatGroup, "/runs #"+goal)

		// The direct chat's overview of the owner's goals and gates.
		say(dm, sandbox.ChatP2P, "/lang "+lang)
		say(dm, sandbox.ChatP2P, "/status")

		// A file a person sends, too large for this server: the refusal names it.
		d, err := e.sb.UserSendsFile(chat, sandbox.ChatGroup, owner, "file "+bad+".png", append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, 4<<10)...), "look", sandbox.MentionBot())
		require.NoError(t, err)
		res := waitDelivery(t, d)
		require.True(t, res.Acked, "%+v", res)
		require.Eventually(t, func() bool {
			return e.count(`SELECT count(*) FROM outbox WHERE dedupe_key LIKE 'file-refused:%' AND receive_id = $1 AND state = 'sent'`, chat) == 1
		}, settle, 20*time.Millisecond, "the refusal naming the file reached Lark")
	}
	e.drained()

	// Every path was taken, in both languages.
	for what, like := range map[string]string{
		"the permission card":              "gate:%:ask:chat:%",
		"the proposal card":                "proposal:%:card:%",
		"the progress card's final update": "turn:%:card:%:final",
		"the breaker card":                 "breaker:%",
		"the file refusal":                 "file-refused:%",
	} {
		require.GreaterOrEqual(t, e.count(`SELECT count(*) FROM outbox WHERE dedupe_key LIKE $1 AND state = 'sent'`, like), 2, what)
	}
	for _, lang := range templates.Languages() {
		require.Equal(t, 3, e.count(`SELECT count(*) FROM outbox WHERE dedupe_key LIKE 'turn:%:card:%' AND dedupe_key NOT LIKE '%:final'
			AND goal_id = $1 AND kind = 'card'`, "docs-"+lang), "the progress card and two failure cards of turns without one")
	}

	seen, messages := 0, 0
	for _, c := range e.sb.Chats() {
		for _, m := range e.sb.Chat(c.ID).BotMessages() {
			messages++
			for _, s := range shownStrings(m.MsgType, m.Content) {
				rest := ownerAt.ReplaceAllString(s, "")
				require.Empty(t, e2eTag.FindAllString(rest, -1), "a tag reached Lark in %s message %s of %s: %s", m.MsgType, m.ID, c.ID, s)
				require.Empty(t, e2eLink.FindAllString(rest, -1), "a link reached Lark in %s message %s of %s: %s", m.MsgType, m.ID, c.ID, s)
			}
			seen += len(evilTarget.FindAllString(m.Content, -1))
		}
	}
	require.Greater(t, messages, 20)
	require.Positive(t, seen, "the hostile words are there, inert: the test looked at what it meant to")
}

// answered waits until the bot's answer to message id in chat reached the emulator.
func answered(t *testing.T, e *testBundle, chat, id, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), settle)
	defer cancel()
	for {
		for _, m := range e.sb.Chat(chat).BotMessages() {
			if m.ParentID == id || m.RootID == id {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no answer to %q in %s", what, chat)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
