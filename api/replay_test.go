package api_test

import (
	"encoding/json"
	"maps"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReplayEveryMutatingEndpoint calls each mutating endpoint, then repeats the call with
// the same Idempotency-Key: the answer is identical (status and body) and no row anywhere
// changes; the same key with another body is 409 and changes nothing either.
func TestReplayEveryMutatingEndpoint(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var agentTok string
	todo1, todo2, gate1, gate2 := "", "", "", ""
	todoVersion := func(id string) float64 {
		m := b.mustAdmin(t, "GET", "/v1/goals/g1/todos/"+id, nil, 200)
		return m["version"].(float64)
	}
	goalVersion := func() float64 {
		return b.mustAdmin(t, "GET", "/v1/goals/g1", nil, 200)["version"].(float64)
	}

	steps := []struct {
		name         string
		method, path string
		token        func() string
		body, other  func() any // the request, and a different request for the same key
		otherPath    string     // when the difference is in the path
		status       int
		after        func(r response)
		tokenInBody  bool // register / rotate: the token is shown once, never in a replay
	}{
		{name: "goal create", method: "POST", path: "/v1/goals", status: 201,
			body: func() any {
				return map[string]any{"goal_id": "g1", "title": "One", "owners": []string{"ou_owner"}, "allowed_slots": 5}
			},
			other: func() any { return map[string]any{"goal_id": "g1", "title": "Other"} }},
		{name: "goal create 2", method: "POST", path: "/v1/goals", status: 201,
			body:  func() any { return map[string]any{"goal_id": "g2", "owners": []string{"ou_owner"}} },
			other: func() any { return map[string]any{"goal_id": "g3"} }},
		{name: "agent register", method: "POST", path: "/v1/goals/g1/agents", status: 201, tokenInBody: true,
			body:  func() any { return map[string]any{"agent_id": "a1"} },
			other: func() any { return map[string]any{"agent_id": "a2"} }},
		{name: "agent rotate-token", method: "POST", path: "/v1/goals/g1/agents/a1/rotate-token", status: 200, tokenInBody: true,
			body: func() any { return map[string]any{} }, otherPath: "/v1/goals/g2/agents/a1/rotate-token",
			after: func(r response) { agentTok = r.json(t)["token"].(string) }},
		{name: "agent update", method: "PATCH", path: "/v1/goals/g1/agents/a1", status: 200,
			body:  func() any { return map[string]any{"work_mode": "active"} },
			other: func() any { return map[string]any{"work_mode": "monitor_only"} }},
		{name: "goal set", method: "PATCH", path: "/v1/goals/g1", status: 200,
			body:  func() any { return map[string]any{"version": goalVersion(), "title": "One!"} },
			other: func() any { return map[string]any{"version": 1, "title": "Else"} }},
		{name: "goal stop", method: "POST", path: "/v1/goals/g1/stop", status: 200,
			body: func() any { return map[string]any{} }, otherPath: "/v1/goals/g2/stop"},
		{name: "goal resume", method: "POST", path: "/v1/goals/g1/resume", status: 200,
			body: func() any { return map[string]any{} }, otherPath: "/v1/goals/g2/resume"},
		{name: "todo add", method: "POST", path: "/v1/goals/g1/todos", status: 201,
			body:  func() any { return map[string]any{"text": "first", "priority": 1} },
			other: func() any { return map[string]any{"text": "another"} },
			after: func(r response) { todo1 = itoa(int64(r.json(t)["todo_id"].(float64))) }},
		{name: "todo add by agent", method: "POST", path: "/v1/goals/g1/todos", status: 201, token: func() string { return agentTok },
			body:  func() any { return map[string]any{"text": "second", "priority": 3} },
			other: func() any { return map[string]any{"text": "third"} },
			after: func(r response) { todo2 = itoa(int64(r.json(t)["todo_id"].(float64))) }},
		{name: "todo claim", method: "POST", status: 200, token: func() string { return agentTok },
			body:  func() any { return map[string]any{"agent_id": "a1"} },
			other: func() any { return map[string]any{"agent_id": "a1", "transfer": true} }},
		{name: "todo update", method: "PATCH", status: 200, token: func() string { return agentTok },
			body:  func() any { return map[string]any{"version": todoVersion(todo1), "priority": 0} },
			other: func() any { return map[string]any{"version": todoVersion(todo1), "priority": 4} }},
		{name: "should-run without turn id", method: "POST", path: "/v1/goals/g1/should-run", status: 200, token: func() string { return agentTok },
			body:  func() any { return map[string]any{"agent_id": "a1"} },
			other: func() any { return map[string]any{"agent_id": "a1", "begin_turn": true} }},
		{name: "should-run begin turn", method: "POST", path: "/v1/goals/g1/should-run", status: 200, token: func() string { return agentTok },
			body:  func() any { return map[string]any{"agent_id": "a1", "turn_instance_id": "t-1", "begin_turn": true} },
			after: func(r response) { require.Equal(t, "run", r.json(t)["decision"], "%s", r.body) }},
		{name: "evidence add", method: "POST", path: "/v1/goals/g1/evidence", status: 201, token: func() string { return agentTok },
			body: func() any {
				return map[string]any{"todo_id": json.RawMessage(todo1), "summary": "did it", "kind": "note"}
			},
			other: func() any { return map[string]any{"summary": "did something else"} }},
		{name: "refresh-state", method: "POST", path: "/v1/goals/g1/refresh-state", status: 200, token: func() string { return agentTok },
			body:  func() any { return map[string]any{"turn_instance_id": "t-1", "next_action": "test it"} },
			other: func() any { return map[string]any{"turn_instance_id": "t-1", "next_action": "ship it"} }},
		{name: "spend-slot", method: "POST", path: "/v1/goals/g1/spend-slot", status: 200, token: func() string { return agentTok },
			body:  func() any { return map[string]any{"turn_instance_id": "t-1", "todo_id": json.RawMessage(todo1)} },
			other: func() any { return map[string]any{"turn_instance_id": "t-2"} }},
		{name: "todo done", method: "POST", status: 200, token: func() string { return agentTok },
			body:  func() any { return map[string]any{"version": todoVersion(todo1)} },
			other: func() any { return map[string]any{"version": 99} }},
		{name: "gate ask", method: "POST", path: "/v1/goals/g1/gates", status: 201, token: func() string { return agentTok },
			body:  func() any { return map[string]any{"question": "Go on?", "todo_id": json.RawMessage(todo2)} },
			other: func() any { return map[string]any{"question": "Stop?"} },
			after: func(r response) { gate1 = itoa(int64(r.json(t)["gate_id"].(float64))) }},
		{name: "gate answer", method: "POST", status: 200,
			body:  func() any { return map[string]any{"answer": "approve", "answered_by": "ou_owner"} },
			other: func() any { return map[string]any{"answer": "reject", "answered_by": "ou_owner"} }},
		{name: "gate ask 2", method: "POST", path: "/v1/goals/g1/gates", status: 201, token: func() string { return agentTok },
			body:  func() any { return map[string]any{"question": "Whole goal?"} },
			other: func() any { return map[string]any{"question": "Another?"} },
			after: func(r response) { gate2 = itoa(int64(r.json(t)["gate_id"].(float64))) }},
		{name: "gate cancel", method: "POST", status: 200, token: func() string { return agentTok },
			body: func() any { return map[string]any{} }},
	}
	paths := map[string]func() string{
		"todo claim":  func() string { return "/v1/goals/g1/todos/" + todo1 + "/claim" },
		"todo update": func() string { return "/v1/goals/g1/todos/" + todo1 },
		"todo done":   func() string { return "/v1/goals/g1/todos/" + todo1 + "/done" },
		"gate answer": func() string { return "/v1/goals/g1/gates/" + gate1 + "/answer" },
		"gate cancel": func() string { return "/v1/goals/g1/gates/" + gate2 + "/cancel" },
	}
	covered := map[string]bool{}
	for _, st := range steps {
		path := st.path
		if f, ok := paths[st.name]; ok {
			path = f()
		}
		tok := adminToken
		if st.token != nil {
			tok = st.token()
		}
		key := newKey()
		body := st.body()
		first := b.do(t, st.method, path, tok, key, body)
		require.Equal(t, st.status, first.status, "%s: %s", st.name, first.body)
		if st.after != nil {
			st.after(first)
		}
		before := b.counts(t)

		again := b.do(t, st.method, path, tok, key, body)
		require.Equal(t, first.status, again.status, "%s replay: %s", st.name, again.body)
		if st.tokenInBody {
			f, a := first.json(t), again.json(t)
			require.NotEmpty(t, f["token"], st.name)
			require.Nil(t, a["token"], "%s: a replay never shows the token again", st.name)
			delete(f, "token")
			require.Equal(t, f, a, st.name)
		} else {
			require.Equal(t, string(first.body), string(again.body), "%s: the replay is byte-identical", st.name)
		}
		require.Equal(t, before, b.counts(t), "%s: the replay wrote something", st.name)

		if st.other != nil || st.otherPath != "" {
			op, ob := path, body
			if st.otherPath != "" {
				op = st.otherPath
			} else {
				ob = st.other()
			}
			diff := b.do(t, st.method, op, tok, key, ob)
			require.Equal(t, http.StatusConflict, diff.status, "%s: same key, different request: %s", st.name, diff.body)
			require.Equal(t, "idempotency_key", diff.err(t).Field, st.name)
			// The refusal is audited (outcome conflict), and nothing else is written.
			want := maps.Clone(before)
			want["audit"]++
			require.Equal(t, want, b.counts(t), "%s: the refused reuse wrote something besides its audit row", st.name)
		}
		covered[st.method+" "+routeOf(path)] = true
	}
	// Every mutating route in routes.go is covered.
	for _, r := range []string{
		"POST /v1/goals", "PATCH /v1/goals/{goal}", "POST /v1/goals/{goal}/stop", "POST /v1/goals/{goal}/resume",
		"POST /v1/goals/{goal}/agents", "POST /v1/goals/{goal}/agents/{agent}/rotate-token",
		"POST /v1/goals/{goal}/todos", "PATCH /v1/goals/{goal}/todos/{todo}", "POST /v1/goals/{goal}/todos/{todo}/claim",
		"POST /v1/goals/{goal}/todos/{todo}/done", "POST /v1/goals/{goal}/gates", "POST /v1/goals/{goal}/gates/{gate}/answer",
		"POST /v1/goals/{goal}/gates/{gate}/cancel", "POST /v1/goals/{goal}/evidence", "POST /v1/goals/{goal}/should-run",
		"POST /v1/goals/{goal}/spend-slot", "POST /v1/goals/{goal}/refresh-state",
	} {
		require.True(t, covered[r], "no replay check for %s", r)
	}
}

// routeOf turns a concrete path back into its route pattern.
func routeOf(path string) string {
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	if len(parts) > 2 {
		parts[2] = "{goal}"
	}
	if len(parts) > 4 {
		parts[4] = map[string]string{"todos": "{todo}", "gates": "{gate}", "agents": "{agent}"}[parts[3]]
	}
	return "/" + strings.Join(parts, "/")
}
