package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"loopx/bot/sandbox"
	"loopx/examples"
	"loopx/scheduler"
	"loopx/scheduler/runner"
	"loopx/templates"
)

// wireScheduler runs the scheduler on this replica: heartbeats, report digests, gate
// reminders and the exec/webhook runners. In sandbox mode it seeds the demo goal once
// (LOOPX_DEMO=off skips that).
//
// Environment: LOOPX_SCHEDULER=off disables it; LOOPX_JITTER_MAX (a duration, default 60s,
// 0 for none) bounds the per-goal delay; LOOPX_EXEC_SHELL=1 lets exec agents use a shell
// command line; LOOPX_AGENT_URL is the URL agents call back on (default from LOOPX_LISTEN);
// LOOPX_REPLICA names this replica in tick rows (default host:pid).
func wireScheduler(ctx context.Context, d *deps) ([]component, error) {
	if d.getenv("LOOPX_SCHEDULER") == "off" {
		d.logger.Info("scheduler off (LOOPX_SCHEDULER=off)")
		return nil, nil
	}
	jitter := time.Duration(0)
	if v := d.getenv("LOOPX_JITTER_MAX"); v != "" {
		j, err := time.ParseDuration(v)
		if err != nil || j < 0 {
			return nil, fmt.Errorf("LOOPX_JITTER_MAX: %q is not a duration such as 60s", v)
		}
		jitter = j
		if j == 0 {
			jitter = -1
		}
	}
	set, err := templates.New()
	if err != nil {
		return nil, fmt.Errorf("load templates: %w", err)
	}
	agentURL := d.getenv("LOOPX_AGENT_URL")
	if agentURL == "" {
		agentURL = "http://" + loopbackAddr(d.cfg.Listen)
	}
	replica := d.getenv("LOOPX_REPLICA")
	if replica == "" {
		host, _ := os.Hostname()
		replica = host + ":" + strconv.Itoa(os.Getpid())
	}
	now, scale, err := schedulerClock(d)
	if err != nil {
		return nil, err
	}
	base := runner.Base{URL: agentURL, Goals: d.store, Tokens: d.store, Templates: set}
	logger := d.logger
	reminders, err := scheduler.NewReminders(scheduler.ReminderConfig{Store: d.store, Templates: set})
	if err != nil {
		return nil, err
	}
	digests, err := scheduler.NewDigests(scheduler.DigestConfig{Store: d.store, Templates: set})
	if err != nil {
		return nil, err
	}
	s, err := scheduler.New(scheduler.Config{
		Store: d.store, Decider: d.quota, Now: now, TimeScale: scale, Logger: logger, Replica: replica, MaxJitter: jitter,
		Reminders: reminders, Digests: digests,
		Runners: map[string]scheduler.Runner{
			"exec":    &runner.Exec{Base: base, AllowShell: d.getenv("LOOPX_EXEC_SHELL") == "1", Logger: logger},
			"webhook": &runner.Webhook{Base: base},
		},
	})
	if err != nil {
		return nil, err
	}
	// Names stay literals in the options: the docs test reads every metric from the source.
	for _, m := range []struct {
		opts  prometheus.CounterOpts
		value func(scheduler.Stats) float64
	}{
		{prometheus.CounterOpts{Name: "loopx_scheduler_ticks_total", Help: "Tick rows written by this replica (ran, skipped and missed)."}, func(t scheduler.Stats) float64 { return float64(t.Ticks) }},
		{prometheus.CounterOpts{Name: "loopx_scheduler_missed_total", Help: "Fire times recorded missed after downtime by this replica."}, func(t scheduler.Stats) float64 { return float64(t.Missed) }},
		{prometheus.CounterOpts{Name: "loopx_scheduler_turns_started_total", Help: "Turns handed to exec or webhook runners by this replica."}, func(t scheduler.Stats) float64 { return float64(t.Started) }},
		{prometheus.CounterOpts{Name: "loopx_scheduler_reminders_total", Help: "Gate reminders sent by this replica."}, func(t scheduler.Stats) float64 { return float64(t.Reminders) }},
		{prometheus.CounterOpts{Name: "loopx_scheduler_db_seconds_total", Help: "Time spent in claiming transactions, should-run included."}, func(t scheduler.Stats) float64 { return t.DBTime.Seconds() }},
	} {
		value := m.value
		if err := d.registry.Register(prometheus.NewCounterFunc(m.opts, func() float64 { return value(s.Totals()) })); err != nil {
			return nil, fmt.Errorf("register %s: %w", m.opts.Name, err)
		}
	}
	if d.cfg.Sandbox && d.getenv("LOOPX_DEMO") != "off" {
		if err := seedDemo(ctx, d); err != nil {
			return nil, err
		}
	}
	return []component{{name: "scheduler", run: s.Run}}, nil
}

// schedulerClock is the serve clock, or, for process-level tests only, an accelerated one
// that every replica computes alike: LOOPX_TEST_CLOCK="<epoch RFC 3339>,<anchor unix ns>,<scale>"
// reads epoch + (real now - anchor) × scale.
func schedulerClock(d *deps) (func() time.Time, float64, error) {
	v := d.getenv("LOOPX_TEST_CLOCK")
	if v == "" {
		return d.now, 1, nil
	}
	parts := strings.Split(v, ",")
	bad := fmt.Errorf("LOOPX_TEST_CLOCK: %q is not <epoch RFC 3339>,<anchor unix ns>,<scale>", v)
	if len(parts) != 3 {
		return nil, 0, bad
	}
	epoch, err1 := time.Parse(time.RFC3339, parts[0])
	anchorNS, err2 := strconv.ParseInt(parts[1], 10, 64)
	scale, err3 := strconv.ParseFloat(parts[2], 64)
	if err1 != nil || err2 != nil || err3 != nil || scale <= 0 {
		return nil, 0, bad
	}
	anchor := time.Unix(0, anchorNS)
	d.logger.Warn("scheduler runs on an accelerated test clock", "epoch", epoch, "scale", scale)
	return func() time.Time {
		return epoch.Add(time.Duration(float64(time.Since(anchor)) * scale))
	}, scale, nil
}

// seedDemo writes the bundled demo agent under LOOPX_HOME and seeds the demo goal once.
func seedDemo(ctx context.Context, d *deps) error {
	script := filepath.Join(d.cfg.Home, "demo-agent.sh")
	if err := os.MkdirAll(d.cfg.Home, 0o700); err != nil {
		return fmt.Errorf("seed demo: %w", err)
	}
	if err := os.WriteFile(script, examples.DemoAgent(), 0o700); err != nil {
		return fmt.Errorf("seed demo: write agent script: %w", err)
	}
	bin, err := os.Executable()
	if err != nil {
		return fmt.Errorf("seed demo: find the loopx binary: %w", err)
	}
	created, err := scheduler.SeedDemo(ctx, d.store, scheduler.DemoParams{
		Owner: sandbox.DefaultDemoUserOpenID, ChatID: sandbox.DefaultChatID,
		Argv: []string{"/bin/sh", script}, Env: map[string]string{"LOOPX_BIN": bin},
	})
	if err != nil {
		return err
	}
	if created {
		d.logger.Info("seeded the demo goal", "goal_id", scheduler.DemoGoalID, "chat_id", sandbox.DefaultChatID)
	}
	return nil
}

// loopbackAddr turns a listen address such as ":7377" or "0.0.0.0:7377" into one an agent
// on this machine can dial.
func loopbackAddr(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}
