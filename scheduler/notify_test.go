package scheduler_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loopx/cards"
	"loopx/scheduler"
	"loopx/store"
	"loopx/store/storetest"
	"loopx/templates"
)

var admin = store.Meta{Actor: "admin", Surface: "api"}

type outboxRow struct {
	key, kind, idType, to, replyTo, content string
	gate                                    int64
}

func outbox(t *testing.T, st *store.Store, prefix string) []outboxRow {
	t.Helper()
	rows, err := st.DB().Query(context.Background(), `SELECT coalesce(dedupe_key, ''), kind, receive_id_type, receive_id,
		reply_to, content, coalesce(gate_id, 0) FROM outbox WHERE coalesce(dedupe_key, '') LIKE $1 || '%' ORDER BY id`, prefix)
	require.NoError(t, err)
	defer rows.Close()
	var out []outboxRow
	for rows.Next() {
		var r outboxRow
		require.NoError(t, rows.Scan(&r.key, &r.kind, &r.idType, &r.to, &r.replyTo, &r.content, &r.gate))
		out = append(out, r)
	}
	return out
}

// notifyBundle is a database with reminders and digests wired, and n scheduler replicas.
type notifyBundle struct {
	url      string
	clock    *storetest.Clock
	st       *store.Store
	replicas []*replica
	set      *templates.Set
}

func newNotifyBundle(t *testing.T, t0 time.Time, replicas int) *notifyBundle {
	t.Helper()
	url := storetest.NewDatabase(t)
	c := storetest.NewClock(t0)
	set, err := templates.New()
	require.NoError(t, err)
	b := &notifyBundle{url: url, clock: c, set: set}
	for i := range replicas {
		b.replicas = append(b.replicas, newReplica(t, url, "n"+string(rune('1'+i)), c, &idleDecider{}, func(cfg *scheduler.Config) {
			rem, err := scheduler.NewReminders(scheduler.ReminderConfig{Store: cfg.Store, Templates: set})
			require.NoError(t, err)
			dig, err := scheduler.NewDigests(scheduler.DigestConfig{Store: cfg.Store, Cards: cards.New(set, "en")})
			require.NoError(t, err)
			cfg.Reminders, cfg.Digests = rem, dig
		}))
	}
	b.st = b.replicas[0].st
	return b
}

func (b *notifyBundle) at(t *testing.T, d time.Duration, t0 time.Time) {
	t.Helper()
	b.clock.Set(t0.Add(d))
	stepAll(t.Context(), t, b.replicas)
}

func TestGateRemindersBackOffEscalateAndStop(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	t0 := time.Date(2026, 5, 4, 8, 0, 0, 0, time.UTC)
	b := newNotifyBundle(t, t0, 3)
	_, err := b.st.CreateGoal(ctx, store.CreateGoalParams{ID: "rem", Owners: []string{"ou_a", "ou_b"}, Meta: admin})
	require.NoError(t, err)
	_, err = b.st.RegisterAgent(ctx, store.RegisterAgentParams{GoalID: "rem", AgentID: "a1", Meta: admin})
	require.NoError(t, err)
	require.NoError(t, b.st.WithTx(ctx, func(tx *store.Tx) error {
		return store.Bind(ctx, tx, store.Binding{ChatID: "oc_team", GoalID: "rem", CreatedBy: "ou_a"})
	}))
	gate, err := b.st.AskGate(ctx, store.AskGateParams{GoalID: "rem", AgentID: "a1", Question: "Deploy to production?", Meta: admin})
	require.NoError(t, err)
	// The gate card went out in the chat; reminders reply in its thread.
	_, err = b.st.DB().Exec(ctx, `INSERT INTO outbox (uuid, kind, receive_id, content, goal_id, gate_id, state, lark_message_id)
		VALUES ('u-card', 'card', 'oc_team', '{}', 'rem', $1, 'sent', 'om_card')`, gate.ID)
	require.NoError(t, err)

	prefix := "gate-reminder:"
	b.at(t, 29*time.Minute, t0)
	require.Empty(t, outbox(t, b.st, prefix), "nothing before 30 minutes")

	b.at(t, 30*time.Minute, t0)
	rows := outbox(t, b.st, prefix)
	require.Len(t, rows, 1, "three replicas, one reminder")
	require.Equal(t, "oc_team", rows[0].to)
	require.Equal(t, "om_card", rows[0].replyTo, "in the gate card's thread")
	require.Equal(t, gate.ID, rows[0].gate)
	require.Contains(t, rows[0].content, "Reminder 1")

	b.at(t, 89*time.Minute, t0)
	require.Len(t, outbox(t, b.st, prefix), 1, "second reminder 60 minutes after the first")
	b.at(t, 90*time.Minute, t0)
	require.Len(t, outbox(t, b.st, prefix), 2)

	b.at(t, 209*time.Minute, t0)
	require.Len(t, outbox(t, b.st, prefix), 2, "third reminder 120 minutes after the second")
	b.at(t, 210*time.Minute, t0)
	rows = outbox(t, b.st, prefix)
	require.Len(t, rows, 5, "the third reminder is escalated: the chat plus each owner directly")
	var direct []string
	for _, r := range rows[2:] {
		if r.idType == "open_id" {
			direct = append(direct, r.to)
		} else {
			require.Contains(t, r.content, "Escalated")
			require.Contains(t, r.content, "ou_a")
		}
	}
	require.ElementsMatch(t, []string{"ou_a", "ou_b"}, direct)

	b.at(t, 330*time.Minute, t0)
	require.Len(t, outbox(t, b.st, prefix), 8, "then every 120 minutes, still escalated")
	g, err := b.st.GetGate(ctx, "rem", gate.ID)
	require.NoError(t, err)
	require.Equal(t, 4, g.Reminders)
	require.Equal(t, store.GateOpen, g.Status, "never expired")

	_, err = b.st.AnswerGate(ctx, store.AnswerGateParams{GoalID: "rem", GateID: gate.ID, Answer: "approve", AnsweredBy: "ou_b", Meta: admin})
	require.NoError(t, err)
	b.at(t, 48*time.Hour, t0)
	require.Len(t, outbox(t, b.st, prefix), 8, "an answered gate is not reminded")

	// Unbound goal: the owners are reminded directly.
	_, err = b.st.CreateGoal(ctx, store.CreateGoalParams{ID: "solo", Owners: []string{"ou_c"}, Lang: "zh", Meta: admin})
	require.NoError(t, err)
	_, err = b.st.RegisterAgent(ctx, store.RegisterAgentParams{GoalID: "solo", AgentID: "a1", Meta: admin})
	require.NoError(t, err)
	g2, err := b.st.AskGate(ctx, store.AskGateParams{GoalID: "solo", AgentID: "a1", Question: "继续吗？", Meta: admin})
	require.NoError(t, err)
	b.at(t, 48*time.Hour+31*time.Minute, t0)
	rows = outbox(t, b.st, "gate-reminder:"+strconv.FormatInt(g2.ID, 10)+":")
	require.Len(t, rows, 1)
	require.Equal(t, "open_id", rows[0].idType)
	require.Equal(t, "ou_c", rows[0].to)
	require.Contains(t, rows[0].content, "第 1 次提醒")
}

// cardText collects every text in a card, so assertions do not depend on layout.
func cardText(t *testing.T, content string) string {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal([]byte(content), &v))
	var sb strings.Builder
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if k == "content" {
					if s, ok := e.(string); ok {
						sb.WriteString(s + "\n")
					}
				}
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return sb.String()
}

// history builds a known day on goal id: 3 todos opened, 1 done, 2 gates asked (one
// answered), 2 evidence, 2 turns (one ok with a spent slot, one failed), 3 skipped and 1
// missed heartbeat tick.
func history(t *testing.T, b *notifyBundle, id, lang string, start time.Time) {
	t.Helper()
	ctx := t.Context()
	step := func(d time.Duration) { b.clock.Set(start.Add(d)) }
	step(0)
	_, err := b.st.CreateGoal(ctx, store.CreateGoalParams{ID: id, Title: "Release " + lang, Owners: []string{"ou_a"},
		ReportSpec: "0 9 * * *", ReportTZ: "Asia/Shanghai", Lang: lang, Meta: admin})
	require.NoError(t, err)
	_, err = b.st.RegisterAgent(ctx, store.RegisterAgentParams{GoalID: id, AgentID: "a1", Runner: "poll", Meta: admin})
	require.NoError(t, err)
	require.NoError(t, b.st.WithTx(ctx, func(tx *store.Tx) error {
		return store.Bind(ctx, tx, store.Binding{ChatID: "oc_" + id, GoalID: id, CreatedBy: "ou_a"})
	}))
	step(time.Hour)
	t1, err := b.st.AddTodo(ctx, store.AddTodoParams{GoalID: id, Text: "Write the changelog", Meta: admin})
	require.NoError(t, err)
	_, err = b.st.AddTodo(ctx, store.AddTodoParams{GoalID: id, Text: "Tag the release", Priority: ptr(1), Meta: admin})
	require.NoError(t, err)
	_, err = b.st.AddTodo(ctx, store.AddTodoParams{GoalID: id, Text: "Announce it", Priority: ptr(3), Meta: admin})
	require.NoError(t, err)
	step(2 * time.Hour)
	turn, err := b.st.OpenTurn(ctx, store.OpenTurnParams{GoalID: id, AgentID: "a1", InstanceID: "t1", TodoID: t1.ID, Meta: admin})
	require.NoError(t, err)
	_, err = b.st.ClaimTodo(ctx, store.ClaimTodoParams{GoalID: id, TodoID: t1.ID, AgentID: "a1", Meta: admin})
	require.NoError(t, err)
	_, err = b.st.AddEvidence(ctx, store.AddEvidenceParams{GoalID: id, AgentID: "a1", TodoID: t1.ID, Summary: "Changelog drafted", Ref: "https://git.example/c/1", Meta: admin})
	require.NoError(t, err)
	_, err = b.st.AddEvidence(ctx, store.AddEvidenceParams{GoalID: id, AgentID: "a1", TodoID: t1.ID, Summary: "Reviewed by CI", Meta: admin})
	require.NoError(t, err)
	cur, err := b.st.GetTodo(ctx, id, t1.ID)
	require.NoError(t, err)
	_, err = b.st.UpdateTodo(ctx, store.UpdateTodoParams{GoalID: id, TodoID: t1.ID, AgentID: "a1", Version: cur.Version, Status: ptr(store.TodoDone), Meta: admin})
	require.NoError(t, err)
	_, err = b.st.EndTurn(ctx, store.EndTurnParams{GoalID: id, AgentID: "a1", InstanceID: "t1", State: store.TurnOK, Meta: admin})
	require.NoError(t, err)
	_, err = b.st.SpendSlot(ctx, store.SpendSlotParams{GoalID: id, AgentID: "a1", TurnInstanceID: "t1", TodoID: t1.ID, Meta: admin})
	require.NoError(t, err)
	_ = turn
	step(3 * time.Hour)
	_, err = b.st.OpenTurn(ctx, store.OpenTurnParams{GoalID: id, AgentID: "a1", InstanceID: "t2", Meta: admin})
	require.NoError(t, err)
	_, err = b.st.EndTurn(ctx, store.EndTurnParams{GoalID: id, AgentID: "a1", InstanceID: "t2", State: store.TurnFailed, Outcome: "exit status 1", Meta: admin})
	require.NoError(t, err)
	g1, err := b.st.AskGate(ctx, store.AskGateParams{GoalID: id, AgentID: "a1", Question: "Use the new runner image?", Meta: admin})
	require.NoError(t, err)
	_, err = b.st.AskGate(ctx, store.AskGateParams{GoalID: id, AgentID: "a1", Question: "Deploy to production?", Meta: admin})
	require.NoError(t, err)
	step(4 * time.Hour)
	_, err = b.st.AnswerGate(ctx, store.AnswerGateParams{GoalID: id, GateID: g1.ID, Answer: "approve", AnsweredBy: "ou_a", Meta: admin})
	require.NoError(t, err)
	// Heartbeat ticks as the scheduler records them.
	var sched int64
	require.NoError(t, b.st.DB().QueryRow(ctx, `SELECT id FROM schedule WHERE goal_id = $1 AND kind = 'heartbeat'`, id).Scan(&sched))
	var ticks []store.Tick
	for i, o := range []struct{ outcome, reason string }{{"skipped", "idle"}, {"skipped", "idle"}, {"skipped", "busy"}, {"missed", "downtime"}} {
		f := start.Add(time.Duration(5+i) * time.Hour)
		ticks = append(ticks, store.Tick{ScheduleID: sched, GoalID: id, AgentID: "a1", Kind: "heartbeat", FireAt: f, RunAt: f,
			Outcome: o.outcome, Reason: o.reason, DecidedAt: f})
	}
	_, err = store.InsertTicks(ctx, b.st.DB(), ticks)
	require.NoError(t, err)
}

func ptr[T any](v T) *T { return &v }

func TestDigestOncePerWindowMatchesHistory(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	// 2026-05-03 09:00 Asia/Shanghai is 01:00Z; the goals are created at 02:00Z that day.
	start := time.Date(2026, 5, 3, 2, 0, 0, 0, time.UTC)
	b := newNotifyBundle(t, start, 3)
	history(t, b, "rel-en", "en", start)
	history(t, b, "rel-zh", "zh", start)

	fire := time.Date(2026, 5, 4, 1, 0, 0, 0, time.UTC) // 09:00 in Shanghai
	b.at(t, fire.Sub(start)-time.Minute, start)
	require.Empty(t, outbox(t, b.st, "digest:"))
	// The report schedule is spread by the goal's jitter; step through the minute.
	for s := 0; s <= 60; s += 5 {
		b.at(t, fire.Sub(start)+time.Duration(s)*time.Second, start)
	}
	rows := outbox(t, b.st, "digest:")
	require.Len(t, rows, 2, "one digest per goal, three replicas")

	for _, r := range rows {
		text := cardText(t, r.content)
		switch r.to {
		case "oc_rel-en":
			for _, want := range []string{"Report: Release en", "1 done · 3 opened", "2 asked · 1 answered · 1 still open",
				"2 added", "2 run (1 finished, 1 failed) · 3 skipped heartbeats · 1 missed fire", "1 turn spent in this window · 1 of 24 used",
				"✓ #", "Write the changelog", "Changelog drafted (https://git.example/c/1)", "Use the new runner image? → approved",
				"Deploy to production?", "no runnable todo ×2 · a turn was live ×1", "P1 #", "Tag the release",
				"2026-05-03 10:00 → 2026-05-04 09:00 (Asia/Shanghai)"} {
				require.Contains(t, text, want)
			}
			require.Contains(t, r.content, `"tag":"chart"`)
			require.Contains(t, r.content, `"turns"`)
		case "oc_rel-zh":
			for _, want := range []string{"报告：Release zh", "完成 1 · 新增 3", "提出 2 · 已回答 1 · 仍待决定 1", "运行 2（完成 1，失败 1）",
				"跳过心跳 3 · 错过 1 次", "本期消耗 1 · 最近 24 小时内已用 1 / 24", "没有可执行的待办 ×2；上一轮仍在进行 ×1", "**接下来**"} {
				require.Contains(t, text, want)
			}
			require.Contains(t, r.content, `"轮次"`)
		default:
			t.Fatalf("digest sent to %s", r.to)
		}
	}

	// A restarted replica at the same time finds nothing due; building the same window again
	// in a transaction is a no-op.
	again := newReplica(t, b.url, "restart", b.clock, &idleDecider{}, func(cfg *scheduler.Config) {
		dig, err := scheduler.NewDigests(scheduler.DigestConfig{Store: cfg.Store, Cards: cards.New(b.set, "en")})
		require.NoError(t, err)
		cfg.Digests = dig
	})
	_, err := again.sched.Step(ctx)
	require.NoError(t, err)
	dig, err := scheduler.NewDigests(scheduler.DigestConfig{Store: b.st, Cards: cards.New(b.set, "en")})
	require.NoError(t, err)
	require.NoError(t, b.st.WithTx(ctx, func(tx *store.Tx) error {
		res, err := dig.Scheduled(ctx, tx, "rel-en", fire)
		require.False(t, res.Created)
		return err
	}))
	require.Len(t, outbox(t, b.st, "digest:"), 2)
	n, err := store.DigestCount(ctx, b.st.DB(), "rel-en")
	require.NoError(t, err)
	require.Equal(t, 1, n)

	// /report an hour later covers only the hour since the digest, replying in the chat.
	b.clock.Set(fire.Add(time.Hour))
	var res scheduler.DigestResult
	require.NoError(t, b.st.WithTx(ctx, func(tx *store.Tx) error {
		var err error
		res, err = dig.Report(ctx, tx, scheduler.ReportParams{GoalID: "rel-en", RequestedBy: "ou_a", ChatID: "oc_elsewhere", ReplyTo: "om_ask"})
		return err
	}))
	require.True(t, res.Created)
	require.Equal(t, fire, res.Facts.WindowStart.UTC())
	require.Zero(t, res.Facts.TodosDone)
	rows = outbox(t, b.st, "digest:")
	require.Len(t, rows, 3)
	require.Equal(t, "oc_elsewhere", rows[2].to)
	require.Equal(t, "om_ask", rows[2].replyTo)
	require.Contains(t, cardText(t, rows[2].content), "0 done · 0 opened")
}
