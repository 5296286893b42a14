// Command scheduler measures the scheduler of a real `loopx serve` at 1,000 to 1,000,000 goals,
// each with a 30-minute heartbeat spread over the interval (LOOPX_JITTER_MAX=interval: a
// stable per-goal phase, like Jenkins' H) and a poll agent with one runnable todo, so every
// fire reads the full should-run snapshot. For each size it reports, over a measuring window
// of real time: tick lateness (a fire's run time, cron time + phase, to its decision being
// recorded) p50/p99/max, database time per tick (the scheduler's claiming, deciding and
// settling, from its /metrics counters), and serve's RSS. Ratios are against the first size,
// measured in the same run.
//
// Seeding uses bulk SQL with the row triggers off (session_replication_role = replica): the
// goals, agents, todos and their schedule rows, already armed at the fire and phase the
// scheduler itself computes (scheduler.Jitter, Spec.MinGap), so the window starts in the
// steady state instead of behind an arming backlog.
//
// Usage: go run ./bench/scheduler [-loopx bin/loopx] [-sizes 1000,10000,100000,1000000]
// [-window 60s] [-out bench/results/scheduler.json]. The server comes from TEST_DATABASE_URL
// (default the local server on 127.0.0.1:5432); its user must be a superuser (the seeding
// turns triggers off).
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"loopx/scheduler"
	"loopx/store"
	"loopx/store/storetest"
)

const (
	spec       = "*/30 * * * *"
	adminToken = "bench-admin-token-0123456789abcdef"
	chunk      = 50000 // rows per seeding statement
)

type result struct {
	Goals         int     `json:"goals"`
	Window        string  `json:"window"`
	Ticks         int     `json:"ticks"`
	TicksPerSec   float64 `json:"ticks_per_second"`
	LatenessP50ms float64 `json:"lateness_p50_ms"`
	LatenessP99ms float64 `json:"lateness_p99_ms"`
	LatenessMaxms float64 `json:"lateness_max_ms"`
	DBPerTickms   float64 `json:"db_ms_per_tick"`
	CostRatio     float64 `json:"db_per_tick_ratio_to_baseline"`
	RSSEndKB      int     `json:"serve_rss_end_kb"`
	RSSPeakKB     int     `json:"serve_rss_peak_kb"`
	SeedSeconds   float64 `json:"seed_seconds"`
}

func main() {
	bin := flag.String("loopx", "bin/loopx", "the loopx binary")
	sizes := flag.String("sizes", "1000,10000,100000,1000000", "goal counts, the first is the baseline")
	window := flag.Duration("window", 60*time.Second, "measuring window per size (at least 150 ticks' worth is waited for at small sizes)")
	out := flag.String("out", "bench/results/scheduler.json", "where to write the JSON results")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *bin, *sizes, *window, *out); err != nil {
		fmt.Fprintln(os.Stderr, "bench scheduler:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, bin, sizes string, window time.Duration, out string) error {
	before := loadAvg()
	var results []result
	for _, f := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return fmt.Errorf("-sizes: %q is not a positive count", f)
		}
		r, err := measure(ctx, bin, n, window)
		if err != nil {
			return fmt.Errorf("measure %d goals: %w", n, err)
		}
		r.CostRatio = 1
		if len(results) > 0 {
			r.CostRatio = r.DBPerTickms / results[0].DBPerTickms
		}
		results = append(results, r)
		fmt.Fprintf(os.Stderr, "%8d goals: %6d ticks in %s (%.0f/s), lateness p50 %6.1f ms p99 %6.1f ms max %6.1f ms, db %.3f ms/tick (x%.2f), serve RSS %d kB (peak %d kB), seeded in %.0f s\n",
			r.Goals, r.Ticks, r.Window, r.TicksPerSec, r.LatenessP50ms, r.LatenessP99ms, r.LatenessMaxms,
			r.DBPerTickms, r.CostRatio, r.RSSEndKB, r.RSSPeakKB, r.SeedSeconds)
	}
	doc := map[string]any{
		"at": time.Now().UTC().Format(time.RFC3339), "cpus": runtime.NumCPU(), "spec": spec,
		"spread": "interval", "runner": "poll", "results": results,
		"load_before": before, "load_after": loadAvg(),
	}
	b, _ := json.MarshalIndent(doc, "", "  ")
	if err := os.MkdirAll("bench/results", 0o755); err != nil {
		return err
	}
	return os.WriteFile(out, append(b, '\n'), 0o644)
}

func measure(ctx context.Context, bin string, goals int, window time.Duration) (result, error) {
	r := result{Goals: goals}
	url, drop, err := storetest.CreateDatabase(ctx, storetest.ServerURL(), "loopx_bench_")
	if err != nil {
		return r, err
	}
	defer func() { _ = drop() }()
	// One connection: the seeding's SET applies to its session.
	pool, err := store.Open(ctx, url+"&pool_max_conns=1")
	if err != nil {
		return r, err
	}
	defer pool.Close()
	seedStart := time.Now()
	if err := seed(ctx, pool, goals); err != nil {
		return r, fmt.Errorf("seed: %w", err)
	}
	r.SeedSeconds = time.Since(seedStart).Seconds()
	// Fires that fell due while seeding (a minute of them at a million goals) would greet
	// serve as a backlog and the window would measure its catching up, not the steady state:
	// each moves to its next occurrence, one interval on, as the scheduler itself would have
	// armed it had it been running. The margin covers serve's start.
	if _, err := pool.Exec(ctx, `UPDATE schedule SET next_fire_at = next_fire_at + interval '30 minutes',
		next_run_at = next_run_at + interval '30 minutes'
		WHERE kind = 'heartbeat' AND next_run_at < now() + interval '15 seconds'`); err != nil {
		return r, fmt.Errorf("re-arm the fires seeding overtook: %w", err)
	}

	srv, err := startServe(ctx, bin, url)
	if err != nil {
		return r, err
	}
	defer srv.stop()
	// Warm up (connections, caches, the first claims), then measure a window of real time,
	// long enough for about 150 ticks at small sizes (the fire rate is goals per 30 minutes).
	if err := sleep(ctx, 10*time.Second); err != nil {
		return r, err
	}
	rate := float64(goals) / 1800
	w := max(window, time.Duration(150/rate*float64(time.Second)))
	w = min(w, 5*time.Minute)
	r.Window = w.Round(time.Second).String()
	m0, err := srv.metrics(ctx)
	if err != nil {
		return r, err
	}
	start := time.Now()
	peak := 0
	for time.Since(start) < w {
		if err := sleep(ctx, time.Second); err != nil {
			return r, err
		}
		peak = max(peak, srv.rssKB())
	}
	end := time.Now()
	m1, err := srv.metrics(ctx)
	if err != nil {
		return r, err
	}
	r.RSSEndKB, r.RSSPeakKB = srv.rssKB(), max(peak, srv.peakKB())
	ticks := m1["loopx_scheduler_ticks_total"] - m0["loopx_scheduler_ticks_total"]
	if ticks > 0 {
		r.DBPerTickms = (m1["loopx_scheduler_db_seconds_total"] - m0["loopx_scheduler_db_seconds_total"]) * 1000 / ticks
	}
	rows, err := pool.Query(ctx, `SELECT extract(epoch FROM decided_at - run_at) * 1000 FROM tick
		WHERE decided_at >= $1 AND decided_at < $2 AND outcome <> 'missed'`, start, end)
	if err != nil {
		return r, err
	}
	var lat []float64
	for rows.Next() {
		var ms float64
		if err := rows.Scan(&ms); err != nil {
			rows.Close()
			return r, err
		}
		lat = append(lat, ms)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return r, err
	}
	if len(lat) == 0 {
		return r, errors.New("no tick was recorded in the window")
	}
	slices.Sort(lat)
	pct := func(p float64) float64 { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	r.Ticks, r.TicksPerSec = len(lat), float64(len(lat))/w.Seconds()
	r.LatenessP50ms, r.LatenessP99ms, r.LatenessMaxms = pct(0.50), pct(0.99), lat[len(lat)-1]
	return r, nil
}

// seed writes n goals ('b0000001', ...) with a 30-minute heartbeat, a poll agent, one
// runnable todo, and their schedule rows armed as the scheduler would arm them: the first fire
// whose run time (fire + the goal's phase) is not past, so the goals fire evenly from now on.
func seed(ctx context.Context, db store.DB, n int) error {
	if _, err := db.Exec(ctx, `SET session_replication_role = replica`); err != nil {
		return fmt.Errorf("turn triggers off (the bench needs a superuser): %w", err)
	}
	defer db.Exec(context.WithoutCancel(ctx), `SET session_replication_role = DEFAULT`) //nolint:errcheck
	sp, err := scheduler.ParseSpec(spec, "UTC")
	if err != nil {
		return err
	}
	now := time.Now()
	for lo := 1; lo <= n; lo += chunk {
		hi := min(lo+chunk-1, n)
		ids, fires, runs := make([]string, 0, hi-lo+1), make([]time.Time, 0, hi-lo+1), make([]time.Time, 0, hi-lo+1)
		for i := lo; i <= hi; i++ {
			id := fmt.Sprintf("b%07d", i)
			j := scheduler.Jitter(id, sp.MinGap())
			fire := sp.NextAtOrAfter(now.Add(-j))
			ids, fires, runs = append(ids, id), append(fires, fire), append(runs, fire.Add(j))
		}
		for _, q := range []struct {
			sql  string
			args []any
		}{
			{`INSERT INTO goal (id, title, heartbeat_spec, heartbeat_tz, owners)
			  SELECT id, 'bench goal', $2, 'UTC', '{ou_bench}' FROM unnest($1::text[]) AS id`, []any{ids, spec}},
			{`INSERT INTO agent (goal_id, id, runner, is_default) SELECT id, 'a1', 'poll', true FROM unnest($1::text[]) AS id`, []any{ids}},
			{`INSERT INTO todo (goal_id, text) SELECT id, 'keep going' FROM unnest($1::text[]) AS id`, []any{ids}},
			{`INSERT INTO schedule (goal_id, agent_id, kind, spec, tz, enabled, rearm, next_fire_at, next_run_at)
			  SELECT id, 'a1', 'heartbeat', $4, 'UTC', true, false, f, r
			  FROM unnest($1::text[], $2::timestamptz[], $3::timestamptz[]) AS s(id, f, r)`, []any{ids, fires, runs, spec}},
			{`INSERT INTO schedule (goal_id, agent_id, kind, spec, tz, enabled, rearm)
			  SELECT id, '', 'report', '', 'UTC', false, true FROM unnest($1::text[]) AS id`, []any{ids}},
		} {
			if _, err := db.Exec(ctx, q.sql, q.args...); err != nil {
				return err
			}
		}
	}
	_, err = db.Exec(ctx, `ANALYZE`)
	return err
}

type serveProc struct {
	cmd  *exec.Cmd
	base string
	logs *bytes.Buffer
}

func startServe(ctx context.Context, bin, dbURL string) (*serveProc, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL, "LOOPX_ADMIN_TOKEN="+adminToken, "LOOPX_LISTEN="+addr,
		"LOOPX_BOT=off", "LOOPX_JITTER_MAX=interval", "LOOPX_REPLICA=bench", "LOG_LEVEL=warn",
		"LOOPX_HOME="+os.TempDir())
	logs := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start loopx serve: %w", err)
	}
	p := &serveProc{cmd: cmd, base: "http://" + addr, logs: logs}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(p.base + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, nil
			}
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			p.stop()
			return nil, err
		}
	}
	p.stop()
	return nil, fmt.Errorf("loopx serve not ready after 60 s:\n%s", logs.String())
}

func (p *serveProc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	_ = p.cmd.Wait()
}

// metrics reads the counters of serve's /metrics.
func (p *serveProc) metrics(ctx context.Context) (map[string]float64, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.base+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") {
			continue
		}
		if v, err := strconv.ParseFloat(value, 64); err == nil {
			out[name] = v
		}
	}
	return out, nil
}

func (p *serveProc) rssKB() int  { return statusKB(p.cmd.Process.Pid, "VmRSS:") }
func (p *serveProc) peakKB() int { return statusKB(p.cmd.Process.Pid, "VmHWM:") }

// statusKB reads one kB field of /proc/<pid>/status.
func statusKB(pid int, field string) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			return n
		}
	}
	return 0
}

// loadAvg is the machine's 1, 5 and 15-minute load average, to judge how quiet a run was.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
