package scheduler_test

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loopx/change"
	"loopx/quota"
	"loopx/scheduler"
	"loopx/store"
	"loopx/store/storetest"
	"loopx/templates"
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
	addr string
	cmd  *exec.Cmd
	log  string
	done chan error // the exit, once
}

// startServe starts `loopx serve` on a free port and returns once /readyz answers 200: by
// then serve has installed its signal handling (the first thing it does), so the test may
// signal it.
func startServe(t *testing.T, bin, url, name string, env ...string) *serveProc {
	t.Helper()
	home := t.TempDir()
	logPath := filepath.Join(home, "serve.log")
	logFile, err := os.Create(logPath)
	require.NoError(t, err)
	t.Cleanup(func() { logFile.Close() })
	addr := freeAddr(t)
	cmd := exec.Command(bin, "serve")
	cmd.Env = append([]string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + home, "LOOPX_HOME=" + home,
		"DATABASE_URL=" + url, "LOOPX_LISTEN=" + addr, "LOOPX_ADMIN_TOKEN=admin-token-for-tests-0123456789",
		"LOOPX_REPLICA=" + name, "LOOPX_DEMO=off", "LOG_LEVEL=warn",
	}, env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	require.NoError(t, cmd.Start())
	p := &serveProc{name: name, addr: addr, cmd: cmd, log: logPath, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // fails only when it has exited already
		<-p.done
		p.done <- nil
	})
	p.waitReady(t)
	return p
}

// freeAddr returns a loopback address whose port is free, for a process the test starts
// next. The port is drawn at random from below the kernel's ephemeral range: a port there is
// never handed to an outgoing connection or to a listener on port 0, so on a busy machine
// nothing else takes it in the seconds before serve binds it.
func freeAddr(t *testing.T) string {
	t.Helper()
	lo := 32768 // Linux's default first ephemeral port
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				lo = n
			}
		}
	}
	if lo > 12000 {
		for range 100 {
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(10000+rand.IntN(lo-10000)))
			if err == nil {
				defer l.Close()
				return l.Addr().String()
			}
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

// waitReady polls /readyz. The deadline only bounds a serve that never comes up; on a busy
// machine the start takes seconds.
func (p *serveProc) waitReady(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		select {
		case err := <-p.done:
			p.done <- err
			p.dump(t)
			t.Fatalf("%s exited during start: %v", p.name, err)
		default:
		}
		resp, err := http.Get("http://" + p.addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.dump(t)
	t.Fatalf("%s not ready after 2 minutes", p.name)
}

// stop sends SIGTERM and requires a clean exit.
func (p *serveProc) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	p.waitExit(t)
}

// waitExit requires a clean exit after SIGTERM. Serve's own shutdown grace is 5 s; the minute
// here only catches a hang, with room for a loaded machine.
func (p *serveProc) waitExit(t *testing.T) {
	t.Helper()
	select {
	case err := <-p.done:
		p.done <- err
		if err != nil {
			p.dump(t)
		}
		require.NoError(t, err, "%s exits cleanly on SIGTERM", p.name)
	case <-time.After(time.Minute):
		p.dump(t)
		t.Fatalf("%s did not stop within a minute of SIGTERM", p.name)
	}
}

func (p *serveProc) dump(t *testing.T) {
	b, _ := os.ReadFile(p.log)
	t.Logf("%s log:\n%s", p.name, b)
}

// waitFor polls cond until it holds. The deadlines are generous: they bound a run that is
// stuck, not one that is slow. A quarter second between polls keeps the queries over the tick
// table from taking much from the replicas.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// Three `loopx serve` processes on one database, 1,000 goals with one-minute heartbeats (poll
// runner), an accelerated clock (60x: a minute every second) covering more than 30 fire times;
// one replica is killed with SIGKILL mid-run. Every (schedule, fire time) up to the cut-off
// has exactly one tick row, there are no duplicates and the chain of planned fires has no gap.
// The test waits for simulated states (ticks recorded, simulated minutes passed), never for a
// real-time span, so a busy machine makes it slower, not wrong: the cut-off is the fire time
// every schedule has reached, and a replica that lags records its late fires as missed.
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
	count := func(q string, args ...any) int {
		var n int
		require.NoError(t, pool.QueryRow(ctx, q, args...).Scan(&n))
		return n
	}

	var procs []*serveProc
	for _, name := range []string{"p1", "p2", "p3"} {
		procs = append(procs, startServe(t, bin, url, name, clockEnv))
	}
	waitFor(t, 5*time.Minute, "twelve simulated minutes with ticks from p3", func() bool {
		return !simNow().Before(epoch.Add(12*time.Minute)) && count(`SELECT count(*) FROM tick WHERE replica = 'p3'`) > 0
	})
	require.NoError(t, procs[2].cmd.Process.Signal(syscall.SIGKILL))
	<-procs[2].done
	procs[2].done <- nil
	killedAt := simNow()

	// Run on until every schedule (p3's too) has fired through 23 simulated minutes after the
	// kill and holds 30 fire times up to the fire time all of them reached.
	const frontier = `SELECT min(m) FROM (SELECT max(run_at) AS m FROM tick GROUP BY schedule_id) AS f`
	waitFor(t, 10*time.Minute, "every schedule fired 23 simulated minutes past the kill, 30 fires each", func() bool {
		if count(`SELECT count(DISTINCT schedule_id) FROM tick`) < goals {
			return false
		}
		if count(`SELECT count(*) FROM (SELECT max(fire_at) AS m FROM tick GROUP BY schedule_id) AS f WHERE m < $1`,
			killedAt.Add(23*time.Minute)) > 0 {
			return false
		}
		return count(`SELECT min(n) FROM (SELECT count(*) AS n FROM tick WHERE run_at <= (`+frontier+`) GROUP BY schedule_id) AS c`) >= 30
	})
	for _, p := range procs[:2] {
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	}
	for _, p := range procs[:2] {
		p.waitExit(t)
	}
	var cutoff time.Time
	require.NoError(t, pool.QueryRow(ctx, frontier).Scan(&cutoff))

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
	require.Zero(t, count(`SELECT count(*) FROM tick WHERE replica = 'p3' AND decided_at > $1`, killedAt), "nothing from p3 after SIGKILL")
	t.Logf("%d goals, %d fire times checked up to %s, %d rows, by replica %v, missed (lag) %d", goals, fires, cutoff, rows, byReplica, missed)

	// Downtime: every replica is down for more than 10 fire times. A restarted replica runs
	// one catch-up tick per schedule (the newest passed fire) and records the rest missed.
	pending := map[int64]time.Time{}
	var latest time.Time
	pr, err := pool.Query(ctx, `SELECT id, next_fire_at FROM schedule WHERE kind = 'heartbeat'`)
	require.NoError(t, err)
	for pr.Next() {
		var id int64
		var at time.Time
		require.NoError(t, pr.Scan(&id, &at))
		pending[id] = at
		if at.After(latest) {
			latest = at
		}
	}
	pr.Close()
	// Twelve simulated minutes past the latest pending fire (jitter is under one) with no
	// replica: at least ten passed fires for every schedule.
	waitFor(t, 5*time.Minute, "twelve simulated minutes of downtime", func() bool {
		return simNow().After(latest.Add(12 * time.Minute))
	})
	back := startServe(t, bin, url, "p4", clockEnv)
	// Only p4's catch-ups count: a replica that lagged before the stop records catch-ups too.
	waitFor(t, 5*time.Minute, "one catch-up per schedule from p4", func() bool {
		return count(`SELECT count(DISTINCT schedule_id) FROM tick WHERE catch_up AND replica = 'p4'`) == goals
	})
	back.stop(t)

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
// The scheduler clock runs 60x so the one-minute heartbeat comes every second. Each wait
// below is for a state; its three minutes bound a stuck agent, not a slow machine.
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
	// The agent calls back on LOOPX_LISTEN (startServe picks the port before serve starts).
	p := startServe(t, bin, url, "demo", clockEnv, "LOOPX_DEMO=on", "LOG_LEVEL=info")
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
	}, 3*time.Minute, 200*time.Millisecond, "the demo agent asks a gate")
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
	}, 3*time.Minute, 200*time.Millisecond, "the agent drains, answers and acks the message")
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
	}, 3*time.Minute, 200*time.Millisecond, "the agent continues after the approval and finishes both todos")

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
	rows.Close()

	// Both todos are finished and evidenced (the publish evidence names c1 and the goal's
	// g1): LoopX proposes finishing the goal, its card reaches the demo chat, the owner
	// confirms, and the goal's heartbeats stop.
	var proposal store.Proposal
	require.Eventually(t, func() bool {
		ps, err := store.ListProposals(ctx, pool, scheduler.DemoGoalID, store.ProposalReady, 10)
		if err != nil || len(ps) == 0 {
			return false
		}
		proposal = ps[0]
		return true
	}, 3*time.Minute, 200*time.Millisecond, "LoopX proposes finishing the demo goal")
	require.Equal(t, store.ProposalGoalDone, proposal.Kind)
	require.Equal(t, store.ActorSystem, proposal.ProposedBy)
	var cards int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM proposal_card pc JOIN outbox o ON o.id = pc.outbox_id
		WHERE pc.proposal_id = $1 AND o.receive_id = 'oc_demo'`, proposal.ID).Scan(&cards))
	require.Equal(t, 1, cards, "the proposal's card is posted to the demo chat")
	tpl, err := templates.New()
	require.NoError(t, err)
	k, err := change.New(st, change.Options{Templates: tpl})
	require.NoError(t, err)
	res, err := k.Confirm(ctx, store.Person{OpenID: "ou_demo_owner"}, store.Meta{Actor: "ou_demo_owner", Surface: "card"}, proposal.ID)
	require.NoError(t, err)
	require.Equal(t, store.ProposalApplied, res.Proposal.State, res.Proposal.Reason)
	require.Equal(t, store.GoalDone, res.Goal.Status)
	d, _, err := quota.Peek(ctx, st, scheduler.DemoGoalID, "writer", time.Now())
	require.NoError(t, err)
	require.Equal(t, quota.StateDone, d.State)
	var enabled int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM schedule WHERE goal_id = $1 AND enabled`, scheduler.DemoGoalID).Scan(&enabled))
	require.Zero(t, enabled, "a done goal's heartbeat and report are off")
}
