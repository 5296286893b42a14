package router_test

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loopx/change"
	"loopx/store"
)

// The goal contract from chat, in both languages: each change previewed, confirmed, applied;
// refusals said in words; no internal identifier in any message.

// internalID matches what must never reach a person: change kinds, reasons, field names,
// and a word list key left unresolved.
var internalID = regexp.MustCompile(`goal\.(done|reopen|replan|set)|agent\.set|missing_capability|criteria_unmet|work_complete|goal_done|` +
	`scope_(editable|protected|notes)|(add|remove)_(criteria|capabilities)|preview_ready|handoff_note|` +
	`\b(parse|help|setting|proposal|run\.why)\.[a-z_]+|contract_refused`)

// reads asserts every row is free of internal identifiers and returns their contents joined.
func reads(t *testing.T, rows []store.OutboxRecord) string {
	t.Helper()
	var b strings.Builder
	for _, r := range rows {
		c := unescape([]byte(r.Content))
		// Mentions are LoopX's markup, not words: leave them out of the check.
		words := regexp.MustCompile(`<at (user_id="|id=)[^>]*></at>`).ReplaceAllString(c, "")
		require.False(t, internalID.MatchString(words), "an internal identifier in %q: %s", internalID.FindString(words), c)
		b.WriteString(c + "\n")
	}
	return b.String()
}

// inLang is the expectation for the chat's language.
type inLang map[string]string

// ask sends text as who and returns what the bot answered (rows since the last look).
func ask(t *testing.T, e *testBundle, who, text string) string {
	t.Helper()
	e.say(who, text)
	rows := e.outbox()
	require.NotEmpty(t, rows, "no answer to %q", text)
	return reads(t, rows)
}

// previewed sends a protected command as the owner, checks that it answers with one preview
// card only and that nothing applied yet, and confirms it from the card.
func previewed(t *testing.T, e *testBundle, text string, want ...string) string {
	t.Helper()
	e.say(owner, text)
	rows := e.outbox()
	require.Len(t, rows, 1, "%q: one preview card", text)
	require.Equal(t, "card", rows[0].Kind, "%q: %s", text, rows[0].Content)
	card := reads(t, rows)
	for _, w := range want {
		require.Contains(t, card, w, text)
	}
	require.True(t, confirmCard(e, rows[0].Content), "%q: confirmed", text)
	return card
}

func langSetup(t *testing.T, lang string) *testBundle {
	t.Helper()
	e := setup(t)
	if lang == "zh" {
		e.say(owner, "/lang zh")
		e.outbox()
	}
	return e
}

// apply makes a change as an admin script would (proposed and confirmed at once).
func apply(t *testing.T, e *testBundle, req change.Request) {
	t.Helper()
	e.apply(req)
}

func (e *testBundle) apply(req change.Request) {
	e.t.Helper()
	_, err := e.k.Apply(e.t.Context(), store.Person{OpenID: admin, Admin: true}, store.Meta{Actor: admin, Surface: "api"}, req)
	require.NoError(e.t, err)
	e.outbox() // the cards a finished goal's gates update, if any
}

func TestContractFromChat(t *testing.T) {
	t.Parallel()
	for _, lang := range []string{"en", "zh"} {
		t.Run(lang, func(t *testing.T) {
			t.Parallel()
			e := langSetup(t, lang)
			ctx := t.Context()
			title := inLang{"en": "Change preview", "zh": "变更预览"}[lang]

			previewed(t, e, "/scope #docs editable docs/** site/*.md", title,
				inLang{"en": "editable paths: — → docs/**, site/*.md", "zh": "可修改的路径：— → docs/**, site/*.md"}[lang])
			previewed(t, e, "/scope protected add deploy/**", inLang{"en": "protected paths: — → deploy/**", "zh": "受保护的路径：— → deploy/**"}[lang])
			previewed(t, e, "/scope notes never touch the billing pages")
			previewed(t, e, "/capability grant write-code, publish", inLang{"en": "the goal grants write-code, publish", "zh": "write-code, publish"}[lang])
			previewed(t, e, "/capability #docs/codex grant publish", inLang{"en": "agent codex may now take todos that need publish", "zh": "codex"}[lang])
			previewed(t, e, "/criteria add every page builds\nlinks: links are checked",
				inLang{"en": "acceptance criteria: — → g1: every page builds; links: links are checked", "zh": "验收标准：— → g1: every page builds; links: links are checked"}[lang])
			previewed(t, e, "/criteria remove links")

			g := e.goal("docs")
			require.Equal(t, []string{"docs/**", "site/*.md"}, g.ScopeEditable)
			require.Equal(t, []string{"deploy/**"}, g.ScopeProtected)
			require.Equal(t, "never touch the billing pages", g.ScopeNotes)
			require.Equal(t, []string{"write-code", "publish"}, g.Capabilities)
			require.Equal(t, []store.Criterion{{ID: "g1", Text: "every page builds"}}, g.Criteria)
			codex, err := e.st.GetAgent(ctx, "docs", "codex")
			require.NoError(t, err)
			require.Equal(t, []string{"publish"}, codex.Capabilities)

			// Members read the contract whole, and /status in short.
			view := ask(t, e, member, "/contract")
			for _, w := range map[string][]string{
				"en": {"#docs — Docs site: the contract", "Scope: agents may change docs/**, site/*.md; protected, never changed: deploy/**",
					"Boundaries: never touch the billing pages", "Capabilities the goal grants: write-code, publish", "- codex holds publish",
					"- claude holds none", "Acceptance criteria: 0 of 1 met", "✗ g1: every page builds — no evidence yet"},
				"zh": {"#docs — Docs site：目标约定", "范围：智能体可以修改 docs/**、site/*.md；受保护、不得修改：deploy/**",
					"边界说明：never touch the billing pages", "目标授予的能力：write-code、publish", "- codex 拥有：publish",
					"- claude 拥有：无", "验收标准：已满足 0 / 1 条", "✗ g1：every page builds —— 尚无产出证据"},
			}[lang] {
				require.Contains(t, view, w)
			}
			status := ask(t, e, member, "/status")
			require.Contains(t, status, inLang{
				"en": "Contract: 0 of 1 criterion met · scope: docs/**, site/*.md, never deploy/** · grants write-code, publish — /contract #docs",
				"zh": "目标约定：验收标准已满足 0 / 1 条 · 范围：docs/**、site/*.md，不得修改 deploy/** · 授予能力 write-code、publish —— /contract #docs"}[lang])
			require.Contains(t, status, inLang{
				"en": "Settings: turns per window: 24 (default) · window (hours): 24 (default) · stall guard (turns): 3 (default)",
				"zh": "设置：每个窗口的轮数：24（默认） · 窗口（小时）：24（默认） · 停滞保护（轮）：3（默认）"}[lang])

			// Refusals in words, nothing proposed.
			proposals := func() int {
				ps, err := store.ListProposals(ctx, e.st.DB(), "docs", "", 0)
				require.NoError(t, err)
				return len(ps)
			}
			before := proposals()
			for text, want := range map[string]inLang{
				"/capability #docs/claude grant spend-money": {"en": "#docs does not grant spend-money, so agent claude cannot hold it. Let the goal grant it first: /capability #docs grant spend-money",
					"zh": "#docs 没有授予 spend-money，所以智能体 claude 不能拥有它。"},
				"/criteria remove zz":                {"en": "#docs has no criterion zz (it has: g1)", "zh": "#docs 没有验收标准 zz（现有：g1）"},
				"/criteria add g1: again":            {"en": "#docs already has a criterion g1", "zh": "#docs 已经有编号为 g1 的验收标准"},
				"/scope protected add deploy/**":     {"en": "Nothing would change", "zh": "不会有任何变化"},
				"/scope editable docs/** site/*.md":  {"en": "Nothing would change", "zh": "不会有任何变化"},
				"/scope bogus x":                     {"en": "/scope takes editable, protected or notes first", "zh": "/scope 后面先写 editable、protected 或 notes"},
				"/capability #docs/nobody grant x":   {"en": `#docs has no agent "nobody"`, "zh": "nobody"},
				"/capability #docs give publish":     {"en": "/capability takes grant or revoke", "zh": "/capability 后面先写 grant 或 revoke"},
				"/scope protected add [bad":          {"en": `"[bad" is not a path pattern`, "zh": "“[bad”不是路径模式"},
				"/criteria add":                      {"en": "say what must be true after add", "zh": "请在 add 后写明必须满足的条件"},
				"/capability #docs grant Write_Code": {"en": `"write_code" is not a capability name`, "zh": "“write_code”不是能力名称"},
			} {
				got := ask(t, e, owner, text)
				require.Contains(t, got, want[lang], text)
			}
			require.Equal(t, before, proposals(), "a refusal proposes nothing")

			// Members may read, not change.
			refusedBefore := len(e.refusals())
			got := ask(t, e, member, "/scope #docs editable src/**")
			require.Contains(t, got, inLang{"en": "Sorry, only owners of #docs may use /scope", "zh": "抱歉，只有 #docs 的负责人可以使用 /scope"}[lang])
			require.Len(t, e.refusals(), refusedBefore+1, "the refusal is audited")
			require.Equal(t, []string{"docs/**", "site/*.md"}, e.goal("docs").ScopeEditable)

			// Revoking: from the agent, then from the goal (which takes it from its agents).
			previewed(t, e, "/capability #docs/codex revoke publish")
			previewed(t, e, "/capability revoke write-code")
			require.Equal(t, []string{"publish"}, e.goal("docs").Capabilities)
			previewed(t, e, "/scope editable all")
			previewed(t, e, "/scope protected none")
			previewed(t, e, "/scope notes none")
			g = e.goal("docs")
			require.Empty(t, g.ScopeEditable)
			require.Empty(t, g.ScopeProtected)
			require.Empty(t, g.ScopeNotes)
		})
	}
}

func TestDoneAndReopenFromChat(t *testing.T) {
	t.Parallel()
	for _, lang := range []string{"en", "zh"} {
		t.Run(lang, func(t *testing.T) {
			t.Parallel()
			e := langSetup(t, lang)
			ctx := t.Context()
			apply(t, e, change.Request{GoalID: "docs", Kind: store.ProposalGoalSet,
				Goal: change.GoalChange{AddCriteria: []store.Criterion{{Text: "every page builds"}}}})
			_, err := e.st.AddTodo(ctx, store.AddTodoParams{GoalID: "docs", Text: "write the index", Meta: setupMeta})
			require.NoError(t, err)
			gate := e.askGate("publish now?", 0)
			e.outbox()

			card := previewed(t, e, "/done #docs shipped it", map[string][]string{
				"en": {"Finish the goal", "status: Active → Done", "criterion g1 (every page builds) has no evidence: confirming waives it",
					"1 todo stays open", "1 open gate is cancelled: g" + itoa(gate.ID), "heartbeats and scheduled reports stop"},
				"zh": {"完成目标", "状态：进行中 → 已完成"},
			}[lang]...)
			require.NotContains(t, card, "LoopX proposes", "an owner proposed it")
			require.Equal(t, store.GoalDone, e.goal("docs").Status)
			require.Equal(t, store.GateCancelled, gateStatus(e, gate.ID))

			status := ask(t, e, member, "/status")
			require.Contains(t, status, inLang{"en": "Status: done since ", "zh": "状态：已完成，"}[lang])
			require.Contains(t, status, inLang{"en": `by <at user_id="ou_owner"></at>: shipped it. Nothing runs until /reopen #docs`,
				"zh": `由 <at user_id="ou_owner"></at> 完成，原因：shipped it。在 /reopen #docs 之前不会再运行`}[lang])
			require.Contains(t, status, inLang{"en": "Agent codex (default): the goal is done: no turn starts until /reopen #docs",
				"zh": "智能体 codex（默认）：目标已完成：在 /reopen #docs 之前不会开始新的一轮"}[lang])

			require.Contains(t, ask(t, e, owner, "/budget 5"), inLang{"en": "#docs is done: nothing about it changes until an owner reopens it (/reopen #docs).",
				"zh": "#docs 已完成：负责人重新打开（/reopen #docs）之前，不能再修改它。"}[lang])
			require.Contains(t, ask(t, e, owner, "/criteria add more"), inLang{"en": "#docs is done", "zh": "#docs 已完成"}[lang])
			require.Contains(t, ask(t, e, owner, "/done"), inLang{"en": "#docs is done already. /reopen #docs runs it again.",
				"zh": "#docs 已经完成了。用 /reopen #docs 可以重新打开。"}[lang])

			previewed(t, e, "/reopen #docs one more fix", inLang{"en": "Reopen the goal", "zh": "重新打开目标"}[lang])
			require.Equal(t, store.GoalActive, e.goal("docs").Status)
			require.Contains(t, ask(t, e, owner, "/reopen"), inLang{"en": "#docs is not done, so there is nothing to reopen.",
				"zh": "#docs 还没有完成，不需要重新打开。"}[lang])

			trail, err := store.ListTrail(ctx, e.st.DB(), "docs", 10)
			require.NoError(t, err)
			require.Len(t, trail, 2)
			require.Equal(t, store.DecisionReopen, trail[0].Kind)
			require.Equal(t, "one more fix", trail[0].Reason)
			require.Equal(t, store.DecisionDone, trail[1].Kind)
			require.Equal(t, "shipped it", trail[1].Reason)
			require.Equal(t, owner, trail[1].DecidedBy)
		})
	}
}

func TestReplanFromChat(t *testing.T) {
	t.Parallel()
	for _, lang := range []string{"en", "zh"} {
		t.Run(lang, func(t *testing.T) {
			t.Parallel()
			e := langSetup(t, lang)
			ctx := t.Context()
			obj := "Write the docs for the CSV parser"
			apply(t, e, change.Request{GoalID: "docs", Kind: store.ProposalGoalSet, Goal: change.GoalChange{Objective: &obj}})
			csv, err := e.st.AddTodo(ctx, store.AddTodoParams{GoalID: "docs", Text: "CSV quoting examples", Meta: setupMeta})
			require.NoError(t, err)
			_, err = e.st.AddTodo(ctx, store.AddTodoParams{GoalID: "docs", Text: "the docs index", Meta: setupMeta})
			require.NoError(t, err)

			// The preview suggests cancelling the CSV todo and says how; nothing is applied.
			e.say(owner, "/replan Write the docs for the JSON parser because the customer sends JSON now")
			rows := e.outbox()
			require.Len(t, rows, 1)
			card := reads(t, rows)
			require.Contains(t, card, inLang{"en": "Change the objective (replan)", "zh": "修改目标描述（重新规划）"}[lang])
			require.Contains(t, card, "Write the docs for the CSV parser → Write the docs for the JSON parser")
			require.Contains(t, card, inLang{"en": "send /replan again ending with: cancel " + itoa(csv.ID),
				"zh": "请重新发送 /replan，并在末尾加上：cancel " + itoa(csv.ID)}[lang])
			require.Equal(t, obj, e.goal("docs").Objective)

			previewed(t, e, "/replan #docs Write the docs for the JSON parser, because JSON now cancel #"+itoa(csv.ID),
				inLang{"en": "todo " + itoa(csv.ID) + " is cancelled: CSV quoting examples", "zh": "CSV quoting examples"}[lang])
			require.Equal(t, "Write the docs for the JSON parser", e.goal("docs").Objective)
			todo, err := e.st.GetTodo(ctx, "docs", csv.ID)
			require.NoError(t, err)
			require.Equal(t, store.TodoCancelled, todo.Status)
			trail, err := store.ListTrail(ctx, e.st.DB(), "docs", 1)
			require.NoError(t, err)
			require.Equal(t, store.DecisionReplan, trail[0].Kind)
			require.Equal(t, "JSON now", trail[0].Reason)
			require.Equal(t, obj, trail[0].Before)

			status := ask(t, e, member, "/status")
			require.Contains(t, status, inLang{"en": "has not read the new objective yet (goal version " + itoa(e.goal("docs").Version) + ")",
				"zh": "还没有读到新的目标描述（目标版本 " + itoa(e.goal("docs").Version) + "）"}[lang])

			require.Contains(t, ask(t, e, owner, "/replan something else cancel 999"), inLang{"en": "#docs has no todo 999.", "zh": "#docs 没有待办 999。"}[lang])
			require.Contains(t, ask(t, e, owner, "/replan something else reopen "+itoa(csv.ID+1)),
				inLang{"en": "Todo #" + itoa(csv.ID+1) + " is open: only finished or cancelled todos can be reopened.",
					"zh": "待办 #" + itoa(csv.ID+1) + " 的状态是待处理：只有已完成或已取消的待办可以重新打开。"}[lang])
			require.Contains(t, ask(t, e, owner, "/replan because"), inLang{"en": "say the new objective", "zh": "请写出新的目标描述"}[lang])
		})
	}
}

func TestWaiveFromChat(t *testing.T) {
	t.Parallel()
	for _, lang := range []string{"en", "zh"} {
		t.Run(lang, func(t *testing.T) {
			t.Parallel()
			e := langSetup(t, lang)
			ctx := t.Context()
			apply(t, e, change.Request{GoalID: "docs", Kind: store.ProposalGoalSet,
				Goal: change.GoalChange{AddCriteria: []store.Criterion{{Text: "links are checked"}}}})
			todo, err := e.st.AddTodo(ctx, store.AddTodoParams{GoalID: "docs", Text: "publish", Criteria: []store.Criterion{{Text: "live"}}, Meta: setupMeta})
			require.NoError(t, err)

			refusedBefore := len(e.refusals())
			require.Contains(t, ask(t, e, member, "/waive g1 fine"), inLang{"en": "Sorry, only owners of #docs may use /waive", "zh": "抱歉，只有 #docs 的负责人可以使用 /waive"}[lang])
			require.Len(t, e.refusals(), refusedBefore+1)

			require.Contains(t, ask(t, e, owner, "/waive #docs g1 checked by hand"), inLang{
				"en": "Waived: criterion g1 of #docs now counts as met without evidence (checked by hand).",
				"zh": "已豁免：#docs 的验收标准 g1 现在不需要产出证据也算满足（checked by hand）。"}[lang])
			st, err := store.CriteriaStatus(ctx, e.st.DB(), "docs", 0, e.goal("docs").Criteria)
			require.NoError(t, err)
			require.True(t, st[0].Met)
			require.Equal(t, owner, st[0].WaivedBy)
			require.Equal(t, "checked by hand", st[0].Waiver)

			word := inLang{"en": "todo", "zh": "待办"}[lang]
			require.Contains(t, ask(t, e, owner, "/waive "+word+" "+itoa(todo.ID)+" c1 not needed"), inLang{
				"en": "Waived: criterion c1 of todo #" + itoa(todo.ID) + " on #docs", "zh": "已豁免：#docs 待办 #" + itoa(todo.ID) + " 的验收标准 c1"}[lang])
			st, err = store.CriteriaStatus(ctx, e.st.DB(), "docs", todo.ID, todo.Criteria)
			require.NoError(t, err)
			require.True(t, st[0].Met)

			require.Contains(t, ask(t, e, owner, "/waive g7 why not"), inLang{"en": "#docs has no criterion g7 (it has: g1).", "zh": "#docs 没有验收标准 g7（现有：g1）。"}[lang])
			require.Contains(t, ask(t, e, owner, "/waive todo "+itoa(todo.ID)+" zz why not"), inLang{
				"en": "Todo #" + itoa(todo.ID) + " on #docs has no criterion zz (it has: c1).", "zh": "#docs 的待办 #" + itoa(todo.ID) + " 没有验收标准 zz（现有：c1）。"}[lang])
			require.Contains(t, ask(t, e, owner, "/waive g1"), inLang{"en": "say why g1 counts as met without evidence", "zh": "请写明为什么 g1 不需要产出证据也算满足"}[lang])
			require.Contains(t, ask(t, e, member, "/contract"), inLang{"en": `✓ g1: links are checked — waived by <at user_id="ou_owner"></at>: checked by hand`,
				"zh": `✓ g1：links are checked —— 已由 <at user_id="ou_owner"></at> 豁免：checked by hand`}[lang])
			audits, err := e.st.ListAudit(ctx, store.ListAuditParams{GoalID: "docs", Action: "criterion.waive", Limit: 10})
			require.NoError(t, err)
			require.Len(t, audits, 2, "each waiver is audited")
			require.Equal(t, owner, audits[0].Actor)
		})
	}
}

func TestHandoffFromChat(t *testing.T) {
	t.Parallel()
	for _, lang := range []string{"en", "zh"} {
		t.Run(lang, func(t *testing.T) {
			t.Parallel()
			e := langSetup(t, lang)
			ctx := t.Context()
			apply(t, e, change.Request{GoalID: "docs", Kind: store.ProposalGoalSet, Goal: change.GoalChange{AddCapabilities: []string{"publish"}}})
			apply(t, e, change.Request{GoalID: "docs", Kind: store.ProposalAgentSet, AgentID: "codex", Agent: change.AgentChange{Grant: []string{"publish"}}})
			todo, err := e.st.AddTodo(ctx, store.AddTodoParams{GoalID: "docs", Text: "publish the site", Requires: []string{"publish"}, Meta: setupMeta})
			require.NoError(t, err)
			_, err = e.st.ClaimTodo(ctx, store.ClaimTodoParams{GoalID: "docs", TodoID: todo.ID, AgentID: "codex", Meta: setupMeta})
			require.NoError(t, err)
			n := itoa(todo.ID)

			// claude lacks publish: refused with the reason and the way out, audited, nothing moves.
			require.Contains(t, ask(t, e, owner, "/handoff "+n+" to claude the build is green"), inLang{
				"en": "claude may not take todo #" + n + ": it needs publish, which claude lacks. Nothing was handed over. Grant it first: /capability #docs/claude grant publish",
				"zh": "claude 不能接手待办 #" + n + "：这个待办需要 publish，而 claude 没有。没有进行交接。请先授予：/capability #docs/claude grant publish"}[lang])
			audits, err := e.st.ListAudit(ctx, store.ListAuditParams{GoalID: "docs", Action: "todo.handoff", Limit: 10})
			require.NoError(t, err)
			require.Len(t, audits, 1)
			require.False(t, audits[0].Allowed)
			pending, err := store.ListHandoffs(ctx, e.st.DB(), store.ListHandoffsParams{GoalID: "docs", PendingTo: "claude"})
			require.NoError(t, err)
			require.Empty(t, pending)

			apply(t, e, change.Request{GoalID: "docs", Kind: store.ProposalAgentSet, AgentID: "claude", Agent: change.AgentChange{Grant: []string{"publish"}}})
			to := inLang{"en": "to", "zh": "给"}[lang]
			require.Contains(t, ask(t, e, owner, "/handoff #docs todo "+n+" "+to+" claude as review check the links first"), inLang{
				"en": "Todo #" + n + ` "publish the site" on #docs is handed to claude to review.`,
				"zh": "#docs 的待办 #" + n + "“publish the site”已交接给 claude（请它审阅）。"}[lang])
			pending, err = store.ListHandoffs(ctx, e.st.DB(), store.ListHandoffsParams{GoalID: "docs", PendingTo: "claude"})
			require.NoError(t, err)
			require.Len(t, pending, 1)
			require.Equal(t, "", pending[0].From, "a person handed it over")
			require.Equal(t, owner, pending[0].CreatedBy)
			require.Equal(t, store.HandoffReview, pending[0].Kind)
			require.Equal(t, "check the links first", pending[0].Next)
			moved, err := e.st.GetTodo(ctx, "docs", todo.ID)
			require.NoError(t, err)
			require.Equal(t, "claude", moved.ClaimedBy)

			require.Contains(t, ask(t, e, member, "/status"), inLang{
				"en": `handoff waiting for it from <at user_id="ou_owner"></at> on todo #` + n + " (to review): check the links first",
				"zh": `有一项交接等它接手（来自 <at user_id="ou_owner"></at>），待办 #` + n + "，请它审阅：check the links first"}[lang])

			require.Contains(t, ask(t, e, owner, "/handoff 999 to claude x"), inLang{"en": "#docs has no todo 999.", "zh": "#docs 没有待办 999。"}[lang])
			require.Contains(t, ask(t, e, owner, "/handoff "+n+" to nobody x"), "nobody")
			require.Contains(t, ask(t, e, owner, "/handoff "+n+" to codex"), inLang{"en": "add a note: what codex should do next", "zh": "请附上说明：codex 接下来要做什么"}[lang])
			require.Contains(t, ask(t, e, owner, "/handoff x to codex y"), inLang{"en": `"x" is not a todo number`, "zh": "“x”不是待办编号"}[lang])
			require.Contains(t, ask(t, e, member, "/handoff "+n+" to codex back"), inLang{"en": "Sorry, only owners", "zh": "抱歉，只有"}[lang])
		})
	}
}

// /runs shows the handoff a turn ended with, and whether it was acknowledged.
func TestRunsShowATurnsHandoff(t *testing.T) {
	t.Parallel()
	for _, lang := range []string{"en", "zh"} {
		t.Run(lang, func(t *testing.T) {
			t.Parallel()
			e := langSetup(t, lang)
			ctx := t.Context()
			agentMeta := store.Meta{Actor: "agent:docs/codex", Surface: "api"}
			turn, err := e.st.OpenTurn(ctx, store.OpenTurnParams{GoalID: "docs", AgentID: "codex", InstanceID: "t-1", Meta: agentMeta})
			require.NoError(t, err)
			_, err = e.st.RefreshState(ctx, store.RefreshStateParams{GoalID: "docs", AgentID: "codex", TurnInstanceID: turn.InstanceID,
				Handoff: &store.TurnHandoff{To: "claude", Done: "drafted the index", Next: "proofread the index"}, Meta: agentMeta})
			require.NoError(t, err)
			runs := ask(t, e, member, "/runs")
			require.Contains(t, runs, inLang{"en": "↳ handed to claude: proofread the index (not acknowledged yet)",
				"zh": "↳ 交接给 claude：proofread the index（尚未确认收到）"}[lang])
		})
	}
}

// LoopX proposes finishing a goal whose work is complete: its card reads well in the chat's
// language, names LoopX as the proposer, and only an owner's Confirm finishes the goal.
func TestLoopXProposesFinishingTheGoal(t *testing.T) {
	t.Parallel()
	for _, lang := range []string{"en", "zh"} {
		t.Run(lang, func(t *testing.T) {
			t.Parallel()
			e := langSetup(t, lang)
			ctx := t.Context()
			k, err := change.New(e.st, change.Options{Templates: e.tpl, Cards: e.cards.Proposals.Update,
				Announce: e.cards.Proposals.Announce, GateNotice: e.cards.Gates.Update})
			require.NoError(t, err)
			todo, err := e.st.AddTodo(ctx, store.AddTodoParams{GoalID: "docs", Text: "write the index", Meta: setupMeta})
			require.NoError(t, err)
			done := store.TodoDone
			_, err = e.st.UpdateTodo(ctx, store.UpdateTodoParams{GoalID: "docs", TodoID: todo.ID, AgentID: "codex", Version: todo.Version,
				Status: &done, Meta: store.Meta{Actor: "agent:docs/codex", Surface: "api"}})
			require.NoError(t, err)
			e.outbox()
			made, err := k.ProposeCompletion(ctx, "docs")
			require.NoError(t, err)
			require.True(t, made)
			rows := e.outbox()
			require.Len(t, rows, 1, "one card, in the bound chat")
			require.Equal(t, room, rows[0].ReceiveID)
			card := reads(t, rows)
			for _, w := range map[string][]string{
				"en": {"Change preview", "Every todo is finished: finish the goal?", "LoopX proposes this: every todo is finished and every criterion is met",
					"Proposed by LoopX · confirm by"},
				"zh": {"变更预览", "所有待办都已完成：要把目标标记为已完成吗？", "由 LoopX 提出 · 请在"},
			}[lang] {
				require.Contains(t, card, w)
			}
			require.NotContains(t, card, "system")

			refusedBefore := len(e.refusals())
			for i, who := range []string{stranger, member} {
				res := click(t, e, "cb_loopx_cancel_"+itoa(int64(i)), who, rows[0].Content, "cancel")
				require.Equal(t, "error", res.ToastKind, "only owners cancel it either")
				res = click(t, e, "cb_loopx_"+itoa(int64(i)), who, rows[0].Content, "confirm")
				require.Equal(t, "error", res.ToastKind)
				require.Contains(t, res.Toast, inLang{"en": "Only owners", "zh": "负责人"}[lang])
				require.Nil(t, res.Card)
			}
			require.Len(t, e.refusals(), refusedBefore+4, "every refusal is audited")
			require.Equal(t, store.GoalActive, e.goal("docs").Status)

			res := click(t, e, "cb_loopx_ok", owner, rows[0].Content, "confirm")
			require.Equal(t, "success", res.ToastKind)
			require.Equal(t, store.GoalDone, e.goal("docs").Status)
			require.Contains(t, unescape(res.Card), inLang{"en": "**Receipt** · proposed by LoopX · confirmed by <at id=ou_owner></at>",
				"zh": "**回执** · 由 LoopX 提出 · <at id=ou_owner></at> 确认"}[lang])
			updates := e.outbox()
			require.Len(t, updates, 1)
			require.Equal(t, rows[0].ID, updates[0].UpdateOf, "the posted card is updated in place")

			// Reopened, the work complete again after a new todo: an owner's Cancel leaves the goal
			// running, and LoopX does not ask again until something changes.
			e.apply(change.Request{GoalID: "docs", Kind: store.ProposalGoalReopen})
			e.clk.Add(time.Minute) // the new todo comes after the last proposal
			more, err := e.st.AddTodo(ctx, store.AddTodoParams{GoalID: "docs", Text: "one more page", Meta: setupMeta})
			require.NoError(t, err)
			_, err = e.st.UpdateTodo(ctx, store.UpdateTodoParams{GoalID: "docs", TodoID: more.ID, AgentID: "codex", Version: more.Version,
				Status: &done, Meta: store.Meta{Actor: "agent:docs/codex", Surface: "api"}})
			require.NoError(t, err)
			made, err = k.ProposeCompletion(ctx, "docs")
			require.NoError(t, err)
			require.True(t, made)
			rows = e.outbox()
			require.Len(t, rows, 1)
			res = click(t, e, "cb_loopx_no", owner, rows[0].Content, "cancel")
			require.Equal(t, "info", res.ToastKind)
			require.Contains(t, unescape(res.Card), inLang{"en": "Change cancelled", "zh": "变更已取消"}[lang])
			require.Equal(t, store.GoalActive, e.goal("docs").Status)
			made, err = k.ProposeCompletion(ctx, "docs")
			require.NoError(t, err)
			require.False(t, made, "not asked again until something changes")
		})
	}
}

// The help lists every contract command with who may run it.
func TestHelpSaysWhoMay(t *testing.T) {
	t.Parallel()
	for _, lang := range []string{"en", "zh"} {
		t.Run(lang, func(t *testing.T) {
			t.Parallel()
			e := langSetup(t, lang)
			help := ask(t, e, stranger, "/help")
			owners, members := inLang{"en": " · owners", "zh": " · 负责人"}[lang], inLang{"en": " · members and owners", "zh": " · 成员和负责人"}[lang]
			require.Contains(t, help, inLang{"en": "/contract [#goal]", "zh": "/contract [#目标]"}[lang]+members)
			usages := map[string][]string{
				"en": {"/scope #goal editable|protected", "/capability #goal[/agent] grant|revoke <name…>",
					"/criteria #goal add [id:] <text> | remove <id…>", "/done #goal [reason]", "/reopen #goal [reason]",
					"/replan #goal <new objective> [because <reason>]", "/waive #goal [todo <n>] <criterion> <reason>",
					"/handoff #goal <todo> to <agent> [as review|verify] <note>"},
				// The forms in Chinese: the placeholders in Chinese, the words typed as they are (待办,
				// 给 and 因为 are typed too).
				"zh": {"/scope #目标 editable|protected", "/capability #目标[/智能体] grant|revoke <能力…>",
					"/criteria #目标 add [编号:] <内容> | remove <编号…>", "/done #目标 [原因]", "/reopen #目标 [原因]",
					"/replan #目标 <新的目标描述> [因为 <原因>]", "/waive #目标 [待办 <编号>] <验收标准> <原因>",
					"/handoff #目标 <待办> 给 <智能体> [as review|verify] <说明>"},
			}
			for _, usage := range usages[lang] {
				i := strings.Index(help, usage)
				require.GreaterOrEqual(t, i, 0, usage)
				line, _, _ := strings.Cut(help[i:], "\n")
				require.True(t, strings.HasSuffix(line, owners), "%q says who may", line)
			}
		})
	}
}
