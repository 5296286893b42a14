package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"loopx/store/storetest"
)

// TestWorkspaceContractInChromium drives the goal contract in real headless Chromium against
// `loopx serve --sandbox`, by keyboard where people would: an owner adds an acceptance
// criterion by preview → confirm; a todo added with a criterion is refused Done until evidence
// names it (the page says which, in words); a goal criterion is waived with a reason; the
// objective is replanned from the replan form with the preview's suggestions taken; the goal
// is finished from the page and says so at its top, with the trail of decisions below; an
// admin opens the machine defaults. Every page checked with axe-core and the accessibility
// tree, in English and Chinese (no retired English word on a Chinese page) and at a phone's
// width. Screenshots go to test-artifacts/workspace (contract-*.png; docs/workspace.md
// describes them).
func TestWorkspaceContractInChromium(t *testing.T) {
	t.Parallel()
	exe := chromiumPath()
	if exe == "" {
		t.Skip("chromium is not installed (apt-get install chromium); .ci/run installs it so CI runs this test")
	}
	axe := axeSource(t)
	retired := retiredInChinese(t)
	sandboxURL := "http://" + freeAddr(t)
	s := startServe(t, map[string]string{
		"DATABASE_URL": storetest.NewDatabase(t), "LOOPX_ADMIN_TOKEN": e2eAdminToken, "LOOPX_HOME": t.TempDir(),
		"LOOPX_SANDBOX_ADDR": strings.TrimPrefix(sandboxURL, "http://"), "LOOPX_DEMO": "off", "LOOPX_SCHEDULER": "off",
		"LOOPX_SANDBOX_STATE": "off",
	})
	admin := e2eAdminToken
	s.ok(t, admin, "goal", "create", "--goal-id", "docs", "--title", "Docs site", "--owner", "ou_owner", "--member", "ou_member",
		"--allowed-slots", "12", "--objective", "Publish the docs site for the CSV importer")
	agentTok := s.ok(t, admin, "agent", "register", "--goal-id", "docs", "--agent-id", "codex")["token"].(string)
	s.ok(t, admin, "agent", "register", "--goal-id", "docs", "--agent-id", "claude")
	csvTodo := int64(s.ok(t, admin, "todo", "add", "--goal-id", "docs", "--text", "Document the CSV quoting rules")["todo_id"].(float64))
	handed := int64(s.ok(t, admin, "todo", "add", "--goal-id", "docs", "--text", "Proofread the intro", "--agent-id", "codex", "--claim")["todo_id"].(float64))
	s.ok(t, agentTok, "evidence", "add", "--goal-id", "docs", "--agent-id", "codex", "--todo-id", strconv.FormatInt(handed, 10),
		"--summary", "first pass: 12 fixes")
	s.ok(t, admin, "todo", "handoff", "--goal-id", "docs", "--todo-id", strconv.FormatInt(handed, 10), "--to", "claude",
		"--kind", "review", "--note", "first pass done", "--next", "check the tone", "--questions", "keep British spelling?")

	shots := artifactsDir(t)
	shoot := func(ctx context.Context, name string) {
		t.Helper()
		screenshot(t, ctx, shots, "contract-"+name)
	}
	owner := newBrowser(t, exe)
	browse(t, owner, "sign in with Lark as the owner", chromedp.Navigate(s.url+"/web/goals/docs"),
		chromedp.WaitVisible(chromedp.CSS(`#lark-signin`)), chromedp.Click(chromedp.CSS(`#lark-signin`)),
		chromedp.WaitVisible(chromedp.CSS(`#authorize`)), fill(`#open_id`, "ou_owner"), chromedp.Click(chromedp.CSS(`#authorize`)),
		chromedp.WaitVisible(chromedp.CSS(`#h-contract`)))
	text := bodyText(t, owner)
	require.Contains(t, text, "Publish the docs site for the CSV importer")
	require.Contains(t, text, "from the admin to claude · review", "the board shows the todo's handoff")
	require.Contains(t, text, "keep British spelling?")
	require.Contains(t, text, "1 handoff waits for this agent to read it")

	// An acceptance criterion, added by preview → confirm (the keyboard's Enter submits).
	browse(t, owner, "preview a new criterion", fill(`#crit-new`, "docs: every page is linked from the index"),
		chromedp.Focus(chromedp.CSS(`#criterion-add button[type="submit"]`)), chromedp.KeyEvent("\r"),
		chromedp.WaitVisible(chromedp.CSS(`table.diff`)))
	text = bodyText(t, owner)
	require.Contains(t, text, "docs: every page is linked from the index")
	require.Empty(t, s.ok(t, admin, "goal", "show", "--goal-id", "docs")["criteria"], "nothing applies before Confirm")
	checkAccessible(t, owner, axe, "the preview of a criterion")
	shoot(owner, "criterion-preview-en")
	browse(t, owner, "confirm it", chromedp.Click(chromedp.CSS(`form[action$="/confirm"] button`)), chromedp.WaitVisible(chromedp.CSS(`p.receipt`)))
	criteria := s.ok(t, admin, "goal", "show", "--goal-id", "docs")["criteria"].([]any)
	require.Len(t, criteria, 1)
	require.Equal(t, "docs", criteria[0].(map[string]any)["id"])

	// A todo with a criterion: Done is refused until evidence names it, and the page says which.
	browse(t, owner, "add a todo with a criterion", chromedp.Navigate(s.url+"/web/goals/docs"), chromedp.WaitVisible(chromedp.CSS(`#todo-text`)),
		fill(`#todo-text`, "Publish the site"), fill(`#todo-criteria`, "the build is green"),
		chromedp.Click(chromedp.CSS(`form[action="/web/goals/docs/todos"] button[type="submit"]`)), chromedp.WaitVisible(chromedp.CSS(`p.flash`)))
	hash := value(t, owner, "the new todo", chromedp.Evaluate[string](`location.hash`))
	publish, err := strconv.ParseInt(strings.TrimPrefix(hash, "#todo-"), 10, 64)
	require.NoError(t, err, hash)
	done := fmt.Sprintf(`#todo-%d form.move button[value="done"]`, publish)
	browse(t, owner, "try to finish it", chromedp.Focus(chromedp.CSS(done)), chromedp.KeyEvent("\r"),
		chromedp.WaitVisible(chromedp.CSS(`p.flash.warn`)))
	require.Contains(t, bodyText(t, owner), fmt.Sprintf("Todo %d is not done yet; acceptance criteria still unmet: c1 (the build is green).", publish))
	open := value(t, owner, "the waivers are open", chromedp.Evaluate[bool](fmt.Sprintf(`document.querySelector("#todo-%d details.more").open`, publish)))
	require.True(t, open, "the owner is offered the waiver")
	checkAccessible(t, owner, axe, "the goal page after a refused finish")
	shoot(owner, "todo-refused-en")
	s.ok(t, agentTok, "evidence", "add", "--goal-id", "docs", "--agent-id", "codex", "--todo-id", strconv.FormatInt(publish, 10),
		"--summary", "CI run 88 is green", "--criterion", "c1")
	browse(t, owner, "finish it with evidence", chromedp.Navigate(s.url+"/web/goals/docs"), chromedp.WaitVisible(chromedp.CSS(done)),
		chromedp.Focus(chromedp.CSS(done)), chromedp.KeyEvent("\r"), chromedp.WaitVisible(chromedp.CSS(`p.flash.ok`)))
	require.Contains(t, bodyText(t, owner), "Todo moved.")
	inDone := value(t, owner, "the todo is done", chromedp.Evaluate[bool](fmt.Sprintf(`!!document.querySelector('[data-col="done"] #todo-%d')`, publish)))
	require.True(t, inDone)

	// The goal's criterion is waived by the owner, with a reason.
	browse(t, owner, "waive the goal criterion", fill(`#gw-why`, "the index is generated; checked by hand"),
		chromedp.Click(chromedp.CSS(`#criterion-waive button[type="submit"]`)))
	waitFor(t, owner, "the waiver is shown", `document.body.innerText.includes("waived by ou_owner · “the index is generated; checked by hand”")`)
	require.Contains(t, bodyText(t, owner), "Criterion waived")

	// Replan: the form, its preview's suggestions taken, confirmed; the trail keeps it.
	browse(t, owner, "open the replan form", chromedp.Navigate(s.url+"/web/goals/docs/replan"), chromedp.WaitVisible(chromedp.CSS(`#rp-obj`)),
		fill(`#rp-obj`, "Publish the docs site for the JSON importer"), fill(`#rp-why`, "the importer reads JSON now"),
		chromedp.Click(chromedp.CSS(`#replan-form button[type="submit"]`)), chromedp.WaitVisible(chromedp.CSS(`table.diff`)))
	require.Contains(t, bodyText(t, owner), "Document the CSV quoting rules", "the preview suggests the CSV todo")
	browse(t, owner, "take the suggestions", chromedp.Click(chromedp.CSS(`a[href*="/replan?from="]`)), chromedp.WaitVisible(chromedp.CSS(`#rp-obj`)))
	ticked := value(t, owner, "the suggestion is ticked", chromedp.Evaluate[bool](fmt.Sprintf(`document.querySelector('input[name="cancel"][value="%d"]').checked`, csvTodo)))
	require.True(t, ticked)
	checkAccessible(t, owner, axe, "the replan form")
	shoot(owner, "replan-en")
	browse(t, owner, "preview again", chromedp.Click(chromedp.CSS(`#replan-form button[type="submit"]`)), chromedp.WaitVisible(chromedp.CSS(`table.diff`)))
	require.Contains(t, bodyText(t, owner), fmt.Sprintf("todo %d is cancelled", csvTodo))
	browse(t, owner, "confirm the replan", chromedp.Click(chromedp.CSS(`form[action$="/confirm"] button`)), chromedp.WaitVisible(chromedp.CSS(`p.receipt`)))
	todo := s.ok(t, admin, "todo", "list", "--goal-id", "docs")
	require.Contains(t, fmt.Sprint(todo), "cancelled")

	// Finish the goal from the page: the preview, then the page says it is done at its top.
	browse(t, owner, "preview finishing", chromedp.Navigate(s.url+"/web/goals/docs"), chromedp.WaitVisible(chromedp.CSS(`#finish-form`)),
		fill(`#done-why`, "the site is live"), chromedp.Click(chromedp.CSS(`#finish-form button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`table.diff`)))
	text = bodyText(t, owner)
	require.Contains(t, text, "Finish the goal")
	require.Contains(t, text, "Proofread the intro", "the open todo is listed")
	checkAccessible(t, owner, axe, "the preview of finishing")
	shoot(owner, "finish-preview-en")
	browse(t, owner, "confirm finishing", chromedp.Click(chromedp.CSS(`form[action$="/confirm"] button`)), chromedp.WaitVisible(chromedp.CSS(`p.receipt`)))
	require.Equal(t, "done", s.ok(t, admin, "goal", "show", "--goal-id", "docs")["status"])
	require.Equal(t, "done", s.ok(t, agentTok, "quota", "should-run", "--goal-id", "docs", "--agent-id", "codex")["state"])
	browse(t, owner, "the done goal", chromedp.Navigate(s.url+"/web/goals/docs"), chromedp.WaitVisible(chromedp.CSS(`#done`)))
	top := value(t, owner, "the banner comes first", chromedp.Evaluate[bool](
		`document.getElementById("done").getBoundingClientRect().top < document.getElementById("h-needs").getBoundingClientRect().top`))
	require.True(t, top)
	text = bodyText(t, owner)
	require.Contains(t, text, "This goal is done")
	require.Contains(t, text, "Reopen…")
	trail := value(t, owner, "the trail", chromedp.Text(chromedp.CSS(`#trail`)))
	require.Contains(t, trail, "Finished")
	require.Contains(t, trail, "Replanned")
	require.Contains(t, trail, "Publish the docs site for the JSON importer")
	require.Contains(t, trail, "Why: the importer reads JSON now")
	checkAccessible(t, owner, axe, "the done goal")
	shoot(owner, "goal-done-en")
	browse(t, owner, "the goals list", chromedp.Navigate(s.url+"/web/goals"), chromedp.WaitVisible(chromedp.CSS(`#g-docs`)))
	require.Contains(t, value(t, owner, "the row", chromedp.Text(chromedp.CSS(`#g-docs`))), "Done")

	// An admin's machine defaults; an owner is told there is nothing there.
	browse(t, owner, "the defaults as an owner", chromedp.Navigate(s.url+"/web/defaults"), chromedp.WaitVisible(chromedp.CSS(`h1`)))
	require.Contains(t, bodyText(t, owner), "There is nothing here you can see.")
	adm := newBrowser(t, exe)
	browse(t, adm, "sign in with the admin token", chromedp.Navigate(s.url+"/web/"), chromedp.WaitVisible(chromedp.CSS(`details summary`)),
		chromedp.Click(chromedp.CSS(`details summary`)), fill(`#admin-token`, admin),
		chromedp.Click(chromedp.CSS(`form[action="/web/signin/admin"] button`)), chromedp.WaitVisible(chromedp.CSS(`form[action="/web/signout"] button`)))
	browse(t, adm, "the machine defaults", chromedp.Navigate(s.url+"/web/defaults"), chromedp.WaitVisible(chromedp.CSS(`#d-allowed_slots`)))
	require.Contains(t, value(t, adm, "a default's row", chromedp.Text(chromedp.CSS(`#d-window_hours`))), "1 goal")
	checkAccessible(t, adm, axe, "the machine defaults")
	shoot(adm, "defaults-en")
	browse(t, adm, "preview a default", fill(`#df-stall_turns`, "5"), chromedp.Click(chromedp.CSS(`form.settings > button.primary`)))
	waitFor(t, adm, "the preview opens", `location.pathname.startsWith("/web/proposals/") && !!document.querySelector("table.diff")`)
	require.Contains(t, bodyText(t, adm), "changes for 1 goal that follows the default: docs")
	shoot(adm, "defaults-preview-en")

	// Phone width: nothing wider than the screen.
	phone := newBrowser(t, exe)
	browse(t, phone, "sign in on a phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2)), chromedp.Navigate(s.url+"/web/goals/docs"),
		chromedp.WaitVisible(chromedp.CSS(`#lark-signin`)), chromedp.Click(chromedp.CSS(`#lark-signin`)),
		chromedp.WaitVisible(chromedp.CSS(`#authorize`)), fill(`#open_id`, "ou_owner"), chromedp.Click(chromedp.CSS(`#authorize`)),
		chromedp.WaitVisible(chromedp.CSS(`#done`)))
	pages := []struct{ name, path, wait string }{
		{"goal-done", "/web/goals/docs", "#done"}, {"replan", "/web/goals/docs/replan", "h1"},
	}
	for _, p := range pages {
		browse(t, phone, "the "+p.name+" page on a phone", chromedp.Navigate(s.url+p.path), chromedp.WaitVisible(chromedp.CSS(p.wait)))
		over := value(t, phone, "measure the width", chromedp.Evaluate[int](`document.documentElement.scrollWidth - window.innerWidth`))
		require.LessOrEqual(t, over, 0, "the %s page fits a phone's width: %s", p.name, value(t, phone, "what is wider", chromedp.Evaluate[string](wider)))
		shoot(phone, p.name+"-en-phone")
	}

	// In Chinese: the same pages, none of the retired English words, accessible.
	own := []string{"Docs site", "Publish the docs site for the JSON importer", "Publish the docs site for the CSV importer",
		"Document the CSV quoting rules", "Proofread the intro", "Publish the site", "the build is green", "CI run 88 is green",
		"every page is linked from the index", "the index is generated; checked by hand", "the importer reads JSON now",
		"the site is live", "first pass: 12 fixes", "first pass done", "check the tone", "keep British spelling?"}
	chinese := func(ctx context.Context, what string) {
		t.Helper()
		text := bodyText(t, ctx)
		for _, o := range own {
			text = strings.ReplaceAll(text, o, "")
		}
		require.Empty(t, retired.FindAllString(text, -1), "retired English words on the Chinese %s", what)
		checkAccessible(t, ctx, axe, "the Chinese "+what)
	}
	for _, b := range []context.Context{owner, adm, phone} {
		browse(t, b, "switch to Chinese", chromedp.Navigate(s.url+"/web/"), chromedp.WaitVisible(chromedp.CSS(`#lang-pick`)),
			fill(`#lang-pick`, "zh"), chromedp.Click(chromedp.CSS(`form[action="/web/lang"] button`)),
			chromedp.WaitVisible(chromedp.CSS(`html[lang="zh-CN"] h1`)))
	}
	browse(t, owner, "the Chinese done goal", chromedp.Navigate(s.url+"/web/goals/docs"), chromedp.WaitVisible(chromedp.CSS(`html[lang="zh-CN"] #done`)))
	text = bodyText(t, owner)
	require.Contains(t, text, "这个目标已完成")
	require.Contains(t, text, "决定记录")
	require.Contains(t, text, "本机默认")
	chinese(owner, "done goal")
	shoot(owner, "goal-done-zh")
	browse(t, owner, "the Chinese replan form", chromedp.Navigate(s.url+"/web/goals/docs/replan"), chromedp.WaitVisible(chromedp.CSS(`html[lang="zh-CN"] h1`)))
	chinese(owner, "replan page")
	shoot(owner, "replan-zh")
	browse(t, owner, "reopen, in Chinese", chromedp.Navigate(s.url+"/web/goals/docs"), chromedp.WaitVisible(chromedp.CSS(`#reopen button`)),
		chromedp.Click(chromedp.CSS(`#reopen button`)))
	waitFor(t, owner, "the preview of reopening opens", `location.pathname.startsWith("/web/proposals/") && !!document.querySelector('html[lang="zh-CN"] table.diff')`)
	chinese(owner, "preview of reopening")
	shoot(owner, "reopen-preview-zh")
	browse(t, owner, "confirm reopening", chromedp.Click(chromedp.CSS(`form[action$="/confirm"] button`)), chromedp.WaitVisible(chromedp.CSS(`p.receipt`)))
	require.Equal(t, "active", s.ok(t, admin, "goal", "show", "--goal-id", "docs")["status"])
	browse(t, owner, "the Chinese goal page", chromedp.Navigate(s.url+"/web/goals/docs"), chromedp.WaitVisible(chromedp.CSS(`html[lang="zh-CN"] #h-contract`)))
	text = bodyText(t, owner)
	require.Contains(t, text, "目标约定")
	require.Contains(t, text, "验收标准")
	require.Contains(t, text, "交接")
	chinese(owner, "goal page")
	shoot(owner, "goal-zh")
	browse(t, adm, "the Chinese machine defaults", chromedp.Navigate(s.url+"/web/defaults"), chromedp.WaitVisible(chromedp.CSS(`html[lang="zh-CN"] #d-allowed_slots`)))
	chinese(adm, "machine defaults")
	shoot(adm, "defaults-zh")
	pages = append(pages, struct{ name, path, wait string }{"goal", "/web/goals/docs", "#h-contract"})
	for _, p := range pages[1:] {
		browse(t, phone, "the Chinese "+p.name+" page on a phone", chromedp.Navigate(s.url+p.path), chromedp.WaitVisible(chromedp.CSS(`html[lang="zh-CN"] `+p.wait)))
		over := value(t, phone, "measure the width", chromedp.Evaluate[int](`document.documentElement.scrollWidth - window.innerWidth`))
		require.LessOrEqual(t, over, 0, "the Chinese %s page fits a phone's width: %s", p.name, value(t, phone, "what is wider", chromedp.Evaluate[string](wider)))
		shoot(phone, p.name+"-zh-phone")
	}
}
