package mcp_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"loopx/api"
	"loopx/api/apitest"
	"loopx/api/client"
	"loopx/mcp"
	"loopx/quota"
	"loopx/store"
	"loopx/store/storetest"
	"loopx/templates"
)

const adminToken = "admin-token-for-mcp-tests-0123456789"

var setupMeta = store.Meta{Actor: "admin", Surface: "system"}

type testBundle struct {
	t       *testing.T
	api     http.Handler
	url     string
	pool    *pgxpool.Pool
	st      *store.Store
	token   string // agent "codex" on goal "demo"
	todoID  int64
	other   string // agent token of goal "other"
	ownerID string
	tokens  map[string]string // "goal/agent" -> token, of the goals contractGoal made
}

// setup starts the real API on a fresh database with goal demo (owner ou_owner), agent codex
// and one todo, and goal other with its own agent.
func setup(t *testing.T) *testBundle {
	t.Helper()
	ctx := t.Context()
	pool := storetest.NewPool(t)
	st := store.New(pool, store.Options{})
	kit := apitest.New(t, st, apitest.Options{AdminToken: adminToken, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	srv := httptest.NewServer(kit.API)
	t.Cleanup(srv.Close)
	b := &testBundle{t: t, api: kit.API, url: srv.URL, pool: pool, st: st, ownerID: "ou_owner", tokens: map[string]string{}}
	for _, g := range []string{"demo", "other"} {
		_, err := st.CreateGoal(ctx, store.CreateGoalParams{ID: g, Owners: []string{b.ownerID}, Meta: setupMeta})
		require.NoError(t, err)
	}
	reg, err := st.RegisterAgent(ctx, store.RegisterAgentParams{GoalID: "demo", AgentID: "codex", Meta: setupMeta})
	require.NoError(t, err)
	b.token = reg.Token
	reg, err = st.RegisterAgent(ctx, store.RegisterAgentParams{GoalID: "other", AgentID: "codex", Meta: setupMeta})
	require.NoError(t, err)
	b.other = reg.Token
	todo, err := st.AddTodo(ctx, store.AddTodoParams{GoalID: "demo", Text: "write the parser", Meta: setupMeta})
	require.NoError(t, err)
	b.todoID = todo.ID
	return b
}

func (b *testBundle) client(token string) *client.Client {
	c, err := client.New(client.Options{BaseURL: b.url, Token: token})
	require.NoError(b.t, err)
	return c
}

// connect serves opts to an in-memory client session.
func connect(t *testing.T, opts mcp.Options) *sdk.ClientSession {
	t.Helper()
	srv, err := mcp.New(opts)
	require.NoError(t, err)
	st, ct := sdk.NewInMemoryTransports()
	ss, err := srv.Connect(t.Context(), st, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "v0"}, nil).Connect(t.Context(), ct, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func (b *testBundle) session(t *testing.T, api mcp.API) *sdk.ClientSession {
	return connect(t, mcp.Options{API: api, GoalID: "demo", AgentID: "codex"})
}

// call calls a tool and returns the result, failing on a protocol error.
func call(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any) *sdk.CallToolResult {
	t.Helper()
	if args == nil {
		args = map[string]any{}
	}
	res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: name, Arguments: args})
	require.NoError(t, err, "%s", name)
	return res
}

// ok calls a tool that must succeed and decodes its structured result.
func ok[T any](t *testing.T, cs *sdk.ClientSession, name string, args map[string]any) T {
	t.Helper()
	res := call(t, cs, name, args)
	require.False(t, res.IsError, "%s: %s", name, text(res))
	var out T
	b, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &out), "%s", b)
	return out
}

func text(res *sdk.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func (b *testBundle) count(sql string, args ...any) int {
	var n int
	require.NoError(b.t, b.pool.QueryRow(b.t.Context(), sql, args...).Scan(&n))
	return n
}

func TestToolsAreListedWithSchemas(t *testing.T) {
	t.Parallel()
	cs := connect(t, mcp.Options{})
	var names []string
	for tool, err := range cs.Tools(t.Context(), nil) {
		require.NoError(t, err)
		names = append(names, tool.Name)
		require.NotEmpty(t, tool.Description, tool.Name)
		require.NotNil(t, tool.InputSchema, tool.Name)
		require.NotNil(t, tool.OutputSchema, tool.Name)
	}
	require.ElementsMatch(t, []string{"should_run", "todo_list", "todo_add", "todo_claim", "todo_update", "todo_finish",
		"evidence_add", "gate_ask", "gate_list", "inbox_drain", "inbox_ack", "inbox_reply", "refresh_state",
		"spend_slot", "goal_status", "progress", "file_get", "todo_handoff", "acknowledge"}, names)
	// Unconnected, the server asks for nothing: it says LoopX is not set up here.
	instr := cs.InitializeResult().Instructions
	require.Contains(t, instr, "LoopX is not set up in this folder")
	require.NotContains(t, instr, "should_run")

	// Without a connection every tool says what to do.
	res := call(t, cs, "should_run", nil)
	require.True(t, res.IsError)
	require.Contains(t, text(res), "loopx connect")
}

// TestGovernedTurn drives one turn through the tools against the real API: should_run opens
// the turn, claim, evidence, a gate the owner answers, should_run mid-turn sees the answer,
// refresh_state, spend_slot; retried calls have one effect.
func TestGovernedTurn(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	cs := b.session(t, b.client(b.token))

	d := ok[mcp.ShouldRunOut](t, cs, "should_run", nil)
	require.True(t, d.ShouldRun, d.NextStep)
	require.NotNil(t, d.YourTurn)
	require.NotNil(t, d.SelectedTodo)
	require.Equal(t, b.todoID, d.SelectedTodo.ID)
	require.Contains(t, d.NextStep, "todo 1")
	turn := d.YourTurn.TurnInstanceID

	ok[mcp.TodoOut](t, cs, "todo_claim", map[string]any{"todo_id": b.todoID})
	ev := ok[mcp.EvidenceOut](t, cs, "evidence_add", map[string]any{"todo_id": b.todoID, "summary": "parser passes 40 tests", "kind": "command", "ref": "go test ./parser"})
	again := ok[mcp.EvidenceOut](t, cs, "evidence_add", map[string]any{"todo_id": b.todoID, "summary": "parser passes 40 tests", "kind": "command", "ref": "go test ./parser"})
	require.Equal(t, ev.Evidence.ID, again.Evidence.ID, "a retried call replays")
	require.Equal(t, 1, b.count(`SELECT count(*) FROM evidence WHERE goal_id = 'demo'`))

	g := ok[mcp.GateOut](t, cs, "gate_ask", map[string]any{"todo_id": b.todoID, "question": "Ship the parser?"})
	require.Contains(t, g.NextStep, "Do not do what it asks")
	gAgain := ok[mcp.GateOut](t, cs, "gate_ask", map[string]any{"todo_id": b.todoID, "question": "Ship the parser?"})
	require.Equal(t, g.Gate.ID, gAgain.Gate.ID)
	require.Equal(t, 1, b.count(`SELECT count(*) FROM gate WHERE goal_id = 'demo'`))

	mid := ok[mcp.ShouldRunOut](t, cs, "should_run", nil)
	require.Equal(t, quota.StateBusy, mid.State)
	require.Equal(t, turn, mid.YourTurn.TurnInstanceID)
	require.Contains(t, mid.NextStep, "carry on")
	require.Contains(t, mid.Gates.Open, g.Gate.ID)

	_, err := b.st.AnswerGate(ctx, store.AnswerGateParams{GoalID: "demo", GateID: g.Gate.ID, Answer: "approve",
		AnsweredBy: b.ownerID, Comment: "go ahead", Meta: store.Meta{Actor: b.ownerID, Surface: "chat"}})
	require.NoError(t, err)
	seen := ok[mcp.ShouldRunOut](t, cs, "should_run", nil)
	require.Equal(t, turn, seen.YourTurn.TurnInstanceID, "still the same turn")
	require.NotContains(t, seen.Gates.Open, g.Gate.ID)
	require.Equal(t, store.GateApproved, seen.RecentGates[0].Status)
	require.Contains(t, seen.NextStep, "approved by ou_owner")
	require.Contains(t, seen.NextStep, "go ahead")

	ok[mcp.RefreshStateOut](t, cs, "refresh_state", map[string]any{"next_action": "add error messages"})
	spent := ok[mcp.SpendSlotOut](t, cs, "spend_slot", nil)
	require.Equal(t, 1, spent.Receipt.SpentSlots)
	require.Equal(t, turn, spent.Receipt.Turn.InstanceID)
	spentAgain := ok[mcp.SpendSlotOut](t, cs, "spend_slot", nil)
	require.Equal(t, spent.Receipt.Entry.ID, spentAgain.Receipt.Entry.ID, "a retried spend replays the receipt")
	require.Equal(t, 1, b.count(`SELECT count(*) FROM quota_ledger WHERE kind = 'slot_spent'`))

	next := ok[mcp.ShouldRunOut](t, cs, "should_run", nil)
	require.True(t, next.ShouldRun, next.NextStep)
	require.NotEqual(t, turn, next.YourTurn.TurnInstanceID, "a new turn")
	require.Equal(t, "add error messages", next.NextAction)

	st := ok[api.Status](t, cs, "goal_status", nil)
	require.Equal(t, "demo", st.Goal.ID)
	require.NotNil(t, st.LiveTurn)
	require.Equal(t, 1, st.Decision.Quota.SpentSlots)
}

// lossy drops the answer of the first should-run after the server handled it: the host
// sees a failure and retries.
type lossy struct {
	mcp.API
	dropped atomic.Bool
}

func (l *lossy) Do(ctx context.Context, r client.Request) (json.RawMessage, error) {
	raw, err := l.API.Do(ctx, r)
	if err == nil && strings.HasSuffix(r.Path, "/should-run") && l.dropped.CompareAndSwap(false, true) {
		return nil, &net503{}
	}
	return raw, err
}

type net503 struct{}

func (*net503) Error() string        { return "connection reset" }
func (*net503) Is(target error) bool { return target == client.ErrUnreachable }

func TestShouldRunRetryAfterLostAnswerIsTheSameTurn(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cs := b.session(t, &lossy{API: b.client(b.token)})
	res := call(t, cs, "should_run", nil)
	require.True(t, res.IsError)
	require.Contains(t, text(res), "did not answer")
	require.Contains(t, text(res), "safe")
	d := ok[mcp.ShouldRunOut](t, cs, "should_run", nil)
	require.True(t, d.ShouldRun, "the retry replays the turn the lost call opened: %s", d.NextStep)
	require.NotNil(t, d.YourTurn)
	require.Equal(t, 1, b.count(`SELECT count(*) FROM turn WHERE goal_id = 'demo'`))
}

func TestInboxDrainAfterAckTakesNewMessages(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	cs := b.session(t, b.client(b.token))
	add := func(msg string) {
		_, _, err := store.InsertInboxItem(ctx, b.pool, store.InboxInsert{GoalID: "demo", AgentID: "codex", Text: msg,
			Sender: b.ownerID, SourceChat: "oc_x", SourceMessage: "om_" + msg}, 100)
		require.NoError(t, err)
	}
	add("one")
	first := ok[api.InboxItems](t, cs, "inbox_drain", nil)
	require.Len(t, first.Items, 1)
	retry := ok[api.InboxItems](t, cs, "inbox_drain", nil)
	require.Equal(t, first.Items[0].ID, retry.Items[0].ID, "a retried drain replays its items")
	ok[api.InboxItems](t, cs, "inbox_ack", map[string]any{"item_ids": []int64{first.Items[0].ID}})
	add("two")
	second := ok[api.InboxItems](t, cs, "inbox_drain", nil)
	require.Len(t, second.Items, 1)
	require.Equal(t, "two", second.Items[0].Text, "a drain after an ack takes new messages")
}

func TestErrorsSayWhatToDo(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// A token of another goal.
	cs := b.session(t, b.client(b.other))
	res := call(t, cs, "should_run", nil)
	require.True(t, res.IsError)
	msg := text(res)
	require.Contains(t, msg, `belongs to goal "other"`)
	require.Contains(t, msg, "loopx connect")
	require.Contains(t, msg, "Do not retry")

	cs = b.session(t, b.client(b.token))
	res = call(t, cs, "todo_claim", map[string]any{"todo_id": 999})
	require.True(t, res.IsError)
	require.Contains(t, text(res), "todo_list")
	res = call(t, cs, "spend_slot", nil)
	require.True(t, res.IsError)
	require.Contains(t, text(res), "without spending")
	res = call(t, cs, "todo_add", map[string]any{})
	require.True(t, res.IsError, "a missing required argument is a tool error")
	require.Contains(t, text(res), "text")
	// An unknown token.
	cs = b.session(t, b.client("lxa_not-a-token-at-all"))
	res = call(t, cs, "goal_status", nil)
	require.True(t, res.IsError)
	require.Contains(t, text(res), "does not know the token")
}

// The advice a model reads follows the API error's code and reason, met through the real API:
// one case per reason, and refusals of other cases that must not get a reason's advice.
func TestErrorAdviceFollowsTheReason(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	opts := mcp.Options{API: b.client(b.token), GoalID: "demo", AgentID: "codex"}
	cs := b.session(t, opts.API)
	const gateClosed = "no longer open"

	// token_scope: the token of another goal.
	res := call(t, b.session(t, b.client(b.other)), "should_run", nil)
	require.True(t, res.IsError)
	require.Contains(t, text(res), "(forbidden)")
	require.Contains(t, text(res), "the token in use belongs to another goal or agent")

	// claimed: another agent holds the todo, for a claim and for an update.
	_, err := b.st.RegisterAgent(ctx, store.RegisterAgentParams{GoalID: "demo", AgentID: "claude", Meta: setupMeta})
	require.NoError(t, err)
	_, err = b.st.ClaimTodo(ctx, store.ClaimTodoParams{GoalID: "demo", TodoID: b.todoID, AgentID: "claude", Meta: setupMeta})
	require.NoError(t, err)
	for tool, args := range map[string]map[string]any{
		"todo_claim":  {"todo_id": b.todoID},
		"todo_update": {"todo_id": b.todoID, "text": "mine now"},
	} {
		res = call(t, cs, tool, args)
		require.True(t, res.IsError, tool)
		require.Contains(t, text(res), "(conflict)", tool)
		require.Contains(t, text(res), "another agent holds this todo", tool)
	}

	// spend_not_owed: a spend for a turn should_run never began.
	res = call(t, cs, "spend_slot", map[string]any{"turn_instance_id": "never-began"})
	require.True(t, res.IsError)
	require.Contains(t, text(res), "(refused)")
	require.Contains(t, text(res), "do not spend for this turn")

	// gate_closed: no tool answers or cancels a gate, so the agent's own client cancels one an
	// owner already answered, and the advice is what a tool would say.
	g := ok[mcp.GateOut](t, cs, "gate_ask", map[string]any{"question": "Ship the parser?"})
	cancel := func(c *client.Client, key string) error {
		_, err := c.Do(ctx, client.Request{Method: http.MethodPost, Path: client.GoalPath("demo", "gates", strconv.FormatInt(g.Gate.ID, 10), "cancel"),
			Body: api.CancelBody{}, IdempotencyKey: key})
		return err
	}
	// First, while it is open, an agent that did not ask it may not cancel it: forbidden,
	// and not called closed.
	other, err := b.st.RegisterAgent(ctx, store.RegisterAgentParams{GoalID: "demo", AgentID: "cursor", Meta: setupMeta})
	require.NoError(t, err)
	err = cancel(b.client(other.Token), "k-open")
	var ae *api.Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, api.CodeForbidden, ae.Code)
	advice := mcp.Explain(mcp.Options{API: b.client(other.Token), GoalID: "demo", AgentID: "cursor"}, "gate_cancel", err)
	require.NotContains(t, advice, gateClosed)
	require.Contains(t, advice, "may not do this")
	_, err = b.st.AnswerGate(ctx, store.AnswerGateParams{GoalID: "demo", GateID: g.Gate.ID, Answer: "approve",
		AnsweredBy: b.ownerID, Meta: store.Meta{Actor: b.ownerID, Surface: "chat"}})
	require.NoError(t, err)
	err = cancel(opts.API.(*client.Client), "k-closed")
	require.ErrorAs(t, err, &ae)
	require.Equal(t, store.ReasonGateClosed, ae.Reason)
	advice = mcp.Explain(opts, "gate_cancel", err)
	require.Contains(t, advice, gateClosed)
	require.Contains(t, advice, "gate_list")

	// A gate asked for a finished todo is refused for another reason; its message names a
	// gate, and the advice does not call any gate closed.
	done, err := b.st.AddTodo(ctx, store.AddTodoParams{GoalID: "demo", Text: "already shipped", Meta: setupMeta})
	require.NoError(t, err)
	fin := store.TodoDone
	_, err = b.st.UpdateTodo(ctx, store.UpdateTodoParams{GoalID: "demo", TodoID: done.ID, Version: done.Version, Status: &fin, Meta: setupMeta})
	require.NoError(t, err)
	res = call(t, cs, "gate_ask", map[string]any{"question": "Ship it again?", "todo_id": done.ID})
	require.True(t, res.IsError)
	require.Contains(t, text(res), "(refused)")
	require.Contains(t, text(res), "a gate cannot block it")
	require.NotContains(t, text(res), gateClosed)
	require.Contains(t, text(res), "the current state does not allow this")

	// The words of a message decide nothing: a forbidden answer that says "belongs to goal"
	// without the reason gets the plain advice.
	advice = mcp.Explain(opts, "should_run", &api.Error{Status: http.StatusForbidden, Code: api.CodeForbidden,
		Message: `this agent token belongs to goal "x"`})
	require.NotContains(t, advice, "belongs to another goal or agent")
	require.Contains(t, advice, "may not do this")
}

func TestResourcesAndPrompt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cs := b.session(t, b.client(b.token))
	r, err := cs.ReadResource(t.Context(), &sdk.ReadResourceParams{URI: mcp.GoalURI})
	require.NoError(t, err)
	var c mcp.GoalContract
	require.NoError(t, json.Unmarshal([]byte(r.Contents[0].Text), &c))
	require.Equal(t, "demo", c.Goal.ID)
	require.NotEmpty(t, c.TurnRules)
	r, err = cs.ReadResource(t.Context(), &sdk.ReadResourceParams{URI: mcp.StateURI})
	require.NoError(t, err)
	require.Contains(t, r.Contents[0].Text, `"needs_you"`)

	p, err := cs.GetPrompt(t.Context(), &sdk.GetPromptParams{Name: "turn", Arguments: map[string]string{"task": "fix the flaky test"}})
	require.NoError(t, err)
	prompt := p.Messages[0].Content.(*sdk.TextContent).Text
	require.Contains(t, prompt, `agent "codex" on the LoopX goal "demo"`)
	require.Contains(t, prompt, templates.LoopSteps(templates.LoopCall{Command: "/loopx", Task: `"fix the flaky test"`}), "the loop contract's steps")
}

// bearer adds a bearer token to every request.
type bearer string

func (tok bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(tok))
	return http.DefaultTransport.RoundTrip(r)
}

func TestHandlerAuthenticatesAgents(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h, err := mcp.Handler(mcp.HandlerOptions{API: b.api})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Cleanup(h.Close)
	dial := func(token string) (*sdk.ClientSession, error) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		hc := &http.Client{}
		if token != "" {
			hc.Transport = bearer(token)
		}
		return sdk.NewClient(&sdk.Implementation{Name: "test", Version: "v0"}, nil).
			Connect(ctx, &sdk.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: hc}, nil)
	}
	for _, tok := range []string{"", "lxa_unknown-token-0000", adminToken} {
		_, err := dial(tok)
		require.Error(t, err, "token %q", tok)
	}
	resp, err := (&http.Client{Transport: bearer(adminToken)}).Post(srv.URL, "application/json", strings.NewReader(`{}`))
	require.NoError(t, err)
	body := make([]byte, 512)
	n, _ := resp.Body.Read(body)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Contains(t, string(body[:n]), "not the admin token")

	cs, err := dial(b.token)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	d := ok[mcp.ShouldRunOut](t, cs, "should_run", nil)
	require.True(t, d.ShouldRun)
	require.Equal(t, "demo", d.GoalID)
	require.Equal(t, "codex", d.AgentID)
}

// TestHTTPSpeaksEveryVersionStdioDoes: /mcp answers initialize at every protocol version the
// SDK negotiates over stdio, 2026-07-28 (no sessions) included; an SSE stream starts with a
// priming event carrying an id and a retry delay, so a client can resume it; a 401 names the
// Bearer scheme.
func TestHTTPSpeaksEveryVersionStdioDoes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h, err := mcp.Handler(mcp.HandlerOptions{API: b.api})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Cleanup(h.Close)

	post := func(token, version, body string) (*http.Response, string) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if version != "" {
			req.Header.Set("Mcp-Protocol-Version", version)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		all, err := io.ReadAll(resp.Body) // a POST's stream ends with its answer
		require.NoError(t, err)
		return resp, string(all)
	}
	resp, _ := post("", "", `{}`)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.True(t, strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer"), resp.Header)

	for _, v := range sdk.SupportedProtocolVersions() {
		if v >= "2026-07-28" {
			cs := sessionOver(t, srv.URL, b.token)
			require.Equal(t, v, cs.InitializeResult().ProtocolVersion, "the SDK's client asks for the newest first")
			d := ok[mcp.ShouldRunOut](t, cs, "should_run", map[string]any{"begin_turn": false})
			require.Equal(t, "demo", d.GoalID)
			continue
		}
		init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + v + `","capabilities":{},"clientInfo":{"name":"probe","version":"0"}}}`
		resp, body := post(b.token, "", init)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", v, body)
		require.Contains(t, body, `"protocolVersion":"`+v+`"`)
		if v >= "2025-11-25" {
			require.True(t, strings.HasPrefix(body, "event: prime\nid: "), "%s: %q", v, body)
			require.Regexp(t, `^event: prime\nid: \S+\nretry: \d+\n`, body)
		}
	}
}

func sessionOver(t *testing.T, url, token string) *sdk.ClientSession {
	t.Helper()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "v0"}, nil).
		Connect(t.Context(), &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer(token)}}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// TestAdminTokenIsRefused: the tools work as one agent; given the admin token (LOOPX_TOKEN
// holding it), every call says so and changes nothing, as /mcp refuses it.
func TestAdminTokenIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cs := b.session(t, b.client(adminToken))
	for tool, args := range map[string]map[string]any{"should_run": {}, "evidence_add": {"summary": "x"}} {
		res := call(t, cs, tool, args)
		require.True(t, res.IsError, tool)
		require.Contains(t, text(res), "admin token", tool)
	}
	require.Zero(t, b.count(`SELECT count(*) FROM turn`))
	require.Zero(t, b.count(`SELECT count(*) FROM evidence`))
}

// TestResourceAndPromptErrorsCarryACode: a resource or prompt that fails answers a JSON-RPC
// error with code -32000, never 0.
func TestResourceAndPromptErrorsCarryACode(t *testing.T) {
	t.Parallel()
	cs := connect(t, mcp.Options{})
	_, err := cs.ReadResource(t.Context(), &sdk.ReadResourceParams{URI: mcp.GoalURI})
	var je *jsonrpc.Error
	require.ErrorAs(t, err, &je)
	require.Equal(t, int64(-32000), je.Code)
	require.Contains(t, je.Message, "loopx connect")
	_, err = cs.GetPrompt(t.Context(), &sdk.GetPromptParams{Name: "turn"})
	require.ErrorAs(t, err, &je)
	require.Equal(t, int64(-32000), je.Code)
}
