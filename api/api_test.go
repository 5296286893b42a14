package api_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"loopx/api"
	"loopx/api/apitest"
	"loopx/store"
	"loopx/store/storetest"
)

const adminToken = "admin-token-for-tests-0123456789"

type testBundle struct {
	srv  *httptest.Server
	pool *pgxpool.Pool
	st   *store.Store
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	pool := storetest.NewPool(t)
	st := store.New(pool, store.Options{})
	kit := apitest.New(t, st, apitest.Options{AdminToken: adminToken, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	srv := httptest.NewServer(kit.API)
	t.Cleanup(srv.Close)
	return &testBundle{srv: srv, pool: pool, st: st}
}

type response struct {
	status int
	body   []byte
	header http.Header
}

func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(r.body, &m), "body: %s", r.body)
	return m
}

func (r response) err(t *testing.T) api.Error {
	t.Helper()
	var eb api.ErrorBody
	require.NoError(t, json.Unmarshal(r.body, &eb), "body: %s", r.body)
	require.NotNil(t, eb.Error, "body: %s", r.body)
	return *eb.Error
}

// do sends a request; key "" sends no Idempotency-Key, token "" no Authorization.
func (b *testBundle) do(t *testing.T, method, path, token, key string, body any) response {
	t.Helper()
	var rd io.Reader
	if body != nil {
		switch v := body.(type) {
		case string:
			rd = strings.NewReader(v)
		default:
			j, err := json.Marshal(v)
			require.NoError(t, err)
			rd = bytes.NewReader(j)
		}
	}
	req, err := http.NewRequestWithContext(t.Context(), method, b.srv.URL+path, rd)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := b.srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return response{status: resp.StatusCode, body: out, header: resp.Header}
}

// admin sends a request with the admin token and a fresh idempotency key.
func (b *testBundle) admin(t *testing.T, method, path string, body any) response {
	t.Helper()
	return b.do(t, method, path, adminToken, newKey(), body)
}

func (b *testBundle) mustAdmin(t *testing.T, method, path string, body any, want int) map[string]any {
	t.Helper()
	r := b.admin(t, method, path, body)
	require.Equal(t, want, r.status, "%s %s: %s", method, path, r.body)
	return r.json(t)
}

func newKey() string { return "k-" + rand.Text() }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// goalWithAgent creates goal g (owner ou_owner) with agent a and returns a's token.
func (b *testBundle) goalWithAgent(t *testing.T, g, a string) string {
	t.Helper()
	b.mustAdmin(t, "POST", "/v1/goals", map[string]any{"goal_id": g, "title": "T " + g, "owners": []string{"ou_owner"}}, 201)
	return b.agent(t, g, a)
}

func (b *testBundle) agent(t *testing.T, g, a string) string {
	t.Helper()
	m := b.mustAdmin(t, "POST", "/v1/goals/"+g+"/agents", map[string]any{"agent_id": a}, 201)
	tok, _ := m["token"].(string)
	require.NotEmpty(t, tok)
	return tok
}

// counts returns the row count of every table, to prove that a call wrote nothing.
func (b *testBundle) counts(t *testing.T) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	rows, err := b.pool.Query(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1`)
	require.NoError(t, err)
	var tables []string
	for rows.Next() {
		var n string
		require.NoError(t, rows.Scan(&n))
		tables = append(tables, n)
	}
	require.NoError(t, rows.Err())
	out := map[string]int64{}
	for _, tb := range tables {
		var n int64
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM "`+tb+`"`).Scan(&n))
		out[tb] = n
	}
	return out
}

func (b *testBundle) refusals(t *testing.T, actor string) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT count(*) FROM audit WHERE NOT allowed AND actor = $1`, actor).Scan(&n))
	return n
}

func TestNoTokenIs401(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range []struct{ method, path, token string }{
		{"GET", "/v1/goals", ""},
		{"POST", "/v1/goals", ""},
		{"GET", "/v1/goals", "not-a-real-token"},
		{"GET", "/v1/goals/x/todos", "Basic abc"},
	} {
		r := b.do(t, tc.method, tc.path, tc.token, "k1", map[string]any{"goal_id": "x"})
		require.Equal(t, http.StatusUnauthorized, r.status, "%s %s", tc.method, tc.path)
		require.Equal(t, api.CodeUnauthenticated, r.err(t).Code)
		require.Equal(t, `Bearer realm="loopx"`, r.header.Get("WWW-Authenticate"), "a 401 names the scheme it asks for")
	}
	require.Zero(t, b.counts(t)["goal"], "nothing was created without a token")
}

func TestAgentTokenIsScopedToItsGoalAndAgent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tokA := b.goalWithAgent(t, "g1", "a1")
	b.agent(t, "g1", "a2")
	b.goalWithAgent(t, "g2", "b1")
	actor := "agent:g1/a1"

	// Its own goal, as itself: fine.
	r := b.do(t, "POST", "/v1/goals/g1/todos", tokA, newKey(), map[string]any{"text": "mine"})
	require.Equal(t, 201, r.status, "%s", r.body)
	todo := int64(r.json(t)["todo_id"].(float64))

	before := b.counts(t)
	// Another goal: 403 on reads and writes.
	scope := store.ReasonTokenScope
	for _, tc := range []struct {
		method, path string
		body         any
		reason       string
	}{
		{"GET", "/v1/goals/g2/todos", nil, scope},
		{"POST", "/v1/goals/g2/todos", map[string]any{"text": "theirs"}, scope},
		{"POST", "/v1/goals/g2/should-run", map[string]any{"agent_id": "a1"}, scope},
		// Its goal, as another agent.
		{"POST", "/v1/goals/g1/should-run", map[string]any{"agent_id": "a2"}, scope},
		{"POST", "/v1/goals/g1/todos/" + itoa(todo) + "/claim", map[string]any{"agent_id": "a2"}, scope},
		{"POST", "/v1/goals/g1/evidence", map[string]any{"agent_id": "a2", "summary": "x"}, scope},
		// Admin-only operations.
		{"POST", "/v1/goals", map[string]any{"goal_id": "g3"}, ""},
		{"POST", "/v1/goals/g1/agents", map[string]any{"agent_id": "a3"}, ""},
		{"POST", "/v1/goals/g1/stop", nil, ""},
		{"GET", "/v1/audit", nil, ""},
	} {
		r := b.do(t, tc.method, tc.path, tokA, newKey(), tc.body)
		require.Equal(t, http.StatusForbidden, r.status, "%s %s: %s", tc.method, tc.path, r.body)
		require.Equal(t, api.CodeForbidden, r.err(t).Code)
		require.Equal(t, tc.reason, r.err(t).Reason, "%s %s: %s", tc.method, tc.path, r.body)
	}
	after := b.counts(t)
	require.Equal(t, before["audit"]+10, after["audit"], "each refusal is audited")
	after["audit"] = before["audit"]
	require.Equal(t, before, after, "refusals write nothing but their audit rows")
	require.Equal(t, 10, b.refusals(t, actor))

	// The admin sees the refusals in the audit.
	m := b.mustAdmin(t, "GET", "/v1/audit?goal_id=g2", nil, 200)
	var found bool
	for _, row := range m["audit"].([]any) {
		a := row.(map[string]any)
		if a["actor"] == actor && a["allowed"] == false {
			found = true
		}
	}
	require.True(t, found, "refusal on g2 listed in the audit: %v", m)
}

func TestNonOwnerGateAnswerIsRefusedAndAudited(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.goalWithAgent(t, "g1", "a1")
	r := b.do(t, "POST", "/v1/goals/g1/gates", tok, newKey(), map[string]any{"question": "Ship it?"})
	require.Equal(t, 201, r.status, "%s", r.body)
	gate := itoa(int64(r.json(t)["gate_id"].(float64)))

	// The agent itself may not answer.
	r = b.do(t, "POST", "/v1/goals/g1/gates/"+gate+"/answer", tok, newKey(), map[string]any{"answer": "approve", "answered_by": "ou_owner"})
	require.Equal(t, http.StatusForbidden, r.status, "%s", r.body)

	// The admin on behalf of someone who is not an owner: refused, audited.
	r = b.admin(t, "POST", "/v1/goals/g1/gates/"+gate+"/answer", map[string]any{"answer": "approve", "answered_by": "ou_stranger"})
	require.Equal(t, http.StatusForbidden, r.status, "%s", r.body)
	e := r.err(t)
	require.Equal(t, api.CodeForbidden, e.Code)
	require.Equal(t, "answered_by", e.Field)
	require.Contains(t, e.Message, "not an owner")
	var n int
	require.NoError(t, b.pool.QueryRow(t.Context(),
		`SELECT count(*) FROM audit WHERE NOT allowed AND outcome = 'refused' AND action = 'gate.answer' AND detail->>'answered_by' = 'ou_stranger'`).Scan(&n))
	require.Equal(t, 1, n, "audited as refused, as it always was")
	m := b.mustAdmin(t, "GET", "/v1/goals/g1/gates?status=open", nil, 200)
	require.Len(t, m["gates"], 1, "the gate is still open")

	// The owner: approved.
	m = b.mustAdmin(t, "POST", "/v1/goals/g1/gates/"+gate+"/answer", map[string]any{"answer": "approve", "answered_by": "ou_owner"}, 200)
	require.Equal(t, "approved", m["status"])
}

// TestErrorsCarryTheirKindAndReason drives each case a program must tell apart through the
// real API: the status and code of its kind, and the reason naming the case.
func TestErrorsCarryTheirKindAndReason(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok1 := b.goalWithAgent(t, "g1", "a1")
	tok2 := b.agent(t, "g1", "a2")
	want := func(r response, code, field, reason string) {
		t.Helper()
		k, ok := store.KindByCode(code)
		require.True(t, ok, code)
		require.Equal(t, k.Status, r.status, "%s", r.body)
		e := r.err(t)
		require.Equal(t, code, e.Code, "%s", r.body)
		require.Equal(t, field, e.Field, "%s", r.body)
		require.Equal(t, reason, e.Reason, "%s", r.body)
		require.NotEmpty(t, e.Message)
	}
	gate := func() string {
		t.Helper()
		r := b.do(t, "POST", "/v1/goals/g1/gates", tok1, newKey(), map[string]any{"question": "Ship it?"})
		require.Equal(t, 201, r.status, "%s", r.body)
		return itoa(int64(r.json(t)["gate_id"].(float64)))
	}

	// A gate cancelled by an agent that did not ask it: forbidden (was 409 refused), audited
	// as refused, and the gate stays open.
	open := gate()
	r := b.do(t, "POST", "/v1/goals/g1/gates/"+open+"/cancel", tok2, newKey(), map[string]any{})
	want(r, store.CodeForbidden, "agent_id", "")
	var n int
	require.NoError(t, b.pool.QueryRow(t.Context(), `SELECT count(*) FROM audit
		WHERE NOT allowed AND outcome = 'refused' AND action = 'gate.cancel' AND target = $1`, "gate:"+open).Scan(&n))
	require.Equal(t, 1, n)
	m := b.mustAdmin(t, "GET", "/v1/goals/g1/gates?status=open", nil, 200)
	require.Len(t, m["gates"], 1, "the gate is still open")

	// A gate no longer open: refused, gate_closed, for an answer and for a cancel.
	b.mustAdmin(t, "POST", "/v1/goals/g1/gates/"+open+"/answer", map[string]any{"answer": "approve", "answered_by": "ou_owner"}, 200)
	r = b.admin(t, "POST", "/v1/goals/g1/gates/"+open+"/answer", map[string]any{"answer": "reject", "answered_by": "ou_owner"})
	want(r, store.CodeRefused, "gate_id", store.ReasonGateClosed)
	r = b.do(t, "POST", "/v1/goals/g1/gates/"+open+"/cancel", tok1, newKey(), map[string]any{})
	want(r, store.CodeRefused, "gate_id", store.ReasonGateClosed)

	// A todo held by another agent: conflict, claimed, for a claim and for an update.
	r = b.do(t, "POST", "/v1/goals/g1/todos", tok1, newKey(), map[string]any{"text": "mine", "claim_for": "a1"})
	require.Equal(t, 201, r.status, "%s", r.body)
	todo := r.json(t)
	id := itoa(int64(todo["todo_id"].(float64)))
	r = b.do(t, "POST", "/v1/goals/g1/todos/"+id+"/claim", tok2, newKey(), map[string]any{})
	want(r, store.CodeConflict, "todo_id", store.ReasonClaimed)
	r = b.do(t, "PATCH", "/v1/goals/g1/todos/"+id, tok2, newKey(), map[string]any{"version": todo["version"], "text": "theirs"})
	want(r, store.CodeConflict, "agent_id", store.ReasonClaimed)
	// A stale version is a conflict of another case: no reason.
	r = b.do(t, "PATCH", "/v1/goals/g1/todos/"+id, tok1, newKey(), map[string]any{"version": 99, "text": "x"})
	want(r, store.CodeConflict, "version", "")

	// A spend that is not owed: refused, spend_not_owed.
	r = b.do(t, "POST", "/v1/goals/g1/spend-slot", tok1, newKey(), map[string]any{"turn_instance_id": "never-began"})
	want(r, store.CodeRefused, "turn_instance_id", store.ReasonNotOwed)

	// A gate asked for a finished todo: refused for another reason, with none.
	done := b.do(t, "POST", "/v1/goals/g1/todos", tok1, newKey(), map[string]any{"text": "finished"})
	require.Equal(t, 201, done.status, "%s", done.body)
	d := done.json(t)
	did := itoa(int64(d["todo_id"].(float64)))
	r = b.do(t, "POST", "/v1/goals/g1/todos/"+did+"/done", tok1, newKey(), map[string]any{"version": d["version"]})
	require.Equal(t, 200, r.status, "%s", r.body)
	r = b.do(t, "POST", "/v1/goals/g1/gates", tok1, newKey(), map[string]any{"question": "Ship it?", "todo_id": d["todo_id"]})
	want(r, store.CodeRefused, "todo_id", "")
}

func TestMutatingCallsNeedAnIdempotencyKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.do(t, "POST", "/v1/goals", adminToken, "", map[string]any{"goal_id": "g1"})
	require.Equal(t, http.StatusBadRequest, r.status)
	require.Equal(t, "Idempotency-Key", r.err(t).Field)
	require.Zero(t, b.counts(t)["goal"])
}

func TestBodyLimitAndUnknownFields(t *testing.T) {
	t.Parallel()
	b := setup(t)
	big := `{"goal_id":"g1","objective":"` + strings.Repeat("x", 300<<10) + `"}`
	r := b.admin(t, "POST", "/v1/goals", big)
	require.Equal(t, http.StatusRequestEntityTooLarge, r.status, "%s", r.body)
	require.Equal(t, "body", r.err(t).Field)

	r = b.admin(t, "POST", "/v1/goals", map[string]any{"goal_id": "g1", "owner": "ou_x"})
	require.Equal(t, http.StatusBadRequest, r.status)
	require.Equal(t, "owner", r.err(t).Field, "the unknown field is named")

	r = b.admin(t, "POST", "/v1/goals", map[string]any{"goal_id": "g1", "allowed_slots": "many"})
	require.Equal(t, http.StatusBadRequest, r.status)
	require.Equal(t, "allowed_slots", r.err(t).Field)
	require.Zero(t, b.counts(t)["goal"])
}

func TestBadInputNamesTheFieldAndWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.goalWithAgent(t, "g1", "a1")
	long := strings.Repeat("é", 12001)
	for _, tc := range []struct {
		name, method, path string
		body               any
		status             int
		field              string
	}{
		{"goal id uppercase", "POST", "/v1/goals", map[string]any{"goal_id": "Bad"}, 422, "goal_id"},
		{"goal id too long", "POST", "/v1/goals", map[string]any{"goal_id": strings.Repeat("a", 64)}, 422, "goal_id"},
		{"goal id in path", "GET", "/v1/goals/-bad/todos", nil, 400, "goal_id"},
		{"agent id", "POST", "/v1/goals/g1/agents", map[string]any{"agent_id": "A B"}, 422, "agent_id"},
		{"agent id in should-run", "POST", "/v1/goals/g1/should-run", map[string]any{"agent_id": "../x"}, 422, "agent_id"},
		{"unknown goal", "POST", "/v1/goals/nope/todos", map[string]any{"text": "x"}, 404, "goal_id"},
		{"unknown goal show", "GET", "/v1/goals/nope", nil, 404, "goal_id"},
		{"objective too long", "POST", "/v1/goals", map[string]any{"goal_id": "g2", "objective": long}, 422, "objective"},
		{"todo text too long", "POST", "/v1/goals/g1/todos", map[string]any{"text": long}, 422, "text"},
		{"question too long", "POST", "/v1/goals/g1/gates", map[string]any{"agent_id": "a1", "question": long}, 422, "question"},
		{"summary too long", "POST", "/v1/goals/g1/evidence", map[string]any{"agent_id": "a1", "summary": long}, 422, "summary"},
		{"invalid cron", "POST", "/v1/goals", map[string]any{"goal_id": "g2", "heartbeat_spec": "every minute"}, 422, "heartbeat_spec"},
		{"invalid zone", "POST", "/v1/goals", map[string]any{"goal_id": "g2", "heartbeat_spec": "*/5 * * * *", "heartbeat_tz": "Mars/Base"}, 422, "heartbeat_tz"},
		{"invalid report zone", "PATCH", "/v1/goals/g1", map[string]any{"version": 1, "report_tz": "Nowhere/City"}, 422, "report_tz"},
		{"negative quota", "POST", "/v1/goals", map[string]any{"goal_id": "g2", "allowed_slots": -1}, 422, "allowed_slots"},
		{"negative window", "PATCH", "/v1/goals/g1", map[string]any{"version": 1, "window_hours": -5}, 422, "window_hours"},
		{"bad todo id", "POST", "/v1/goals/g1/todos/abc/claim", map[string]any{"agent_id": "a1"}, 400, "todo_id"},
		{"set without version", "PATCH", "/v1/goals/g1", map[string]any{"title": "x"}, 422, "version"},
	} {
		before := b.counts(t)
		r := b.admin(t, tc.method, tc.path, tc.body)
		require.Equal(t, tc.status, r.status, "%s: %s", tc.name, r.body)
		e := r.err(t)
		require.Equal(t, tc.field, e.Field, "%s: %s", tc.name, r.body)
		require.NotEmpty(t, e.Message, tc.name)
		require.Equal(t, before, b.counts(t), "%s wrote something", tc.name)
	}
	// The agent token gets the same answers.
	r := b.do(t, "POST", "/v1/goals/g1/todos", tok, newKey(), map[string]any{"text": ""})
	require.Equal(t, 422, r.status, "%s", r.body)
	require.Equal(t, "text", r.err(t).Field)
}
