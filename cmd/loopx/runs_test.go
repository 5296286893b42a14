package main

import (
	"encoding/json"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loopx/api/apitest"
	"loopx/quota"
	"loopx/store"
	"loopx/store/storetest"
	"loopx/templates"
)

// cliServer runs the API in process, for CLI tests that need no serve process, and returns
// its store and URL.
func cliServer(t *testing.T, admin string) (*store.Store, string) {
	t.Helper()
	st := storetest.New(t, store.Options{})
	hs := httptest.NewServer(apitest.New(t, st, apitest.Options{AdminToken: admin}).API)
	t.Cleanup(hs.Close)
	return st, hs.URL
}

// loopx runs lists the run index, filtered and paged.
func TestRunsCommand(t *testing.T) {
	t.Parallel()
	const admin = "admin-token-for-runs-cli-tests"
	st, url := cliServer(t, admin)
	vars := map[string]string{"LOOPX_URL": url, "LOOPX_TOKEN": admin}
	ctx := t.Context()
	meta := store.Meta{Actor: "admin", Surface: "system"}
	_, err := st.CreateGoal(ctx, store.CreateGoalParams{ID: "demo", Owners: []string{"ou_o"}, Meta: meta})
	require.NoError(t, err)
	_, err = st.RegisterAgent(ctx, store.RegisterAgentParams{GoalID: "demo", AgentID: "codex", Meta: meta})
	require.NoError(t, err)
	q := quota.NewService(st, testTemplates(t), quota.Options{})
	d, err := q.ShouldRun(ctx, quota.ShouldRunParams{GoalID: "demo", AgentID: "codex", TurnInstanceID: "t0", BeginTurn: true, Meta: meta})
	require.NoError(t, err)
	require.Equal(t, "skip", d.Decision, "nothing to do yet")
	td, err := st.AddTodo(ctx, store.AddTodoParams{GoalID: "demo", Text: "Write the parser", Meta: meta})
	require.NoError(t, err)
	for _, turn := range []string{"t1", "t2", "t3"} {
		d, err = q.ShouldRun(ctx, quota.ShouldRunParams{GoalID: "demo", AgentID: "codex", TurnInstanceID: turn, BeginTurn: true, Meta: meta})
		require.NoError(t, err)
		require.Equal(t, "run", d.Decision)
		_, err = st.EndTurn(ctx, store.EndTurnParams{GoalID: "demo", AgentID: "codex", InstanceID: turn, State: store.TurnFailed,
			Outcome: "exit status 1", LogTail: "boom in " + turn, Meta: meta})
		require.NoError(t, err)
	}

	code, out, stderr := runInProcess(t, vars, "runs", "--goal-id", "demo", "--limit", "2")
	require.Equal(t, 0, code, stderr)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Equal(t, "TURN_ID\tAGENT_ID\tSTATE\tSTARTED_AT\tTODO_ID\tEVIDENCE\tSPENT\tOUTCOME", lines[0])
	require.Len(t, lines, 4, out)
	require.Contains(t, lines[1], "codex\tfailed")
	require.Contains(t, lines[1], "\t"+strconv.FormatInt(td.ID, 10)+"\t0\tfalse\texit status 1")
	require.True(t, strings.HasPrefix(lines[3], "more: --cursor "), out)
	cursor := strings.TrimPrefix(lines[3], "more: --cursor ")

	code, out, stderr = runInProcess(t, vars, "runs", "--goal-id", "demo", "--cursor", cursor, "--since", "1h", "--format", "json")
	require.Equal(t, 0, code, stderr)
	var page struct {
		Turns []store.RunTurn `json:"turns"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &page))
	require.Len(t, page.Turns, 1)
	require.Equal(t, "t1", page.Turns[0].InstanceID)

	code, out, stderr = runInProcess(t, vars, "runs", "show", "--goal-id", "demo", "--turn-id", strconv.FormatInt(page.Turns[0].ID, 10))
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "log_tail: boom in t1")

	code, out, stderr = runInProcess(t, vars, "runs", "decisions", "--goal-id", "demo", "--decision", "skip", "--since",
		time.Now().Add(-time.Hour).UTC().Format(time.RFC3339))
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "codex\tskip\tidle\tno_runnable_todo\tt0")
	require.NotContains(t, out, "\trun\t")

	code, _, stderr = runInProcess(t, vars, "runs", "--goal-id", "demo", "--since", "yesterday")
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, "--since")
	code, _, stderr = runInProcess(t, vars, "runs", "--goal-id", "demo", "--state", "sleeping")
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, "state")
}

// Listing an unknown goal exits 2 with the API's 404 (not_found), not an empty list.
func TestListingAnUnknownGoalExits2(t *testing.T) {
	t.Parallel()
	const admin = "admin-token-for-unknown-goal-tests"
	st, url := cliServer(t, admin)
	vars := map[string]string{"LOOPX_URL": url, "LOOPX_TOKEN": admin}
	_, err := st.CreateGoal(t.Context(), store.CreateGoalParams{ID: "demo", Owners: []string{"ou_o"}, Meta: store.Meta{Actor: "admin", Surface: "system"}})
	require.NoError(t, err)
	for _, args := range [][]string{
		{"todo", "list", "--goal-id", "nosuch"}, {"gate", "list", "--goal-id", "nosuch"},
		{"evidence", "list", "--goal-id", "nosuch"}, {"agent", "list", "--goal-id", "nosuch"},
	} {
		code, out, stderr := runInProcess(t, vars, args...)
		require.Equal(t, exitUsage, code, "%v: %s", args, out)
		require.Contains(t, stderr, `goal_id: no goal "nosuch" (not_found)`, args)
	}
	code, out, stderr := runInProcess(t, vars, "todo", "list", "--goal-id", "demo", "--status", "done")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "no todos\n", out, "a goal with no such todos is an empty list")
}

// testTemplates is the embedded template set, as serve builds it once.
func testTemplates(t testing.TB) *templates.Set {
	t.Helper()
	tpl, err := templates.New()
	require.NoError(t, err)
	return tpl
}
