package router_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"loopx/change"
	"loopx/router"
	"loopx/store"
)

// TestAuthorizationMatrix runs every command and the card click as owner, member, admin and
// stranger in a group bound to goal docs. Allowed: the effect happens and nothing is refused.
// Refused: nothing changes, the reply (or toast) says who may, and the refusal is audited.
func TestAuthorizationMatrix(t *testing.T) {
	t.Parallel()
	type level int
	const (
		anyone level = iota
		members
		owners
		ownersOfBound // /lang in a bound group
	)
	allowed := func(who string, l level) bool {
		switch l {
		case anyone:
			return true
		case members:
			return who != stranger
		}
		return who == owner || who == admin
	}
	type cas struct {
		name   string
		level  level
		setup  func(e *testBundle) string // returns the text to send ("" = card click)
		effect func(e *testBundle, arg string) bool
	}
	cases := []cas{
		{"help", anyone, func(*testBundle) string { return "/help" }, answered("/approve <gate>")},
		{"goals", anyone, func(*testBundle) string { return "/goals" }, answered("")},
		{"status", members, func(*testBundle) string { return "/status" }, answered("turns used in the last 24 h")},
		{"gates", members, func(*testBundle) string { return "/gates #docs" }, answered("no open gates")},
		{"report", members, func(*testBundle) string { return "/report" }, answered("Reports are not configured")},
		{"message", members, func(*testBundle) string { return "#docs/claude hello" }, func(e *testBundle, _ string) bool {
			return len(e.inbox("docs", "claude")) == 1
		}},
		{"bind", owners, func(*testBundle) string { return "/bind #docs/claude" }, func(e *testBundle, _ string) bool {
			bs, err := store.ListChatBindings(e.t.Context(), e.st.DB(), room)
			require.NoError(e.t, err)
			return len(bs) == 1 && bs[0].AgentID == "claude"
		}},
		{"unbind", owners, func(*testBundle) string { return "/unbind" }, func(e *testBundle, _ string) bool {
			bs, err := store.ListChatBindings(e.t.Context(), e.st.DB(), room)
			require.NoError(e.t, err)
			ok := len(bs) == 0
			if ok { // put it back for the cases that follow
				require.NoError(e.t, store.Bind(e.t.Context(), e.st.DB(), store.Binding{ChatID: room, GoalID: "docs", CreatedBy: owner}))
			}
			return ok
		}},
		{"pause", owners, func(*testBundle) string { return "/pause #docs" }, func(e *testBundle, reply string) bool {
			ok := confirmCard(e, reply) && e.goal("docs").Status == store.GoalStopped
			if ok {
				_, err := e.st.ResumeGoal(e.t.Context(), store.GoalRef{GoalID: "docs", Meta: setupMeta})
				require.NoError(e.t, err)
			}
			return ok
		}},
		{"resume", owners, func(e *testBundle) string {
			_, err := e.st.StopGoal(e.t.Context(), store.GoalRef{GoalID: "docs", Meta: setupMeta})
			require.NoError(e.t, err)
			return "/resume"
		}, func(e *testBundle, reply string) bool {
			ok := confirmCard(e, reply) && e.goal("docs").Status == store.GoalActive
			if !ok {
				_, err := e.st.ResumeGoal(e.t.Context(), store.GoalRef{GoalID: "docs", Meta: setupMeta})
				require.NoError(e.t, err)
			}
			return ok
		}},
		{"budget", owners, func(*testBundle) string { return "/budget #docs 7 12" }, func(e *testBundle, reply string) bool {
			if !confirmCard(e, reply) {
				return false
			}
			g := e.goal("docs")
			return g.AllowedSlots == 7 && g.WindowHours == 12
		}},
		{"todo", members, func(*testBundle) string { return "/todo #docs write the tests" }, func(e *testBundle, _ string) bool {
			ts, err := e.st.ListTodos(e.t.Context(), store.ListTodosParams{GoalID: "docs"})
			require.NoError(e.t, err)
			return len(ts) == 1 && ts[0].Text == "write the tests"
		}},
		{"approve", owners, func(e *testBundle) string {
			e.gate = e.askGate("approve me?", 0).ID
			e.outbox()
			return "/approve g" + itoa(e.gate) + " fine"
		}, func(e *testBundle, _ string) bool { return gateStatus(e, e.gate) == store.GateApproved }},
		{"reject", owners, func(e *testBundle) string {
			e.gate = e.askGate("reject me?", 0).ID
			e.outbox()
			return "/reject " + itoa(e.gate)
		}, func(e *testBundle, _ string) bool { return gateStatus(e, e.gate) == store.GateRejected }},
		{"lang", ownersOfBound, func(*testBundle) string { return "/lang zh" }, func(e *testBundle, _ string) bool {
			l, err := store.GetChatLang(e.t.Context(), e.st.DB(), room)
			require.NoError(e.t, err)
			return l == "zh"
		}},
		{"contract", members, func(*testBundle) string { return "/contract" }, answered("#docs — Docs site")},
		{"scope", owners, func(*testBundle) string { return "/scope #docs protected add deploy/**" }, func(e *testBundle, reply string) bool {
			return confirmCard(e, reply) && slices.Contains(e.goal("docs").ScopeProtected, "deploy/**")
		}},
		{"capability", owners, func(*testBundle) string { return "/capability #docs grant publish" }, func(e *testBundle, reply string) bool {
			return confirmCard(e, reply) && slices.Contains(e.goal("docs").Capabilities, "publish")
		}},
		{"criteria", owners, func(*testBundle) string { return "/criteria #docs add docs build" }, func(e *testBundle, reply string) bool {
			return confirmCard(e, reply) && len(e.goal("docs").Criteria) == 1
		}},
		{"waive", owners, func(e *testBundle) string {
			if len(e.goal("docs").Criteria) == 0 { // the criteria case was refused: give it one to waive
				e.apply(change.Request{GoalID: "docs", Kind: store.ProposalGoalSet, Goal: change.GoalChange{AddCriteria: []store.Criterion{{ID: "g1", Text: "docs build"}}}})
			}
			return "/waive #docs g1 checked by hand"
		}, func(e *testBundle, _ string) bool {
			st, err := store.CriteriaStatus(e.t.Context(), e.st.DB(), "docs", 0, e.goal("docs").Criteria)
			require.NoError(e.t, err)
			return st[0].WaivedBy != ""
		}},
		{"handoff", owners, func(e *testBundle) string {
			td, err := e.st.AddTodo(e.t.Context(), store.AddTodoParams{GoalID: "docs", Text: "hand me over", Meta: setupMeta})
			require.NoError(e.t, err)
			e.gate = td.ID
			return "/handoff #docs " + itoa(td.ID) + " to claude take it from here"
		}, func(e *testBundle, _ string) bool {
			hs, err := store.ListHandoffs(e.t.Context(), e.st.DB(), store.ListHandoffsParams{GoalID: "docs", TodoID: e.gate})
			require.NoError(e.t, err)
			return len(hs) == 1
		}},
		{"replan", owners, func(*testBundle) string { return "/replan #docs Ship the docs site because it is due" }, func(e *testBundle, reply string) bool {
			return confirmCard(e, reply) && e.goal("docs").Objective == "Ship the docs site"
		}},
		{"done", owners, func(*testBundle) string { return "/done #docs" }, func(e *testBundle, reply string) bool {
			ok := confirmCard(e, reply) && e.goal("docs").Status == store.GoalDone
			if ok { // reopen it for the cases that follow
				e.apply(change.Request{GoalID: "docs", Kind: store.ProposalGoalReopen})
			}
			return ok
		}},
		{"reopen", owners, func(e *testBundle) string {
			e.apply(change.Request{GoalID: "docs", Kind: store.ProposalGoalDone})
			e.outbox()
			return "/reopen #docs"
		}, func(e *testBundle, reply string) bool {
			ok := confirmCard(e, reply) && e.goal("docs").Status == store.GoalActive
			if !ok {
				e.apply(change.Request{GoalID: "docs", Kind: store.ProposalGoalReopen})
			}
			return ok
		}},
		{"card click", owners, func(e *testBundle) string {
			e.gate = e.askGate("click me?", 0).ID
			return ""
		}, func(e *testBundle, _ string) bool { return gateStatus(e, e.gate) == store.GateApproved }},
	}

	for _, who := range []string{owner, member, admin, stranger} {
		t.Run(who, func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			for _, c := range cases {
				text := c.setup(e)
				reply := ""
				refusedBefore := len(e.refusals())
				want := allowed(who, c.level)
				if text == "" { // the card click
					card := e.outbox()
					require.Len(t, card, 1)
					res, err := e.chat.HandleCardAction(t.Context(), router.CardAction{
						EventID: "cb_" + c.name, OperatorID: who, ChatID: room, MessageID: "om_card",
						Value: buttonValue(t, card[0].Content, "approve"),
					})
					require.NoError(t, err)
					if want {
						require.Equal(t, "success", res.ToastKind, "%s %s", who, c.name)
					} else {
						require.Equal(t, "error", res.ToastKind, "%s %s", who, c.name)
					}
				} else {
					m := e.say(who, text)
					rows := e.outbox()
					require.NotEmpty(t, rows, "%s %s: no answer at all", who, c.name)
					last := rows[len(rows)-1]
					reply = last.Content
					require.True(t, last.ReplyTo == m.MessageID || last.TargetMessage == m.MessageID, "%s %s: the answer is about the message", who, c.name)
					if !want {
						require.Len(t, rows, 1, "%s %s: a refusal writes only its reply", who, c.name)
						require.Contains(t, last.Content, `<at user_id="`+owner+`">`, "%s %s: the refusal names the owners", who, c.name)
					}
				}
				require.Equal(t, want, c.effect(e, reply), "%s %s: effect (reply %q)", who, c.name, reply)
				refused := e.refusals()
				if want {
					require.Len(t, refused, refusedBefore, "%s %s: allowed but a refusal was audited", who, c.name)
				} else {
					require.Len(t, refused, refusedBefore+1, "%s %s: refusal not audited", who, c.name)
					require.Equal(t, who, refused[len(refused)-1].Actor)
					require.Equal(t, "docs", refused[len(refused)-1].GoalID)
				}
			}
		})
	}
}

// answered: the reply is the command's answer (containing want), not a refusal.
func answered(want string) func(*testBundle, string) bool {
	return func(_ *testBundle, reply string) bool {
		return !strings.HasPrefix(reply, "Sorry") && strings.Contains(reply, want)
	}
}

func gateStatus(e *testBundle, id int64) string {
	e.t.Helper()
	g, err := e.st.GetGate(e.t.Context(), "docs", id)
	require.NoError(e.t, err)
	return g.Status
}
