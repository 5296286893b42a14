package scheduler_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loopx/scheduler"
	"loopx/store"
	"loopx/store/storetest"
)

// buildLoopx compiles the loopx binary for process-level tests.
func buildLoopx(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "loopx")
	out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "loopx/cmd/loopx").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

type serveProc struct {
	name string
	cmd  *exec.Cmd
	log  string
}

func startServe(t *testing.T, bin, url, name string, env ...string) *serveProc {
	t.Helper()
	home := t.TempDir()
	logPath := filepath.Join(home, "serve.log")
	logFile, err := os.Create(logPath)
	require.NoError(t, err)
	t.Cleanup(func() { logFile.Close() })
	cmd := exec.Command(bin, "serve")
	cmd.Env = append([]string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + home, "LOOPX_HOME=" + home,
		"DATABASE_URL=" + url, "LOOPX_LISTEN=127.0.0.1:0", "LOOPX_ADMIN_TOKEN=admin-token-for-tests-0123456789",
		"LOOPX_REPLICA=" + name, "LOOPX_DEMO=off", "LOG_LEVEL=warn",
	}, env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	require.NoError(t, cmd.Start())
	p := &serveProc{name: name, cmd: cmd, log: logPath}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_, _ = cmd.Process.Wait()
		}
	})
	return p
}

func (p *serveProc) dump(t *testing.T) {
	b, _ := os.ReadFile(p.log)
	t.Logf("%s log:\n%s", p.name, b)
}

// Three `loopx serve` processes on one database, 1,000 goals with one-minute heartbeats (poll
// runner), an accelerated clock (60x: a minute every second) covering more than 30 fire times;
// one replica is killed with SIGKILL mid-run. Every (schedule, fire time) up to the cut-off
// has exactly one tick row, there are no duplicates and the chain of planned fires has no gap.
func TestServeReplicasKill9(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("process-level scale test")
	}
	ctx := t.Context()
	bin := buildLoopx(t)
	url := storetest.NewDatabase(t)
	pool, err := store.Open(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	const goals = 1000
	seedGoals(t, pool, "p", goals, "* * * * *", "UTC", store.RunnerPoll)

	const scale = 60.0
	epoch := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	anchor := time.Now().Add(2 * time.Second)
	clockEnv := fmt.Sprintf("LOOPX_TEST_CLOCK=%s,%d,%g", epoch.Format(time.RFC3339), anchor.UnixNano(), scale)
	simNow := func() time.Time { return epoch.Add(time.Duration(float64(time.Since(anchor)) * scale)) }

	var procs []*serveProc
	for _, name := range []string{"p1", "p2", "p3"} {
		procs = append(procs, startServe(t, bin, url, name, clockEnv))
	}
	time.Sleep(time.Until(anchor.Add(12 * time.Second))) // twelve simulated minutes
	require.NoError(t, procs[2].cmd.Process.Signal(syscall.SIGKILL))
	_, _ = procs[2].cmd.Process.Wait()
	killedAt := simNow()

	time.Sleep(time.Until(anchor.Add(35 * time.Second))) // 35 simulated minutes in all
	cutoff := simNow().Add(-2 * time.Minute)
	for _, p := range procs[:2] {
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	}
	for _, p := range procs[:2] {
		done := make(chan error, 1)
		go func() { done <- p.cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				p.dump(t)
			}
			require.NoError(t, err, "%s exits cleanly on SIGTERM", p.name)
		case <-time.After(20 * time.Second):
			p.dump(t)
			t.Fatalf("%s did not stop", p.name)
		}
	}

	ticks := allTicks(t, pool)
	require.Len(t, ticks, goals)
	fires := 0
	for _, list := range ticks {
		g := list[0].goal
		j := scheduler.Jitter(g, 60*time.Second)
		first := list[0].fire.UTC()
		var want []time.Time
		for f := first; !f.Add(j).After(cutoff); f = f.Add(time.Minute) {
			want = append(want, f)
		}
		require.GreaterOrEqual(t, len(want), 30, "goal %s covers 30 fire times", g)
		got := make([]time.Time, 0, len(want))
		for _, r := range list {
			if !r.fire.Add(j).After(cutoff) {
				got = append(got, r.fire.UTC())
			}
		}
		require.Equal(t, want, got, "goal %s: one row per fire time up to the cut-off", g)
		fires += len(want)
	}
	var rows, distinct int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT (schedule_id, fire_at)) FROM tick`).Scan(&rows, &distinct))
	require.Equal(t, rows, distinct, "no duplicates")
	checkChains(t, pool)

	byReplica := map[string]int{}
	var missed int
	r, err := pool.Query(ctx, `SELECT replica, count(*), count(*) FILTER (WHERE outcome = 'missed') FROM tick GROUP BY replica`)
	require.NoError(t, err)
	for r.Next() {
		var name string
		var n, m int
		require.NoError(t, r.Scan(&name, &n, &m))
		byReplica[name] = n
		missed += m
	}
	r.Close()
	require.Positive(t, byReplica["p3"], "p3 worked before it was killed")
	var after int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM tick WHERE replica = 'p3' AND decided_at > $1`, killedAt).Scan(&after))
	require.Zero(t, after, "nothing from p3 after SIGKILL")
	t.Logf("%d goals, %d fire times checked, %d rows, by replica %v, missed (lag) %d", goals, fires, rows, byReplica, missed)

	// Downtime: every replica is down for more than 10 fire times. A restarted replica runs
	// one catch-up tick per schedule (the newest passed fire) and records the rest missed.
	pending := map[int64]time.Time{}
	pr, err := pool.Query(ctx, `SELECT id, next_fire_at FROM schedule WHERE kind = 'heartbeat'`)
	require.NoError(t, err)
	for pr.Next() {
		var id int64
		var at time.Time
		require.NoError(t, pr.Scan(&id, &at))
		pending[id] = at
	}
	pr.Close()
	time.Sleep(10 * time.Second) // ten simulated minutes with no replica
	back := startServe(t, bin, url, "p4", clockEnv)
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(DISTINCT schedule_id) FROM tick WHERE catch_up`).Scan(&n))
		return n == goals
	}, 30*time.Second, 200*time.Millisecond, "one catch-up per schedule")
	require.NoError(t, back.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, back.cmd.Wait())

	after2 := allTicks(t, pool)
	for sched, list := range after2 {
		// The rows from the pending fire up to the first catch-up are the downtime: all
		// missed but the catch-up. (Later rows may be more lag at 60x; they are not the gap.)
		var gap []tickRow
		for _, r := range list {
			if r.fire.Before(pending[sched]) {
				continue
			}
			gap = append(gap, r)
			if r.catchUp {
				break
			}
		}
		require.GreaterOrEqual(t, len(gap), 10, "schedule %d: the downtime covered at least 10 fires", sched)
		require.True(t, gap[len(gap)-1].catchUp, "schedule %d: one catch-up, the newest passed fire", sched)
		for _, r := range gap[:len(gap)-1] {
			require.Equal(t, "missed", r.outcome, "schedule %d fire %s", sched, r.fire)
			require.False(t, r.catchUp)
		}
	}
	checkChains(t, pool)
}

// The sandbox demo end to end: `loopx serve` (sandbox) seeds the demo goal, the bundled
// examples/demo-agent.sh drives the real CLI with its per-turn token, claims the first todo,
// adds evidence and asks a gate; once the owner approves, the next turns finish both todos.
// The scheduler clock runs 60x so the one-minute heartbeat comes every second.
func TestSandboxDemoAgentDrivesTheCLI(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("process-level test")
	}
	ctx := t.Context()
	bin := buildLoopx(t)
	url := storetest.NewDatabase(t)
	pool, err := store.Open(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	st := store.New(pool, store.Options{})
	clockEnv := fmt.Sprintf("LOOPX_TEST_CLOCK=%s,%d,60", time.Now().UTC().Format(time.RFC3339), time.Now().UnixNano())
	// The agent calls back on LOOPX_LISTEN, so the port must be known before serve starts.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := lis.Addr().String()
	require.NoError(t, lis.Close())
	p := startServe(t, bin, url, "demo", clockEnv, "LOOPX_DEMO=on", "LOG_LEVEL=info", "LOOPX_LISTEN="+addr)
	defer func() {
		if t.Failed() {
			p.dump(t)
		}
	}()

	var gate store.Gate
	require.Eventually(t, func() bool {
		gates, err := st.ListGates(ctx, store.ListGatesParams{GoalID: scheduler.DemoGoalID, Status: store.GateOpen})
		if err != nil || len(gates) == 0 {
			return false
		}
		gate = gates[0]
		return true
	}, 45*time.Second, 200*time.Millisecond, "the demo agent asks a gate")
	require.Contains(t, gate.Question, "May I publish them?")
	ev, err := st.ListEvidence(ctx, store.ListEvidenceParams{GoalID: scheduler.DemoGoalID})
	require.NoError(t, err)
	require.NotEmpty(t, ev, "evidence before the gate")

	// Someone writes to the agent while its todo waits: the next turn answers first.
	item, _, err := store.InsertInboxItem(ctx, pool, store.InboxInsert{GoalID: scheduler.DemoGoalID, AgentID: "writer",
		Text: "hi, what are you doing?", Sender: "ou_demo_owner", SourceChat: "oc_demo", SourceMessage: "om_hi"}, 0)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		var state string
		require.NoError(t, pool.QueryRow(ctx, `SELECT state FROM inbox_item WHERE id = $1`, item.ID).Scan(&state))
		return state == "acked"
	}, 45*time.Second, 200*time.Millisecond, "the agent drains, answers and acks the message")
	var replies int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE receive_id = 'oc_demo' AND content LIKE '%demo agent%'`).Scan(&replies))
	require.Equal(t, 1, replies, "one reply in the chat")

	_, err = st.AnswerGate(ctx, store.AnswerGateParams{GoalID: scheduler.DemoGoalID, GateID: gate.ID, Answer: "approve",
		AnsweredBy: "ou_demo_owner", Meta: admin})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		todos, err := st.ListTodos(ctx, store.ListTodosParams{GoalID: scheduler.DemoGoalID, Statuses: []string{store.TodoDone}})
		// A turn the agent settled itself (spend-slot) stops being live before its process
		// exits; the runner stores the log tail after the exit, so wait for the tails too.
		var live, untailed int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 'live'), count(*) FILTER (WHERE log_tail = '')
			FROM turn WHERE goal_id = $1`, scheduler.DemoGoalID).Scan(&live, &untailed))
		return err == nil && len(todos) == 2 && live == 0 && untailed == 0
	}, 45*time.Second, 200*time.Millisecond, "the agent continues after the approval and finishes both todos")

	rows, err := pool.Query(ctx, `SELECT state, log_tail FROM turn WHERE goal_id = $1 ORDER BY id`, scheduler.DemoGoalID)
	require.NoError(t, err)
	defer rows.Close()
	n := 0
	for rows.Next() {
		var state, tail string
		require.NoError(t, rows.Scan(&state, &tail))
		require.Equal(t, store.TurnOK, state, tail)
		require.Contains(t, tail, "[demo-agent]")
		n++
	}
	require.GreaterOrEqual(t, n, 3)
}
