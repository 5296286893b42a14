package api_test

import (
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loopx/api"
)

// Listing an unknown goal answers 404, as docs/api.md says; an existing goal with nothing in
// it answers an empty list.
func TestListingAnUnknownGoalIs404(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.mustAdmin(t, "POST", "/v1/goals", map[string]any{"goal_id": "empty", "owners": []string{"ou_owner"}}, 201)
	for _, what := range []string{"todos", "gates", "evidence", "agents", "turns", "decisions"} {
		r := b.admin(t, "GET", "/v1/goals/nosuch/"+what, nil)
		require.Equal(t, http.StatusNotFound, r.status, "%s: %s", what, r.body)
		e := r.err(t)
		require.Equal(t, api.CodeNotFound, e.Code)
		require.Equal(t, "goal_id", e.Field, what)

		m := b.mustAdmin(t, "GET", "/v1/goals/empty/"+what, nil, 200)
		require.Empty(t, m[what], what)
	}
	r := b.admin(t, "GET", "/v1/goals/nosuch/turns/1", nil)
	require.Equal(t, http.StatusNotFound, r.status)
	require.Equal(t, "goal_id", r.err(t).Field)
	r = b.admin(t, "GET", "/v1/goals/empty/turns/1", nil)
	require.Equal(t, http.StatusNotFound, r.status)
	require.Equal(t, "turn_id", r.err(t).Field)
}

// The run index: turns and should-run decisions newest first, filtered by agent, state and
// time, paged by cursor.
func TestRunIndex(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tokA := b.goalWithAgent(t, "g", "a1")
	b.agent(t, "g", "a2")
	b.goalWithAgent(t, "other", "x")
	start := time.Now().UTC().Add(-time.Minute).Format(time.RFC3339)
	todo := b.mustAdmin(t, "POST", "/v1/goals/g/todos", map[string]any{"text": "Write the parser"}, 201)
	todoID := todo["todo_id"].(float64)

	shouldRun := func(agent, turn string) map[string]any {
		return b.mustAdmin(t, "POST", "/v1/goals/g/should-run", map[string]any{"agent_id": agent, "turn_instance_id": turn, "begin_turn": true}, 200)
	}
	// a1: three turns (the first two spend their slot, the last one stays live); a2: one.
	for _, turn := range []string{"t1", "t2"} {
		d := shouldRun("a1", turn)
		require.Equal(t, "run", d["decision"])
		b.mustAdmin(t, "POST", "/v1/goals/g/evidence", map[string]any{"agent_id": "a1", "summary": "did " + turn}, 201)
		b.mustAdmin(t, "POST", "/v1/goals/g/spend-slot", map[string]any{"agent_id": "a1", "turn_instance_id": turn}, 200)
	}
	require.Equal(t, "run", shouldRun("a1", "t3")["decision"])
	require.Equal(t, "skip", shouldRun("a1", "t4")["decision"], "busy")
	require.Equal(t, "run", shouldRun("a2", "u1")["decision"])

	list := func(path string, q url.Values, key string) ([]map[string]any, string) {
		t.Helper()
		m := b.mustAdmin(t, "GET", path+"?"+q.Encode(), nil, 200)
		var out []map[string]any
		for _, v := range m[key].([]any) {
			out = append(out, v.(map[string]any))
		}
		cur, _ := m["next_cursor"].(string)
		return out, cur
	}
	ids := func(rows []map[string]any, field string) []string {
		var out []string
		for _, r := range rows {
			out = append(out, r[field].(string))
		}
		return out
	}

	turns, cur := list("/v1/goals/g/turns", url.Values{}, "turns")
	require.Equal(t, []string{"u1", "t3", "t2", "t1"}, ids(turns, "turn_instance_id"), "newest first")
	require.Empty(t, cur)
	require.Equal(t, "ok", turns[2]["state"])
	require.Equal(t, 1.0, turns[2]["evidence"])
	require.Equal(t, true, turns[2]["spent"])
	require.Equal(t, todoID, turns[2]["todo_id"])
	require.Equal(t, "Write the parser", turns[2]["todo_text"])
	require.NotContains(t, turns[2], "log_tail", "the list leaves the log tail to the single turn")

	// Filters: agent, state, time range; cursor paging.
	turns, _ = list("/v1/goals/g/turns", url.Values{"agent_id": {"a1"}, "state": {"live"}}, "turns")
	require.Equal(t, []string{"t3"}, ids(turns, "turn_instance_id"))
	turns, _ = list("/v1/goals/g/turns", url.Values{"since": {time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}}, "turns")
	require.Empty(t, turns)
	turns, _ = list("/v1/goals/g/turns", url.Values{"since": {start}, "state": {"ok,live"}, "agent_id": {"a1"}}, "turns")
	require.Len(t, turns, 3)
	var pages [][]string
	q := url.Values{"limit": {"3"}}
	for {
		page, next := list("/v1/goals/g/turns", q, "turns")
		pages = append(pages, ids(page, "turn_instance_id"))
		if next == "" {
			break
		}
		q.Set("cursor", next)
	}
	require.Equal(t, [][]string{{"u1", "t3", "t2"}, {"t1"}}, pages)

	one := b.mustAdmin(t, "GET", "/v1/goals/g/turns/"+itoa(int64(turns[0]["turn_id"].(float64))), nil, 200)
	require.Equal(t, "t3", one["turn_instance_id"])
	require.Contains(t, one, "log_tail")

	decisions, _ := list("/v1/goals/g/decisions", url.Values{}, "decisions")
	require.Len(t, decisions, 5)
	require.Equal(t, "u1", decisions[0]["turn_instance_id"])
	skips, _ := list("/v1/goals/g/decisions", url.Values{"decision": {"skip"}}, "decisions")
	require.Len(t, skips, 1)
	require.Equal(t, "busy", skips[0]["state"])
	require.Equal(t, "live_turn", skips[0]["reason"])
	busy, _ := list("/v1/goals/g/decisions", url.Values{"state": {"busy"}, "agent_id": {"a1"}}, "decisions")
	require.Equal(t, []string{"t4"}, ids(busy, "turn_instance_id"))
	page, next := list("/v1/goals/g/decisions", url.Values{"limit": {"2"}}, "decisions")
	require.Equal(t, []string{"u1", "t4"}, ids(page, "turn_instance_id"))
	page, _ = list("/v1/goals/g/decisions", url.Values{"limit": {"2"}, "cursor": {next}}, "decisions")
	require.Equal(t, []string{"t3", "t2"}, ids(page, "turn_instance_id"))

	// Bad filters name the input at fault; an agent token reads its own goal only.
	for q, field := range map[string]string{"state=sleeping": "state", "since=yesterday": "since", "cursor=abc": "cursor",
		"limit=500": "limit", "decision=maybe": "decision", "agent_id=A%20B": "agent_id"} {
		path := "/v1/goals/g/decisions?" + q
		r := b.admin(t, "GET", path, nil)
		require.Contains(t, []int{400, 422}, r.status, "%s: %s", q, r.body)
		require.Equal(t, field, r.err(t).Field, q)
	}
	r := b.do(t, "GET", "/v1/goals/g/turns", tokA, "", nil)
	require.Equal(t, 200, r.status)
	r = b.do(t, "GET", "/v1/goals/other/turns", tokA, "", nil)
	require.Equal(t, http.StatusForbidden, r.status)
}

// A turn's log tail is the admin's and its own agent's to read: a peer agent's token on the
// same goal sees the turn without it.
func TestLogTailIsForTheAdminAndTheTurnsAgent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tokA := b.goalWithAgent(t, "g", "a1")
	tokB := b.agent(t, "g", "a2")
	b.mustAdmin(t, "POST", "/v1/goals/g/todos", map[string]any{"text": "Write the parser"}, 201)
	d := b.mustAdmin(t, "POST", "/v1/goals/g/should-run", map[string]any{"agent_id": "a1", "turn_instance_id": "t1", "begin_turn": true}, 200)
	turnID := int64(d["turn"].(map[string]any)["turn_id"].(float64))
	require.NoError(t, b.st.RecordTurnLog(t.Context(), turnID, "build ok\nAuthorization: Bearer [REDACTED]"))
	path := "/v1/goals/g/turns/" + strconv.FormatInt(turnID, 10)

	read := func(token string) map[string]any {
		t.Helper()
		r := b.do(t, "GET", path, token, "", nil)
		require.Equal(t, http.StatusOK, r.status, string(r.body))
		return r.json(t)
	}
	require.Contains(t, read(adminToken)["log_tail"], "build ok")
	require.Contains(t, read(tokA)["log_tail"], "build ok", "the turn's own agent")
	peer := read(tokB)
	require.Equal(t, "", peer["log_tail"], "a peer agent's token")
	require.Equal(t, "a1", peer["agent_id"], "the rest of the turn is shown")
}
