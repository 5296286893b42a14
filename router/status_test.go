package router_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loopx/store"
)

// failSend stores an outbox row about goal that the sender gave up on with Lark code code.
func (e *testBundle) failSend(goal string, code int, reason string) {
	e.t.Helper()
	_, err := e.st.DB().Exec(e.t.Context(), `INSERT INTO outbox (uuid, kind, receive_id, content, goal_id, state, attempts, last_code, last_error)
		VALUES (gen_random_uuid()::text, 'text', $1, 'a reply', $2, 'failed', 1, $3, $4)`, room, goal, code, reason)
	require.NoError(e.t, err)
	e.outbox() // not a reply of the router's
}

// missFire records a missed heartbeat of goal/agent at fire, as the scheduler does after downtime.
func (e *testBundle) missFire(goal, agent string, fire time.Time) {
	e.t.Helper()
	scheds, err := e.st.ListSchedules(e.t.Context(), goal)
	require.NoError(e.t, err)
	for _, s := range scheds {
		if s.Kind == "heartbeat" && s.AgentID == agent {
			_, err := store.InsertTicks(e.t.Context(), e.st.DB(), []store.Tick{{ScheduleID: s.ID, GoalID: goal, AgentID: agent,
				Kind: "heartbeat", FireAt: fire, RunAt: fire, Outcome: store.TickMissed, Reason: "no replica ran", DecidedAt: e.clk.Now()}})
			require.NoError(e.t, err)
			return
		}
	}
	e.t.Fatalf("no heartbeat schedule for %s/%s in %+v", goal, agent, scheds)
}

// /status shows the goal's failed sends with their Lark code and a hint, and its missed
// heartbeat fires (issues 4 and 5); another goal's failures stay out of it.
func TestStatusShowsFailedSendsAndMissedFires(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *config) {
		// The bot's advice table (bot.Advice), for the codes this test sends.
		c.Router.Advice = func(code int) string {
			return map[int]string{230002: "not_in_chat", 230001: "bad_request", 10014: "credentials"}[code]
		}
	})
	quiet := e.oneReply(e.say(member, "/status")).Content
	require.NotContains(t, quiet, "Missed fires")
	require.NotContains(t, quiet, "gave up sending")

	now := e.clk.Now()
	e.failSend("docs", 230002, "the bot is not in this chat (230002): add the bot to the chat")
	e.failSend("infra", 99991672, "the app lacks a permission (99991672)")
	e.missFire("docs", "codex", now.Add(-90*time.Minute))
	e.missFire("docs", "codex", now.Add(-30*time.Hour)) // outside the 24 h window
	e.missFire("infra", "ops", now.Add(-time.Hour))

	got := e.oneReply(e.say(member, "/status")).Content
	require.Contains(t, got, "Messages LoopX gave up sending: 1")
	require.Contains(t, got, "text to "+room+": bot not in chat (230002): add the bot to the chat")
	require.NotContains(t, got, "99991672", "infra's failure is not docs' business")
	require.Contains(t, got, "Missed fires in the last 24 h: 1 (times in UTC)")
	require.Contains(t, got, "- "+now.Add(-90*time.Minute).UTC().Format("2006-01-02 15:04")+" heartbeat of codex")
	require.NotContains(t, got, now.Add(-30*time.Hour).UTC().Format("2006-01-02 15:04"))

	// Newest first, at most three, with how many more.
	for _, code := range []int{230001, 10014, 230099} {
		e.failSend("docs", code, "lark code said no")
	}
	got = e.oneReply(e.say(member, "/status")).Content
	require.Contains(t, got, "Messages LoopX gave up sending: 4")
	i1, i2 := indexOf(t, got, "Lark code 230099"), indexOf(t, got, "wrong app id or secret (10014)")
	i3 := indexOf(t, got, "Lark refused the message as invalid (230001)")
	require.Less(t, i1, i2)
	require.Less(t, i2, i3)
	require.NotContains(t, got, "(230002)")
	require.Contains(t, got, "- and 1 more")

	zh := e.oneReply(e.say(owner, "/lang zh")).Content
	require.Contains(t, zh, "中文")
	e.failSend("docs", 230002, "the bot is not in this chat")
	got = e.oneReply(e.say(member, "/status")).Content
	require.Contains(t, got, "机器人不在该群（230002）：请把机器人拉进群")
	require.Contains(t, got, "最近 24 小时错过的触发：1 次")
}

func indexOf(t *testing.T, s, sub string) int {
	t.Helper()
	i := strings.Index(s, sub)
	require.GreaterOrEqual(t, i, 0, "%q not in %q", sub, s)
	return i
}
