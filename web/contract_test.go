package web_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"loopx/change"
	"loopx/store"
)

// The goal contract on the workspace: every act goes through the change kernel (preview →
// confirm → receipt) or the store's own operation, with chat's roles: owners change, members
// read, strangers see nothing.

var adminPerson = store.Person{Admin: true}

// apply makes a change at once, as the admin token would (the set-up of a test).
func apply(t *testing.T, b *testBundle, req change.Request) {
	t.Helper()
	_, err := b.k.Apply(t.Context(), adminPerson, store.Meta{Actor: store.ActorAdmin, Surface: "api"}, req)
	require.NoError(t, err)
}

// preview posts a change form and answers the proposal page's path; the change is not applied.
func (br *browser) preview(goalID string, form url.Values) string {
	br.t.Helper()
	status, loc := br.post("/web/goals/"+goalID+"/proposals", form)
	require.Equal(br.t, http.StatusSeeOther, status, loc)
	require.Regexp(br.t, `^/web/proposals/\d+$`, loc)
	return loc
}

// confirm confirms the proposal at path and answers the page it lands on, which must say it
// applied with a receipt.
func (br *browser) confirm(path string) string {
	br.t.Helper()
	status, loc := br.post(path+"/confirm", url.Values{})
	require.Equal(br.t, http.StatusSeeOther, status)
	require.Contains(br.t, loc, "m=applied", "the confirmation applied")
	_, body, _ := br.get(loc)
	require.Contains(br.t, body, "Receipt: proposed by")
	return body
}

// TestContractShowsOnTheGoalPage: the objective, scope, the capabilities the goal grants and
// each agent's, the criteria with which are met and by what; members read it all but get no
// control; a stranger sees nothing.
func TestContractShowsOnTheGoalPage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	obj := "Publish the docs site"
	editable, protected, notes := []string{"docs/**"}, []string{"deploy/*.yaml"}, "Never touch the billing pages."
	caps := []string{"write-code", "publish"}
	criteria := []store.Criterion{{Text: "every page builds"}, {ID: "links", Text: "no broken links"}}
	apply(t, b, change.Request{GoalID: "docs", Kind: store.ProposalGoalSet, Goal: change.GoalChange{Objective: &obj,
		ScopeEditable: &editable, ScopeProtected: &protected, ScopeNotes: &notes, Capabilities: &caps, Criteria: &criteria}})
	apply(t, b, change.Request{GoalID: "docs", Kind: store.ProposalAgentSet, AgentID: "codex", Agent: change.AgentChange{Grant: []string{"write-code"}}})
	ev, err := b.st.AddEvidence(ctx, store.AddEvidenceParams{GoalID: "docs", AgentID: "codex", Summary: "make site: 41 pages",
		Criteria: []string{"g1"}, Meta: agentMeta})
	require.NoError(t, err)

	ob := b.signIn(t, owner)
	status, body, _ := ob.get("/web/goals/docs")
	require.Equal(t, http.StatusOK, status)
	for _, want := range []string{"Contract", "Publish the docs site", "<code>docs/**</code>", "<code>deploy/*.yaml</code>",
		"Never touch the billing pages.", "The goal grants: <code>write-code</code> <code>publish</code>",
		"codex: <code>write-code</code>", "<strong>g1</strong> every page builds", `met by <a href="#ev-` + itoa(ev.ID) + `">make site: 41 pages</a>`,
		"<strong>links</strong> no broken links", "no evidence yet", `<span class="count">1/2</span>`} {
		require.Contains(t, body, want)
	}
	require.Contains(t, body, `id="criterion-add"`, "owners change the contract")
	require.Contains(t, body, `id="criterion-waive"`, "owners waive a criterion")
	require.Contains(t, body, `id="finish-form"`)

	mb := b.signIn(t, member)
	_, body, _ = mb.get("/web/goals/docs")
	require.Contains(t, body, "no broken links", "members read the contract")
	for _, control := range []string{`id="criterion-add"`, `id="criterion-waive"`, `id="scope-change"`, `id="finish-form"`, `part=`, `value="criterion_remove"`} {
		require.NotContains(t, body, control, "members get no control")
	}
	status, _, _ = b.signIn(t, stranger).get("/web/goals/docs")
	require.Equal(t, http.StatusNotFound, status)
}

// TestOwnersChangeTheContractThroughPreviews: a criterion added, the scope, the capabilities
// and an agent's grants, each by preview → confirm; nothing applies before the confirmation;
// members and strangers are refused and change nothing.
func TestOwnersChangeTheContractThroughPreviews(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ob := b.signIn(t, owner)
	ob.get("/web/goals/docs")

	loc := ob.preview("docs", url.Values{"kind": {"goal.set"}, "part": {"criterion_add"}, "criterion": {"links: no broken links"}})
	_, body, _ := ob.get(loc)
	require.Contains(t, body, `<th scope="row">acceptance criteria</th>`)
	require.Contains(t, body, "<ins>links: no broken links</ins>")
	require.Contains(t, body, "links", "the effect names the new criterion")
	require.Empty(t, goal(t, b).Criteria, "a preview applies nothing")
	ob.confirm(loc)
	require.Equal(t, []store.Criterion{{ID: "links", Text: "no broken links"}}, goal(t, b).Criteria)

	// A second one gets the next free id.
	ob.confirm(ob.preview("docs", url.Values{"kind": {"goal.set"}, "part": {"criterion_add"}, "criterion": {"every page builds"}}))
	require.Equal(t, []store.Criterion{{ID: "links", Text: "no broken links"}, {ID: "g1", Text: "every page builds"}}, goal(t, b).Criteria)

	ob.confirm(ob.preview("docs", url.Values{"kind": {"goal.set"}, "part": {"scope"}, "scope_editable": {"docs/**\r\n site/*.md \r\n"},
		"scope_protected": {"deploy/**"}, "scope_notes": {"Ask before the pricing page."}}))
	g := goal(t, b)
	require.Equal(t, []string{"docs/**", "site/*.md"}, g.ScopeEditable)
	require.Equal(t, []string{"deploy/**"}, g.ScopeProtected)
	require.Equal(t, "Ask before the pricing page.", g.ScopeNotes)

	ob.confirm(ob.preview("docs", url.Values{"kind": {"goal.set"}, "part": {"capabilities"}, "capabilities": {"write-code, publish"}}))
	require.Equal(t, []string{"write-code", "publish"}, goal(t, b).Capabilities)
	_, body, _ = ob.get("/web/goals/docs")
	require.Contains(t, body, "Capabilities of codex")
	before, err := b.st.GetAgent(t.Context(), "docs", "codex")
	require.NoError(t, err)
	loc = ob.preview("docs", url.Values{"kind": {"agent.set"}, "agent_id": {"codex"}, "part": {"grants"}, "capability": {"publish"}})
	_, body, _ = ob.get(loc)
	require.Contains(t, body, "<ins>publish</ins>")
	ob.confirm(loc)
	a, err := b.st.GetAgent(t.Context(), "docs", "codex")
	require.NoError(t, err)
	require.Equal(t, []string{"publish"}, a.Capabilities)
	require.Equal(t, before.IsDefault, a.IsDefault, "the grants form leaves the agent's other settings")
	require.Equal(t, before.WorkMode, a.WorkMode)

	// Removing a criterion is previewed too.
	ob.confirm(ob.preview("docs", url.Values{"kind": {"goal.set"}, "part": {"criterion_remove"}, "criterion": {"g1"}}))
	require.Equal(t, []store.Criterion{{ID: "links", Text: "no broken links"}}, goal(t, b).Criteria)

	// Bad input names the field, in people's words, and changes nothing.
	status, body := ob.post("/web/goals/docs/proposals", url.Values{"kind": {"goal.set"}, "part": {"capabilities"}, "capabilities": {"Write Code!"}})
	require.Equal(t, http.StatusUnprocessableEntity, status)
	require.Contains(t, body, "capabilities: &#34;code!&#34; is not a capability name")

	// Members and strangers change nothing.
	version := goal(t, b).Version
	status, loc = b.signIn(t, member).post("/web/goals/docs/proposals", url.Values{"kind": {"goal.set"}, "part": {"criterion_add"}, "criterion": {"x"}})
	require.Equal(t, http.StatusSeeOther, status)
	require.Contains(t, loc, "m=not_allowed")
	status, _ = b.signIn(t, stranger).post("/web/goals/docs/proposals", url.Values{"kind": {"goal.set"}, "part": {"criterion_add"}, "criterion": {"x"}})
	require.Equal(t, http.StatusNotFound, status)
	require.Equal(t, version, goal(t, b).Version)
}

// TestSettingsSayWhereTheirValueComesFrom: each setting shows its value and whether it is the
// machine default or set for this goal; the settings form changes only what the owner
// changed (a setting that follows the default keeps following it), and "Use the default"
// previews putting one back.
func TestSettingsSayWhereTheirValueComesFrom(t *testing.T) {
	t.Parallel()
	b := setup(t) // docs sets its own turns per window (12); everything else follows the default
	mb := b.signIn(t, member)
	_, body, _ := mb.get("/web/goals/docs")
	require.Regexp(t, `<th scope="row">turns per window</th><td>12</td><td>set for this goal · default: 24</td>`, body)
	require.Regexp(t, `<th scope="row">window \(hours\)</th><td>24</td><td>default</td>`, body)
	require.NotContains(t, body, "Use the default", "members only read")

	ob := b.signIn(t, owner)
	_, body, _ = ob.get("/web/goals/docs")
	require.Contains(t, body, `<button type="submit" form="reset-allowed_slots"`)
	require.NotContains(t, body, `form="reset-window_hours"`, "a setting that follows the default has nothing to put back")
	require.Contains(t, body, `set for this goal · default: 24`)
	require.Contains(t, body, `<output id="f-permission_timeout_seconds"`, "the permission wait is shown, changed elsewhere")

	// The whole form with one value changed: the others keep their source.
	form := url.Values{"kind": {"goal.set"}}
	for _, f := range []string{"window_hours", "stall_turns", "breaker_failures", "reminder_escalate_after"} {
		form.Set(f, map[string]string{"window_hours": "24", "stall_turns": "3", "breaker_failures": "3", "reminder_escalate_after": "3"}[f])
	}
	form.Set("allowed_slots", "12")
	form.Set("heartbeat_tz", "UTC")
	form.Set("report_tz", "UTC")
	form.Set("heartbeat_spec", "")
	form.Set("report_spec", "")
	form.Set("progress_card", "on")
	form.Set("quiet_digests", "off") // the one change
	form.Set("reminder_minutes", "30, 60, 120")
	form.Set("lang", "en")
	form.Set("owners", owner)
	form.Set("members", member)
	loc := ob.preview("docs", form)
	_, body, _ = ob.get(loc)
	require.Equal(t, 1, strings.Count(body, `<th scope="row">`), "one setting changes: %s", body)
	require.Contains(t, body, "skip quiet digests")
	ob.confirm(loc)
	g := goal(t, b)
	require.Equal(t, store.SourceOverride, g.Source(store.SettingQuietDigests))
	require.Equal(t, store.SourceDefault, g.Source(store.SettingWindowHours), "unchanged values still follow the default")
	require.Equal(t, store.SourceDefault, g.Source(store.SettingReminderMinutes))

	// Back to the default: previewed, then the goal follows it.
	loc = ob.preview("docs", url.Values{"kind": {"goal.set"}, "part": {"default"}, "setting": {"allowed_slots"}})
	_, body, _ = ob.get(loc)
	require.Contains(t, body, "<td>12</td><td><ins>24 (default)</ins></td>")
	require.Equal(t, 12, goal(t, b).AllowedSlots)
	ob.confirm(loc)
	g = goal(t, b)
	require.Equal(t, 24, g.AllowedSlots)
	require.Equal(t, store.SourceDefault, g.Source(store.SettingAllowedSlots))

	// In Chinese, with the glossary's words.
	ob.post("/web/lang", url.Values{"lang": {"zh"}, "back": {"/web/"}})
	_, body, _ = mb.get("/web/goals/docs")
	require.Contains(t, body, "set for this goal", "the member's session stays English")
	mb.post("/web/lang", url.Values{"lang": {"zh"}, "back": {"/web/"}})
	_, body, _ = mb.get("/web/goals/docs")
	require.Contains(t, body, "本机默认")
	require.Contains(t, body, "本目标单独设置")
}

// TestTodoFinishesOnlyWithEvidenceOrAWaiver: a todo added with criteria and a required
// capability shows both on the board; finishing it with a criterion unmet is refused and the
// page names the criteria in words and opens their waivers; an owner's waiver (with a reason)
// and evidence naming the other let it finish.
func TestTodoFinishesOnlyWithEvidenceOrAWaiver(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	caps := []string{"publish"}
	apply(t, b, change.Request{GoalID: "docs", Kind: store.ProposalGoalSet, Goal: change.GoalChange{Capabilities: &caps}})

	mb := b.signIn(t, member)
	_, body, _ := mb.get("/web/goals/docs")
	require.Contains(t, body, `name="requires" value="publish"`, "the add-todo form offers the goal's capabilities")
	status, loc := mb.post("/web/goals/docs/todos", url.Values{"text": {"Release the site"},
		"criteria": {"the build is green\r\nfast: loads in under 1 s\r\n"}, "requires": {"publish"}})
	require.Equal(t, http.StatusSeeOther, status)
	require.Contains(t, loc, "m=todo_added")
	todos, err := b.st.ListTodos(ctx, store.ListTodosParams{GoalID: "docs"})
	require.NoError(t, err)
	require.Len(t, todos, 1)
	td := todos[0]
	require.Equal(t, []store.Criterion{{ID: "c1", Text: "the build is green"}, {ID: "fast", Text: "loads in under 1 s"}}, td.Criteria)
	require.Equal(t, []string{"publish"}, td.Requires)
	_, body, _ = mb.get("/web/goals/docs")
	require.Contains(t, body, "needs: <code>publish</code>")
	require.Contains(t, body, "<strong>fast</strong> loads in under 1 s")

	ob := b.signIn(t, owner)
	path := "/web/goals/docs/todos/" + itoa(td.ID)
	status, loc = ob.post(path, url.Values{"to": {"done"}, "version": {itoa(td.Version)}})
	require.Equal(t, http.StatusSeeOther, status)
	require.Contains(t, loc, "m=criteria_unmet")
	require.Contains(t, loc, "#todo-"+itoa(td.ID), "the page returns to the todo")
	_, body, _ = ob.get(loc)
	require.Contains(t, body, "Todo "+itoa(td.ID)+" is not done yet; acceptance criteria still unmet: c1 (the build is green); fast (loads in under 1 s).")
	require.Regexp(t, `<details class="more" open><summary>Waive a criterion…`, body, "the waivers open")
	got, err := b.st.GetTodo(ctx, "docs", td.ID)
	require.NoError(t, err)
	require.Equal(t, store.TodoOpen, got.Status)

	zh := b.signIn(t, owner)
	zh.post("/web/lang", url.Values{"lang": {"zh"}, "back": {"/web/"}})
	_, body, _ = zh.get(loc)
	require.Contains(t, body, "待办 "+itoa(td.ID)+" 还不能完成，尚未达成的验收标准：c1（the build is green）；fast（loads in under 1 s）。")

	// A member may not waive; an owner does, with a reason.
	waiver := url.Values{"todo": {itoa(td.ID)}, "criterion": {"fast"}, "reason": {"measured by hand: 0.4 s"}}
	status, loc = mb.post("/web/goals/docs/waivers", waiver)
	require.Equal(t, http.StatusSeeOther, status)
	require.Contains(t, loc, "m=not_allowed")
	status, body = ob.post("/web/goals/docs/waivers", url.Values{"todo": {itoa(td.ID)}, "criterion": {"fast"}, "reason": {""}})
	require.Equal(t, http.StatusUnprocessableEntity, status, "a waiver needs its reason")
	require.Contains(t, body, "Why")
	status, loc = ob.post("/web/goals/docs/waivers", waiver)
	require.Equal(t, http.StatusSeeOther, status)
	require.Contains(t, loc, "m=waived")
	_, body, _ = ob.get(loc)
	require.Contains(t, body, "Criterion waived")
	require.Contains(t, body, "waived by ou_owner · “measured by hand: 0.4 s”")

	// Still c1: refused again; evidence naming it lets the todo finish.
	status, loc = ob.post(path, url.Values{"to": {"done"}, "version": {itoa(td.Version)}})
	require.Equal(t, http.StatusSeeOther, status)
	require.Contains(t, loc, "m=criteria_unmet")
	_, body, _ = ob.get(loc)
	require.Contains(t, body, "acceptance criteria still unmet: c1 (the build is green).")
	_, err = b.st.AddEvidence(ctx, store.AddEvidenceParams{GoalID: "docs", AgentID: "codex", TodoID: td.ID, Summary: "CI run 88 green",
		Criteria: []string{"c1"}, Meta: agentMeta})
	require.NoError(t, err)
	status, loc = ob.post(path, url.Values{"to": {"done"}, "version": {itoa(td.Version)}})
	require.Equal(t, http.StatusSeeOther, status)
	require.Contains(t, loc, "m=todo_moved")
	got, err = b.st.GetTodo(ctx, "docs", td.ID)
	require.NoError(t, err)
	require.Equal(t, store.TodoDone, got.Status)
	_, body, _ = ob.get("/web/goals/docs")
	require.Contains(t, body, "CI run 88 green</a>", "the criterion names the evidence that met it")

	audit, err := b.st.ListAudit(ctx, store.ListAuditParams{GoalID: "docs"})
	require.NoError(t, err)
	var waived, refused bool
	for _, a := range audit {
		waived = waived || (a.Action == "criterion.waive" && a.Allowed && a.Actor == owner && a.Surface == "web")
		refused = refused || (a.Action == "web.waive" && !a.Allowed && a.Actor == member)
	}
	require.True(t, waived, "the waiver is audited")
	require.True(t, refused, "the member's refused waiver is audited")
}

// TestFinishAndReopenTheGoal: the owner previews finishing (unmet criteria, open todos and
// gates are listed), a member cannot confirm, the owner confirms; the goal says it is done at
// the top of its page and offers reopen, home and the goals list say Done, the trail keeps
// both decisions.
func TestFinishAndReopenTheGoal(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	criteria := []store.Criterion{{Text: "docs updated"}}
	apply(t, b, change.Request{GoalID: "docs", Kind: store.ProposalGoalSet, Goal: change.GoalChange{Criteria: &criteria}})
	_, err := b.st.AddTodo(ctx, store.AddTodoParams{GoalID: "docs", Text: "Proofread", Meta: setupMeta})
	require.NoError(t, err)

	ob := b.signIn(t, owner)
	loc := ob.preview("docs", url.Values{"kind": {"goal.done"}, "reason": {"shipped on Friday"}})
	_, body, _ := ob.get(loc)
	require.Contains(t, body, "Finish the goal")
	require.Contains(t, body, "<td>Active</td><td><ins>Done</ins></td>")
	require.Contains(t, body, "criterion g1 (docs updated) has no evidence: confirming waives it")
	require.Contains(t, body, "Proofread")
	require.Contains(t, body, "1 open gate is cancelled")
	require.Equal(t, store.GoalActive, goal(t, b).Status, "a preview applies nothing")

	mb := b.signIn(t, member)
	status, back := mb.post(loc+"/confirm", url.Values{})
	require.Equal(t, http.StatusSeeOther, status)
	require.Contains(t, back, "m=not_allowed")
	require.Equal(t, store.GoalActive, goal(t, b).Status)

	ob.confirm(loc)
	require.Equal(t, store.GoalDone, goal(t, b).Status)
	_, body, _ = ob.get("/web/goals/docs")
	require.Contains(t, body, "This goal is done")
	require.Contains(t, body, "Finished by ou_owner")
	require.Contains(t, body, "“shipped on Friday”")
	require.Contains(t, body, `value="goal.reopen"`)
	require.Less(t, strings.Index(body, "This goal is done"), strings.Index(body, `id="h-needs"`), "said at the top")
	for _, gone := range []string{`id="finish-form"`, `id="contract-change"`, `value="goal.pause"`, `/handoff"`} {
		require.NotContains(t, body, gone, "a done goal takes no other change")
	}
	require.Contains(t, body, `id="decision-`, "the trail")
	require.Contains(t, body, "<strong>Finished</strong>")
	_, body, _ = mb.get("/web/goals/docs")
	require.Contains(t, body, "This goal is done")
	require.NotContains(t, body, `value="goal.reopen"`, "members cannot reopen")

	_, body, _ = ob.get("/web/")
	require.Regexp(t, `Done goals <span class="count">1</span>`, body)
	require.Contains(t, body, `<a href="/web/goals/docs">#docs</a> Docs site · <span class="status done">Done</span>`)
	_, body, _ = ob.get("/web/goals?status=done")
	require.Contains(t, body, `<span class="status done">Done</span>`)

	loc = ob.preview("docs", url.Values{"kind": {"goal.reopen"}, "reason": {"one more page"}})
	_, body, _ = ob.get(loc)
	require.Contains(t, body, "<td>Done</td><td><ins>Active</ins></td>")
	ob.confirm(loc)
	require.Equal(t, store.GoalActive, goal(t, b).Status)
	_, body, _ = ob.get("/web/goals/docs")
	require.NotContains(t, body, "This goal is done")
	require.Contains(t, body, "<strong>Reopened</strong>")
	require.Contains(t, body, "Why: one more page")
	require.Less(t, strings.Index(body, "<strong>Reopened</strong>"), strings.Index(body, "<strong>Finished</strong>"), "newest first")
}

// TestLoopXsProposalToFinishShowsUnderWhatNeedsYou: when the work is complete LoopX proposes
// finishing the goal itself; the proposal waits under "what needs you" on home and on the
// goal page, named as LoopX's, and an owner confirms it from the page.
func TestLoopXsProposalToFinishShowsUnderWhatNeedsYou(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	gates, err := b.st.ListGates(ctx, store.ListGatesParams{GoalID: "docs"})
	require.NoError(t, err)
	_, err = b.st.AnswerGate(ctx, store.AnswerGateParams{GoalID: "docs", GateID: gates[0].ID, Answer: "approve", AnsweredBy: owner, Meta: setupMeta})
	require.NoError(t, err)
	td, err := b.st.AddTodo(ctx, store.AddTodoParams{GoalID: "docs", Text: "Publish", Meta: setupMeta})
	require.NoError(t, err)
	done := store.TodoDone
	_, err = b.st.UpdateTodo(ctx, store.UpdateTodoParams{GoalID: "docs", TodoID: td.ID, AgentID: "codex", Version: td.Version, Status: &done, Meta: agentMeta})
	require.NoError(t, err)
	made, err := b.k.ProposeCompletion(ctx, "docs")
	require.NoError(t, err)
	require.True(t, made)

	ob := b.signIn(t, owner)
	_, body, _ := ob.get("/web/")
	require.Regexp(t, `Changes awaiting your confirmation <span class="count">1</span>`, body)
	require.Contains(t, body, "Every todo is finished: finish the goal?")
	require.Contains(t, body, "proposed by LoopX")
	_, body, _ = ob.get("/web/goals/docs")
	needs := body[strings.Index(body, `id="h-needs"`):strings.Index(body, `id="h-todos"`)]
	require.Contains(t, needs, "Every todo is finished: finish the goal?")
	require.Contains(t, needs, "proposed by LoopX")
	href := regexp.MustCompile(`<a href="(/web/proposals/\d+)">p\d+</a> · Every todo is finished: finish the goal\?`).FindStringSubmatch(needs)
	require.NotNil(t, href)
	ob.confirm(href[1])
	require.Equal(t, store.GoalDone, goal(t, b).Status)
}

// TestReplanFormPreviewConfirmAndTrail: the replan form lists the open todos to cancel and the
// finished ones to reopen; its preview suggests which; "Choose the todos again" brings the form
// back with the suggestions ticked, and posting it replaces the earlier preview; confirming
// cancels the ticked todos, records the decision (before → after, why, who, version) on the
// trail, and every agent shows it has not read the new objective yet.
func TestReplanFormPreviewConfirmAndTrail(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	obj := "Write the parser for CSV files"
	apply(t, b, change.Request{GoalID: "docs", Kind: store.ProposalGoalSet, Goal: change.GoalChange{Objective: &obj}})
	_, err := b.st.Acknowledge(ctx, store.AckParams{GoalID: "docs", AgentID: "codex", DecisionID: 1, Meta: agentMeta})
	require.NoError(t, err)
	csv, err := b.st.AddTodo(ctx, store.AddTodoParams{GoalID: "docs", Text: "CSV quoting rules", Meta: setupMeta})
	require.NoError(t, err)
	bench, err := b.st.AddTodo(ctx, store.AddTodoParams{GoalID: "docs", Text: "benchmark harness", Meta: setupMeta})
	require.NoError(t, err)
	old, err := b.st.AddTodo(ctx, store.AddTodoParams{GoalID: "docs", Text: "JSON fixtures", Meta: setupMeta})
	require.NoError(t, err)
	cancelled := store.TodoCancelled
	_, err = b.st.UpdateTodo(ctx, store.UpdateTodoParams{GoalID: "docs", TodoID: old.ID, Version: old.Version, Status: &cancelled, Meta: setupMeta})
	require.NoError(t, err)

	status, _, _ := b.signIn(t, member).get("/web/goals/docs/replan")
	require.Equal(t, http.StatusNotFound, status, "only owners see the replan form")
	ob := b.signIn(t, owner)
	_, body, _ := ob.get("/web/goals/docs")
	require.Contains(t, body, `href="/web/goals/docs/replan"`)
	status, body, _ = ob.get("/web/goals/docs/replan")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, `name="cancel" value="`+itoa(csv.ID)+`"`)
	require.Contains(t, body, `name="reopen" value="`+itoa(old.ID)+`"`)
	require.Contains(t, body, ">Write the parser for CSV files</textarea>", "the objective to edit")

	first := ob.preview("docs", url.Values{"kind": {"goal.replan"}, "objective": {"Write the parser for JSON files"},
		"reason": {"the customer sends JSON now"}})
	_, body, _ = ob.get(first)
	require.Contains(t, body, "<td>Write the parser for CSV files</td><td><ins>Write the parser for JSON files</ins></td>")
	require.Contains(t, body, "CSV quoting rules")
	require.Contains(t, body, "JSON fixtures")
	require.Contains(t, body, `href="/web/goals/docs/replan?from=`)
	_, body, _ = ob.get("/web/goals/docs/replan?from=" + strings.TrimPrefix(first, "/web/proposals/"))
	require.Regexp(t, `name="cancel" value="`+itoa(csv.ID)+`" checked`, body, "the suggestion to cancel is ticked")
	require.Regexp(t, `name="reopen" value="`+itoa(old.ID)+`" checked`, body, "the suggestion to reopen is ticked")
	require.NotRegexp(t, `name="cancel" value="`+itoa(bench.ID)+`" checked`, body)
	require.Contains(t, body, `name="replaces" value="`+strings.TrimPrefix(first, "/web/proposals/")+`"`)
	require.Contains(t, body, `value="the customer sends JSON now"`)

	second := ob.preview("docs", url.Values{"kind": {"goal.replan"}, "objective": {"Write the parser for JSON files"},
		"reason": {"the customer sends JSON now"}, "cancel": {itoa(csv.ID)}, "replaces": {strings.TrimPrefix(first, "/web/proposals/")}})
	_, body, _ = ob.get(first)
	require.Contains(t, body, "cancelled", "the earlier preview is replaced")
	ob.confirm(second)
	got, err := b.st.GetTodo(ctx, "docs", csv.ID)
	require.NoError(t, err)
	require.Equal(t, store.TodoCancelled, got.Status)
	require.Equal(t, "Write the parser for JSON files", goal(t, b).Objective)

	_, body, _ = ob.get("/web/goals/docs")
	trail := body[strings.Index(body, `id="h-trail"`):strings.Index(body, `id="h-audit"`)]
	require.Contains(t, trail, "<strong>Replanned</strong> · decided by ou_owner")
	require.Contains(t, trail, "<del>Write the parser for CSV files</del>")
	require.Contains(t, trail, "<ins>Write the parser for JSON files</ins>")
	require.Contains(t, trail, "Why: the customer sends JSON now")
	require.Contains(t, trail, "version "+strconv.FormatInt(goal(t, b).Version, 10))
	require.Contains(t, trail, `cancelled <a href="#todo-`+itoa(csv.ID)+`">todo `+itoa(csv.ID)+`</a>`)
	require.Contains(t, body, "Has not read the new objective yet (goal version "+strconv.FormatInt(goal(t, b).Version, 10)+").")

	// A replan that changes nothing is refused on the page, naming the objective.
	status, body = ob.post("/web/goals/docs/proposals", url.Values{"kind": {"goal.replan"}, "objective": {"Write the parser for JSON files"}})
	require.Equal(t, http.StatusUnprocessableEntity, status)
	require.Contains(t, body, "objective")
}

// TestOwnerHandsATodoOn: an owner hands a todo to another agent with a note; the claim moves,
// the board shows the handoff (from, to, kind, what was done, what is next, questions, the
// evidence), the receiver's card says a handoff waits for it; members cannot; the turn page
// shows the handoff a turn ended with.
func TestOwnerHandsATodoOn(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	_, err := b.st.RegisterAgent(ctx, store.RegisterAgentParams{GoalID: "docs", AgentID: "claude", Meta: setupMeta})
	require.NoError(t, err)
	td, err := b.st.AddTodo(ctx, store.AddTodoParams{GoalID: "docs", Text: "Write the intro", ClaimFor: "codex", Meta: setupMeta})
	require.NoError(t, err)
	ev, err := b.st.AddEvidence(ctx, store.AddEvidenceParams{GoalID: "docs", AgentID: "codex", TodoID: td.ID, Summary: "first draft", Meta: agentMeta})
	require.NoError(t, err)

	form := url.Values{"to": {"claude"}, "handoff_kind": {"review"}, "done": {"a first draft"}, "next": {"tighten the second paragraph"},
		"questions": {"keep the diagram?"}}
	path := "/web/goals/docs/todos/" + itoa(td.ID) + "/handoff"
	status, loc := b.signIn(t, member).post(path, form)
	require.Equal(t, http.StatusSeeOther, status)
	require.Contains(t, loc, "m=not_allowed")
	got, err := b.st.GetTodo(ctx, "docs", td.ID)
	require.NoError(t, err)
	require.Equal(t, "codex", got.ClaimedBy)

	ob := b.signIn(t, owner)
	_, body, _ := ob.get("/web/goals/docs")
	require.Contains(t, body, `href="/web/goals/docs?handoff=`+itoa(td.ID)+`#todo-`+itoa(td.ID)+`"`, "each todo links its handoff form")
	require.NotContains(t, body, `action="`+path+`"`, "the form opens on demand")
	_, body, _ = ob.get("/web/goals/docs?handoff=" + itoa(td.ID))
	require.Contains(t, body, `action="`+path+`"`)
	status, loc = ob.post(path, form)
	require.Equal(t, http.StatusSeeOther, status)
	require.Contains(t, loc, "m=handed_off")
	got, err = b.st.GetTodo(ctx, "docs", td.ID)
	require.NoError(t, err)
	require.Equal(t, "claude", got.ClaimedBy, "the claim moves to the receiver")
	_, body, _ = ob.get(loc)
	for _, want := range []string{"Todo handed off", "from ou_owner to claude · review", "claude has not read it yet", "a first draft",
		"tighten the second paragraph", "keep the diagram?", `<a href="#ev-` + itoa(ev.ID) + `">evidence ` + itoa(ev.ID) + `</a>`,
		"1 handoff waits for this agent to read it"} {
		require.Contains(t, body, want)
	}
	// A note is needed: the receiver starts from it.
	status, _ = ob.post(path, url.Values{"to": {"codex"}})
	require.Equal(t, http.StatusUnprocessableEntity, status)

	// A todo that needs a capability goes only to an agent that holds it; the page says so.
	caps := []string{"publish"}
	apply(t, b, change.Request{GoalID: "docs", Kind: store.ProposalGoalSet, Goal: change.GoalChange{Capabilities: &caps}})
	rel, err := b.st.AddTodo(ctx, store.AddTodoParams{GoalID: "docs", Text: "Release", Requires: caps, Meta: setupMeta})
	require.NoError(t, err)
	status, loc = ob.post("/web/goals/docs/todos/"+itoa(rel.ID)+"/handoff", url.Values{"to": {"codex"}, "next": {"release it"}})
	require.Equal(t, http.StatusSeeOther, status)
	require.Contains(t, loc, "m=handoff_capability")
	_, body, _ = ob.get(loc)
	require.Contains(t, body, "That agent lacks a capability this todo requires")
	rel, err = b.st.GetTodo(ctx, "docs", rel.ID)
	require.NoError(t, err)
	require.Empty(t, rel.ClaimedBy, "nothing moved")

	// A turn that ends with a handoff shows it on its page.
	tu, err := b.st.OpenTurn(ctx, store.OpenTurnParams{GoalID: "docs", AgentID: "claude", InstanceID: "t-h", TodoID: td.ID, Meta: store.Meta{Actor: "agent:docs/claude", Surface: "api"}})
	require.NoError(t, err)
	_, err = b.st.RefreshState(ctx, store.RefreshStateParams{GoalID: "docs", AgentID: "claude", TurnInstanceID: "t-h",
		Handoff: &store.TurnHandoff{To: "codex", Kind: store.HandoffVerify, Done: "tightened it", Next: "check the links"},
		Meta:    store.Meta{Actor: "agent:docs/claude", Surface: "api"}})
	require.NoError(t, err)
	_, body, _ = b.signIn(t, member).get("/web/goals/docs/turns/" + itoa(tu.ID))
	require.Contains(t, body, "from claude to codex · verify against the criteria")
	require.Contains(t, body, "tightened it")
	require.Contains(t, body, "check the links")
}

// TestMachineDefaultsAreForAdmins: the admin's page lists every default with how many goals
// follow it; a change is previewed with the goals it reaches and confirmed; it reaches the
// goals that follow the default only. Owners and members are answered like a page that does
// not exist, and their post is refused and audited.
func TestMachineDefaultsAreForAdmins(t *testing.T) {
	t.Parallel()
	b := setup(t) // docs sets its own turns per window
	_, err := b.st.CreateGoal(t.Context(), store.CreateGoalParams{ID: "quiet", Owners: []string{owner}, Meta: setupMeta})
	require.NoError(t, err)

	for _, who := range []string{owner, member} {
		br := b.signIn(t, who)
		status, body, _ := br.get("/web/defaults")
		require.Equal(t, http.StatusNotFound, status, who)
		require.Contains(t, body, "There is nothing here you can see.")
		_, body, _ = br.get("/web/")
		require.NotContains(t, body, `href="/web/defaults"`, "no link either")
		status, _ = br.post("/web/defaults/proposals", url.Values{"allowed_slots": {"30"}})
		require.Equal(t, http.StatusNotFound, status)
	}
	d, err := b.st.GetMachineDefaults(t.Context())
	require.NoError(t, err)
	require.Equal(t, 24, d.AllowedSlots, "nothing changed")
	var refused int
	require.NoError(t, b.st.DB().QueryRow(t.Context(), `SELECT count(*) FROM audit WHERE action = 'web.defaults' AND NOT allowed`).Scan(&refused))
	require.Equal(t, 2, refused)

	ab := b.newBrowser(t)
	status, loc := ab.postRaw("/web/signin/admin", url.Values{"token": {admin}})
	require.Equal(t, http.StatusSeeOther, status)
	ab.get(loc)
	status, body, _ := ab.get("/web/defaults")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, `href="/web/defaults" aria-current="page"`)
	require.Regexp(t, `<tr id="d-allowed_slots"><th scope="row">turns per window</th><td>24</td><td>1 goal</td></tr>`, body)
	require.Regexp(t, `<tr id="d-window_hours"><th scope="row">window \(hours\)</th><td>24</td><td>2 goals</td></tr>`, body)

	form := url.Values{"version": {strconv.FormatInt(d.Version, 10)}}
	for _, f := range store.Settings() {
		form.Set(f, d.Value(f))
	}
	form.Set("allowed_slots", "30")
	status, loc = ab.post("/web/defaults/proposals", form)
	require.Equal(t, http.StatusSeeOther, status)
	require.Regexp(t, `^/web/proposals/\d+$`, loc)
	_, body, _ = ab.get(loc)
	require.Contains(t, body, "Change the machine defaults")
	require.Contains(t, body, "turns per window changes for 1 goal that follows the default: quiet")
	require.Contains(t, body, `<a href="/web/defaults">Back to the machine defaults</a>`)
	require.NotContains(t, body, "#</", "no goal named")
	status, back := ab.post(loc+"/confirm", url.Values{})
	require.Equal(t, http.StatusSeeOther, status)
	require.Contains(t, back, "m=applied")
	_, body, _ = ab.get(back)
	require.Contains(t, body, "the machine defaults are now at version")
	q, err := b.st.GetGoal(t.Context(), "quiet")
	require.NoError(t, err)
	require.Equal(t, 30, q.AllowedSlots, "a goal that follows the default gets it")
	require.Equal(t, 12, goal(t, b).AllowedSlots, "a goal with its own value keeps it")

	// The same form again, read before the change: nothing changes, and the page says so.
	form.Del("key")
	status, body = ab.post("/web/defaults/proposals", form)
	require.Equal(t, http.StatusConflict, status)
	require.Contains(t, body, "The machine defaults changed since you opened this page")

	// An owner cannot see the proposal either.
	status, _, _ = b.signIn(t, owner).get(loc)
	require.Equal(t, http.StatusNotFound, status)
}
