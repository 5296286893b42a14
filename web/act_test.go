package web_test

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"loopx/store"
)

var agentMeta = store.Meta{Actor: "agent:docs/codex", Surface: "api"}

// TestGoalsListShowsEveryGoalAndUnknownPagesAre404 lists a goal with nothing pending beside
// one with a gate, filters and sorts them, and answers an unknown address with the styled page.
func TestGoalsListShowsEveryGoalAndUnknownPagesAre404(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.st.CreateGoal(t.Context(), store.CreateGoalParams{ID: "quiet", Title: "Nothing pending", Owners: []string{owner}, Meta: setupMeta})
	require.NoError(t, err)
	br := b.signIn(t, owner)
	status, body, _ := br.get("/web/goals")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, `href="/web/goals/quiet"`)
	require.Contains(t, body, "Nothing pending")
	require.Contains(t, body, "1 open gate")
	require.Contains(t, body, "2 goals")
	require.Less(t, strings.Index(body, `id="g-docs"`), strings.Index(body, `id="g-quiet"`), "what needs you comes first")

	_, body, _ = br.get("/web/goals?needs=1")
	require.NotContains(t, body, `id="g-quiet"`)
	require.Contains(t, body, `id="g-docs"`)
	_, body, _ = br.get("/web/goals?q=NOTHING&sort=name")
	require.Contains(t, body, `id="g-quiet"`)
	require.NotContains(t, body, `id="g-docs"`)
	status, body, _ = br.get("/web/goals?status=sleeping")
	require.Equal(t, http.StatusOK, status, "a bad filter is said on the page")
	require.Contains(t, body, "sleeping")

	_, body, _ = br.get("/web/")
	require.Contains(t, body, `<a href="/web/goals">2 goals you can see</a>`)

	for _, path := range []string{"/web/nope", "/web/goals/docs/nope", "/web/goals/docs/turns/abc", "/web/proposals/zz"} {
		status, body, _ = br.get(path)
		require.Equal(t, http.StatusNotFound, status, path)
		require.Contains(t, body, "There is nothing here you can see.", path)
		require.Contains(t, body, `rel="stylesheet"`, path)
	}
	// Signed out, an unknown page is the same styled 404.
	status, body, _ = b.newBrowser(t).get("/web/nope")
	require.Equal(t, http.StatusNotFound, status)
	require.Contains(t, body, "Nothing here")
}

// TestTurnPageShowsLogEvidenceDecisionAndSpend reads a finished turn's page.
func TestTurnPageShowsLogEvidenceDecisionAndSpend(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	td, err := b.st.AddTodo(ctx, store.AddTodoParams{GoalID: "docs", Text: "Write the intro", Meta: setupMeta})
	require.NoError(t, err)
	tu, err := b.st.OpenTurn(ctx, store.OpenTurnParams{GoalID: "docs", AgentID: "codex", InstanceID: "t1", TodoID: td.ID, Meta: agentMeta})
	require.NoError(t, err)
	_, err = b.st.AddEvidence(ctx, store.AddEvidenceParams{GoalID: "docs", AgentID: "codex", TurnID: tu.ID, Kind: "link",
		Summary: "Draft of the intro", Ref: "https://example.test/intro", Meta: agentMeta})
	require.NoError(t, err)
	_, err = b.st.EndTurn(ctx, store.EndTurnParams{GoalID: "docs", AgentID: "codex", InstanceID: "t1", State: "ok",
		Outcome: "intro drafted", LogTail: "$ make intro\nwrote intro.md\n", Meta: agentMeta})
	require.NoError(t, err)

	br := b.signIn(t, member)
	status, body, _ := br.get("/web/goals/docs")
	require.Equal(t, http.StatusOK, status)
	path := "/web/goals/docs/turns/" + strconv.FormatInt(tu.ID, 10)
	require.Contains(t, body, `href="`+path+`"`, "the goal page links the turn")
	status, body, _ = br.get(path)
	require.Equal(t, http.StatusOK, status)
	for _, want := range []string{"Draft of the intro", "https://example.test/intro", "intro drafted",
		"Write the intro", "finished", "no quota spent", "The decision that started it", "The log is shown to the goal’s owners."} {
		require.Contains(t, body, want)
	}
	require.Contains(t, body, `<a href="https://example.test/intro" rel="noopener noreferrer">`, "a link opens")
	require.NotContains(t, body, "wrote intro.md", "the log tail is the owners'")
	_, body, _ = b.signIn(t, owner).get(path)
	require.Contains(t, body, "wrote intro.md")
	status, _, _ = br.get("/web/goals/docs/turns/999999")
	require.Equal(t, http.StatusNotFound, status)
	status, _, _ = b.signIn(t, "ou_stranger").get(path)
	require.Equal(t, http.StatusNotFound, status, "a stranger reads no turn")

	// LoopX's own outcomes read in words, in the page's language: a turn an owner halted
	// names who did it, a turn the agent settled by spending its quota says its state.
	halted, err := b.st.OpenTurn(ctx, store.OpenTurnParams{GoalID: "docs", AgentID: "codex", InstanceID: "t2", Meta: agentMeta})
	require.NoError(t, err)
	_, err = b.st.EndTurn(ctx, store.EndTurnParams{GoalID: "docs", AgentID: "codex", InstanceID: "t2", State: store.TurnStopped,
		Outcome: store.HaltedBy(owner) + "; " + store.OutcomeKilled, Meta: agentMeta})
	require.NoError(t, err)
	_, body, _ = br.get("/web/goals/docs/turns/" + strconv.FormatInt(halted.ID, 10))
	require.Contains(t, body, "halted by "+owner+" · its processes were ended")
	require.NotContains(t, body, store.OutcomeKilled)
	spent, err := b.st.OpenTurn(ctx, store.OpenTurnParams{GoalID: "docs", AgentID: "codex", InstanceID: "t3", Meta: agentMeta})
	require.NoError(t, err)
	_, err = b.st.EndTurn(ctx, store.EndTurnParams{GoalID: "docs", AgentID: "codex", InstanceID: "t3", State: store.TurnOK,
		Outcome: store.OutcomeSpent, Meta: agentMeta})
	require.NoError(t, err)
	zh := b.signIn(t, member)
	status, _ = zh.post("/web/lang", url.Values{"lang": {"zh"}, "back": {"/web/"}})
	require.Equal(t, http.StatusSeeOther, status)
	_, body, _ = zh.get("/web/goals/docs/turns/" + strconv.FormatInt(spent.ID, 10))
	require.Contains(t, body, "<dd>已完成</dd>", "a settled turn says its state, in Chinese")
	require.NotContains(t, body, store.OutcomeSpent)
	_, body, _ = zh.get("/web/goals/docs/turns/" + strconv.FormatInt(halted.ID, 10))
	require.Contains(t, body, "已由 "+owner+" 停止 · 已结束它的进程")
}

// TestMemberAddsTodoAndMessagesAgentOwnerMovesIt acts from the page with chat's rules:
// members add todos and message agents; only owners move todos on the board.
func TestMemberAddsTodoAndMessagesAgentOwnerMovesIt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	mb := b.signIn(t, member)
	_, body, _ := mb.get("/web/goals/docs")
	require.Contains(t, body, `action="/web/goals/docs/todos"`)
	require.NotContains(t, body, `class="move"`, "members get no board controls")

	status, loc := mb.post("/web/goals/docs/todos", url.Values{"text": {"Check the links"}, "priority": {"1"}})
	require.Equal(t, http.StatusSeeOther, status)
	require.Contains(t, loc, "m=todo_added")
	todos, err := b.st.ListTodos(ctx, store.ListTodosParams{GoalID: "docs"})
	require.NoError(t, err)
	require.Len(t, todos, 1)
	require.Equal(t, "Check the links", todos[0].Text)
	require.Equal(t, 1, todos[0].Priority)
	require.Equal(t, member, todos[0].CreatedBy)

	form := url.Values{"text": {"Please look at the footer"}, "mode": {"inbox"}, "key": {"msg-1"}}
	status, loc = mb.post("/web/goals/docs/agents/codex/messages", form)
	require.Equal(t, http.StatusSeeOther, status)
	require.Contains(t, loc, "m=message_sent")
	status, _ = mb.post("/web/goals/docs/agents/codex/messages", form)
	require.Equal(t, http.StatusSeeOther, status, "a double submit replays")
	items, err := store.ListInbox(ctx, b.st.DB(), "docs", "codex")
	require.NoError(t, err)
	require.Len(t, items, 1, "one item for one submit, however often it is sent")
	require.Equal(t, "Please look at the footer", items[0].Text)
	require.Equal(t, member, items[0].Sender)

	// Steer without a live turn is refused, never downgraded.
	status, loc = mb.post("/web/goals/docs/agents/codex/messages", url.Values{"text": {"now!"}, "mode": {"steer"}})
	require.Equal(t, http.StatusSeeOther, status)
	require.Contains(t, loc, "m=steer_no_turn")
	items, err = store.ListInbox(ctx, b.st.DB(), "docs", "codex")
	require.NoError(t, err)
	require.Len(t, items, 1)

	// A member may not move the todo; the refusal is audited.
	td := todos[0]
	move := url.Values{"to": {"done"}, "version": {strconv.FormatInt(td.Version, 10)}}
	status, loc = mb.post("/web/goals/docs/todos/"+strconv.FormatInt(td.ID, 10), move)
	require.Equal(t, http.StatusSeeOther, status)
	require.Contains(t, loc, "m=not_allowed")
	got, err := b.st.GetTodo(ctx, "docs", td.ID)
	require.NoError(t, err)
	require.Equal(t, store.TodoOpen, got.Status)

	ob := b.signIn(t, owner)
	_, body, _ = ob.get("/web/goals/docs")
	require.Contains(t, body, `class="move"`)
	status, loc = ob.post("/web/goals/docs/todos/"+strconv.FormatInt(td.ID, 10), move)
	require.Equal(t, http.StatusSeeOther, status)
	require.Contains(t, loc, "m=todo_moved")
	require.Contains(t, loc, "#todo-"+strconv.FormatInt(td.ID, 10), "the page returns to the todo")
	got, err = b.st.GetTodo(ctx, "docs", td.ID)
	require.NoError(t, err)
	require.Equal(t, store.TodoDone, got.Status)
	// The same form again (the version it read is old) changes nothing and says so.
	move.Set("key", "again")
	status, loc = ob.post("/web/goals/docs/todos/"+strconv.FormatInt(td.ID, 10), url.Values{"to": {"p0"}, "version": move["version"]})
	require.Equal(t, http.StatusSeeOther, status)
	require.Contains(t, loc, "m=todo_changed")
	status, loc = ob.post("/web/goals/docs/todos/"+strconv.FormatInt(td.ID, 10), url.Values{"to": {"p0"}, "version": {strconv.FormatInt(got.Version, 10)}})
	require.Equal(t, http.StatusSeeOther, status)
	require.Contains(t, loc, "m=todo_moved")
	got, err = b.st.GetTodo(ctx, "docs", td.ID)
	require.NoError(t, err)
	require.Equal(t, 0, got.Priority)

	audit, err := b.st.ListAudit(ctx, store.ListAuditParams{GoalID: "docs"})
	require.NoError(t, err)
	var refused, added bool
	for _, a := range audit {
		refused = refused || (a.Action == "web.move" && !a.Allowed && a.Actor == member)
		added = added || (a.Action == "todo.add" && a.Surface == "web" && a.Actor == member)
	}
	require.True(t, refused, "the member's move is audited as refused")
	require.True(t, added, "the todo's audit row names the web")
}
