package router_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loopx/inbox"
	"loopx/quota"
	"loopx/router"
	"loopx/scheduler"
	"loopx/store"
)

// Chat semantics that hold up in daily use (issue 15): what the bot says is what it did.

func texts(items []store.InboxItem) []string {
	out := []string{}
	for _, it := range items {
		out = append(out, it.Text)
	}
	return out
}

// /queue is not the inbox: a queued message reaches the agent's next turn, never the live one.
// Both chat paths (the group-commit fast path for a plain /queue in a bound chat, and the
// transactional path for an addressed one) record the turn it waits out.
func TestQueueWaitsForTheNextTurn(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	codex := inboxAgent("docs", "codex")
	drain := func() []string {
		t.Helper()
		items, err := e.ib.Drain(ctx, codex, inbox.DrainParams{Limit: 50})
		require.NoError(t, err)
		return texts(items)
	}

	live, err := e.st.OpenTurn(ctx, store.OpenTurnParams{GoalID: "docs", AgentID: "codex", Lease: time.Hour, Meta: setupMeta})
	require.NoError(t, err)
	e.say(member, "/queue after this turn")          // fast path
	e.say(member, "/queue #docs/codex and this too") // transactional path
	e.say(member, "#docs/codex right now")           // inbox: the live turn may take it
	e.outbox()

	require.Equal(t, []string{"right now"}, drain(), "inbox drain during the live turn does not hand out queued items")
	require.Empty(t, drain())
	for _, it := range e.inbox("docs", "codex") {
		if it.Mode == store.ModeQueue {
			require.Equal(t, live.ID, it.TurnID, "a queued item names the turn it waits out: %q", it.Text)
		}
	}
	counts, err := e.ib.Counts(ctx, codex)
	require.NoError(t, err)
	require.Equal(t, 2, counts.Pending, "the queued items still wait, and are counted")

	_, err = e.st.EndTurn(ctx, store.EndTurnParams{GoalID: "docs", AgentID: "codex", InstanceID: live.InstanceID, State: store.TurnOK, Meta: setupMeta})
	require.NoError(t, err)
	next, err := e.st.OpenTurn(ctx, store.OpenTurnParams{GoalID: "docs", AgentID: "codex", Lease: 10 * time.Minute, Meta: setupMeta})
	require.NoError(t, err)
	require.Equal(t, []string{"after this turn", "and this too"}, drain(), "the next turn gets them at its start")

	// A turn whose lease has passed holds nothing back: it is no longer live.
	e.say(member, "/queue after the stuck turn")
	e.outbox()
	require.Empty(t, drain())
	e.clk.Add(11 * time.Minute)
	require.Equal(t, []string{"after the stuck turn"}, drain())

	// With no live turn a queued message goes to the next drain.
	_, err = e.st.ExpireTurns(ctx)
	require.NoError(t, err)
	e.say(member, "/queue when you can")
	e.outbox()
	require.Equal(t, []string{"when you can"}, drain())
	_ = next
}

// A gate asked with its own options stores and shows the option chosen; approve and reject
// keep their meaning for should-run.
func TestCustomGateAnswerIsStoredAndShown(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	agentMeta := store.Meta{Actor: "agent:docs/codex", Surface: "api"}
	todo := func(text string) store.Todo {
		td, err := e.st.AddTodo(ctx, store.AddTodoParams{GoalID: "docs", Text: text, Meta: setupMeta})
		require.NoError(t, err)
		return td
	}
	ask := func(td store.Todo) store.Gate {
		g, err := e.st.AskGate(ctx, store.AskGateParams{GoalID: "docs", AgentID: "codex", Question: "Publish " + td.Text + " now?",
			Options: []string{"approve", "later", "reject"}, TodoID: td.ID, Notice: e.cards.Gates.Ask, Meta: agentMeta})
		require.NoError(t, err)
		return g
	}
	click := func(option, event string) router.CardResult {
		t.Helper()
		cards := e.outbox()
		require.Len(t, cards, 1)
		res, err := e.chat.HandleCardAction(ctx, router.CardAction{EventID: event, OperatorID: owner, ChatID: room,
			Value: buttonValue(t, cards[0].Content, option)})
		require.NoError(t, err)
		return res
	}

	notes := todo("the notes")
	g := ask(notes)
	res := click("later", "cb_later")
	require.Equal(t, "success", res.ToastKind)
	require.Equal(t, "Answered: later", res.Toast)
	var card struct {
		Header struct {
			Title struct {
				Content string `json:"content"`
			} `json:"title"`
		} `json:"header"`
	}
	require.NoError(t, json.Unmarshal(res.Card, &card))
	require.Equal(t, fmt.Sprintf("Answered: later · g%d · #docs", g.ID), card.Header.Title.Content)
	update := e.outbox()
	require.Len(t, update, 1)
	require.Equal(t, "card_update", update[0].Kind)
	require.Contains(t, update[0].Content, "Answered: later")

	got, err := e.st.GetGate(ctx, "docs", g.ID)
	require.NoError(t, err)
	require.Equal(t, store.GateAnswered, got.Status, "the option is not an approval")
	require.Equal(t, "later", got.Answer)
	answered, err := e.st.ListGates(ctx, store.ListGatesParams{GoalID: "docs", Status: store.GateAnswered})
	require.NoError(t, err)
	require.Len(t, answered, 1)

	// Answered: the gate no longer blocks; the todo is back for the agent, which reads the answer.
	decide := func() quota.Decision {
		snap, err := e.st.ReadShouldRunSnapshot(ctx, "docs", "codex", e.clk.Now())
		require.NoError(t, err)
		return quota.Decide(snap, e.clk.Now())
	}
	d := decide()
	require.Equal(t, quota.StateEligible, d.State)
	require.Equal(t, notes.ID, d.SelectedTodo.ID)
	require.Empty(t, d.Gates.Open)

	// reject keeps its meaning: the todo stays blocked; approve reopens it.
	_, err = e.st.UpdateTodo(ctx, store.UpdateTodoParams{GoalID: "docs", TodoID: notes.ID, Version: todoVersion(t, e, notes.ID), Status: ptr(store.TodoDone), Meta: setupMeta})
	require.NoError(t, err)
	tag := todo("the tag")
	ask(tag)
	res = click("reject", "cb_reject")
	require.Equal(t, "Rejected", res.Toast)
	e.outbox()
	require.Equal(t, store.TodoBlocked, todoStatus(t, e, tag.ID))
	require.Equal(t, quota.StateIdle, decide().State)
	mail := todo("the mail")
	ask(mail)
	res = click("approve", "cb_approve")
	require.Equal(t, "Approved", res.Toast)
	e.outbox()
	require.Equal(t, store.TodoOpen, todoStatus(t, e, mail.ID))
	require.Equal(t, mail.ID, decide().SelectedTodo.ID)
}

func ptr[T any](v T) *T { return &v }

func todoVersion(t *testing.T, e *testBundle, id int64) int64 {
	t.Helper()
	td, err := e.st.GetTodo(t.Context(), "docs", id)
	require.NoError(t, err)
	return td.Version
}

func todoStatus(t *testing.T, e *testBundle, id int64) string {
	t.Helper()
	td, err := e.st.GetTodo(t.Context(), "docs", id)
	require.NoError(t, err)
	return td.Status
}

// /status says what each agent is really doing, with times in the goal's zone; /pause and
// /status use the same word.
func TestStatusSaysWhatIsTrue(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	tz := "Asia/Shanghai"
	loc, err := time.LoadLocation(tz)
	require.NoError(t, err)
	_, err = e.st.UpdateGoal(ctx, store.UpdateGoalParams{GoalID: "docs", HeartbeatSpec: ptr("*/10 * * * *"), HeartbeatTZ: ptr(tz),
		ReportSpec: ptr("0 9 * * *"), ReportTZ: ptr(tz), AllowedSlots: ptr(2), Meta: setupMeta})
	require.NoError(t, err)
	_, err = e.st.RegisterAgent(ctx, store.RegisterAgentParams{GoalID: "docs", AgentID: "watch", WorkMode: "monitor_only", Meta: setupMeta})
	require.NoError(t, err)
	// The scheduler arms the heartbeats and the report: /status shows their next fires.
	sched, err := scheduler.New(scheduler.Config{Store: e.st, Decider: quota.NewService(e.st, e.tpl, quota.Options{Now: e.clk.Now}),
		Now: e.clk.Now, MaxJitter: -1})
	require.NoError(t, err)
	_, err = sched.Step(ctx)
	require.NoError(t, err)
	next := map[string]string{}
	scheds, err := e.st.ListSchedules(ctx, "docs")
	require.NoError(t, err)
	for _, sc := range scheds {
		require.False(t, sc.NextFireAt.IsZero(), "armed: %+v", sc)
		next[sc.Kind+sc.AgentID] = sc.NextFireAt.In(loc).Format("2006-01-02 15:04")
	}

	parser, err := e.st.AddTodo(ctx, store.AddTodoParams{GoalID: "docs", Text: "Write the parser", Meta: setupMeta})
	require.NoError(t, err)
	turn, err := e.st.OpenTurn(ctx, store.OpenTurnParams{GoalID: "docs", AgentID: "codex", TodoID: parser.ID, Lease: time.Hour, Meta: setupMeta})
	require.NoError(t, err)
	gate, err := e.st.AskGate(ctx, store.AskGateParams{GoalID: "docs", AgentID: "claude", Question: "Which license?", Meta: store.Meta{Actor: "agent:docs/claude", Surface: "api"}})
	require.NoError(t, err)
	e.say(member, "#docs/codex how far along?")
	e.clk.Add(12 * time.Minute)
	e.outbox()

	got := e.oneReply(e.say(member, "/status #docs")).Content
	for _, want := range []string{
		"Status: active",
		"Quota: 0 of 2 turns used in the last 24 h, 2 left",
		fmt.Sprintf("Open gates: g%d", gate.ID),
		"Next report: " + next["report"] + " (Asia/Shanghai)",
		fmt.Sprintf(`Agent codex (default): working on todo #%d "Write the parser" for 12 min`, parser.ID),
		"inbox: 1 waiting · next heartbeat: " + next["heartbeatcodex"] + " (Asia/Shanghai)",
		fmt.Sprintf("Agent claude: waiting on gate g%d", gate.ID),
		"Agent watch: watches only",
	} {
		require.Contains(t, got, want)
	}
	require.NotContains(t, got, "idle", "no agent here is idle")

	// Two slots spent: everyone not working is throttled until the first spend leaves the window.
	spentAt := e.clk.Now()
	_, err = e.st.SpendSlot(ctx, store.SpendSlotParams{GoalID: "docs", AgentID: "codex", TurnInstanceID: turn.InstanceID, Meta: setupMeta})
	require.NoError(t, err) // settles the turn
	t2, err := e.st.OpenTurn(ctx, store.OpenTurnParams{GoalID: "docs", AgentID: "claude", Meta: setupMeta})
	require.NoError(t, err)
	e.clk.Add(time.Minute)
	_, err = e.st.SpendSlot(ctx, store.SpendSlotParams{GoalID: "docs", AgentID: "claude", TurnInstanceID: t2.InstanceID, Meta: setupMeta})
	require.NoError(t, err)
	got = e.oneReply(e.say(member, "/status")).Content
	until := spentAt.Add(24 * time.Hour).In(loc).Format("2006-01-02 15:04")
	require.Contains(t, got, "Quota: 2 of 2 turns used in the last 24 h, 0 left")
	require.Contains(t, got, "Agent codex (default): throttled until "+until+" (Asia/Shanghai)")

	// Paused: /pause and /status say the same word.
	e.say(owner, "/pause #docs")
	rows := e.outbox()
	require.Len(t, rows, 1)
	require.Equal(t, "card", rows[0].Kind, "a pause is previewed")
	preview := rows[0].Content
	require.Contains(t, preview, "paused")
	require.True(t, confirmCard(e, preview), "the owner confirms the pause")
	got = e.oneReply(e.say(member, "/status")).Content
	require.Contains(t, got, "Status: paused")
	require.NotContains(t, got, "stopped")
	require.Contains(t, got, "Agent codex (default): paused")

	// An agent with nothing to do is idle; the same in Chinese.
	got = e.oneReply(e.say(owner, "/status #infra")).Content
	require.Contains(t, got, "Agent ops (default): idle")
	e.oneReply(e.say(owner, "/lang zh"))
	got = e.oneReply(e.say(member, "/status")).Content
	require.Contains(t, got, "状态：已暂停")
	require.Contains(t, got, "智能体 codex（默认）：已暂停")
}

// #goal/nobody on a goal with agents names the agents it has, in both languages.
func TestUnknownAgentListsTheAgents(t *testing.T) {
	t.Parallel()
	e := setup(t)
	got := e.oneReply(e.say(member, "#docs/nobody hello")).Content
	require.Contains(t, got, `#docs has no agent "nobody"`)
	require.Contains(t, got, "#docs/codex")
	require.Contains(t, got, "#docs/claude")
	require.NotContains(t, got, "no agents yet")
	require.Empty(t, e.inbox("docs", "codex"))
	u := e.unrouted()
	require.Equal(t, []string{"docs/claude", "docs/codex"}, u[len(u)-1].Candidates)

	e.oneReply(e.say(owner, "/lang zh"))
	got = e.oneReply(e.say(member, "#docs/nobody 你好")).Content
	require.Contains(t, got, "它的智能体有：#docs/claude、#docs/codex")
	require.NotContains(t, got, "目前还没有智能体")
}

// /report: the report card is the whole answer; when nothing new is queued the bot says so
// instead of promising a report that never comes.
func TestReportAnswersOnce(t *testing.T) {
	t.Parallel()
	var digests *scheduler.Digests
	e := setup(t, func(c *config) {
		c.Router.Report = func(ctx context.Context, db store.DB, req router.ReportRequest) (bool, error) {
			res, err := digests.Report(ctx, db, scheduler.ReportParams{GoalID: req.GoalID, RequestedBy: req.RequestedBy,
				ChatID: req.ChatID, ReplyTo: req.ReplyTo, Lang: req.Lang})
			return len(res.Outbox) > 0, err
		}
	})
	var err error
	digests, err = scheduler.NewDigests(scheduler.DigestConfig{Store: e.st, Cards: e.cards})
	require.NoError(t, err)

	e.clk.Add(time.Hour)
	first := e.say(member, "/report #docs")
	rows := e.outbox()
	require.Len(t, rows, 1, "the card alone answers: %+v", rows)
	require.Equal(t, "card", rows[0].Kind)
	require.Equal(t, first.MessageID, rows[0].ReplyTo)

	// The same instant again: the last report already covers it; nothing is queued.
	again := e.oneReply(e.say(member, "/report #docs")).Content
	require.NotContains(t, again, "on its way")
	require.Contains(t, again, "No report sent")
	require.Contains(t, again, e.clk.Now().UTC().Format("2006-01-02 15:04"))
}

// /runs lists the last turns with outcome, todo and evidence, and the skips grouped by reason.
func TestRunsSummarisesTurnsAndSkips(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	agentMeta := store.Meta{Actor: "agent:docs/codex", Surface: "api"}
	q := quota.NewService(e.st, e.tpl, quota.Options{Now: e.clk.Now})
	ask := func(agent string) quota.Decision {
		d, err := q.ShouldRun(ctx, quota.ShouldRunParams{GoalID: "docs", AgentID: agent, BeginTurn: true, Meta: agentMeta})
		require.NoError(t, err)
		return d
	}
	require.Equal(t, "skip", ask("codex").Decision, "no todo yet: idle")
	require.Equal(t, "skip", ask("claude").Decision)

	td, err := e.st.AddTodo(ctx, store.AddTodoParams{GoalID: "docs", Text: "Write the parser", Meta: setupMeta})
	require.NoError(t, err)
	d := ask("codex")
	require.Equal(t, "run", d.Decision)
	_, err = e.st.AddEvidence(ctx, store.AddEvidenceParams{GoalID: "docs", AgentID: "codex", TodoID: td.ID, Summary: "tests pass", Meta: agentMeta})
	require.NoError(t, err)
	_, err = e.st.AddEvidence(ctx, store.AddEvidenceParams{GoalID: "docs", AgentID: "codex", TodoID: td.ID, Summary: "docs updated", Meta: agentMeta})
	require.NoError(t, err)
	require.Equal(t, quota.StateBusy, ask("codex").State, "a live turn: busy")
	e.clk.Add(7 * time.Minute)
	_, err = e.st.EndTurn(ctx, store.EndTurnParams{GoalID: "docs", AgentID: "codex", InstanceID: d.Turn.InstanceID, State: store.TurnFailed, Outcome: "exit status 1", Meta: agentMeta})
	require.NoError(t, err)

	got := e.oneReply(e.say(member, "/runs")).Content
	require.Contains(t, got, "#docs: the last 1 turn, newest first (times in UTC)")
	require.Contains(t, got, fmt.Sprintf(`codex: failed (exit status 1) · todo #%d "Write the parser" · 2 evidence · 7 min`, td.ID))
	require.Contains(t, got, "Turns skipped in the last 24 h: 3 (no open todo ×2 · a turn was live ×1)")

	got = e.oneReply(e.say(owner, "/runs #infra 5")).Content
	require.Contains(t, got, "no turn has run yet")
	require.Contains(t, e.oneReply(e.say(member, "/runs #docs 99")).Content, "from 1 to 30")
	require.True(t, strings.Contains(e.oneReply(e.say(stranger, "/runs #docs")).Content, "owner"), "strangers are refused")
}

func TestParseRuns(t *testing.T) {
	t.Parallel()
	for text, want := range map[string]router.Parsed{
		"/runs":          {Command: "runs"},
		"/runs 5":        {Command: "runs", Count: 5},
		"／runs ＃docs 30": {Command: "runs", Addr: &router.Address{Goal: "docs"}, Count: 30},
	} {
		got, err := router.Parse(text)
		require.NoError(t, err, text)
		require.Equal(t, want, got, text)
	}
	for _, text := range []string{"/runs 0", "/runs 31", "/runs many", "/runs #docs 2 3"} {
		_, err := router.Parse(text)
		var pe *router.ParseError
		require.ErrorAs(t, err, &pe, text)
		require.Equal(t, "runs", pe.Form)
	}
}
