package router_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loopx/inbox"
	"loopx/router"
	"loopx/store"
)

func TestRoutingTable(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()

	// Chat binding: oc_room is bound to docs, whose default agent is codex.
	m := e.say(member, "please look at the 404s")
	items := e.inbox("docs", "codex")
	require.Len(t, items, 1)
	require.Equal(t, "please look at the 404s", items[0].Text)
	require.Equal(t, store.ModeInbox, items[0].Mode)
	require.Equal(t, m.MessageID, items[0].SourceMessage)
	rows := e.outbox()
	require.Len(t, rows, 1)
	require.Equal(t, "reaction", rows[0].Kind, "an accepted message gets a quiet receipt")
	require.Equal(t, m.MessageID, rows[0].TargetMessage)
	require.Equal(t, router.ReceiptEmoji, rows[0].Content)

	// Thread: a reply in the thread of a bot message about docs/claude goes there, even
	// without a mention, and beats the chat binding.
	id, _, err := store.InsertOutbox(ctx, e.st.DB(), store.OutboxInsert{Kind: "text", ReceiveID: room, Content: "claude here", GoalID: "docs", AgentID: "claude"})
	require.NoError(t, err)
	require.NoError(t, e.st.MarkOutboxSent(ctx, id, "om_bot_claude"))
	e.outbox()
	e.send(router.Message{SenderID: member, RootID: "om_bot_claude", ParentID: "om_bot_claude", Text: "thanks, go on"}, false)
	require.Len(t, e.inbox("docs", "claude"), 1)
	require.Len(t, e.inbox("docs", "codex"), 1)

	// Explicit token beats the thread.
	e.send(router.Message{SenderID: owner, RootID: "om_bot_claude", Text: "#infra restart the runner"}, false)
	require.Len(t, e.inbox("infra", "ops"), 1)
	require.Len(t, e.inbox("docs", "claude"), 1)

	// A thread binding beats the chat binding.
	e.send(router.Message{SenderID: owner, RootID: "om_topic", Text: "/bind #infra"}, true)
	e.send(router.Message{SenderID: owner, RootID: "om_topic", Text: "deploy it"}, true)
	require.Len(t, e.inbox("infra", "ops"), 2)
	e.outbox()

	// Unaddressed group chatter, and bot senders, are ignored: nothing written at all.
	e.send(router.Message{SenderID: member, Text: "lunch?"}, false)
	e.send(router.Message{SenderID: "ou_otherbot", SenderIsBot: true, Text: "@_user_1 #docs hi"}, true)
	e.send(router.Message{SenderID: bot, Text: "#docs echo"}, true)
	require.Empty(t, e.outbox())
	require.Len(t, e.inbox("docs", "codex"), 1)

	// A direct chat needs no mention; it has no binding, so the token routes.
	e.send(router.Message{ChatID: "oc_dm", ChatType: router.ChatP2P, SenderID: member, Text: "#docs/claude hi from dm"}, false)
	require.Len(t, e.inbox("docs", "claude"), 2)
	e.outbox()

	// A chat bound to two goals: clarify, list both, route nothing, record it.
	e.send(router.Message{ChatID: "oc_two", SenderID: owner, Text: "/bind #docs"}, true)
	e.send(router.Message{ChatID: "oc_two", SenderID: owner, Text: "/bind #infra"}, true)
	e.outbox()
	before := len(e.unrouted())
	amb := e.send(router.Message{ChatID: "oc_two", SenderID: owner, Text: "which one gets this?"}, true)
	r := e.oneReply(amb)
	require.Contains(t, r.Content, "#docs")
	require.Contains(t, r.Content, "#infra")
	u := e.unrouted()
	require.Len(t, u, before+1)
	require.Equal(t, "ambiguous", u[len(u)-1].Reason)
	require.ElementsMatch(t, []string{"docs", "infra"}, u[len(u)-1].Candidates)
	require.Len(t, e.inbox("docs", "codex"), 1)
	require.Len(t, e.inbox("infra", "ops"), 2)

	// A goal with two agents and no default: ask which agent.
	_, err = e.st.DB().Exec(ctx, `UPDATE agent SET is_default = false WHERE goal_id = 'docs'`) // no kernel op unsets a default
	require.NoError(t, err)
	two := e.say(member, "#docs who takes this?")
	r = e.oneReply(two)
	require.Contains(t, r.Content, "#docs/claude")
	require.Contains(t, r.Content, "#docs/codex")
	require.Equal(t, "need_agent", e.unrouted()[len(e.unrouted())-1].Reason)
	require.Len(t, e.inbox("docs", "codex"), 1)

	// Unknown goal: suggestions from the sender's goals.
	unk := e.say(member, "#doc hello")
	r = e.oneReply(unk)
	require.Contains(t, r.Content, "#docs")
	require.Equal(t, "unknown_goal", e.unrouted()[len(e.unrouted())-1].Reason)

	// Unknown agent: closest names.
	ua := e.say(member, "#docs/codx hello")
	r = e.oneReply(ua)
	require.Contains(t, r.Content, "#docs/codex")

	// Nothing bound and no token: ask, route nothing.
	nb := e.send(router.Message{ChatID: "oc_empty", SenderID: member, Text: "hello?"}, true)
	r = e.oneReply(nb)
	require.Contains(t, r.Content, "#docs", "the sender's own goals are offered")
	require.Equal(t, "no_match", e.unrouted()[len(e.unrouted())-1].Reason)
}

func TestStrangerNeverLearnsOfGoals(t *testing.T) {
	t.Parallel()
	e := setup(t)
	// infra is not bound to oc_lobby and the stranger has no role on it: it must look
	// exactly like a goal that does not exist.
	probe := e.send(router.Message{ChatID: "oc_lobby", SenderID: stranger, Text: "#infra hi"}, true)
	r1 := e.oneReply(probe)
	missing := e.send(router.Message{ChatID: "oc_lobby", SenderID: stranger, Text: "#nosuch hi"}, true)
	r2 := e.oneReply(missing)
	require.Equal(t, strings.ReplaceAll(r1.Content, "infra", "X"), strings.ReplaceAll(r2.Content, "nosuch", "X"))
	require.NotContains(t, r1.Content, "docs")
	ref := e.refusals()
	require.Len(t, ref, 1, "the probe of a hidden goal is audited")
	require.Equal(t, "infra", ref[0].GoalID)
	require.Empty(t, e.inbox("infra", "ops"))

	// /goals lists nothing for a stranger; a near miss suggests nothing.
	g := e.send(router.Message{ChatID: "oc_lobby", SenderID: stranger, Text: "/goals"}, true)
	require.NotContains(t, e.oneReply(g).Content, "#")
	near := e.send(router.Message{ChatID: "oc_lobby", SenderID: stranger, Text: "#infr hi"}, true)
	require.NotContains(t, e.oneReply(near).Content, "#infra")
}

func TestDeliveryModes(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *config) { c.Router.Receipt = router.ReceiptReply })
	ctx := t.Context()

	// /steer with no live turn: refused with how to queue; nothing delivered, no downgrade.
	s := e.say(member, "/steer #docs/codex stop and rebase")
	r := e.oneReply(s)
	require.Contains(t, r.Content, "no live turn")
	require.Contains(t, r.Content, "/queue #docs/codex")
	require.Empty(t, e.inbox("docs", "codex"))

	// With a live turn, /steer lands as a steer item tied to it.
	turn, err := e.st.OpenTurn(ctx, store.OpenTurnParams{GoalID: "docs", AgentID: "codex", Lease: time.Hour, Meta: setupMeta})
	require.NoError(t, err)
	s = e.say(member, "／steer ＃docs/codex stop and rebase")
	r = e.oneReply(s)
	require.Contains(t, r.Content, "live turn", "receipt: reply mode names the mode")
	items := e.inbox("docs", "codex")
	require.Len(t, items, 1)
	require.Equal(t, store.ModeSteer, items[0].Mode)
	require.Equal(t, turn.ID, items[0].TurnID)

	// /queue and the default inbox mode.
	e.say(member, "/queue #docs after this turn")
	e.say(member, "#docs whenever")
	e.outbox()
	items = e.inbox("docs", "codex")
	require.Len(t, items, 3)
	require.Equal(t, store.ModeQueue, items[1].Mode)
	require.Equal(t, store.ModeInbox, items[2].Mode)

	// The drain order puts the steer item first even though it is not the oldest pending; the
	// queued item waits for the next turn.
	drained, err := e.ib.Drain(ctx, inboxAgent("docs", "codex"), inbox.DrainParams{Limit: 10})
	require.NoError(t, err)
	require.Equal(t, store.ModeSteer, drained[0].Mode)
	require.Len(t, drained, 2)
	require.Equal(t, store.ModeInbox, drained[1].Mode)

	// Bounds: too long is refused with a reply; nothing is written.
	long := e.say(member, "#docs "+strings.Repeat("x", 12001))
	require.Contains(t, e.oneReply(long).Content, "12000")
	require.Len(t, e.inbox("docs", "codex"), 3)
}

func TestInboxFullTellsSender(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *config) { c.Inbox.MaxPending = 2 })
	e.say(member, "one")
	e.say(member, "two")
	e.outbox()
	m := e.say(member, "three")
	r := e.oneReply(m)
	require.Contains(t, r.Content, "holds 2")
	require.Len(t, e.inbox("docs", "codex"), 2, "nothing dropped silently, nothing over the bound")
}

func TestReplyLandsInSourceThread(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	m := e.send(router.Message{SenderID: member, RootID: "om_topic_root", Text: "#docs how far along?"}, true)
	e.outbox()
	item := e.inbox("docs", "codex")[0]
	require.Equal(t, "om_topic_root", item.SourceThread)

	ag := inboxAgent("docs", "codex")
	_, err := e.ib.Drain(ctx, ag, inbox.DrainParams{Limit: 10})
	require.NoError(t, err)
	res, err := e.ib.Reply(ctx, ag, replyParams(item.ID, "", "halfway"))
	require.NoError(t, err)
	again, err := e.ib.Reply(ctx, ag, replyParams(item.ID, "", "halfway"))
	require.NoError(t, err)
	require.Equal(t, res.OutboxID, again.OutboxID)
	rows := e.outbox()
	require.Len(t, rows, 1, "the same reply twice is one outbox row")
	require.Equal(t, room, rows[0].ReceiveID)
	require.Equal(t, m.MessageID, rows[0].ReplyTo)
	require.True(t, rows[0].ReplyInThread)
	require.Equal(t, "halfway", rows[0].Content)

	// Once sent, a reply to the agent's answer routes back to the same agent.
	require.NoError(t, e.st.MarkOutboxSent(ctx, rows[0].ID, "om_answer"))
	e.send(router.Message{SenderID: member, ParentID: "om_answer", Text: "great, thanks"}, false)
	require.Len(t, e.inbox("docs", "codex"), 2)
}

func TestDuplicateEventHasOneEffect(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var dups []string
	e := setup(t, func(c *config) {
		c.Router.OnDuplicate = func(_ context.Context, eventType string) {
			mu.Lock()
			defer mu.Unlock()
			dups = append(dups, eventType)
		}
	})
	seen := func() []string { mu.Lock(); defer mu.Unlock(); return slices.Clone(dups) }
	m := e.say(member, "#docs do it once")
	require.Empty(t, seen(), "a first delivery is no duplicate")
	require.NoError(t, e.chat.HandleMessage(t.Context(), m)) // Lark redelivers the same event
	require.Equal(t, []string{"im.message.receive_v1"}, seen(), "the hook hears of the redelivery once")
	// Another replica receives the same event with a new message object: still one effect.
	require.NoError(t, e.chat.HandleMessage(t.Context(), m))
	require.Len(t, e.inbox("docs", "codex"), 1)
	require.Len(t, e.outbox(), 1, "one receipt")
	require.Len(t, seen(), 2)

	p := e.say(owner, "/pause #docs")
	require.NoError(t, e.chat.HandleMessage(t.Context(), p))
	require.Equal(t, store.GoalActive, e.goal("docs").Status, "a protected command only proposes")
	preview := e.outbox()
	require.Len(t, preview, 1, "one reply: the preview card")
	require.Len(t, seen(), 3)
	require.True(t, confirmCard(e, preview[0].Content))
	require.Equal(t, store.GoalStopped, e.goal("docs").Status)
	require.Len(t, seen(), 3)

	// A card click delivered twice: the second is "already handled" and reported as such.
	e.askGate("Ship it?", 0)
	approve := buttonValue(t, e.outbox()[0].Content, "approve")
	click := router.CardAction{EventID: "cb_dup", OperatorID: owner, ChatID: room, Value: approve}
	res, err := e.chat.HandleCardAction(t.Context(), click)
	require.NoError(t, err)
	require.Equal(t, "success", res.ToastKind)
	require.Len(t, seen(), 3, "a first click is no duplicate")
	res, err = e.chat.HandleCardAction(t.Context(), click)
	require.NoError(t, err)
	require.Equal(t, "info", res.ToastKind)
	require.Equal(t, []string{"im.message.receive_v1", "im.message.receive_v1", "im.message.receive_v1", "card.action.trigger"}, seen())
}

func TestBadInputGetsUsage(t *testing.T) {
	t.Parallel()
	e := setup(t)
	m := e.say(owner, "/budget #docs lots")
	r := e.oneReply(m)
	require.Contains(t, r.Content, "the number of turns must be a whole number")
	require.Contains(t, r.Content, "/budget #goal <turns> [<window-hours>]")
	require.Equal(t, 24, e.goal("docs").AllowedSlots, "nothing changed")

	h := e.say(member, "")
	help := e.oneReply(h).Content
	for _, c := range []string{"/help", "/goals", "/status", "/gates", "/report", "/bind", "/unbind", "/pause", "/resume", "/budget", "/todo", "/approve", "/reject", "/lang"} {
		require.Contains(t, help, c)
	}

	// An event without an id is keyed by its message id (Lark's stable key for a message):
	// a second delivery of it is a duplicate, not a second effect.
	noID := router.Message{ChatID: room, ChatType: router.ChatGroup, MessageID: "om_noid", SenderID: owner,
		Text: "@_user_1 no event id", Mentions: []router.Mention{{Key: "@_user_1", OpenID: bot, Name: "LoopX"}}}
	require.NoError(t, e.chat.HandleMessage(t.Context(), noID))
	require.NoError(t, e.chat.HandleMessage(t.Context(), noID))
	n := 0
	for _, it := range e.inbox("docs", "codex") {
		if it.SourceMessage == "om_noid" {
			n++
		}
	}
	require.Equal(t, 1, n)
	require.Error(t, e.chat.HandleMessage(t.Context(), router.Message{ChatID: room, SenderID: owner, Text: "hi"}), "no message id is a bot bug, reported")
}

func TestLangAndReport(t *testing.T) {
	t.Parallel()
	e := setup(t)
	m := e.say(owner, "/lang zh")
	require.Contains(t, e.oneReply(m).Content, "中文")
	s := e.say(member, "/report")
	require.Contains(t, e.oneReply(s).Content, "未配置", "reports answer in the chat's language, and say they are not configured")

	var got router.ReportRequest
	e2 := setup(t, func(c *config) {
		c.Router.Report = func(ctx context.Context, db store.DB, req router.ReportRequest) (bool, error) {
			got = req
			_, _, err := store.InsertOutbox(ctx, db, store.OutboxInsert{Kind: "text", ReceiveID: req.ChatID, ReplyTo: req.ReplyTo, Content: "digest", GoalID: req.GoalID})
			return true, err
		}
	})
	r := e2.say(member, "/report #docs")
	rows := e2.outbox()
	require.Len(t, rows, 1)
	require.Equal(t, "digest", rows[0].Content)
	require.Equal(t, router.ReportRequest{GoalID: "docs", ChatID: room, ReplyTo: r.MessageID, Lang: "en", RequestedBy: member}, got)
}

// The same event delivered to two replicas at once (Lark's WS cluster mode, or a redelivery
// racing the first attempt) has one effect; and so does the same card click.
func TestConcurrentReplicasOneEffect(t *testing.T) {
	t.Parallel()
	e := setup(t)
	other, err := router.New(e.st, router.Options{BotOpenID: bot, Admins: []string{admin}, Now: e.clk.Now, Inbox: e.ib, Templates: e.tpl,
		Cards: e.cards, Changes: e.k})
	require.NoError(t, err)
	replicas := []*router.Chat{e.chat, other}

	for i := range 5 {
		m := router.Message{EventID: "ev_race_" + itoa(int64(i)), MessageID: "om_race_" + itoa(int64(i)), ChatID: room,
			ChatType: router.ChatGroup, SenderID: member, Text: "@_user_1 #docs race " + itoa(int64(i)),
			Mentions: []router.Mention{{Key: "@_user_1", OpenID: bot}}}
		errs := make(chan error, 4)
		for j := range 4 {
			go func() { errs <- replicas[j%2].HandleMessage(t.Context(), m) }()
		}
		for range 4 {
			require.NoError(t, <-errs)
		}
	}
	require.Len(t, e.inbox("docs", "codex"), 5)
	require.Len(t, e.outbox(), 5, "one receipt per event")

	g := e.askGate("race?", 0)
	card := e.outbox()[0]
	val := buttonValue(t, card.Content, "approve")
	results := make(chan router.CardResult, 4)
	for j := range 4 {
		go func() {
			res, err := replicas[j%2].HandleCardAction(t.Context(), router.CardAction{EventID: "cb_race", OperatorID: owner, ChatID: room, Value: val})
			if err != nil {
				res = router.CardResult{ToastKind: "err: " + err.Error()}
			}
			results <- res
		}()
	}
	kinds := map[string]int{}
	for range 4 {
		kinds[(<-results).ToastKind]++
	}
	require.Equal(t, map[string]int{"success": 1, "info": 3}, kinds)
	require.Equal(t, store.GateApproved, gateStatus(e, g.ID))
	require.Len(t, e.outbox(), 1, "one card update")
}

func TestAnswersStayInTheirThread(t *testing.T) {
	t.Parallel()
	e := setup(t)
	in := e.send(router.Message{SenderID: member, RootID: "om_r", ThreadID: "omt_1", Text: "/status"}, true)
	require.True(t, e.oneReply(in).ReplyInThread, "a message in a thread is answered in it")
	plain := e.send(router.Message{SenderID: member, RootID: "om_r", ParentID: "om_r", Text: "/status"}, true)
	require.False(t, e.oneReply(plain).ReplyInThread, "a plain reply is answered with a plain reply")
}
