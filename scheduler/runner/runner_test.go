package runner_test

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loopx/quota"
	"loopx/scheduler"
	"loopx/scheduler/runner"
	"loopx/store"
	"loopx/store/storetest"
	"loopx/templates"
)

var admin = store.Meta{Actor: "admin", Surface: "api"}

// testBundle is a goal with one agent driven by a real scheduler, quota service and runner.
type testBundle struct {
	st    *store.Store
	qs    *quota.Service
	sched *scheduler.Scheduler
	clock *storetest.Clock
	goal  string
	agent string
	todo  store.Todo
}

// setup creates goal "g" with a one-minute heartbeat, agent "a1" with the given runner and
// settings, and one runnable todo. The clock starts just before a minute boundary, in the
// future so the turn lease (fake clock) is later than the real time the runners use.
func setup(t *testing.T, kind string, settings any, stallTurns int) *testBundle {
	t.Helper()
	return setupGoal(t, kind, settings, store.CreateGoalParams{StallTurns: &stallTurns})
}

// setupGoal is setup with more of the goal given (its contract).
func setupGoal(t *testing.T, kind string, settings any, goal store.CreateGoalParams) *testBundle {
	t.Helper()
	ctx := t.Context()
	c := storetest.NewClock(time.Now().UTC().Truncate(time.Minute).Add(time.Hour + 50*time.Second))
	st := storetest.New(t, store.Options{Now: c.Now})
	goal.ID, goal.Title, goal.Objective, goal.Owners = "g", "Test goal", "Prove the runner.", []string{"ou_owner"}
	goal.HeartbeatSpec, goal.HeartbeatTZ, goal.Meta = "* * * * *", "UTC", admin
	_, err := st.CreateGoal(ctx, goal)
	require.NoError(t, err)
	raw, err := json.Marshal(settings)
	require.NoError(t, err)
	_, err = st.RegisterAgent(ctx, store.RegisterAgentParams{GoalID: "g", AgentID: "a1", Runner: kind, RunnerConfig: raw, Meta: admin})
	require.NoError(t, err)
	todo, err := st.AddTodo(ctx, store.AddTodoParams{GoalID: "g", Text: "Do the thing", Meta: admin})
	require.NoError(t, err)
	set, err := templates.New()
	require.NoError(t, err)
	qs := quota.NewService(st, testTemplates(t), quota.Options{Now: c.Now})
	base := runner.Base{URL: "http://127.0.0.1:7377", Goals: st, Tokens: st, Templates: set, Secrets: st}
	sched, err := scheduler.New(scheduler.Config{
		Store: st, Decider: qs, Now: c.Now, MaxJitter: -1, Replica: "t",
		Runners: map[string]scheduler.Runner{
			store.RunnerExec:    &runner.Exec{Base: base, Grace: 500 * time.Millisecond},
			store.RunnerWebhook: &runner.Webhook{Base: base, Backoff: 50 * time.Millisecond},
		},
	})
	require.NoError(t, err)
	return &testBundle{st: st, qs: qs, sched: sched, clock: c, goal: "g", agent: "a1", todo: todo}
}

// fire moves the clock to the next minute boundary and runs one Step.
func (b *testBundle) fire(t *testing.T) scheduler.Stats {
	t.Helper()
	now := b.clock.Now()
	b.clock.Add(now.Truncate(time.Minute).Add(time.Minute).Sub(now))
	st, err := b.sched.Step(t.Context())
	require.NoError(t, err)
	return st
}

type turnRow struct {
	id                       int64
	instance, state, outcome string
	tail                     string
}

func (b *testBundle) turns(t *testing.T) []turnRow {
	t.Helper()
	rows, err := b.st.DB().Query(context.Background(), `SELECT id, instance_id, state, outcome, log_tail FROM turn ORDER BY id`)
	require.NoError(t, err)
	defer rows.Close()
	var out []turnRow
	for rows.Next() {
		var r turnRow
		require.NoError(t, rows.Scan(&r.id, &r.instance, &r.state, &r.outcome, &r.tail))
		out = append(out, r)
	}
	return out
}

func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "agent.sh")
	require.NoError(t, os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755))
	return p
}

// waitFor polls cond; the deadline catches a stuck test, not a slow machine.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestExecEnvironmentAndStdin(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	agent := script(t, `env > "$OUT/env"; cat > "$OUT/stdin"; cat "$LOOPX_PROMPT_FILE" > "$OUT/prompt"; echo "$1" > "$OUT/arg"; echo finished`)
	b := setup(t, store.RunnerExec, runner.ExecSettings{Argv: []string{"/bin/sh", agent, "{{prompt}}"}, Env: map[string]string{"OUT": out}}, 3)

	st := b.fire(t)
	require.Equal(t, 1, st.Started)
	b.sched.Wait()

	env := map[string]string{}
	raw, err := os.ReadFile(filepath.Join(out, "env"))
	require.NoError(t, err)
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		env[k] = v
	}
	turns := b.turns(t)
	require.Len(t, turns, 1)
	require.Equal(t, "g", env["LOOPX_GOAL_ID"])
	require.Equal(t, "a1", env["LOOPX_AGENT_ID"])
	require.Equal(t, turns[0].instance, env["LOOPX_TURN_ID"])
	require.Equal(t, "http://127.0.0.1:7377", env["LOOPX_URL"])
	require.True(t, strings.HasPrefix(env["LOOPX_TOKEN"], "lxt_"), "a per-turn token")
	allowed := map[string]bool{"PATH": true, "HOME": true, "USER": true, "LANG": true, "LC_ALL": true, "TMPDIR": true,
		"TERM": true, "OUT": true, "PWD": true, "SHLVL": true, "_": true, "OLDPWD": true}
	for k := range env {
		require.True(t, allowed[k] || strings.HasPrefix(k, "LOOPX_"), "the server's %s leaked into the agent", k)
	}

	var packet runner.Packet
	raw, err = os.ReadFile(filepath.Join(out, "stdin"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &packet))
	require.Equal(t, "loopx_turn_packet_v1", packet.Version)
	require.Equal(t, turns[0].instance, packet.TurnInstanceID)
	require.Equal(t, "run", packet.ShouldRun.Decision)
	require.Equal(t, b.todo.ID, packet.ShouldRun.SelectedTodo.ID)
	require.Equal(t, "Prove the runner.", packet.Goal.Objective)
	prompt, err := os.ReadFile(filepath.Join(out, "prompt"))
	require.NoError(t, err)
	require.Contains(t, string(prompt), "Selected todo #"+strconv.FormatInt(b.todo.ID, 10))
	require.Contains(t, string(prompt), "loopx quota spend-slot --goal-id g --agent-id a1 --turn-instance-id "+turns[0].instance)
	arg, err := os.ReadFile(filepath.Join(out, "arg"))
	require.NoError(t, err)
	require.Equal(t, strings.TrimSpace(string(prompt)), strings.TrimSpace(string(arg)), "{{prompt}} in argv is the prompt")

	require.Equal(t, store.TurnOK, turns[0].state)
	require.Equal(t, "exit 0", turns[0].outcome)
	require.Contains(t, turns[0].tail, "finished")
	ticks, err := b.st.ListTicks(t.Context(), store.TicksParams{GoalID: "g"})
	require.NoError(t, err)
	require.Len(t, ticks, 1)
	require.Equal(t, store.TickRan, ticks[0].Outcome)
	require.Equal(t, turns[0].id, ticks[0].TurnID)
	// The hint (run_now, 3 minutes) stretched the one-minute cadence.
	require.Equal(t, ticks[0].FireAt.Add(3*time.Minute), ticks[0].NextFireAt)
}

func TestExecNonZeroExitFailsWithTail(t *testing.T) {
	t.Parallel()
	agent := script(t, `i=0; while [ $i -lt 2000 ]; do echo "line $i"; i=$((i+1)); done; echo "fatal: compiler exploded" >&2; exit 3`)
	b := setup(t, store.RunnerExec, runner.ExecSettings{Argv: []string{"/bin/sh", agent}}, 3)
	b.fire(t)
	b.sched.Wait()
	turns := b.turns(t)
	require.Len(t, turns, 1)
	require.Equal(t, store.TurnFailed, turns[0].state)
	require.Equal(t, "exit status 3", turns[0].outcome)
	require.True(t, strings.HasSuffix(strings.TrimSpace(turns[0].tail), "fatal: compiler exploded"))
	require.NotContains(t, turns[0].tail, "line 0\n", "only the tail is kept")
	require.LessOrEqual(t, len(turns[0].tail), 8<<10)
}

func TestExecTimeoutKillsProcessGroup(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	// The agent leaves a grandchild running and ignores SIGTERM itself.
	agent := script(t, `trap '' TERM; sleep 300 & echo $! > "$OUT/child"; echo started; sleep 300`)
	b := setup(t, store.RunnerExec, runner.ExecSettings{Argv: []string{"/bin/sh", agent}, Env: map[string]string{"OUT": out}, Timeout: "1s"}, 3)
	start := time.Now()
	b.fire(t)
	b.sched.Wait()
	// The 1 s timeout ends the turn, not the agent's 300 s sleeps; the bound leaves a busy
	// machine room to start and kill the processes.
	require.Less(t, time.Since(start), 30*time.Second)
	turns := b.turns(t)
	require.Len(t, turns, 1)
	require.Equal(t, store.TurnFailed, turns[0].state)
	require.Contains(t, turns[0].outcome, "timed out after 1s; process group killed")
	require.Contains(t, turns[0].tail, "started")
	raw, err := os.ReadFile(filepath.Join(out, "child"))
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	require.NoError(t, err)
	waitFor(t, "the grandchild to die", func() bool {
		return syscall.Kill(pid, 0) == syscall.ESRCH
	})
}

// While the exec turn is live, should-run answers busy and the next heartbeat is skipped,
// not queued; once the turn ends the agent runs again.
func TestExecBusyWhileTurnIsLive(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	agent := script(t, `touch "$OUT/running"; while [ ! -f "$OUT/release" ]; do sleep 0.05; done; echo done`)
	b := setup(t, store.RunnerExec, runner.ExecSettings{Argv: []string{"/bin/sh", agent}, Env: map[string]string{"OUT": out}}, 3)
	b.fire(t)
	waitFor(t, "the agent to start", func() bool { _, err := os.Stat(filepath.Join(out, "running")); return err == nil })

	d, err := b.qs.ShouldRun(t.Context(), quota.ShouldRunParams{GoalID: "g", AgentID: "a1"})
	require.NoError(t, err)
	require.Equal(t, "skip", d.Decision)
	require.Equal(t, quota.StateBusy, d.State)

	b.clock.Add(2 * time.Minute) // fire moves to the next minute: 3 minutes, as the hint stretched the cadence
	st := b.fire(t)
	require.Equal(t, 1, st.Ticks)
	require.Zero(t, st.Started, "a busy heartbeat never queues a turn")
	ticks, err := b.st.ListTicks(t.Context(), store.TicksParams{GoalID: "g"})
	require.NoError(t, err)
	require.Equal(t, store.TickSkipped, ticks[0].Outcome)
	require.Equal(t, quota.StateBusy, ticks[0].Reason)

	require.NoError(t, os.WriteFile(filepath.Join(out, "release"), nil, 0o644))
	b.sched.Wait()
	require.Len(t, b.turns(t), 1)
	require.Equal(t, store.TurnOK, b.turns(t)[0].state)
}

// The stall guard end to end: turns that make no progress, then should-run answers stalled,
// opens the stall gate, and the heartbeat stops spending turns.
func TestStallGuardStopsTheHeartbeat(t *testing.T) {
	t.Parallel()
	agent := script(t, `echo "thinking, but producing nothing"`)
	b := setup(t, store.RunnerExec, runner.ExecSettings{Argv: []string{"/bin/sh", agent}}, 2)
	var stalledAt int
	for i := range 12 {
		b.clock.Add(2 * time.Minute)
		b.fire(t)
		b.sched.Wait()
		ticks, err := b.st.ListTicks(t.Context(), store.TicksParams{GoalID: "g", Limit: 1})
		require.NoError(t, err)
		if len(ticks) > 0 && ticks[0].Reason == quota.StateStalled {
			stalledAt = i
			break
		}
	}
	require.NotZero(t, stalledAt, "should-run answered stalled")
	require.Len(t, b.turns(t), 2, "two turns without progress, then no more")
	gates, err := b.st.ListGates(t.Context(), store.ListGatesParams{GoalID: "g", Status: store.GateOpen})
	require.NoError(t, err)
	require.Len(t, gates, 1)
	require.Equal(t, store.GateKindStall, gates[0].Kind)

	// The heartbeat keeps firing but only records that it waits for the owner.
	for range 5 {
		b.clock.Add(2 * time.Hour)
		b.fire(t)
		b.sched.Wait()
	}
	require.Len(t, b.turns(t), 2, "no turn is spent while the stall gate is open")
	ticks, err := b.st.ListTicks(t.Context(), store.TicksParams{GoalID: "g", Limit: 1})
	require.NoError(t, err)
	require.Equal(t, store.TickSkipped, ticks[0].Outcome)
	require.Equal(t, quota.StateWaiting, ticks[0].Reason)
}

func TestWebhookSignedRetriedAndEndsTheTurn(t *testing.T) {
	t.Parallel()
	const secret = "0123456789abcdef-secret"
	var calls atomic.Int32
	var got struct {
		mu        sync.Mutex
		deliverys []string
		body      map[string]any
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ts, _ := strconv.ParseInt(r.Header.Get(runner.HeaderTimestamp), 10, 64)
		if r.Header.Get(runner.HeaderSignature) != runner.Sign(secret, ts, body) {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		got.mu.Lock()
		got.deliverys = append(got.deliverys, r.Header.Get(runner.HeaderDelivery))
		_ = json.Unmarshal(body, &got.body)
		got.mu.Unlock()
		if calls.Add(1) == 1 {
			http.Error(w, "warming up", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "agent did the work")
	}))
	defer srv.Close()
	b := setup(t, store.RunnerWebhook, runner.WebhookSettings{URL: srv.URL, Secret: secret}, 3)
	b.fire(t)
	b.sched.Wait()
	turns := b.turns(t)
	require.Len(t, turns, 1)
	require.Equal(t, store.TurnOK, turns[0].state, turns[0].outcome)
	require.Equal(t, int32(2), calls.Load())
	require.Equal(t, []string{turns[0].instance, turns[0].instance}, got.deliverys, "same delivery id on the retry")
	require.True(t, strings.HasPrefix(got.body["loopx_token"].(string), "lxt_"))
	require.Contains(t, turns[0].tail, "agent did the work")

	// A wrong secret is refused by the receiver: 401 is not retried and fails the turn.
	_, err := runner.ParseWebhookSettings(json.RawMessage(`{"url":"ftp://x","secret":"0123456789abcdef"}`))
	require.ErrorContains(t, err, "runner_config.url")
	_, err = runner.ParseWebhookSettings(json.RawMessage(`{"url":"https://x.example","secret":"short"}`))
	require.ErrorContains(t, err, "runner_config.secret")
}

func TestParseExecSettings(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ raw, field string }{
		{`{}`, "runner_config.argv"},
		{`{"shell":"echo hi"}`, "runner_config.shell"},
		{`{"argv":["x"],"shell":"y"}`, "runner_config.shell"},
		{`{"argv":["x"],"timeout":"soon"}`, "runner_config.timeout"},
		{`{"argv":["x"],"stdin":"file"}`, "runner_config.stdin"},
		{`{"argv":["x"],"env":{"LOOPX_TOKEN":"x"}}`, "runner_config.env.LOOPX_TOKEN"},
		{`{"argv":["x"],"argz":1}`, "runner_config"},
	} {
		_, err := runner.ParseExecSettings(json.RawMessage(c.raw), false)
		require.ErrorContains(t, err, c.field, c.raw)
	}
	s, err := runner.ParseExecSettings(json.RawMessage(`{"shell":"echo hi"}`), true)
	require.NoError(t, err)
	require.Equal(t, "echo hi", s.Shell)
}

// A 4xx other than 408/429 is the receiver refusing the turn: no retry, the turn fails.
func TestWebhookRefusalFailsWithoutRetry(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		http.Error(w, "signature rejected", http.StatusUnauthorized)
	}))
	defer srv.Close()
	b := setup(t, store.RunnerWebhook, runner.WebhookSettings{URL: srv.URL, Secret: "0123456789abcdef-other"}, 3)
	b.fire(t)
	b.sched.Wait()
	turns := b.turns(t)
	require.Len(t, turns, 1)
	require.Equal(t, store.TurnFailed, turns[0].state)
	require.Contains(t, turns[0].outcome, "webhook answered 401 (1 attempts)")
	require.Contains(t, turns[0].tail, "signature rejected")
	require.Equal(t, int32(1), calls.Load())
}

// testTemplates is the embedded template set, as serve builds it once.
func testTemplates(t testing.TB) *templates.Set {
	t.Helper()
	tpl, err := templates.New()
	require.NoError(t, err)
	return tpl
}

// An exec agent that prints its own key (set -x, a client echoing headers, base64 of it) and
// its turn token has neither stored in its turn's log tail.
func TestExecRedactsTheSecretsItWasGiven(t *testing.T) {
	t.Parallel()
	const key = "sk-live-8f3a9c2e71d04b5b"
	agent := script(t, `set -x
curl_header="Authorization: Bearer $API_KEY"
echo "$curl_header"
printf '%s' "$API_KEY" | base64
echo "token=$LOOPX_TOKEN"
printf 'x%.0s' $(seq 1 9000)
echo
echo "tail: $API_KEY"
exit 1`)
	b := setup(t, store.RunnerExec, runner.ExecSettings{Argv: []string{"/bin/sh", agent}, Env: map[string]string{"API_KEY": key, "MODE": "fast"}}, 3)
	b.fire(t)
	b.sched.Wait()
	turns := b.turns(t)
	require.Len(t, turns, 1)
	tail := turns[0].tail
	require.Contains(t, tail, "tail: "+runner.Redacted, "the secret's place is marked")
	require.NotContains(t, tail, key)
	require.NotContains(t, tail, base64.StdEncoding.EncodeToString([]byte(key)))
	require.NotContains(t, tail, "lxt_", "the turn token is redacted")
	require.NotContains(t, tail, key[len(key)-8:], "no piece of the key")
}

func TestRedactFindsEncodingsAndPieces(t *testing.T) {
	t.Parallel()
	const s = "pa55/word+secret=="
	for _, in := range []string{
		s, base64.StdEncoding.EncodeToString([]byte(s)), url.QueryEscape(s), hex.EncodeToString([]byte(s)),
		`{"k":"` + strings.ReplaceAll(s, "/", `\/`) + `"}`,
	} {
		out := runner.Redact("before "+in+" after", s)
		require.NotContains(t, out, "word+secret", in)
		require.Contains(t, out, runner.Redacted, in)
	}
	// Inside a longer base64 text, at each of the three offsets (an HTTP Basic header is
	// base64 of "user:secret"): only the characters at its ends that mix in the bytes around
	// it are left, never enough to read a piece of it back.
	for _, around := range []string{"user:" + s, "ab:" + s + "\n", "x" + s + "yz"} {
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
			in := "Authorization: Basic " + enc.EncodeToString([]byte(around))
			out := runner.Redact(in, s)
			require.Contains(t, out, runner.Redacted, in)
			rest := strings.TrimPrefix(out, "Authorization: Basic ")
			require.LessOrEqual(t, len(rest)-len(runner.Redacted), 12, "%s: %s", in, out)
		}
	}
	// A tail cut inside the secret loses the piece it starts with.
	require.Equal(t, runner.Redacted+" rest", runner.Redact("word+secret== rest", s))
	// Short values are left alone: they would blank out ordinary words.
	require.Equal(t, "mode fast", runner.Redact("mode fast", "fast"))
}
