package mcp_test

import (
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"loopx/api"
	"loopx/api/client"
	"loopx/mcp"
	"loopx/quota"
	"loopx/store"
)

// contractGoal creates goal id with the given contract and agents, and returns a session per
// agent.
func (b *testBundle) contractGoal(t *testing.T, p store.CreateGoalParams, agents ...string) map[string]*sdk.ClientSession {
	t.Helper()
	p.Owners, p.Meta = []string{b.ownerID}, setupMeta
	_, err := b.st.CreateGoal(t.Context(), p)
	require.NoError(t, err)
	out := map[string]*sdk.ClientSession{}
	for _, a := range agents {
		reg, err := b.st.RegisterAgent(t.Context(), store.RegisterAgentParams{GoalID: p.ID, AgentID: a, Meta: setupMeta})
		require.NoError(t, err)
		out[a] = connect(t, mcp.Options{API: b.client(reg.Token), GoalID: p.ID, AgentID: a})
		b.tokens[p.ID+"/"+a] = reg.Token
	}
	return out
}

// admin calls the API as the admin.
func (b *testBundle) admin(t *testing.T, method, path string, body, out any) {
	t.Helper()
	raw, err := b.client(adminToken).Do(t.Context(), client.Request{Method: method, Path: path, Body: body,
		IdempotencyKey: "test-" + rand.Text()})
	require.NoError(t, err, "%s %s", method, path)
	if out != nil {
		require.NoError(t, json.Unmarshal(raw, out))
	}
}

// peekAPI is the agent's should-run answer over the API (read-only), with its token.
func (b *testBundle) peekAPI(t *testing.T, goal, agent string) quota.Decision {
	t.Helper()
	var d quota.Decision
	require.NoError(t, b.client(b.tokens[goal+"/"+agent]).DoJSON(t.Context(), client.Request{Method: http.MethodGet,
		Path: client.GoalPath(goal, "quota"), Query: url.Values{"agent_id": {agent}}}, &d))
	return d
}

// TestHandoffIsCarriedUntilAcknowledged: agent A hands its todo to agent B with a note over
// MCP; B's next should_run, over MCP and over the API, carries the continuation until B
// acknowledges it. A transfer of a todo with evidence needs a note.
func TestHandoffIsCarriedUntilAcknowledged(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.contractGoal(t, store.CreateGoalParams{ID: "relay"}, "alpha", "beta")
	a, bb := s["alpha"], s["beta"]

	todo := ok[mcp.TodoOut](t, a, "todo_add", map[string]any{"text": "write the tokenizer", "claim": true})
	d := ok[mcp.ShouldRunOut](t, a, "should_run", map[string]any{"todo_id": todo.Todo.ID})
	require.True(t, d.ShouldRun, d.NextStep)
	require.NotNil(t, d.Contract, "every answer carries the contract")
	ok[mcp.EvidenceOut](t, a, "evidence_add", map[string]any{"todo_id": todo.Todo.ID, "summary": "tokenizer and its tests"})

	// B may not take the todo (it has evidence) without a note.
	res := call(t, bb, "todo_claim", map[string]any{"todo_id": todo.Todo.ID, "transfer": true})
	require.True(t, res.IsError)
	require.Contains(t, text(res), "changes hands only with a handoff note", text(res))

	h := ok[mcp.HandoffOut](t, a, "todo_handoff", map[string]any{"todo_id": todo.Todo.ID, "to_agent": "beta", "kind": "review",
		"done": "the tokenizer and its tests", "next": "review the grammar, then merge"})
	require.Equal(t, "beta", h.Handoff.To)
	require.Contains(t, h.NextStep, "now agent beta's")
	ok[mcp.RefreshStateOut](t, a, "refresh_state", map[string]any{"next_action": "nothing: handed to beta"})
	ok[mcp.SpendSlotOut](t, a, "spend_slot", nil)
	var holder string
	require.NoError(t, b.pool.QueryRow(t.Context(), `SELECT claimed_by FROM todo WHERE id = $1`, todo.Todo.ID).Scan(&holder))
	require.Equal(t, "beta", holder, "the claim moved to the receiver")

	// Over the API: read-only, twice, still there.
	for range 2 {
		api := b.peekAPI(t, "relay", "beta")
		require.NotNil(t, api.Continuation)
		require.Equal(t, h.Handoff.ID, api.Continuation.ID)
		require.Equal(t, "review the grammar, then merge", api.Continuation.Next)
	}
	// Over MCP: the turn opens on the handed todo, and the next step says what to do with it.
	got := ok[mcp.ShouldRunOut](t, bb, "should_run", nil)
	require.True(t, got.ShouldRun, got.NextStep)
	require.Equal(t, todo.Todo.ID, got.SelectedTodo.ID, "the continuation's todo comes first")
	require.Equal(t, h.Handoff.ID, got.Continuation.ID)
	require.Equal(t, 1, got.ContinuationsPending)
	require.Contains(t, got.NextStep, "handoff "+itoa(h.Handoff.ID)+" (review) from agent alpha")
	require.Contains(t, got.NextStep, `next: "review the grammar, then merge"`)
	require.Contains(t, got.NextStep, "acknowledge with handoff_id "+itoa(h.Handoff.ID))
	mid := ok[mcp.ShouldRunOut](t, bb, "should_run", nil)
	require.Equal(t, h.Handoff.ID, mid.Continuation.ID, "carried mid-turn too, until acknowledged")

	// Acknowledging needs one id; then the continuation is gone, over both.
	require.True(t, call(t, bb, "acknowledge", nil).IsError)
	ack := ok[store.Ack](t, bb, "acknowledge", map[string]any{"handoff_id": h.Handoff.ID})
	require.NotNil(t, ack.Handoff.AckedAt)
	again := ok[store.Ack](t, bb, "acknowledge", map[string]any{"handoff_id": h.Handoff.ID})
	require.Equal(t, ack.Handoff.AckedAt, again.Handoff.AckedAt, "a repeated acknowledgement answers the first")
	require.Nil(t, b.peekAPI(t, "relay", "beta").Continuation)
	mid = ok[mcp.ShouldRunOut](t, bb, "should_run", nil)
	require.Nil(t, mid.Continuation)
	require.NotContains(t, mid.NextStep, "acknowledge")

	// B ends its turn with a handoff back to A: refresh_state records it, A's next answer
	// carries it.
	end := ok[mcp.RefreshStateOut](t, bb, "refresh_state", map[string]any{"next_action": "merge",
		"handoff": map[string]any{"to_agent": "alpha", "kind": "verify", "done": "reviewed: two nits fixed", "next": "merge it"}})
	require.NotNil(t, end.Handoff)
	require.Equal(t, "alpha", end.Handoff.To)
	require.Equal(t, todo.Todo.ID, end.Handoff.TodoID, "about the turn's todo")
	require.NotZero(t, end.Entry.ID)
	ok[mcp.SpendSlotOut](t, bb, "spend_slot", nil)
	back := ok[mcp.ShouldRunOut](t, a, "should_run", map[string]any{"begin_turn": false})
	require.Equal(t, end.Handoff.ID, back.Continuation.ID)
	require.Equal(t, store.HandoffVerify, back.Continuation.Kind)
}

// TestClaimNeedsTheCapability: a todo requiring a capability the agent lacks is refused with
// advice by reason, should_run says why the agent is idle, and a granted capability lets
// the claim through.
func TestClaimNeedsTheCapability(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.contractGoal(t, store.CreateGoalParams{ID: "caps", Capabilities: []string{"publish", "write-code"}}, "writer")
	w := s["writer"]
	todo := ok[mcp.TodoOut](t, w, "todo_add", map[string]any{"text": "publish the release notes", "requires": []string{"publish"}})
	require.Equal(t, []string{"publish"}, todo.Todo.Requires)

	res := call(t, w, "todo_claim", map[string]any{"todo_id": todo.Todo.ID})
	require.True(t, res.IsError)
	require.Contains(t, text(res), "(forbidden)")
	require.Contains(t, text(res), "lacks a capability the todo requires")
	require.Contains(t, text(res), "an owner can grant the capability")
	require.Equal(t, 1, b.count(`SELECT count(*) FROM audit WHERE goal_id = 'caps' AND outcome <> 'ok'`), "the refusal is audited")

	d := ok[mcp.ShouldRunOut](t, w, "should_run", nil)
	require.False(t, d.ShouldRun)
	require.Equal(t, "missing_capability", d.Reason)
	require.Contains(t, d.NextStep, "need a capability this agent lacks (it holds none; the goal grants publish, write-code)")
	require.Contains(t, d.NextStep, "without spending")

	b.admin(t, http.MethodPost, client.GoalPath("caps", "agents", "writer", "capabilities"), api.CapabilitiesBody{Grant: []string{"publish"}}, nil)
	claimed := ok[mcp.TodoOut](t, w, "todo_claim", map[string]any{"todo_id": todo.Todo.ID})
	require.Equal(t, "writer", claimed.Todo.ClaimedBy)
	d = ok[mcp.ShouldRunOut](t, w, "should_run", map[string]any{"begin_turn": false})
	require.Equal(t, []string{"publish"}, d.Contract.Capabilities.Agent)
}

// TestEvidenceNamingCriteriaFinishesTheTodo: todo_finish is refused while a criterion has no
// evidence (the advice names what to do), and evidence naming each lets it finish.
func TestEvidenceNamingCriteriaFinishesTheTodo(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.contractGoal(t, store.CreateGoalParams{ID: "crit", ScopeEditable: []string{"src/**"}, ScopeProtected: []string{"deploy/**"},
		Criteria: []store.Criterion{{Text: "the release is tagged"}}}, "coder")
	c := s["coder"]
	todo := ok[mcp.TodoOut](t, c, "todo_add", map[string]any{"text": "parse JSON", "claim": true,
		"criteria": []string{"tests pass", "docs: the README shows an example"}})
	require.Equal(t, []string{"c1", "docs"}, store.CriterionIDs(todo.Todo.Criteria))

	p, err := c.GetPrompt(t.Context(), &sdk.GetPromptParams{Name: "turn"})
	require.NoError(t, err)
	prompt := p.Messages[0].Content.(*sdk.TextContent).Text
	for _, want := range []string{"change only: src/**", "never touch: deploy/**", "g1: the release is tagged", "c1: tests pass", "docs: the README shows an example"} {
		require.Contains(t, prompt, want, "the turn prompt says the contract")
	}
	d := ok[mcp.ShouldRunOut](t, c, "should_run", map[string]any{"todo_id": todo.Todo.ID})
	require.True(t, d.ShouldRun, d.NextStep)
	require.Len(t, d.SelectedTodo.Criteria, 2)
	require.Contains(t, d.NextStep, `criteria: c1 ("tests pass"), docs ("the README shows an example")`)
	require.Contains(t, d.NextStep, "Scope: change only paths matching src/**.")
	require.Contains(t, d.NextStep, "Never touch paths matching deploy/** (protected).")
	require.Equal(t, "g1", d.Contract.Criteria[0].ID)

	ok[mcp.EvidenceOut](t, c, "evidence_add", map[string]any{"todo_id": todo.Todo.ID, "summary": "parser written", "criteria": []string{"c1"}})
	res := call(t, c, "todo_finish", map[string]any{"todo_id": todo.Todo.ID})
	require.True(t, res.IsError)
	require.Contains(t, text(res), "(refused)")
	require.Contains(t, text(res), "docs", "the refusal names the missing criterion")
	require.NotContains(t, text(res), "c1 (")
	require.Contains(t, text(res), "call evidence_add with its id in criteria")

	ok[mcp.EvidenceOut](t, c, "evidence_add", map[string]any{"todo_id": todo.Todo.ID, "summary": "README example added", "ref": "README.md", "criteria": []string{"docs"}})
	done := ok[mcp.TodoOut](t, c, "todo_finish", map[string]any{"todo_id": todo.Todo.ID})
	require.Equal(t, store.TodoDone, done.Todo.Status)
	ok[mcp.SpendSlotOut](t, c, "spend_slot", nil)
}

// TestObjectiveChangeAndDone: a replan is announced in should_run until acknowledged; a
// finished goal answers done, and writes on it are refused with advice by reason.
func TestObjectiveChangeAndDone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.contractGoal(t, store.CreateGoalParams{ID: "plan", Objective: "Parse CSV"}, "coder")
	c := s["coder"]
	csv := ok[mcp.TodoOut](t, c, "todo_add", map[string]any{"text": "parse CSV"})
	b.admin(t, http.MethodPost, client.GoalPath("plan", "replan"), api.ReplanBody{Objective: "Parse CSV and JSON", Reason: "the customer sends JSON"}, nil)

	d := ok[mcp.ShouldRunOut](t, c, "should_run", nil)
	require.True(t, d.ShouldRun, d.NextStep)
	require.NotNil(t, d.ObjectiveChanged)
	require.Equal(t, "Parse CSV and JSON", d.ObjectiveChanged.After)
	require.Contains(t, d.NextStep, `it is now "Parse CSV and JSON"`)
	require.Contains(t, d.NextStep, `because "the customer sends JSON"`)
	require.Contains(t, d.NextStep, "acknowledge with decision_id "+itoa(d.ObjectiveChanged.DecisionID))
	require.NotNil(t, b.peekAPI(t, "plan", "coder").ObjectiveChanged, "over the API too")
	ok[store.Ack](t, c, "acknowledge", map[string]any{"decision_id": d.ObjectiveChanged.DecisionID})
	require.Nil(t, b.peekAPI(t, "plan", "coder").ObjectiveChanged)
	ok[mcp.SpendSlotOut](t, c, "spend_slot", nil)

	b.admin(t, http.MethodPost, client.GoalPath("plan", "done"), api.LifecycleBody{Reason: "shipped"}, nil)
	d = ok[mcp.ShouldRunOut](t, c, "should_run", nil)
	require.False(t, d.ShouldRun)
	require.Equal(t, quota.StateDone, d.State)
	require.Contains(t, d.NextStep, "The goal is done")
	require.Contains(t, d.NextStep, "without spending")
	res := call(t, c, "todo_handoff", map[string]any{"todo_id": csv.Todo.ID, "to_agent": "coder", "next": "JSON"})
	require.True(t, res.IsError)
	require.Contains(t, text(res), "the goal is done: it takes this only after an owner reopens it", text(res))
}

// TestGoalResourceCarriesTheContract: loopx://goal has the contract and every setting with
// its source, as GET /v1/goals/{goal} answers them.
func TestGoalResourceCarriesTheContract(t *testing.T) {
	t.Parallel()
	b := setup(t)
	slots := 5
	s := b.contractGoal(t, store.CreateGoalParams{ID: "res", AllowedSlots: &slots, ScopeProtected: []string{"secrets/**"},
		Capabilities: []string{"publish"}, Criteria: []store.Criterion{{ID: "ship", Text: "v1 is on the release page"}}}, "coder")
	r, err := s["coder"].ReadResource(t.Context(), &sdk.ReadResourceParams{URI: mcp.GoalURI})
	require.NoError(t, err)
	var c mcp.GoalContract
	require.NoError(t, json.Unmarshal([]byte(r.Contents[0].Text), &c))
	require.Equal(t, []string{"secrets/**"}, c.Contract.Scope.Protected)
	require.Equal(t, []string{"publish"}, c.Contract.Capabilities.Goal)
	require.Equal(t, []string{}, c.Contract.Capabilities.Agent)
	require.Equal(t, "ship", c.Contract.Criteria[0].ID)
	require.False(t, c.Contract.Criteria[0].Met)
	sources := map[string]string{}
	for _, v := range c.Settings {
		sources[v.Setting] = v.Source
	}
	require.Equal(t, "override", sources["allowed_slots"])
	require.Equal(t, "default", sources["window_hours"])
	var want api.GoalAnswer
	require.NoError(t, b.client(b.tokens["res/coder"]).DoJSON(t.Context(), client.Request{Method: http.MethodGet, Path: client.GoalPath("res")}, &want))
	require.Equal(t, want.Settings, c.Settings, "the API's answer")
	require.Contains(t, c.TurnRules[2], "contract.scope.protected")
}
