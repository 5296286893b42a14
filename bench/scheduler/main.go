// Command scheduler measures the scheduler at 1,000, 10,000 and 100,000 goals with
// one-minute heartbeats (poll runner, the real should-run service, real time): tick lateness
// (the fire's run time, fire + jitter, to the decision being recorded) p50/p99, and database
// time per tick (claiming transactions including the should-run calls, divided by ticks).
// Each size runs on a fresh database for one whole fire (every goal fires once within the
// minute's jitter spread); ratios are against the first size, measured in the same run.
//
// Usage: go run ./bench/scheduler [-sizes 1000,10000,100000] [-out bench/results/scheduler.json]
// The server comes from TEST_DATABASE_URL (default the local server on 127.0.0.1:5432).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"loopx/scheduler"
	"loopx/scheduler/quota"
	"loopx/store"
	"loopx/store/storetest"
)

type result struct {
	Goals         int     `json:"goals"`
	Ticks         int     `json:"ticks"`
	Completed     bool    `json:"completed"` // every goal's fire was decided within the window
	LatenessP50ms float64 `json:"lateness_p50_ms"`
	LatenessP99ms float64 `json:"lateness_p99_ms"`
	LatenessMaxms float64 `json:"lateness_max_ms"`
	DBPerTickms   float64 `json:"db_ms_per_tick"`
	CostRatio     float64 `json:"db_per_tick_ratio_to_baseline"`
	P99Ratio      float64 `json:"lateness_p99_ratio_to_baseline"`
}

func main() {
	sizes := flag.String("sizes", "1000,10000,100000", "goal counts, the first is the baseline")
	out := flag.String("out", "bench/results/scheduler.json", "where to write the JSON results")
	workers := flag.Int("workers", 4, "concurrent should-run calls per batch")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *sizes, *out, *workers); err != nil {
		fmt.Fprintln(os.Stderr, "bench scheduler:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, sizes, out string, workers int) error {
	var results []result
	for _, f := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return fmt.Errorf("-sizes: %q is not a positive count", f)
		}
		r, err := measure(ctx, n, workers)
		if err != nil {
			return fmt.Errorf("measure %d goals: %w", n, err)
		}
		if len(results) > 0 {
			base := results[0]
			r.CostRatio = r.DBPerTickms / base.DBPerTickms
			r.P99Ratio = r.LatenessP99ms / base.LatenessP99ms
		} else {
			r.CostRatio, r.P99Ratio = 1, 1
		}
		results = append(results, r)
		fmt.Fprintf(os.Stderr, "%7d goals: %6d ticks, lateness p50 %7.1f ms p99 %7.1f ms max %7.1f ms, db %.3f ms/tick (x%.2f), completed %v\n",
			r.Goals, r.Ticks, r.LatenessP50ms, r.LatenessP99ms, r.LatenessMaxms, r.DBPerTickms, r.CostRatio, r.Completed)
	}
	doc := map[string]any{
		"at": time.Now().UTC().Format(time.RFC3339), "cpus": runtime.NumCPU(), "spec": "* * * * *",
		"runner": "poll", "max_jitter": "60s", "workers": workers, "results": results,
	}
	b, _ := json.MarshalIndent(doc, "", "  ")
	if err := os.MkdirAll("bench/results", 0o755); err != nil {
		return err
	}
	return os.WriteFile(out, append(b, '\n'), 0o644)
}

// newDatabase creates a migrated database on the test server and returns its URL and a
// function that drops it.
func newDatabase(ctx context.Context) (string, func(), error) {
	url, drop, err := storetest.CreateDatabase(ctx, storetest.ServerURL(), "loopx_bench_")
	if err != nil {
		return "", nil, err
	}
	return url, func() { _ = drop() }, nil
}

func measure(ctx context.Context, goals, workers int) (result, error) {
	r := result{Goals: goals}
	url, drop, err := newDatabase(ctx)
	if err != nil {
		return r, err
	}
	defer drop()
	pool, err := store.Open(ctx, url)
	if err != nil {
		return r, err
	}
	defer pool.Close()
	if err := seed(ctx, pool, goals); err != nil {
		return r, err
	}
	st := store.New(pool, store.Options{})
	qs := quota.NewService(st, quota.Options{})
	s, err := scheduler.New(scheduler.Config{Store: st, Decider: qs, Replica: "bench", Workers: workers,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return r, err
	}
	// Arm every schedule, then measure the first whole minute: the fire at the next boundary
	// after arming, run by every goal within its jitter.
	if _, err := s.Step(ctx); err != nil {
		return r, err
	}
	var fire time.Time
	if err := pool.QueryRow(ctx, `SELECT min(next_fire_at) FROM schedule WHERE kind = 'heartbeat'`).Scan(&fire); err != nil {
		return r, err
	}
	before := s.Totals()
	runCtx, cancel := context.WithDeadline(ctx, fire.Add(60*time.Second+45*time.Second))
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx) }()
	// Stop as soon as the fire is decided for every goal (or at the deadline).
	for runCtx.Err() == nil {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM tick WHERE fire_at = $1`, fire).Scan(&n); err != nil {
			return r, err
		}
		if n >= goals {
			r.Completed = true
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		return r, err
	}
	after := s.Totals()
	rows, err := pool.Query(ctx, `SELECT extract(epoch FROM decided_at - run_at) * 1000 FROM tick WHERE fire_at = $1`, fire)
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
	slices.Sort(lat)
	r.Ticks = len(lat)
	if r.Ticks == 0 {
		return r, errors.New("no tick was recorded")
	}
	pct := func(p float64) float64 { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	r.LatenessP50ms, r.LatenessP99ms, r.LatenessMaxms = pct(0.50), pct(0.99), lat[len(lat)-1]
	ticks := after.Ticks - before.Ticks
	r.DBPerTickms = float64((after.DBTime - before.DBTime).Microseconds()) / 1000 / float64(max(ticks, 1))
	return r, nil
}

func seed(ctx context.Context, pool store.DB, n int) error {
	if _, err := pool.Exec(ctx, `INSERT INTO goal (id, title, heartbeat_spec, heartbeat_tz, owners)
		SELECT 'b' || lpad(i::text, 7, '0'), 'bench goal ' || i, '* * * * *', 'UTC', '{ou_bench}'
		FROM generate_series(1, $1) AS i`, n); err != nil {
		return fmt.Errorf("seed goals: %w", err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO agent (goal_id, id, runner, is_default)
		SELECT id, 'a1', 'poll', true FROM goal`); err != nil {
		return fmt.Errorf("seed agents: %w", err)
	}
	// One runnable todo per goal, so should-run does its full work (eligible, hint progression).
	if _, err := pool.Exec(ctx, `INSERT INTO todo (goal_id, text) SELECT id, 'keep going' FROM goal`); err != nil {
		return fmt.Errorf("seed todos: %w", err)
	}
	_, err := pool.Exec(ctx, `ANALYZE`)
	return err
}
