// Command storage measures how the database grows with time under a steady workload and
// whether it stops growing once each retention window has passed. It simulates 30 days at
// 10,000 goals, one simulated day at a time: each day it writes the rows the product writes
// for that day's work (in bulk SQL, with the product's row shapes and payload sizes), then runs
// the product's retention sweep (store.Prune and PruneTicks with store.DefaultRetention at the
// end of the day) and a VACUUM (what autovacuum does over a real day), and records the size of
// every table.
//
// The workload per goal and day, for a goal with a 3-minute heartbeat and an exec or webhook
// agent that mostly waits: 16 heartbeat fires that should-run skips or runs (the scheduler
// hint backs an idle agent off to two hours; chat pulls it in), each with its tick row and its
// decision record; 4 chat messages (inbox item acknowledged by the agent, audit row, receipt
// reaction sent) each answered by one turn (turn with its log tail, slot spent,
// evidence, heartbeat and spend receipts, three audit rows, the reply sent); a command and a
// card click (their lark_event rows).
//
// Usage: go run ./bench/storage [-goals 10000] [-days 30] [-out bench/results/storage.json]
// The server comes from TEST_DATABASE_URL (default the local server on 127.0.0.1:5432).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"time"

	"loopx/quota"
	"loopx/store"
	"loopx/store/storetest"
)

// Per goal and simulated day.
const (
	firesPerDay    = 16
	messagesPerDay = 4
	eventsPerDay   = 2 // a command and a card click: the events no inbox item records
)

type day struct {
	Day        int              `json:"day"`
	TotalBytes int64            `json:"total_bytes"`
	Tables     map[string]int64 `json:"tables"`
	Pruned     store.Pruned     `json:"pruned"`
	Ticks      int64            `json:"ticks_pruned"`
	Seconds    float64          `json:"seconds"`
}

func main() {
	goals := flag.Int("goals", 10000, "goals")
	days := flag.Int("days", 30, "simulated days")
	out := flag.String("out", "bench/results/storage.json", "result file")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *goals, *days, *out); err != nil {
		fmt.Fprintln(os.Stderr, "bench storage:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, goals, days int, out string) error {
	load := loadAvg()
	url, drop, err := storetest.CreateDatabase(ctx, storetest.ServerURL(), "loopx_storage_")
	if err != nil {
		return err
	}
	defer func() { _ = drop() }()
	pool, err := store.Open(ctx, url+"&pool_max_conns=1")
	if err != nil {
		return err
	}
	defer pool.Close()
	st := store.New(pool, store.Options{})
	if err := seed(ctx, pool, goals); err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	payloads, err := samplePayloads()
	if err != nil {
		return err
	}
	keep := store.DefaultRetention()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var results []day
	for d := 1; d <= days; d++ {
		t0 := time.Now()
		dayStart := start.Add(time.Duration(d-1) * 24 * time.Hour)
		if err := writeDay(ctx, pool, d, dayStart, payloads); err != nil {
			return fmt.Errorf("day %d: %w", d, err)
		}
		end := dayStart.Add(24 * time.Hour)
		r := day{Day: d}
		if r.Pruned, err = st.Prune(ctx, keep, end); err != nil {
			return fmt.Errorf("day %d: %w", d, err)
		}
		for {
			n, err := st.PruneTicks(ctx, end.Add(-keep.Decisions), 50000)
			if err != nil {
				return fmt.Errorf("day %d: %w", d, err)
			}
			r.Ticks += n
			if n < 50000 {
				break
			}
		}
		if _, err := pool.Exec(ctx, `VACUUM`); err != nil {
			return fmt.Errorf("day %d: vacuum: %w", d, err)
		}
		if r.Tables, r.TotalBytes, err = sizes(ctx, pool); err != nil {
			return err
		}
		r.Seconds = time.Since(t0).Seconds()
		results = append(results, r)
		fmt.Fprintf(os.Stderr, "day %2d: %8.1f MB (%5.1f s)\n", d, float64(r.TotalBytes)/1e6, r.Seconds)
	}
	doc := summarize(results, goals)
	doc["at"] = time.Now().UTC().Format(time.RFC3339)
	doc["cpus"] = runtime.NumCPU()
	doc["goals"], doc["days"] = goals, days
	doc["workload"] = map[string]any{"heartbeat_fires_per_goal_day": firesPerDay, "chat_messages_per_goal_day": messagesPerDay,
		"turns_per_goal_day": messagesPerDay}
	doc["retention"] = map[string]string{"decisions": keep.Decisions.String(), "lark_events": keep.LarkEvents.String(),
		"receipts": keep.Receipts.String(), "outbox": keep.Outbox.String(), "inbox": keep.Inbox.String(),
		"audit": keep.Audit.String(), "runs": keep.Runs.String()}
	doc["by_day"] = results
	doc["load_before"], doc["load_after"] = load, loadAvg()
	b, _ := json.MarshalIndent(doc, "", "  ")
	if err := os.MkdirAll("bench/results", 0o755); err != nil {
		return err
	}
	tables, _ := doc["tables"].(map[string]any)
	if t, ok := tables["tick"].(map[string]any); ok {
		fmt.Fprintf(os.Stderr, "storage: tick %.0f bytes per goal-day while it grows (target ≤ 5 KB); every table %.0f bytes per goal-day in the first week, %.0f over the last five days\n",
			t["bytes_per_goal_day_first_week"], doc["bytes_per_goal_day_first_week"], doc["bytes_per_goal_day_last_5_days"])
	}
	return os.WriteFile(out, append(b, '\n'), 0o644)
}

// summarize reports, per table, the bytes per goal-day while it grows (the first week) and
// the growth over the last five days: a table whose windows have all passed grows by about
// nothing; one kept longer than the run (the audit trail, a year; runs, 90 days; evidence,
// for ever) grows at its bytes per goal-day.
func summarize(rs []day, goals int) map[string]any {
	if len(rs) < 8 {
		return map[string]any{}
	}
	first, week, last5, last := rs[0], rs[7], rs[len(rs)-6], rs[len(rs)-1]
	tables := map[string]any{}
	names := make([]string, 0, len(last.Tables))
	for n := range last.Tables {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		perGoalDay := float64(week.Tables[n]-first.Tables[n]) / 7 / float64(goals)
		tailGrowth := float64(last.Tables[n]-last5.Tables[n]) / 5 / float64(goals)
		if last.Tables[n] < 1<<20 && perGoalDay < 1 {
			continue
		}
		tables[n] = map[string]any{"bytes_end": last.Tables[n], "bytes_per_goal_day_first_week": round(perGoalDay),
			"bytes_per_goal_day_last_5_days": round(tailGrowth)}
	}
	return map[string]any{
		"total_bytes_end":                last.TotalBytes,
		"bytes_per_goal_day_first_week":  round(float64(week.TotalBytes-first.TotalBytes) / 7 / float64(goals)),
		"bytes_per_goal_day_last_5_days": round(float64(last.TotalBytes-last5.TotalBytes) / 5 / float64(goals)),
		"tables":                         tables,
	}
}

func round(f float64) float64 { return float64(int64(f*10)) / 10 }

func seed(ctx context.Context, db store.DB, goals int) error {
	for _, q := range []string{
		`INSERT INTO goal (id, title, heartbeat_spec, heartbeat_tz, owners, members)
		 SELECT 's' || lpad(i::text, 6, '0'), 'storage goal ' || i, '*/3 * * * *', 'UTC', '{ou_owner}', '{ou_member}'
		 FROM generate_series(1, $1) AS i`,
		`INSERT INTO agent (goal_id, id, runner, runner_config, is_default)
		 SELECT id, 'a1', 'webhook', '{"url": "https://agent.example/hook"}', true FROM goal`,
		`INSERT INTO todo (goal_id, text) SELECT id, 'keep the release notes current' FROM goal`,
		`INSERT INTO binding (chat_id, goal_id, agent_id, created_by) SELECT 'oc_' || id, id, '', 'ou_owner' FROM goal`,
	} {
		args := []any{}
		if strings.Contains(q, "$1") {
			args = append(args, goals)
		}
		if _, err := db.Exec(ctx, q, args...); err != nil {
			return err
		}
	}
	_, err := db.Exec(ctx, `ANALYZE`)
	return err
}

// payloads are the product's own documents, at their real sizes.
type payloads struct {
	decision  string // a should-run answer, as a heartbeat receipt holds it
	tick      string // its summary, as a tick row holds it (quota.Summary)
	detail    string // a tick_decision ledger row's detail
	logTail   string // the end of an agent's output
	reply     string // an agent's answer in the chat
	spendBody string // a spend receipt
}

func samplePayloads() (payloads, error) {
	now := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	snap := store.ShouldRunSnapshot{GoalFound: true, AgentFound: true,
		Goal:     store.Goal{ID: "s000001", Status: store.GoalActive, WindowHours: 24, AllowedSlots: 24, StallTurns: 3, Lang: "en"},
		Agent:    store.Agent{GoalID: "s000001", ID: "a1", Runner: store.RunnerWebhook, WorkMode: "active"},
		Runnable: []store.Todo{{ID: 1, GoalID: "s000001", Role: "agent", Text: "keep the release notes current", Priority: 2, Status: store.TodoOpen}},
	}
	d := quota.Decide(snap, now)
	d.HeartbeatReceipt = &quota.HeartbeatReceipt{Status: "committed", LedgerID: 123456789, TurnInstanceID: "tick-123456-1767258000"}
	dec, err := json.Marshal(d)
	if err != nil {
		return payloads{}, err
	}
	tick, _ := json.Marshal(d.Summary())
	detail, _ := json.Marshal(map[string]any{"decision": d.Decision, "state": d.State, "reason": d.Reason,
		"effective_action": d.EffectiveAction, "turn_instance_id": "tick-123456-1767258000", "hint": d.SchedulerHint.Action,
		"interval_minutes": d.SchedulerHint.IntervalMinutes})
	spend, _ := json.Marshal(map[string]any{"quota_event": map[string]any{"event_id": 123456789, "goal_id": "s000001",
		"agent_id": "a1", "kind": "slot_spent", "turn_id": 1234567, "todo_id": 1, "slots": 1}, "spent_slots": 3})
	return payloads{
		decision:  string(dec),
		tick:      string(tick),
		detail:    string(detail),
		logTail:   strings.Repeat("go test ./... ok; wrote docs/release-notes.md; ", 20),
		reply:     "Done: the release notes now cover the three features and two fixes merged today.",
		spendBody: string(spend),
	}, nil
}

// writeDay writes day d's rows for every goal, at times spread over the day.
func writeDay(ctx context.Context, db store.DB, d int, dayStart time.Time, p payloads) error {
	at := func(slots string) string { // an instant of the day, slot k of n
		return fmt.Sprintf(`($1::timestamptz + make_interval(secs => (%s) * 86400.0))`, slots)
	}
	fire := at(fmt.Sprintf(`(k - 1 + 0.5) / %d`, firesPerDay))
	msg := at(fmt.Sprintf(`(k - 1 + 0.25) / %d`, messagesPerDay))
	key := fmt.Sprintf(`'%d_' || g.id || '_' || k`, d)
	ds := dayStart
	for _, q := range []struct {
		what string
		sql  string
		args []any
	}{
		{"ticks", `INSERT INTO tick (schedule_id, goal_id, agent_id, kind, fire_at, run_at, outcome, reason, decision, decided_at, next_fire_at, replica)
			SELECT s.id, s.goal_id, s.agent_id, 'heartbeat', ` + fire + `, ` + fire + `, 'skipped', 'idle', $2::jsonb,
			       ` + fire + `, ` + fire + ` + interval '2 hours', 'r1'
			FROM schedule s, generate_series(1, ` + fmt.Sprint(firesPerDay) + `) k WHERE s.kind = 'heartbeat'`, []any{ds, p.tick}},
		{"decisions", `INSERT INTO quota_ledger (goal_id, agent_id, kind, detail, created_at)
			SELECT g.id, 'a1', 'tick_decision', $2::jsonb, ` + fire + ` FROM goal g, generate_series(1, ` + fmt.Sprint(firesPerDay) + `) k`,
			[]any{ds, p.detail}},
		// A message that made an inbox item is recorded by that item alone; the lark_event
		// rows are the day's command and card click.
		{"lark events", `INSERT INTO lark_event (event_id, event_type, received_at)
			SELECT 'ev_' || ` + key + `, 'card.action.trigger', ` + msg + ` FROM goal g, generate_series(1, ` + fmt.Sprint(eventsPerDay) + `) k`,
			[]any{ds}},
		{"inbox", `INSERT INTO inbox_item (goal_id, agent_id, mode, text, sender, source_chat, source_message, state, acked_at, created_at)
			SELECT g.id, 'a1', 'inbox', 'please refresh the release notes with today''s merges', 'ou_member', 'oc_' || g.id,
			       'om_' || ` + key + `, 'acked', ` + msg + ` + interval '10 minutes', ` + msg + `
			FROM goal g, generate_series(1, ` + fmt.Sprint(messagesPerDay) + `) k`, []any{ds}},
		{"turns", `INSERT INTO turn (goal_id, agent_id, instance_id, todo_id, action, state, progress, lease_expires_at, started_at, ended_at, outcome, log_tail)
			SELECT g.id, 'a1', 't_' || ` + key + `, t.id, 'inbox_reply_due', 'ok', true, ` + msg + ` + interval '30 minutes',
			       ` + msg + ` + interval '3 minutes', ` + msg + ` + interval '8 minutes', 'settled', $2
			FROM goal g JOIN todo t ON t.goal_id = g.id, generate_series(1, ` + fmt.Sprint(messagesPerDay) + `) k`, []any{ds, p.logTail}},
		{"spends", `INSERT INTO quota_ledger (goal_id, agent_id, kind, turn_id, slots, detail, created_at)
			SELECT goal_id, agent_id, 'slot_spent', id, 1, '{"source": "api"}', ended_at FROM turn WHERE instance_id LIKE $1`,
			[]any{fmt.Sprintf("t_%d_%%", d)}},
		{"evidence", `INSERT INTO evidence (goal_id, agent_id, turn_id, kind, summary, ref, created_at)
			SELECT goal_id, agent_id, id, 'command', 'release notes updated and checked', 'make docs', ended_at
			FROM turn WHERE instance_id LIKE $1`, []any{fmt.Sprintf("t_%d_%%", d)}},
		{"receipts", `INSERT INTO receipt (key, request_hash, status, body, created_at)
			SELECT kk.prefix || ` + key + `, '\x0011223344556677889900112233445566778899001122334455667788990011', 200,
			       CASE WHEN k2 = 1 THEN $2::jsonb ELSE $3::jsonb END, ` + msg + `
			FROM goal g, generate_series(1, ` + fmt.Sprint(messagesPerDay) + `) k, generate_series(1, 2) k2,
			     LATERAL (SELECT CASE WHEN k2 = 1 THEN 'heartbeat|' ELSE 'agent|spend|' END AS prefix) kk`, []any{ds, p.decision, p.spendBody}},
		{"audit", `INSERT INTO audit (at, actor, surface, action, goal_id, target, allowed, detail)
			SELECT ` + msg + `, a.actor, a.surface, a.action, g.id, 'inbox:' || k, true, '{"agent_id": "a1", "mode": "inbox", "session_id": ""}'
			FROM goal g, generate_series(1, ` + fmt.Sprint(messagesPerDay) + `) k,
			     (VALUES ('ou_member', 'chat', 'chat.message'), ('scheduler', 'scheduler', 'turn.open'),
			             ('agent', 'api', 'quota.spend_slot'), ('agent', 'api', 'evidence.add')) AS a(actor, surface, action)`, []any{ds}},
		{"outbox", `INSERT INTO outbox (uuid, dedupe_key, kind, receive_id, reply_to, target_message, content, goal_id, agent_id, state, lark_message_id, sent_at, created_at)
			SELECT o.kind || ` + key + `, o.kind || ':' || ` + key + `, o.kind, 'oc_' || g.id,
			       CASE WHEN o.kind = 'text' THEN 'om_' || ` + key + ` ELSE '' END,
			       CASE WHEN o.kind = 'reaction' THEN 'om_' || ` + key + ` ELSE '' END,
			       CASE WHEN o.kind = 'text' THEN $2 ELSE 'OK' END, g.id, 'a1', 'sent', 'om_bot_' || ` + key + `,
			       ` + msg + ` + interval '1 second', ` + msg + `
			FROM goal g, generate_series(1, ` + fmt.Sprint(messagesPerDay) + `) k, (VALUES ('reaction'), ('text')) AS o(kind)`, []any{ds, p.reply}},
	} {
		if _, err := db.Exec(ctx, q.sql, q.args...); err != nil {
			return fmt.Errorf("write %s: %w", q.what, err)
		}
	}
	return nil
}

// sizes reads the size of every table with its indexes and TOAST, and the database's.
func sizes(ctx context.Context, db store.DB) (map[string]int64, int64, error) {
	rows, err := db.Query(ctx, `SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind = 'r'`)
	if err != nil {
		return nil, 0, err
	}
	out := map[string]int64{}
	for rows.Next() {
		var name string
		var b int64
		if err := rows.Scan(&name, &b); err != nil {
			rows.Close()
			return nil, 0, err
		}
		out[name] = b
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}
	var total int64
	err = db.QueryRow(ctx, `SELECT pg_database_size(current_database())`).Scan(&total)
	return out, total, err
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}
