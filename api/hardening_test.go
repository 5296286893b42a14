package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loopx/api"
	"loopx/api/apitest"
	"loopx/store"
	"loopx/store/storetest"
)

// Runner secrets are write-only: no listing, receipt, audit row or agent token shows them;
// listings say that each is set and when it changed; an agent token sees only its own
// settings, not its peers'.
func TestRunnerSecretsAreWriteOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const hookSecret = "whsec-0123456789-abcdef"
	const apiKey = "sk-peer-secret-value-42"
	b.mustAdmin(t, "POST", "/v1/goals", map[string]any{"goal_id": "g", "title": "G", "owners": []string{"ou_owner"}}, 201)
	reg := b.mustAdmin(t, "POST", "/v1/goals/g/agents", map[string]any{"agent_id": "hook", "runner": "webhook",
		"runner_config": map[string]any{"url": "https://hooks.example/wake", "secret": hookSecret}}, 201)
	execTok := b.mustAdmin(t, "POST", "/v1/goals/g/agents", map[string]any{"agent_id": "codex", "runner": "exec",
		"runner_config": map[string]any{"argv": []string{"codex", "exec"}, "env": map[string]string{"OPENAI_API_KEY": apiKey}}}, 201)["token"].(string)
	hookTok := reg["token"].(string)
	regBody, _ := json.Marshal(reg)
	require.NotContains(t, string(regBody), hookSecret, "the registration answer")

	// The admin's listing: settings without secrets, each secret named as set.
	r := b.do(t, "GET", "/v1/goals/g/agents", adminToken, "", nil)
	require.Equal(t, 200, r.status)
	require.NotContains(t, string(r.body), hookSecret)
	require.NotContains(t, string(r.body), apiKey)
	var list struct {
		Agents []store.Agent `json:"agents"`
	}
	require.NoError(t, json.Unmarshal(r.body, &list))
	byID := map[string]store.Agent{}
	for _, a := range list.Agents {
		byID[a.ID] = a
	}
	require.Len(t, byID["hook"].Secrets, 1)
	require.Equal(t, "secret", byID["hook"].Secrets[0].Name)
	require.True(t, byID["hook"].Secrets[0].Set)
	require.False(t, byID["hook"].Secrets[0].ChangedAt.IsZero())
	require.JSONEq(t, `{"url":"https://hooks.example/wake"}`, string(byID["hook"].RunnerConfig))
	require.Equal(t, "env.OPENAI_API_KEY", byID["codex"].Secrets[0].Name)

	// The webhook agent's token (and so an exec agent's per-turn token) sees its own
	// settings only: not the peer's env, not even its names.
	r = b.do(t, "GET", "/v1/goals/g/agents", hookTok, "", nil)
	require.Equal(t, 200, r.status)
	require.NotContains(t, string(r.body), apiKey)
	require.NotContains(t, string(r.body), "OPENAI_API_KEY")
	require.NotContains(t, string(r.body), hookSecret)
	list.Agents = nil
	require.NoError(t, json.Unmarshal(r.body, &list))
	require.Len(t, list.Agents, 2)
	for _, a := range list.Agents {
		if a.ID != "hook" {
			require.Empty(t, a.RunnerConfig, "a peer's settings are not shown to an agent")
			require.Empty(t, a.Secrets)
		}
	}
	r = b.do(t, "GET", "/v1/goals/g/agents", execTok, "", nil)
	require.NotContains(t, string(r.body), "hooks.example")

	// Nothing stored in clear: settings, receipts, audit rows; the sealed value is not the
	// secret.
	for _, q := range []string{`SELECT coalesce(string_agg(runner_config::text, ' '), '') FROM agent`,
		`SELECT coalesce(string_agg(body::text, ' '), '') FROM receipt`,
		`SELECT coalesce(string_agg(detail::text, ' '), '') FROM audit`,
		`SELECT coalesce(string_agg(encode(sealed, 'escape'), ' '), '') FROM agent_secret`} {
		var all string
		require.NoError(t, b.pool.QueryRow(t.Context(), q).Scan(&all))
		require.NotContains(t, all, hookSecret, q)
		require.NotContains(t, all, apiKey, q)
	}

	// The runner alone reads it back.
	cfg, err := b.st.RunnerConfig(t.Context(), "g", "hook")
	require.NoError(t, err)
	require.Contains(t, string(cfg), hookSecret)

	// A change of the URL keeps the secret; a new secret moves changed_at; the audit row
	// has the before and after of the URL and says the secret changed, redacted.
	upd := b.mustAdmin(t, "PATCH", "/v1/goals/g/agents/hook", map[string]any{
		"runner_config": map[string]any{"url": "https://hooks.example/v2", "secret": "another-secret-0123456789"}}, 200)
	updBody, _ := json.Marshal(upd)
	require.NotContains(t, string(updBody), "another-secret")
	var detail string
	require.NoError(t, b.pool.QueryRow(t.Context(), `SELECT detail::text FROM audit WHERE action = 'agent.update' ORDER BY id DESC LIMIT 1`).Scan(&detail))
	require.Contains(t, detail, "https://hooks.example/wake")
	require.Contains(t, detail, "https://hooks.example/v2")
	require.Contains(t, detail, store.Redacted)
	require.NotContains(t, detail, "another-secret")
	require.NotContains(t, detail, hookSecret)
}

// Malformed input is a 4xx naming the input at fault, and writes nothing.
func TestMalformedInputIs4xxAndWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.goalWithAgent(t, "g", "a")
	goal := map[string]any{"goal_id": "g2", "title": "T", "owners": []string{"ou_o"}}
	cases := []struct {
		name    string
		method  string
		path    string
		token   string
		key     string
		ctype   string
		body    any
		status  int
		field   string
		comment string
	}{
		{name: "non-UTF-8 Idempotency-Key", method: "POST", path: "/v1/goals", key: "k\xff\xfe", body: goal, status: 400, field: "Idempotency-Key"},
		{name: "control character in Idempotency-Key", method: "POST", path: "/v1/goals", key: "k\tk", body: goal, status: 400, field: "Idempotency-Key"},
		{name: "text/plain body", method: "POST", path: "/v1/goals", ctype: "text/plain", body: goal, status: 400, field: "Content-Type"},
		{name: "form body", method: "POST", path: "/v1/goals", ctype: "application/x-www-form-urlencoded", body: "goal_id=g2", status: 400, field: "Content-Type"},
		{name: "NUL in a string", method: "POST", path: "/v1/goals", body: `{"goal_id":"g2","title":"a\u0000b","owners":["ou_o"]}`, status: 400, field: "body"},
		{name: "exec without argv", method: "POST", path: "/v1/goals/g/agents", body: map[string]any{"agent_id": "x", "runner": "exec"}, status: 400, field: "runner_config.argv"},
		{name: "exec with an unknown setting", method: "POST", path: "/v1/goals/g/agents", body: map[string]any{"agent_id": "x", "runner": "exec", "runner_config": map[string]any{"command": "codex"}}, status: 400, field: "runner_config.command"},
		{name: "webhook without a URL", method: "POST", path: "/v1/goals/g/agents", body: map[string]any{"agent_id": "x", "runner": "webhook", "runner_config": map[string]any{"secret": "0123456789abcdef0"}}, status: 400, field: "runner_config.url"},
		{name: "webhook to a file URL", method: "POST", path: "/v1/goals/g/agents", body: map[string]any{"agent_id": "x", "runner": "webhook", "runner_config": map[string]any{"url": "file:///etc/passwd", "secret": "0123456789abcdef0"}}, status: 400, field: "runner_config.url"},
		{name: "poll with settings", method: "POST", path: "/v1/goals/g/agents", body: map[string]any{"agent_id": "x", "runner_config": map[string]any{"url": "https://x"}}, status: 400, field: "runner_config"},
		{name: "gate with duplicate options", method: "POST", path: "/v1/goals/g/gates", token: tok, body: map[string]any{"question": "Ship?", "options": []string{"yes", "no", "Yes "}}, status: 400, field: "options"},
	}
	for _, c := range cases {
		before := b.counts(t)
		token := c.token
		if token == "" {
			token = adminToken
		}
		key := c.key
		if key == "" {
			key = newKey()
		}
		var rd io.Reader
		switch v := c.body.(type) {
		case string:
			rd = strings.NewReader(v)
		default:
			j, _ := json.Marshal(v)
			rd = strings.NewReader(string(j))
		}
		req, err := http.NewRequestWithContext(t.Context(), c.method, b.srv.URL+c.path, rd)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header["Idempotency-Key"] = []string{key} // as sent, bytes and all
		if c.ctype != "" {
			req.Header.Set("Content-Type", c.ctype)
		}
		resp, err := b.srv.Client().Do(req)
		require.NoError(t, err, c.name)
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		r := response{status: resp.StatusCode, body: out}
		require.Equal(t, c.status, r.status, "%s: %s", c.name, out)
		require.Equal(t, c.field, r.err(t).Field, "%s: %s", c.name, out)
		require.Equal(t, before, b.counts(t), "%s wrote something", c.name)
	}
}

// While the database is unreachable the API answers 503 with Retry-After, never 500, so
// clients and load balancers back off and retry.
func TestDatabaseOutageIs503(t *testing.T) {
	t.Parallel()
	outage := storetest.NewOutage(t)
	pool := outage.Pool
	st := store.New(pool, store.Options{})
	kit := apitest.New(t, st, apitest.Options{AdminToken: adminToken})
	srv := httptest.NewServer(kit.API)
	t.Cleanup(srv.Close)
	b := &testBundle{srv: srv, pool: pool, st: st}
	b.mustAdmin(t, "POST", "/v1/goals", map[string]any{"goal_id": "g", "title": "G", "owners": []string{"ou_o"}}, 201)
	agentTok := b.agent(t, "g", "a")

	outage.Cut()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for _, c := range []struct {
		method, path, token string
		body                any
	}{
		{"POST", "/v1/goals", adminToken, map[string]any{"goal_id": "g2", "title": "G", "owners": []string{"ou_o"}}},
		{"GET", "/v1/goals/g", adminToken, nil},
		{"POST", "/v1/goals/g/todos", adminToken, map[string]any{"text": "x"}},
		{"GET", "/v1/goals/g/todos", agentTok, nil}, // the agent token cannot even be looked up
	} {
		var rd io.Reader
		if c.body != nil {
			j, _ := json.Marshal(c.body)
			rd = strings.NewReader(string(j))
		}
		req, err := http.NewRequestWithContext(ctx, c.method, srv.URL+c.path, rd)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+c.token)
		req.Header.Set("Idempotency-Key", newKey())
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "%s %s: %s", c.method, c.path, out)
		require.NotEmpty(t, resp.Header.Get("Retry-After"), "%s %s", c.method, c.path)
		require.Equal(t, api.CodeUnavailable, response{status: resp.StatusCode, body: out}.err(t).Code)
	}
}

// Every refusal and every change writes one audit row with actor, action, target and
// outcome; changes keep each field's before and after; the log filters by goal, actor,
// action, outcome and time.
func TestRefusalsAndChangesAreAudited(t *testing.T) {
	t.Parallel()
	b := setup(t)
	start := time.Now().Add(-time.Second).UTC()
	tok := b.goalWithAgent(t, "g", "a")
	actor := "agent:g/a"
	td := b.mustAdmin(t, "POST", "/v1/goals/g/todos", map[string]any{"text": "one"}, 201)
	id := itoa(int64(td["todo_id"].(float64)))

	// A stale version is a 409: audited with outcome conflict.
	r := b.do(t, "PATCH", "/v1/goals/g/todos/"+id, tok, newKey(), map[string]any{"version": 99, "priority": 1})
	require.Equal(t, 409, r.status, "%s", r.body)
	// A key reused for another request: 409, audited.
	key := newKey()
	require.Equal(t, 201, b.do(t, "POST", "/v1/goals/g/todos", tok, key, map[string]any{"text": "two"}).status)
	require.Equal(t, 409, b.do(t, "POST", "/v1/goals/g/todos", tok, key, map[string]any{"text": "three"}).status)
	// A token used outside its scope: 403, audited as forbidden.
	require.Equal(t, 403, b.do(t, "POST", "/v1/goals/g/agents", tok, newKey(), map[string]any{"agent_id": "b"}).status)

	// A change keeps each field's before and after: a PATCH goes through the change kernel,
	// whose receipt carries the diff and whether it applied.
	v := b.mustAdmin(t, "GET", "/v1/goals/g", nil, 200)["version"].(float64)
	b.mustAdmin(t, "PATCH", "/v1/goals/g", map[string]any{"version": v, "title": "New title", "allowed_slots": 7}, 200)

	list := func(q string) []store.Audit {
		t.Helper()
		r := b.do(t, "GET", "/v1/audit?"+q, adminToken, "", nil)
		require.Equal(t, 200, r.status, "%s", r.body)
		var out struct {
			Audit []store.Audit `json:"audit"`
		}
		require.NoError(t, json.Unmarshal(r.body, &out))
		return out.Audit
	}
	conflicts := list("goal_id=g&outcome=conflict&actor=" + url.QueryEscape(actor))
	require.Len(t, conflicts, 2, "the stale version and the reused key")
	for _, a := range conflicts {
		require.False(t, a.Allowed)
		require.NotEmpty(t, a.Action)
		require.Equal(t, "g", a.GoalID)
		require.NotEmpty(t, a.Target)
	}
	require.Equal(t, "todo.update", conflicts[0].Action)
	require.Equal(t, "todo:"+id, conflicts[0].Target)
	require.Len(t, list("outcome=forbidden&actor="+url.QueryEscape(actor)), 1)

	upd := list("action=proposal.apply&since=" + url.QueryEscape(start.Format(time.RFC3339)))
	require.Len(t, upd, 1)
	require.Equal(t, "ok", upd[0].Outcome)
	var d struct {
		Applied bool                `json:"applied"`
		Diff    []store.FieldChange `json:"diff"`
	}
	require.NoError(t, json.Unmarshal(upd[0].Detail, &d))
	require.True(t, d.Applied)
	fields := map[string]store.FieldChange{}
	for _, c := range d.Diff {
		fields[c.Field] = c
	}
	require.Equal(t, "New title", fields["title"].After)
	require.Equal(t, "7", fields["allowed_slots"].After)
	require.NotContains(t, fields, "version")

	require.Empty(t, list("action=proposal.apply&until="+url.QueryEscape(start.Format(time.RFC3339))))
	require.Equal(t, 400, b.do(t, "GET", "/v1/audit?since=yesterday", adminToken, "", nil).status)
	require.Equal(t, 422, b.do(t, "GET", "/v1/audit?outcome=maybe", adminToken, "", nil).status)
}
