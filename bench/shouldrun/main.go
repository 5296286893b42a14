// Command shouldrun measures `loopx quota should-run --format json` as a whole process against
// a real `loopx serve`, beside `psql -c 'select 1'` against the same PostgreSQL server, the
// two interleaved call by call so that both see the same machine load. It creates a scratch
// database with 10,000 goals and a goal of 1,000 todos, and drops it afterwards.
//
//	go run ./bench/shouldrun -loopx bin/loopx -db "$TEST_DATABASE_URL" -n 1000 -out bench/results/should-run-process.json
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"loopx/store"
	"loopx/store/storetest"
)

const adminToken = "bench-admin-token-0123456789abcdef"

// seed builds the data set in set-based statements after `loopx serve` migrated the database.
var seed = []string{
	`INSERT INTO goal (id, title, owners, allowed_slots)
	 SELECT 'bench-' || lpad(i::text, 5, '0'), 'goal ' || i, '{ou_bench}', 24 FROM generate_series(0, 9998) i`,
	`INSERT INTO goal (id, title, owners, allowed_slots, stall_turns) VALUES ('measured', 'measured goal', '{ou_bench}', 1000000, 0)`,
	`INSERT INTO agent (goal_id, id, is_default) SELECT id, 'a', true FROM goal WHERE id = 'measured' OR id LIKE 'bench-%'`,
	`INSERT INTO todo (goal_id, text, priority, status)
	 SELECT 'bench-' || lpad((i % 9999)::text, 5, '0'), 'todo ' || i, i % 5, CASE WHEN i % 3 = 0 THEN 'done' ELSE 'open' END
	 FROM generate_series(0, 49999) i`,
	`INSERT INTO todo (goal_id, text, priority, status)
	 SELECT 'measured', 'measured todo ' || i || ' ' || repeat('text ', 40), i % 5,
	        CASE i % 4 WHEN 0 THEN 'done' ELSE 'open' END
	 FROM generate_series(1, 1000) i`,
	`ANALYZE`,
}

type stats struct {
	N      int     `json:"n"`
	P50Ms  float64 `json:"p50_ms"`
	P90Ms  float64 `json:"p90_ms"`
	P99Ms  float64 `json:"p99_ms"`
	MeanMs float64 `json:"mean_ms"`
	MinMs  float64 `json:"min_ms"`
	MaxMs  float64 `json:"max_ms"`
}

type result struct {
	Benchmark      string  `json:"benchmark"`
	At             string  `json:"at"`
	CPUs           int     `json:"cpus"`
	Goals          int     `json:"goals"`
	TodosOnGoal    int     `json:"todos_on_goal"`
	Command        string  `json:"command"`
	Baseline       string  `json:"baseline"`
	Interleaved    bool    `json:"interleaved"`
	Warmup         int     `json:"warmup"`
	LoopxShouldRun stats   `json:"loopx_should_run"`
	PsqlSelect1    stats   `json:"psql_select_1"`
	P50Ratio       float64 `json:"p50_ratio"`
	P99Ratio       float64 `json:"p99_ratio"`
	TargetP50Ratio float64 `json:"target_p50_ratio"`
	Met            bool    `json:"target_met"`
	Decision       string  `json:"last_decision"`
	// The machine's 1-minute load average before and after: the figures above are only as
	// quiet as the machine was.
	LoadBefore string `json:"loadavg_before"`
	LoadAfter  string `json:"loadavg_after"`
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "shouldrun:", err)
		os.Exit(1)
	}
}

func run() error {
	bin := flag.String("loopx", "bin/loopx", "the loopx binary")
	admin := flag.String("db", os.Getenv("TEST_DATABASE_URL"), "admin URL of the PostgreSQL server")
	n := flag.Int("n", 1000, "calls of each command")
	warmup := flag.Int("warmup", 30, "untimed calls of each command first")
	out := flag.String("out", "bench/results/should-run-process.json", "result file")
	psql := flag.String("psql", "", "the psql binary (default: the real client, not Debian's Perl wrapper)")
	flag.Parse()
	if *admin == "" {
		*admin = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	dbURL, drop, err := storetest.CreateDatabase(ctx, *admin, "loopx_bench_")
	if err != nil {
		return err
	}
	defer func() { _ = drop() }()

	addr, err := freeAddr()
	if err != nil {
		return err
	}
	srv := exec.Command(*bin, "serve")
	srv.Env = append(os.Environ(), "DATABASE_URL="+dbURL, "LOOPX_ADMIN_TOKEN="+adminToken,
		"LOOPX_LISTEN="+addr, "LOG_LEVEL=warn")
	var logs bytes.Buffer
	srv.Stdout, srv.Stderr = &logs, &logs
	if err := srv.Start(); err != nil {
		return fmt.Errorf("start loopx serve: %w", err)
	}
	defer func() {
		_ = srv.Process.Signal(syscall.SIGTERM)
		_ = srv.Wait()
	}()
	base := "http://" + addr
	if err := waitReady(ctx, base); err != nil {
		return fmt.Errorf("%w\n%s", err, logs.String())
	}

	db, err := store.Open(ctx, dbURL)
	if err != nil {
		return err
	}
	for _, q := range seed {
		if _, err := db.Exec(ctx, q); err != nil {
			db.Close()
			return fmt.Errorf("seed: %w", err)
		}
	}
	db.Close()

	// An agent token, as an agent host would use.
	reg := exec.CommandContext(ctx, *bin, "agent", "rotate-token", "--goal-id", "measured", "--agent-id", "a", "--format", "json")
	reg.Env = append(os.Environ(), "LOOPX_URL="+base, "LOOPX_TOKEN="+adminToken)
	rb, err := reg.Output()
	if err != nil {
		return fmt.Errorf("rotate agent token: %w", err)
	}
	var tok struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal(rb, &tok); err != nil || tok.Token == "" {
		return fmt.Errorf("rotate agent token: no token in %s", rb)
	}

	loopxArgs := []string{"quota", "should-run", "--goal-id", "measured", "--agent-id", "a", "--format", "json"}
	loopxEnv := append(os.Environ(), "LOOPX_URL="+base, "LOOPX_TOKEN="+tok.Token)
	psqlArgs := []string{dbURL, "-X", "-q", "-c", "select 1"}
	psqlBin := realPsql(*psql)
	var last []byte
	timed := func(env []string, bin string, args ...string) (time.Duration, error) {
		c := exec.CommandContext(ctx, bin, args...)
		c.Env = env
		var o bytes.Buffer
		c.Stdout = &o
		c.Stderr = &o
		t0 := time.Now()
		err := c.Run()
		d := time.Since(t0)
		if err != nil {
			return 0, fmt.Errorf("%s %s: %w: %s", bin, strings.Join(args, " "), err, o.String())
		}
		last = o.Bytes()
		return d, nil
	}
	loadBefore := loadavg()
	var lx, ps []time.Duration
	for i := 0; i < *warmup+*n; i++ {
		// Alternate which goes first, so neither always follows the other.
		first, second := true, false
		if i%2 == 1 {
			first, second = false, true
		}
		for _, isLoopx := range []bool{first, second} {
			var d time.Duration
			var err error
			if isLoopx {
				d, err = timed(loopxEnv, *bin, loopxArgs...)
			} else {
				d, err = timed(os.Environ(), psqlBin, psqlArgs...)
			}
			if err != nil {
				return err
			}
			if i < *warmup {
				continue
			}
			if isLoopx {
				lx = append(lx, d)
			} else {
				ps = append(ps, d)
			}
		}
	}
	var dec struct {
		State string `json:"state"`
	}
	_, _ = timed(loopxEnv, *bin, loopxArgs...)
	_ = json.Unmarshal(last, &dec)

	r := result{
		Benchmark: "whole-process should-run vs psql select 1", At: time.Now().UTC().Format(time.RFC3339),
		CPUs: runtime.NumCPU(), Goals: 10000, TodosOnGoal: 1000,
		Command:  "loopx " + strings.Join(loopxArgs, " "),
		Baseline: "psql client binary (not Debian's pg_wrapper) <same server> -X -q -c 'select 1'", Interleaved: true, Warmup: *warmup,
		LoopxShouldRun: summarize(lx), PsqlSelect1: summarize(ps), TargetP50Ratio: 2.0, Decision: dec.State,
		LoadBefore: loadBefore, LoadAfter: loadavg(),
	}
	r.P50Ratio = round(r.LoopxShouldRun.P50Ms / r.PsqlSelect1.P50Ms)
	r.P99Ratio = round(r.LoopxShouldRun.P99Ms / r.PsqlSelect1.P99Ms)
	r.Met = r.P50Ratio <= r.TargetP50Ratio
	b, _ := json.MarshalIndent(r, "", "  ")
	if err := os.WriteFile(*out, append(b, '\n'), 0o644); err != nil {
		return err
	}
	fmt.Println(string(b))
	return nil
}

func summarize(ds []time.Duration) stats {
	s := slices.Clone(ds)
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	ms := func(d time.Duration) float64 { return round(float64(d.Microseconds()) / 1000) }
	pct := func(p int) float64 {
		i := (len(s)*p+99)/100 - 1
		return ms(s[max(0, min(i, len(s)-1))])
	}
	return stats{N: len(s), P50Ms: pct(50), P90Ms: pct(90), P99Ms: pct(99),
		MeanMs: ms(sum / time.Duration(len(s))), MinMs: ms(s[0]), MaxMs: ms(s[len(s)-1])}
}

func round(f float64) float64 { return float64(int64(f*100+0.5)) / 100 }

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func waitReady(ctx context.Context, base string) error {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return errors.New("loopx serve not ready after 60 s")
}

// realPsql finds the psql client itself. On Debian, psql on PATH is pg_wrapper, a Perl script
// that picks a cluster and then execs the client: timing it would add Perl's start-up to the
// baseline and flatter the ratio.
func realPsql(given string) string {
	if given != "" {
		return given
	}
	if path, err := exec.LookPath("psql"); err == nil {
		if target, err := filepath.EvalSymlinks(path); err == nil && !strings.HasSuffix(target, "pg_wrapper") {
			return path
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/psql")
	slices.SortFunc(dirs, func(a, b string) int { return versionOf(b) - versionOf(a) })
	if len(dirs) > 0 {
		return dirs[0]
	}
	return "psql"
}

// versionOf reads the major version from /usr/lib/postgresql/<major>/bin/psql.
func versionOf(path string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(path))))
	return v
}
