package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"loopx/bot/sandbox"
	"loopx/store"
	"loopx/store/storetest"
)

// TestGoalContractWalkthrough drives the goal contract through a real `loopx serve
// --sandbox` (the scheduler on an accelerated clock: a one-minute heartbeat fires every
// second), the real CLI with the admin's and the agents' own tokens, and the Lark emulator:
// criteria and a capability set by preview → confirm; an agent without the capability cannot
// claim the todo that needs it; finishing a todo without evidence naming its criteria is
// refused, then accepted with it; a handoff from one agent to another is carried in the
// receiver's should-run until it acknowledges it; a replan is announced until acknowledged;
// finishing the goal is previewed and confirmed, its heartbeats stop and should-run answers
// done; reopening starts them again. Every wait is for a state.
func TestGoalContractWalkthrough(t *testing.T) {
	t.Parallel()
	dbURL := storetest.NewDatabase(t)
	sandboxURL := "http://" + freeAddr(t)
	s := startServe(t, map[string]string{
		"DATABASE_URL": dbURL, "LOOPX_ADMIN_TOKEN": e2eAdminToken, "LOOPX_HOME": t.TempDir(),
		"LOOPX_SANDBOX_ADDR": strings.TrimPrefix(sandboxURL, "http://"), "LOOPX_DEMO": "off", "LOOPX_SANDBOX_STATE": "off",
		"LOOPX_TEST_CLOCK": fmt.Sprintf("%s,%d,60", time.Now().UTC().Format(time.RFC3339), time.Now().UnixNano()),
	})
	ctx := t.Context()
	pool, err := store.Open(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	admin := e2eAdminToken
	ctl, err := sandbox.NewClient(sandboxURL, "")
	require.NoError(t, err)

	s.ok(t, admin, "goal", "create", "--goal-id", "g", "--title", "Parser", "--objective", "Write the CSV parser",
		"--owner", "ou_owner", "--heartbeat", "* * * * *")
	tokens := map[string]string{}
	for _, a := range []string{"a", "b"} {
		tokens[a] = s.ok(t, admin, "agent", "register", "--goal-id", "g", "--agent-id", a)["token"].(string)
	}
	r := &room{t: t, ctl: ctl, id: "oc_team"}
	r.say("ou_owner", "/bind #g")
	r.wait("the bind is answered", time.Minute, func(m sandbox.MessageView) bool { return strings.Contains(m.Text, "#g") })

	// 1. The contract, previewed and confirmed: a criterion of the goal, a capability, a scope.
	p := s.ok(t, admin, "goal", "set", "--goal-id", "g", "--add-criterion", "g1: the parser is released",
		"--capability", "publish", "--scope-editable", "parser/**", "--scope-protected", "deploy/**", "--preview")
	require.Equal(t, "preview_ready", p["state"])
	require.Equal(t, "Write the CSV parser", s.ok(t, admin, "goal", "show", "--goal-id", "g")["objective"])
	require.Empty(t, s.ok(t, admin, "goal", "show", "--goal-id", "g")["capabilities"], "nothing applies before the confirmation")
	s.ok(t, admin, "proposal", "confirm", fmt.Sprint(p["proposal_id"]))
	g := s.ok(t, admin, "goal", "show", "--goal-id", "g")
	require.Equal(t, []any{"publish"}, g["capabilities"])
	contract := g["contract"].(map[string]any)
	require.Equal(t, []any{"deploy/**"}, contract["scope"].(map[string]any)["protected"])
	sources := map[string]string{}
	for _, v := range g["settings"].([]any) {
		m := v.(map[string]any)
		sources[m["setting"].(string)] = m["source"].(string)
	}
	require.Equal(t, "override", sources["heartbeat_spec"], "goal show marks each value's source")
	require.Equal(t, "default", sources["allowed_slots"])

	// 2. A todo that needs the capability: the agent without it cannot claim it.
	todo := s.ok(t, admin, "todo", "add", "--goal-id", "g", "--text", "Release the parser", "--requires", "publish",
		"--criterion", "c1: the release page links the notes")
	todoID := fmt.Sprint(int64(todo["todo_id"].(float64)))
	claim := s.cli(t, tokens["a"], "todo", "claim", "--goal-id", "g", "--todo-id", todoID, "--agent-id", "a")
	require.Equal(t, 1, claim.code, claim.stderr)
	require.Contains(t, claim.stderr, "needs publish")
	d := s.ok(t, tokens["a"], "quota", "should-run", "--goal-id", "g", "--agent-id", "a")
	require.Equal(t, "missing_capability", d["reason"], "should-run does not offer it, and says why")
	grant := s.ok(t, admin, "agent", "grant", "--goal-id", "g", "--agent-id", "a", "--capability", "publish", "--preview")
	s.ok(t, admin, "proposal", "confirm", fmt.Sprint(grant["proposal_id"]))
	s.ok(t, tokens["a"], "todo", "claim", "--goal-id", "g", "--todo-id", todoID, "--agent-id", "a")

	// 3. Finishing it without evidence naming its criterion is refused; with it, accepted.
	s.ok(t, tokens["a"], "evidence", "add", "--goal-id", "g", "--agent-id", "a", "--todo-id", todoID, "--summary", "tagged v1")
	done := s.cli(t, tokens["a"], "todo", "done", "--goal-id", "g", "--todo-id", todoID, "--agent-id", "a")
	require.Equal(t, 1, done.code, done.stderr)
	require.Contains(t, done.stderr, "c1 (the release page links the notes)")
	s.ok(t, tokens["a"], "evidence", "add", "--goal-id", "g", "--agent-id", "a", "--todo-id", todoID,
		"--criterion", "c1", "--criterion", "g1", "--summary", "release page: https://example.invalid/v1")
	require.Equal(t, "done", s.ok(t, tokens["a"], "todo", "done", "--goal-id", "g", "--todo-id", todoID, "--agent-id", "a")["status"])

	// 4. A handoff: agent a hands a todo to b with a note; b's should-run carries it until b
	// acknowledges it.
	next := s.ok(t, admin, "todo", "add", "--goal-id", "g", "--text", "Review the quoting rules", "--agent-id", "a", "--claim")
	nextID := fmt.Sprint(int64(next["todo_id"].(float64)))
	s.ok(t, tokens["a"], "evidence", "add", "--goal-id", "g", "--agent-id", "a", "--todo-id", nextID, "--summary", "drafted the rules")
	h := s.ok(t, tokens["a"], "todo", "handoff", "--goal-id", "g", "--todo-id", nextID, "--agent-id", "a", "--to", "b",
		"--kind", "review", "--note", "the rules are drafted", "--next", "review them against RFC 4180")
	for range 2 { // carried on every answer, not only the first
		d = s.ok(t, tokens["b"], "quota", "should-run", "--goal-id", "g", "--agent-id", "b")
		c, _ := d["continuation"].(map[string]any)
		require.NotNil(t, c, "b's should-run carries the continuation: %v", d)
		require.Equal(t, h["handoff_id"], c["handoff_id"])
		require.Equal(t, "review", c["kind"])
		require.Equal(t, "review them against RFC 4180", c["next"])
		require.Equal(t, nextID, fmt.Sprint(int64(d["selected_todo"].(map[string]any)["todo_id"].(float64))))
	}
	s.ok(t, tokens["b"], "ack", "--goal-id", "g", "--agent-id", "b", "--handoff-id", fmt.Sprint(h["handoff_id"]))
	d = s.ok(t, tokens["b"], "quota", "should-run", "--goal-id", "g", "--agent-id", "b")
	require.Nil(t, d["continuation"], "acknowledged: no longer carried")
	done2 := s.ok(t, tokens["b"], "todo", "done", "--goal-id", "g", "--todo-id", nextID, "--agent-id", "b")
	require.Equal(t, "done", done2["status"])

	// 5. A replan, previewed, confirmed, recorded with its reason and announced to every agent
	// until it acknowledges it.
	rp := s.ok(t, admin, "goal", "replan", "--goal-id", "g", "--objective", "Write the CSV and JSON parsers",
		"--because", "the customer sends JSON too", "--preview")
	s.ok(t, admin, "proposal", "confirm", fmt.Sprint(rp["proposal_id"]))
	trail := s.ok(t, admin, "goal", "trail", "--goal-id", "g")["decisions"].([]any)
	require.Equal(t, "the customer sends JSON too", trail[0].(map[string]any)["reason"])
	for _, a := range []string{"a", "b"} {
		d = s.ok(t, tokens[a], "quota", "should-run", "--goal-id", "g", "--agent-id", a)
		oc, _ := d["objective_changed"].(map[string]any)
		require.NotNil(t, oc, "agent %s is told", a)
		require.Equal(t, "Write the CSV and JSON parsers", oc["after"])
		s.ok(t, tokens[a], "ack", "--goal-id", "g", "--agent-id", a, "--decision-id", fmt.Sprint(oc["decision_id"]))
		require.Nil(t, s.ok(t, tokens[a], "quota", "should-run", "--goal-id", "g", "--agent-id", a)["objective_changed"])
	}

	// 6. Finishing the goal: previewed (what is unmet, what stops), confirmed; its heartbeats
	// stop and should-run answers done. Reopening starts them again.
	ticks := func() (n int) {
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM tick WHERE goal_id = 'g'`).Scan(&n))
		return n
	}
	require.Eventually(t, func() bool { return ticks() > 0 }, 2*time.Minute, 100*time.Millisecond, "the heartbeat ticks")
	// Every todo is finished and g1 met: LoopX proposed finishing the goal itself, and its
	// card reached the chat. An owner's own preview (with a reason) takes its place.
	var auto int64
	require.Eventually(t, func() bool {
		return pool.QueryRow(ctx, `SELECT id FROM proposal WHERE goal_id = 'g' AND kind = 'goal.done' AND proposed_by = 'system'
			AND state = 'preview_ready'`).Scan(&auto) == nil
	}, time.Minute, 100*time.Millisecond, "LoopX proposes finishing the goal")
	r.wait("the proposal's card reaches the chat", time.Minute, func(m sandbox.MessageView) bool {
		return m.Card != nil && strings.Contains(m.Card.Title, fmt.Sprintf("p%d", auto))
	})
	fin := s.ok(t, admin, "goal", "done", "--goal-id", "g", "--reason", "released", "--preview")
	var state string
	var successor int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT state, coalesce(successor_id, 0) FROM proposal WHERE id = $1`, auto).Scan(&state, &successor))
	require.Equal(t, "stale", state)
	require.Equal(t, int64(fin["proposal_id"].(float64)), successor)
	require.Contains(t, fmt.Sprint(fin["effects_text"]), "heartbeats and scheduled reports stop until an owner reopens the goal")
	s.ok(t, admin, "proposal", "confirm", fmt.Sprint(fin["proposal_id"]))
	d = s.ok(t, tokens["a"], "quota", "should-run", "--goal-id", "g", "--agent-id", "a")
	require.Equal(t, "done", d["state"])
	require.Equal(t, "goal_done", d["reason"])
	requireHeartbeats(ctx, t, pool, false)
	reopen := s.ok(t, admin, "goal", "reopen", "--goal-id", "g", "--preview")
	s.ok(t, admin, "proposal", "confirm", fmt.Sprint(reopen["proposal_id"]))
	requireHeartbeats(ctx, t, pool, true)
	before := ticks()
	require.Eventually(t, func() bool { return ticks() > before }, 2*time.Minute, 100*time.Millisecond, "heartbeats run again")
	require.NotEqual(t, "done", s.ok(t, tokens["a"], "quota", "should-run", "--goal-id", "g", "--agent-id", "a")["state"])
	kinds := []string{}
	for _, d := range s.ok(t, admin, "goal", "trail", "--goal-id", "g")["decisions"].([]any) {
		kinds = append(kinds, d.(map[string]any)["kind"].(string))
	}
	require.Equal(t, []string{"reopen", "done", "replan"}, kinds)
}

// requireHeartbeats checks that goal g's heartbeat schedules are all on (or all off).
func requireHeartbeats(ctx context.Context, t *testing.T, pool *pgxpool.Pool, on bool) {
	t.Helper()
	var enabled, all int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE enabled), count(*) FROM schedule
		WHERE goal_id = 'g' AND kind = 'heartbeat'`).Scan(&enabled, &all))
	require.Equal(t, 2, all)
	if on {
		require.Equal(t, all, enabled, "heartbeats run")
	} else {
		require.Zero(t, enabled, "heartbeats stop")
	}
}
