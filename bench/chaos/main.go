// Command chaos is LoopX's standing fault suite (`make chaos`). It runs real processes: three
// `loopx serve` replicas on one database, a private PostgreSQL cluster it stops and starts,
// Debian's pgbouncer in transaction mode, and the Lark sandbox (in this process, apart from
// the replicas) with Lark's redelivery ladder (15 s, 5 min, 1 h, 6 h) time-scaled and never
// cut short. It injects the faults of each scenario, checks that nothing acknowledged was
// lost or done twice, and writes the figures to bench/results/chaos.json. It exits 1 when
// any check fails.
//
//	go run ./bench/chaos -loopx bin/loopx -out bench/results/chaos.json
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

func main() {
	var o options
	flag.StringVar(&o.bin, "loopx", "bin/loopx", "the loopx binary to run as the replicas")
	flag.StringVar(&o.out, "out", "bench/results/chaos.json", "where the figures go")
	flag.StringVar(&o.corpus, "corpus", "bench/chaos/corpus", "the bad-input corpus")
	flag.IntVar(&o.events, "events", 10000, "chat events of the duplicate scenario (half over each transport)")
	flag.Float64Var(&o.ladderScale, "ladder-scale", 1000, "how much faster than Lark the redelivery ladder runs")
	flag.StringVar(&o.only, "only", "", "comma-separated scenarios to run (default all but image and upgrade): chat,faults,ratelimit,seam,badinput,work,pgbouncer,backup,image,upgrade")
	flag.BoolVar(&o.keep, "keep", false, "keep the work directory (logs, database) after the run")
	flag.StringVar(&o.imageRootfs, "image-rootfs", "", "image: the image's exported filesystem, run by chroot as the image's user (where podman run is refused)")
	flag.StringVar(&o.imagePodman, "image-podman", "", "image: the image's tag, run by podman run")
	flag.StringVar(&o.imageConfig, "image-config", "", "image: the image's configuration (podman image inspect --format '{{json .Config}}')")
	flag.StringVar(&o.imageVersion, "image-version", "", "image: the release version the image holds")
	flag.Int64Var(&o.imageSize, "image-size", 0, "image: its size in bytes, for the record")
	flag.StringVar(&o.previous, "previous", "", "upgrade: the previous release's loopx binary")
	flag.StringVar(&o.previousVersion, "previous-version", "", "upgrade: the previous release's version")
	flag.StringVar(&o.previousCommit, "previous-commit", "", "upgrade: the previous release's commit (its migrations are read from git)")
	flag.StringVar(&o.next, "next", "", "upgrade: this tree's loopx built with one more migration, standing in for the next release")
	flag.Parse()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := run(ctx, o, logger)
	if res != nil {
		if werr := writeResults(o.out, res); werr != nil {
			logger.Error("write results", "err", werr)
		}
	}
	if err != nil {
		logger.Error("chaos failed", "err", err)
		os.Exit(1)
	}
	logger.Info("chaos passed", "out", o.out, "seconds", res.Seconds)
}

type options struct {
	bin, out, corpus, only string
	events                 int
	ladderScale            float64
	keep                   bool

	imageRootfs, imagePodman, imageConfig, imageVersion string
	imageSize                                           int64

	previous, previousVersion, previousCommit, next string
}

// onRequest are the scenarios that need inputs of their own (an image, a previous release):
// they run only when -only names them.
var onRequest = map[string]bool{"image": true, "upgrade": true}

func (o options) wants(name string) bool {
	if o.only == "" {
		return !onRequest[name]
	}
	for _, s := range strings.Split(o.only, ",") {
		if strings.TrimSpace(s) == name {
			return true
		}
	}
	return false
}

// Results is bench/results/chaos.json.
type Results struct {
	At        string            `json:"at"`
	Machine   string            `json:"machine"`
	Seconds   float64           `json:"seconds"`
	Passed    bool              `json:"passed"`
	Failures  []string          `json:"failures"`
	Ladder    []string          `json:"redelivery_ladder"`
	Chat      *ChatResult       `json:"chat,omitempty"`
	Faults    *FaultResult      `json:"faults,omitempty"`
	RateLimit *RateLimitResult  `json:"rate_limit,omitempty"`
	Seam      *SeamResult       `json:"seam,omitempty"`
	BadInput  *BadInputResult   `json:"bad_input,omitempty"`
	PgBouncer *PgBouncerResult  `json:"pgbouncer,omitempty"`
	Work      *WorkResult       `json:"work,omitempty"`
	Backup    *BackupResult     `json:"backup_restore,omitempty"`
	Image     *ImageResult      `json:"image,omitempty"`
	Upgrade   *UpgradeResult    `json:"upgrade,omitempty"`
	Durations map[string]string `json:"scenario_durations"`
}

func writeResults(path string, r *Results) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// check records a failed expectation; the run goes on so one report shows every failure.
func (r *Results) check(ok bool, format string, args ...any) {
	if !ok {
		r.Failures = append(r.Failures, fmt.Sprintf(format, args...))
	}
}

func run(ctx context.Context, o options, logger *slog.Logger) (*Results, error) {
	start := time.Now()
	res := &Results{At: start.UTC().Format(time.RFC3339), Machine: fmt.Sprintf("%s/%s, %d CPUs", runtime.GOOS, runtime.GOARCH, runtime.NumCPU()),
		Durations: map[string]string{}, Failures: []string{}}
	bin, err := filepath.Abs(o.bin)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("the loopx binary %s: %w (make chaos builds it)", bin, err)
	}
	dir, err := os.MkdirTemp("", "loopx-chaos-")
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	if !o.keep {
		defer os.RemoveAll(dir)
	} else {
		logger.Info("work directory kept", "dir", dir)
	}
	s, err := newSuite(ctx, o, bin, dir, logger)
	if err != nil {
		return nil, err
	}
	defer s.close()
	res.Ladder = s.ladderText()

	// shared: the scenario runs on the suite's goal, chats and three replicas, which are
	// started and seeded before the first such scenario; the others bring their own.
	type scenario struct {
		name   string
		run    func(context.Context, *Results) error
		shared bool
	}
	seeded := false
	for _, sc := range []scenario{
		{"chat", s.chatScenario, true},
		{"badinput", s.badInput, true},
		{"faults", s.faultScenario, true},
		{"ratelimit", s.rateLimitScenario, true},
		{"seam", s.seamScenario, true},
		{"work", s.workScenario, true},
		{"pgbouncer", s.pgBouncerScenario, true},
		{"backup", s.backupScenario, true},
		{"image", s.imageScenario, false},
		{"upgrade", s.upgradeScenario, false},
	} {
		if !o.wants(sc.name) {
			continue
		}
		if sc.shared && !seeded {
			if err := s.ensureTransport(ctx, "ws"); err != nil {
				return res, err
			}
			if err := s.seed(ctx); err != nil {
				return res, fmt.Errorf("seed: %w", err)
			}
			seeded = true
		}
		t0 := time.Now()
		logger.Info("scenario start", "name", sc.name)
		err := sc.run(ctx, res)
		res.Durations[sc.name] = time.Since(t0).Round(100 * time.Millisecond).String()
		logger.Info("scenario end", "name", sc.name, "took", res.Durations[sc.name], "failures so far", len(res.Failures))
		if err != nil {
			res.Failures = append(res.Failures, sc.name+": "+err.Error())
			if ctx.Err() != nil {
				break
			}
		}
	}
	res.Seconds = time.Since(start).Round(100 * time.Millisecond).Seconds()
	res.Passed = len(res.Failures) == 0
	if !res.Passed {
		return res, errors.New(strings.Join(res.Failures, "; "))
	}
	return res, nil
}
