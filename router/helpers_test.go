package router_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"loopx/cards"
	"loopx/change"
	"loopx/inbox"
	"loopx/router"
	"loopx/store"
	"loopx/store/storetest"
	"loopx/templates"
)

const (
	bot      = "ou_bot"
	owner    = "ou_owner"
	member   = "ou_member"
	admin    = "ou_admin"
	stranger = "ou_stranger"
	room     = "oc_room" // a group bound to goal docs
)

var setupMeta = store.Meta{Actor: "admin", Surface: "system"}

// testBundle is one fresh database with two goals:
//
//	docs  owners ou_owner, members ou_member; agents codex (default) and claude; bound to oc_room
//	infra owners ou_owner; agent ops
type testBundle struct {
	t     testing.TB
	pool  *pgxpool.Pool
	st    *store.Store
	chat  *router.Chat
	ib    *inbox.Inbox
	cards *cards.Set
	k     *change.Kernel
	tpl   *templates.Set
	clk   *storetest.Clock
	seq   *atomic.Int64
	mark  int64 // outbox id already looked at
	gate  int64 // the gate a test case works on
}

// config is what a test may change before setup builds the router.
type config struct {
	Router router.Options
	Inbox  inbox.Options
}

func setup(t testing.TB, mutate ...func(*config)) *testBundle {
	t.Helper()
	clk := storetest.NewClock(time.Now().UTC().Truncate(time.Microsecond))
	pool := storetest.NewPool(t)
	st := store.New(pool, store.Options{Now: clk.Now})
	ctx := t.Context()
	_, err := st.CreateGoal(ctx, store.CreateGoalParams{ID: "docs", Title: "Docs site", Owners: []string{owner}, Members: []string{member}, Meta: setupMeta})
	require.NoError(t, err)
	_, err = st.CreateGoal(ctx, store.CreateGoalParams{ID: "infra", Owners: []string{owner}, Meta: setupMeta})
	require.NoError(t, err)
	for _, a := range [][2]string{{"docs", "codex"}, {"docs", "claude"}, {"infra", "ops"}} {
		_, err = st.RegisterAgent(ctx, store.RegisterAgentParams{GoalID: a[0], AgentID: a[1], Meta: setupMeta})
		require.NoError(t, err)
	}
	tpl, err := templates.New()
	require.NoError(t, err)
	cs := cards.New(tpl, "en")
	k, err := change.New(st, change.Options{Templates: tpl, Cards: cs.Proposals.Update})
	require.NoError(t, err)
	c := config{Router: router.Options{BotOpenID: bot, Admins: []string{admin}, Now: clk.Now, Templates: tpl, Cards: cs, Changes: k},
		Inbox: inbox.Options{Now: clk.Now, Templates: tpl}}
	for _, m := range mutate {
		m(&c)
	}
	ib, err := inbox.New(st, c.Inbox)
	require.NoError(t, err)
	c.Router.Inbox = ib
	chat, err := router.New(st, c.Router)
	require.NoError(t, err)
	e := &testBundle{t: t, pool: pool, st: st, chat: chat, ib: ib, cards: cs, k: k, tpl: tpl, clk: clk, seq: &atomic.Int64{}}
	e.send(router.Message{ChatID: room, ChatType: router.ChatGroup, SenderID: owner, Text: "@_user_1 /bind #docs"}, true)
	e.outbox() // forget the setup replies
	return e
}

// send delivers a message (a fresh event and message id unless set); mention adds the bot
// mention the text's @_user_1 placeholder stands for. It returns the message as sent.
func (e *testBundle) send(m router.Message, mention bool) router.Message {
	e.t.Helper()
	n := e.seq.Add(1)
	if m.EventID == "" {
		m.EventID = fmt.Sprintf("ev_%d", n)
	}
	if m.MessageID == "" {
		m.MessageID = fmt.Sprintf("om_%d", n)
	}
	if m.ChatType == "" {
		m.ChatType = router.ChatGroup
	}
	if m.ChatID == "" {
		m.ChatID = room
	}
	if mention {
		m.Mentions = append(m.Mentions, router.Mention{Key: "@_user_1", OpenID: bot, Name: "LoopX"})
		if !strings.Contains(m.Text, "@_user_1") {
			m.Text = "@_user_1 " + m.Text
		}
	}
	require.NoError(e.t, e.chat.HandleMessage(e.t.Context(), m))
	return m
}

// say sends text to oc_room from sender, mentioning the bot.
func (e *testBundle) say(sender, text string) router.Message {
	e.t.Helper()
	return e.send(router.Message{SenderID: sender, Text: text}, true)
}

// outbox returns the rows written since the last call.
func (e *testBundle) outbox() []store.OutboxRecord {
	e.t.Helper()
	rows, err := store.ListOutboxAfter(e.t.Context(), e.st.DB(), e.mark, 0)
	require.NoError(e.t, err)
	if len(rows) > 0 {
		e.mark = rows[len(rows)-1].ID
	}
	return rows
}

// oneReply asserts exactly one text reply to m was written since the last look and returns it.
func (e *testBundle) oneReply(m router.Message) store.OutboxRecord {
	e.t.Helper()
	rows := e.outbox()
	require.Len(e.t, rows, 1, "rows: %+v", rows)
	require.Equal(e.t, "text", rows[0].Kind)
	require.Equal(e.t, m.ChatID, rows[0].ReceiveID)
	require.Equal(e.t, m.MessageID, rows[0].ReplyTo)
	return rows[0]
}

func (e *testBundle) inbox(goal, agent string) []store.InboxItem {
	e.t.Helper()
	items, err := store.ListInbox(e.t.Context(), e.st.DB(), goal, agent)
	require.NoError(e.t, err)
	return items
}

func (e *testBundle) unrouted() []store.Unrouted {
	e.t.Helper()
	u, err := store.ListUnrouted(e.t.Context(), e.st.DB(), "", 100)
	require.NoError(e.t, err)
	return u
}

// refusals lists audit rows with allowed=false, newest last.
func (e *testBundle) refusals() []store.Audit {
	e.t.Helper()
	rows, err := store.ListChatAudit(e.t.Context(), e.st.DB(), "", 0)
	require.NoError(e.t, err)
	var out []store.Audit
	for _, a := range rows {
		if !a.Allowed {
			out = append(out, a)
		}
	}
	return out
}

func (e *testBundle) goal(id string) store.Goal {
	e.t.Helper()
	g, err := e.st.GetGoal(e.t.Context(), id)
	require.NoError(e.t, err)
	return g
}

// askGate opens a gate the way the API does, with the router's card renderer.
func (e *testBundle) askGate(question string, todo int64) store.Gate {
	e.t.Helper()
	g, err := e.st.AskGate(e.t.Context(), store.AskGateParams{
		GoalID: "docs", AgentID: "codex", Question: question, TodoID: todo,
		Notice: e.cards.Gates.Ask, Meta: store.Meta{Actor: "agent:docs/codex", Surface: "api"},
	})
	require.NoError(e.t, err)
	return g
}

// buttonValue finds the callback value of the button for option in a card's JSON.
func buttonValue(t testing.TB, card, option string) map[string]any {
	t.Helper()
	var found map[string]any
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if x["type"] == "callback" {
				if val, ok := x["value"].(map[string]any); ok && (val["option"] == option || val["action"] == option) {
					found = val
				}
			}
			for _, y := range x {
				walk(y)
			}
		case []any:
			for _, y := range x {
				walk(y)
			}
		}
	}
	var root any
	require.NoError(t, json.Unmarshal([]byte(card), &root))
	walk(root)
	require.NotNil(t, found, "no %q button in %s", option, card)
	return found
}

func inboxAgent(goal, agent string) inbox.Agent { return inbox.Agent{GoalID: goal, AgentID: agent} }

func replyParams(item int64, key, text string) inbox.ReplyParams {
	return inbox.ReplyParams{ItemID: item, Key: key, Text: text}
}

// drainAll empties docs/codex's inbox (benchmarks stay under the pending bound).
func (e *testBundle) drainAll(tb testing.TB) {
	tb.Helper()
	for {
		items, err := e.ib.Drain(tb.Context(), inboxAgent("docs", "codex"), inbox.DrainParams{Limit: 200})
		require.NoError(tb, err)
		if len(items) == 0 {
			return
		}
		ids := make([]int64, len(items))
		for i, it := range items {
			ids[i] = it.ID
		}
		_, err = e.ib.Ack(tb.Context(), inboxAgent("docs", "codex"), ids, "")
		require.NoError(tb, err)
	}
}

// confirmCard clicks Confirm on the proposal card reply as the goal's owner and reports
// whether the change was applied; a reply that is no proposal card (a refusal) is false.
func confirmCard(e *testBundle, reply string) bool {
	e.t.Helper()
	if !strings.Contains(reply, `"action":"confirm"`) {
		return false
	}
	res, err := e.chat.HandleCardAction(e.t.Context(), router.CardAction{
		EventID: fmt.Sprintf("cb_confirm_%d", time.Now().UnixNano()), OperatorID: owner, ChatID: room,
		MessageID: "om_proposal", Value: buttonValue(e.t, reply, "confirm"),
	})
	require.NoError(e.t, err)
	e.outbox() // the card updates
	return res.ToastKind == "success"
}
