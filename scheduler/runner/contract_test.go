package runner_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"loopx/scheduler/runner"
	"loopx/store"
)

// contractWorld is goal g with a scope, a capability, a goal criterion and a todo criterion;
// a todo with a criterion handed to agent a1 by a person, and a replan a1 has not acknowledged.
func contractWorld(t *testing.T, kind string, settings any) (*testBundle, store.Handoff, store.GoalDecision) {
	t.Helper()
	ctx := t.Context()
	stall := 3
	b := setupGoal(t, kind, settings, store.CreateGoalParams{StallTurns: &stall, ScopeEditable: []string{"src/**"},
		ScopeProtected: []string{"deploy/**"}, ScopeNotes: "Keep the public API.", Capabilities: []string{"write-code"},
		Criteria: []store.Criterion{{Text: "the release is tagged"}}})
	// The handed todo, with a criterion, comes before setup's (the continuation's todo first).
	todo, err := b.st.AddTodo(ctx, store.AddTodoParams{GoalID: "g", Text: "Check the parser", Criteria: []store.Criterion{{Text: "tests pass"}}, Meta: admin})
	require.NoError(t, err)
	b.todo = todo
	h, err := b.st.HandOff(ctx, store.HandoffParams{GoalID: "g", TodoID: b.todo.ID, To: "a1", Kind: store.HandoffVerify,
		Done: "the parser", Next: "check it against c1", Meta: admin})
	require.NoError(t, err)
	d, err := store.InsertDecision(ctx, b.st.DB(), store.GoalDecision{GoalID: "g", Kind: store.DecisionReplan, GoalVersion: 2,
		Before: "Prove the runner.", After: "Prove the runner and its packet.", Reason: "the packet matters", DecidedBy: "ou_owner"}, b.clock.Now())
	require.NoError(t, err)
	return b, h, d
}

// TestExecPacketCarriesTheContract: an exec agent reads the contract, the continuation and
// the objective change in its packet (top level and in should_run), their ids in its
// environment, and all of them in its prompt, with the commands that acknowledge them.
func TestExecPacketCarriesTheContract(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	agent := script(t, `env > "$OUT/env"; cat > "$OUT/stdin"; cat "$LOOPX_PROMPT_FILE" > "$OUT/prompt"`)
	b, h, dec := contractWorld(t, store.RunnerExec, runner.ExecSettings{Argv: []string{"/bin/sh", agent}, Env: map[string]string{"OUT": out}})
	require.Equal(t, 1, b.fire(t).Started)
	b.sched.Wait()

	var p runner.Packet
	raw, err := os.ReadFile(filepath.Join(out, "stdin"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &p))
	require.NotNil(t, p.Contract)
	require.Equal(t, []string{"src/**"}, p.Contract.Scope.Editable)
	require.Equal(t, []string{"deploy/**"}, p.Contract.Scope.Protected)
	require.Equal(t, []string{"write-code"}, p.Contract.Capabilities.Goal)
	require.Equal(t, "g1", p.Contract.Criteria[0].ID)
	require.Equal(t, h.ID, p.Continuation.ID)
	require.Equal(t, dec.ID, p.ObjectiveChanged.DecisionID)
	require.Equal(t, p.Contract, p.ShouldRun.Contract, "the should-run answer's own")
	require.Equal(t, "c1", p.ShouldRun.SelectedTodo.Criteria[0].ID)

	env, err := os.ReadFile(filepath.Join(out, "env"))
	require.NoError(t, err)
	require.Contains(t, string(env), "LOOPX_HANDOFF_ID="+strconv.FormatInt(h.ID, 10)+"\n")
	require.Contains(t, string(env), "LOOPX_DECISION_ID="+strconv.FormatInt(dec.ID, 10)+"\n")

	prompt, err := os.ReadFile(filepath.Join(out, "prompt"))
	require.NoError(t, err)
	for _, want := range []string{
		"change only: src/**", "never touch: deploy/**", "boundaries: Keep the public API.",
		"g1: the release is tagged", "c1: tests pass", "Handoff #" + strconv.FormatInt(h.ID, 10) + " (verify) for you",
		"next: check it against c1", "The objective changed (goal version 2, decided by ou_owner: the packet matters)",
		"loopx ack --goal-id g --agent-id a1 --handoff-id " + strconv.FormatInt(h.ID, 10),
		"loopx ack --goal-id g --agent-id a1 --decision-id " + strconv.FormatInt(dec.ID, 10),
		"--todo-id " + strconv.FormatInt(b.todo.ID, 10) + " --criterion c1 --summary",
	} {
		require.Contains(t, string(prompt), want)
	}
}

// TestWebhookBodyCarriesTheContract: the webhook's body is the same packet.
func TestWebhookBodyCarriesTheContract(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var body map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		_ = json.NewDecoder(r.Body).Decode(&body)
	}))
	defer srv.Close()
	b, h, dec := contractWorld(t, store.RunnerWebhook, runner.WebhookSettings{URL: srv.URL, Secret: "0123456789abcdef-secret"})
	b.fire(t)
	b.sched.Wait()
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []any{"deploy/**"}, body["contract"].(map[string]any)["scope"].(map[string]any)["protected"])
	require.Equal(t, float64(h.ID), body["continuation"].(map[string]any)["handoff_id"])
	require.Equal(t, float64(dec.ID), body["objective_changed"].(map[string]any)["decision_id"])
	require.True(t, strings.Contains(body["prompt"].(string), "never touch: deploy/**"))
}
