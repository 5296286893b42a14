package server

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"

	"loopx/bot/sandbox"
	"loopx/examples"
	"loopx/scheduler"
	"loopx/scheduler/runner"
)

// wireScheduler runs the scheduler on this replica: heartbeats, report digests, gate
// reminders and the exec/webhook runners. In sandbox mode it seeds the demo goal once
// (LOOPX_DEMO=off skips that). LOOPX_SCHEDULER=off leaves it out.
func wireScheduler(ctx context.Context, d *deps) ([]component, error) {
	sc := d.cfg.Scheduler
	if !sc.Enabled {
		d.logger.Info("scheduler off (LOOPX_SCHEDULER=off)")
		return nil, nil
	}
	agentURL := cmp.Or(sc.AgentURL, "http://"+loopbackAddr(d.cfg.Listen))
	base := runner.Base{URL: agentURL, Goals: d.store, Tokens: d.store, Templates: d.templates, Secrets: d.store, Files: d.store}
	logger := d.logger
	reminders, err := scheduler.NewReminders(scheduler.ReminderConfig{Store: d.store, Templates: d.templates})
	if err != nil {
		return nil, err
	}
	s, err := scheduler.New(scheduler.Config{
		Store: d.store, Decider: d.quota, Now: d.schedulerNow, TimeScale: d.schedulerScale, Logger: logger, Replica: d.cfg.Replica,
		MaxJitter: sc.MaxJitter, Reminders: reminders, Digests: d.digests, Cards: d.cards,
		Runners: map[string]scheduler.Runner{
			"exec":    &runner.Exec{Base: base, AllowShell: sc.ExecShell, Logger: logger, Notes: d.store},
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
		{prometheus.CounterOpts{Name: "loopx_scheduler_ticks_total", Help: "Tick rows written by this replica (ran, due, skipped and missed)."}, func(t scheduler.Stats) float64 { return float64(t.Ticks) }},
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
	if d.cfg.Sandbox && sc.Demo {
		if err := seedDemo(ctx, d); err != nil {
			return nil, err
		}
	}
	return []component{{name: "scheduler", run: s.Run}}, nil
}

// seedDemo writes the bundled demo agent under LOOPX_HOME and seeds the demo goal once.
func seedDemo(ctx context.Context, d *deps) error {
	// The demo agent is a shell script: where there is no shell (the container image is FROM
	// scratch) it could never run, so there is no demo goal to seed.
	if _, err := os.Stat("/bin/sh"); err != nil {
		d.logger.Info("no /bin/sh on this system: the demo agent (a shell script) cannot run here, so the demo goal is not seeded")
		return nil
	}
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
