package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/accessibility"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"loopx/bot/sandbox"
	"loopx/store"
	"loopx/store/storetest"
)

// axeSource is axe-core's script (LOOPX_AXE_JS, which .ci/run sets from scripts/axe.sh); ""
// when it is not installed: the DevTools accessibility tree check still runs, and with
// LOOPX_REQUIRE_AXE=1 the test fails instead.
func axeSource(t *testing.T) string {
	t.Helper()
	path := os.Getenv("LOOPX_AXE_JS")
	if path == "" {
		require.NotEqual(t, "1", os.Getenv("LOOPX_REQUIRE_AXE"), "LOOPX_AXE_JS is not set (scripts/axe.sh installs axe-core)")
		t.Log("axe-core is not installed (scripts/axe.sh); checking the DevTools accessibility tree only")
		return ""
	}
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

// checkAccessible runs axe-core's WCAG 2.1 A/AA rules on the open page (when installed) and
// requires no serious or critical violation; and, always, reads the DevTools accessibility tree
// and requires every control and link to have a name.
func checkAccessible(t *testing.T, ctx context.Context, axe, what string) {
	t.Helper()
	if axe != "" {
		js := axe + `;axe.run(document, {runOnly: {type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]}})
			.then(r => JSON.stringify(r.violations.filter(v => v.impact === "serious" || v.impact === "critical")
			.map(v => ({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 5).map(n => n.target.join(" "))}))))`
		out := value(t, ctx, "run axe on "+what, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))
		require.Equal(t, "[]", out, "serious accessibility violations on %s", what)
	}
	tree := value(t, ctx, "read the accessibility tree of "+what, func(ctx context.Context, tg *chromedp.Target) (accessibility.GetFullAXTreeResult, error) {
		return cdp.Call(ctx, tg, accessibility.GetFullAXTree, accessibility.GetFullAXTreeParams{})
	})
	named := map[string]bool{"button": true, "link": true, "textbox": true, "combobox": true, "checkbox": true, "searchbox": true, "spinbutton": true}
	var unnamed []string
	for _, n := range tree.Nodes {
		if n.Ignored || n.Role == nil {
			continue
		}
		var role, name string
		_ = json.Unmarshal(n.Role.Value, &role)
		if n.Name != nil {
			_ = json.Unmarshal(n.Name.Value, &name)
		}
		if named[role] && strings.TrimSpace(name) == "" {
			unnamed = append(unnamed, fmt.Sprintf("%s #%d", role, n.BackendDOMNodeID))
		}
	}
	require.Empty(t, unnamed, "controls without an accessible name on %s", what)
}

// wider lists the elements that reach past the screen's right edge (for a failure's message).
const wider = `Array.from(document.querySelectorAll("body *")).filter(e => e.getBoundingClientRect().right > window.innerWidth + 0.5)
	.slice(-5).map(e => e.tagName + "." + e.className + "#" + e.id + " " + Math.round(e.getBoundingClientRect().right)).join(", ")`

// waitFor waits until js is true on the page, across the navigation a form submit starts
// (an evaluation during it fails and is tried again).
func waitFor(t *testing.T, ctx context.Context, what, js string) {
	t.Helper()
	require.Eventually(t, func() bool {
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		ok, err := chromedp.Run(c, chromedp.Evaluate[bool](js))
		return err == nil && ok
	}, 30*time.Second, 100*time.Millisecond, what)
}

// retiredInChinese reads the English words a Chinese screen must never show from the glossary
// (docs/glossary.md, the block marked retired-in-zh).
func retiredInChinese(t *testing.T) *regexp.Regexp {
	t.Helper()
	words := glossaryBlock(t, "retired-in-zh")
	require.NotEmpty(t, words)
	return regexp.MustCompile(`(?i)\b(` + strings.Join(words, "|") + `)\b`)
}

// glossaryBlock reads the words of one fenced block (```name) of docs/glossary.md.
func glossaryBlock(t *testing.T, name string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "glossary.md"))
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(b), "```"+name+"\n")
	require.True(t, ok, "docs/glossary.md has no %s block", name)
	block, _, _ := strings.Cut(rest, "```")
	var out []string
	for _, w := range strings.FieldsFunc(block, func(r rune) bool { return r == ',' || r == '\n' }) {
		if w = strings.TrimSpace(w); w != "" {
			out = append(out, regexp.QuoteMeta(w))
		}
	}
	return out
}

// TestWorkspaceTeamInChromium drives what a team does in its first hour, in real headless
// Chromium against `loopx serve --sandbox` (the Lark emulator, the real SDK): sign in through
// the emulated Lark OAuth; the goals list shows a goal with nothing pending; a turn page shows
// its log and evidence; a member adds a todo and messages an agent, which reaches its inbox;
// an owner moves a todo on the board; "Open in workspace" on a gate card lands on that gate;
// the page installs (manifest, service worker); no serious accessibility violation on the
// home, goals, goal, turn and proposal pages; the Chinese pages show none of the retired
// English words. Screenshots of each page, in both languages and at phone width, are written
// to test-artifacts/workspace (git-ignored; docs/workspace.md describes them).
func TestWorkspaceTeamInChromium(t *testing.T) {
	t.Parallel()
	exe := chromiumPath()
	if exe == "" {
		t.Skip("chromium is not installed (apt-get install chromium); .ci/run installs it so CI runs this test")
	}
	axe := axeSource(t)
	retired := retiredInChinese(t)
	dbURL := storetest.NewDatabase(t)
	sandboxURL := "http://" + freeAddr(t)
	s := startServe(t, map[string]string{
		"DATABASE_URL": dbURL, "LOOPX_ADMIN_TOKEN": e2eAdminToken, "LOOPX_HOME": t.TempDir(),
		"LOOPX_SANDBOX_ADDR": strings.TrimPrefix(sandboxURL, "http://"), "LOOPX_DEMO": "off", "LOOPX_SCHEDULER": "off",
		"LOOPX_SANDBOX_STATE": "off",
	})
	admin := e2eAdminToken
	s.ok(t, admin, "goal", "create", "--goal-id", "docs", "--title", "Docs site", "--owner", "ou_owner", "--member", "ou_member",
		"--allowed-slots", "12", "--heartbeat", "*/30 * * * *")
	s.ok(t, admin, "goal", "create", "--goal-id", "quiet", "--title", "Quiet corner", "--owner", "ou_owner")
	agentTok := s.ok(t, admin, "agent", "register", "--goal-id", "docs", "--agent-id", "codex")["token"].(string)
	s.ok(t, agentTok, "gate", "ask", "--goal-id", "docs", "--agent-id", "codex", "--question", "Publish the draft?")
	todoID := int64(s.ok(t, admin, "todo", "add", "--goal-id", "docs", "--text", "Write the intro", "--priority", "P1")["todo_id"].(float64))

	// One finished turn with a log and evidence, as an exec runner leaves it.
	ctx := t.Context()
	pool, err := store.Open(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	st := store.New(pool, store.Options{})
	agentMeta := store.Meta{Actor: "agent:docs/codex", Surface: "api"}
	tu, err := st.OpenTurn(ctx, store.OpenTurnParams{GoalID: "docs", AgentID: "codex", InstanceID: "t-intro", TodoID: todoID, Meta: agentMeta})
	require.NoError(t, err)
	_, err = st.AddEvidence(ctx, store.AddEvidenceParams{GoalID: "docs", AgentID: "codex", TurnID: tu.ID, Kind: "link",
		Summary: "Draft of the intro", Ref: "https://example.test/intro", Meta: agentMeta})
	require.NoError(t, err)
	_, err = st.EndTurn(ctx, store.EndTurnParams{GoalID: "docs", AgentID: "codex", InstanceID: "t-intro", State: store.TurnOK,
		Outcome: "intro drafted", LogTail: "$ make intro\nwrote intro.md (412 words)\n", Meta: agentMeta})
	require.NoError(t, err)
	turnPath := "/web/goals/docs/turns/" + strconv.FormatInt(tu.ID, 10)

	shots := artifactsDir(t)
	shoot := func(ctx context.Context, name string) {
		t.Helper()
		screenshot(t, ctx, shots, name)
	}

	// Sign in through the emulated Lark OAuth: the workspace's sign-in page, Lark's authorize
	// page (the sandbox's), back to the page first asked for.
	larkSignIn := func(openID, path string) context.Context {
		t.Helper()
		b := newBrowser(t, exe)
		browse(t, b, "sign in with Lark as "+openID, chromedp.Navigate(s.url+path),
			chromedp.WaitVisible(chromedp.CSS(`#lark-signin`)), chromedp.Click(chromedp.CSS(`#lark-signin`)),
			chromedp.WaitVisible(chromedp.CSS(`#authorize`)), fill(`#open_id`, openID), chromedp.Click(chromedp.CSS(`#authorize`)),
			chromedp.WaitVisible(chromedp.CSS(`form[action="/web/signout"] button`)))
		loc := value(t, b, "where the sign-in landed", chromedp.Evaluate[string](`location.pathname`))
		require.Equal(t, path, loc, "the sign-in returns to the page asked for")
		return b
	}
	owner := larkSignIn("ou_owner", "/web/goals")

	// The goals list: every goal, the quiet one with nothing pending; what needs you first.
	text := bodyText(t, owner)
	require.Contains(t, text, "#quiet")
	require.Contains(t, text, "Quiet corner")
	require.Contains(t, text, "nothing pending")
	require.Contains(t, text, "1 open gate")
	checkAccessible(t, owner, axe, "the goals list")
	shoot(owner, "goals-en")
	browse(t, owner, "home", chromedp.Navigate(s.url+"/web/"), chromedp.WaitVisible(chromedp.CSS(`#h-gates`)))
	home := bodyText(t, owner)
	require.Contains(t, home, "2 goals you can see")
	// What needs the owner first, then one quiet line; no empty section says "Nothing here".
	require.Less(t, strings.Index(home, "Publish the draft?"), strings.Index(home, "Nothing else waits for you."))
	require.NotContains(t, home, "Nothing here")
	checkAccessible(t, owner, axe, "home")
	shoot(owner, "home-en")

	// The page installs: a manifest Chromium accepts and the service worker, active over /web/.
	scope := value(t, owner, "the service worker is active", chromedp.Evaluate[string](
		`navigator.serviceWorker.ready.then(r => r.active ? r.scope : "")`, chromedp.EvalAwaitPromise))
	require.Equal(t, s.url+"/web/", scope)
	manifest := value(t, owner, "read the app manifest", func(ctx context.Context, tg *chromedp.Target) (page.GetAppManifestResult, error) {
		return cdp.Call(ctx, tg, page.GetAppManifest, page.GetAppManifestParams{})
	})
	require.Empty(t, manifest.Errors, "the manifest parses")
	require.Contains(t, manifest.Data, `"start_url":"/web/"`)
	installable := value(t, owner, "ask Chromium whether the page installs", func(ctx context.Context, tg *chromedp.Target) (page.GetInstallabilityErrorsResult, error) {
		return cdp.Call(ctx, tg, page.GetInstallabilityErrors, cdp.Empty{})
	})
	for _, e := range installable.InstallabilityErrors {
		t.Logf("installability: %s", e.ErrorID)
		require.Contains(t, []string{"in-incognito", "not-from-secure-origin"}, e.ErrorID, "only the headless profile's own limits")
	}

	// The turn page: its log (for an owner) and evidence, the decision, the todo.
	browse(t, owner, "the turn page", chromedp.Navigate(s.url+turnPath), chromedp.WaitVisible(chromedp.CSS(`#h-log`)))
	text = bodyText(t, owner)
	require.Contains(t, text, "wrote intro.md (412 words)")
	require.Contains(t, text, "Draft of the intro")
	require.Contains(t, text, "Write the intro")
	checkAccessible(t, owner, axe, "the turn page")
	shoot(owner, "turn-en")

	// A member adds a todo and messages the agent from the goal page; the message reaches the
	// agent's inbox.
	member := larkSignIn("ou_member", "/web/goals/docs")
	browse(t, member, "add a todo", fill(`#todo-text`, "Check every link"),
		chromedp.Click(chromedp.CSS(`form[action="/web/goals/docs/todos"] button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`p.flash`)))
	require.Contains(t, bodyText(t, member), "Todo added.")
	browse(t, member, "message the agent", fill(`#msg-codex`, "Please look at the footer too"),
		chromedp.Click(chromedp.CSS(`form[action="/web/goals/docs/agents/codex/messages"] button[type="submit"]`)))
	waitFor(t, member, "the message is sent", `document.body.innerText.includes("Message sent to the inbox.")`)
	items, err := store.ListInbox(ctx, st.DB(), "docs", "codex")
	require.NoError(t, err)
	require.Len(t, items, 1)
	require.Equal(t, "Please look at the footer too", items[0].Text)
	require.Equal(t, "ou_member", items[0].Sender)
	controls := value(t, member, "count board controls", chromedp.Evaluate[int](`document.querySelectorAll("form.move").length`))
	require.Zero(t, controls, "a member gets no board controls")
	require.NotContains(t, bodyText(t, member), "wrote intro.md", "the log stays with the owners")

	// The owner moves the new todo on the board to Done (a button: keyboard and phone alike).
	todos, err := st.ListTodos(ctx, store.ListTodosParams{GoalID: "docs"})
	require.NoError(t, err)
	var added store.Todo
	for _, td := range todos {
		if td.Text == "Check every link" {
			added = td
		}
	}
	require.NotZero(t, added.ID)
	sel := fmt.Sprintf(`#todo-%d button[value="done"]`, added.ID)
	browse(t, owner, "move the todo to done", chromedp.Navigate(s.url+"/web/goals/docs"), chromedp.WaitVisible(chromedp.CSS(sel)),
		chromedp.Focus(chromedp.CSS(sel)), chromedp.KeyEvent("\r"), chromedp.WaitVisible(chromedp.CSS(`p.flash`)))
	require.Contains(t, bodyText(t, owner), "Todo moved.")
	hash := value(t, owner, "where the page returned", chromedp.Evaluate[string](`location.hash`))
	require.Equal(t, fmt.Sprintf("#todo-%d", added.ID), hash, "the page returns to the todo it moved")
	got, err := st.GetTodo(ctx, "docs", added.ID)
	require.NoError(t, err)
	require.Equal(t, store.TodoDone, got.Status)
	inDone := value(t, owner, "the todo is in the done column", chromedp.Evaluate[bool](
		fmt.Sprintf(`!!document.querySelector('[data-col="done"] #todo-%d')`, added.ID)))
	require.True(t, inDone)
	checkAccessible(t, owner, axe, "the goal page")
	shoot(owner, "goal-en")

	// A change preview (the proposal page).
	browse(t, owner, "preview pausing", chromedp.Click(chromedp.CSS(`#settings form.inline button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`table.diff`)))
	checkAccessible(t, owner, axe, "the proposal page")
	shoot(owner, "proposal-en")
	proposalPath := value(t, owner, "the proposal's address", chromedp.Evaluate[string](`location.pathname`))

	// "Open in workspace" on the gate card lands on that gate.
	ctl, err := sandbox.NewClient(sandboxURL, "")
	require.NoError(t, err)
	ownerChat := "oc_p2p_ou_owner"
	var card sandbox.MessageView
	require.Eventually(t, func() bool {
		page, err := ctl.Messages(t.Context(), ownerChat, 0, 0, 0)
		if err != nil {
			return false
		}
		for _, m := range page.Messages {
			if m.Card != nil && strings.Contains(m.Card.Title, "Decision needed") {
				card = m
				return true
			}
		}
		return false
	}, 30*time.Second, 100*time.Millisecond, "the gate card reaches the owner")
	button := 0
	for i, b := range card.Card.Buttons {
		if strings.Contains(b.Text, "Open in workspace") {
			button = i + 1
		}
	}
	require.NotZero(t, button, "the card has an Open in workspace button")
	before, err := ctl.Messages(t.Context(), ownerChat, 0, 0, 0)
	require.NoError(t, err)
	_, err = ctl.Click(t.Context(), sandbox.ClickRequest{MessageID: card.MessageID, Button: button, OpenID: "ou_owner"})
	require.NoError(t, err)
	var link string
	require.Eventually(t, func() bool {
		page, err := ctl.Messages(t.Context(), ownerChat, before.Cursor, 0, time.Second)
		if err != nil {
			return false
		}
		for _, m := range page.Messages {
			if m.SenderType == "app" {
				link = signInLink.FindString(m.Text + m.Content)
			}
		}
		return link != ""
	}, 30*time.Second, 100*time.Millisecond, "the bot sends the clicker a link")
	phone := newBrowser(t, exe)
	browse(t, phone, "open the card's link on a phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2)),
		chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS(`form[action="/web/signin"] button`)),
		chromedp.Click(chromedp.CSS(`form[action="/web/signin"] button`)), chromedp.WaitVisible(chromedp.CSS(`#gate-1`)))
	landed := value(t, phone, "where the card's link landed", chromedp.Evaluate[string](`location.pathname + location.hash`))
	require.Equal(t, "/web/goals/docs#gate-1", landed)
	gateTop := value(t, phone, "the gate is on screen", chromedp.Evaluate[float64](`document.getElementById("gate-1").getBoundingClientRect().top`))
	require.Less(t, gateTop, float64(844), "the page opens at the gate, not at the top")
	overflow := value(t, phone, "measure the width", chromedp.Evaluate[int](`document.documentElement.scrollWidth - window.innerWidth`))
	require.LessOrEqual(t, overflow, 0, "the goal page fits a phone's width: %s", value(t, phone, "what is wider", chromedp.Evaluate[string](wider)))
	// The same link again says it was used, before any click.
	used := newBrowser(t, exe)
	browse(t, used, "open the used link", chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS(`h1`)))
	require.Contains(t, bodyText(t, used), "This link was already used")

	// Phone-width screenshots of every page.
	for _, p := range []struct{ name, path, wait string }{
		{"home", "/web/", "#home-quiet"}, {"goals", "/web/goals", "h1"}, {"goal", "/web/goals/docs", "#h-needs"},
		{"turn", turnPath, "#h-log"}, {"proposal", proposalPath, "table.diff"},
	} {
		browse(t, phone, "the "+p.name+" page on a phone", chromedp.Navigate(s.url+p.path), chromedp.WaitVisible(chromedp.CSS(p.wait)))
		over := value(t, phone, "measure the width", chromedp.Evaluate[int](`document.documentElement.scrollWidth - window.innerWidth`))
		require.LessOrEqual(t, over, 0, "the %s page fits a phone's width: %s", p.name, value(t, phone, "what is wider", chromedp.Evaluate[string](wider)))
		shoot(phone, p.name+"-en-phone")
	}

	// The Chinese pages: every page in Chinese, none of the retired English words, accessible.
	browse(t, owner, "switch to Chinese", chromedp.Navigate(s.url+"/web/"), chromedp.WaitVisible(chromedp.CSS(`#lang-pick`)),
		fill(`#lang-pick`, "zh"), chromedp.Click(chromedp.CSS(`form[action="/web/lang"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`html[lang="zh-CN"] h1`)))
	for _, p := range []struct{ name, path, wait string }{
		{"home", "/web/", "#home-quiet"}, {"goals", "/web/goals", "h1"}, {"goal", "/web/goals/docs", "#h-needs"},
		{"turn", turnPath, "#h-log"}, {"proposal", proposalPath, "table.diff"},
	} {
		browse(t, owner, "the Chinese "+p.name+" page", chromedp.Navigate(s.url+p.path), chromedp.WaitVisible(chromedp.CSS(`html[lang="zh-CN"] `+p.wait)))
		text := bodyText(t, owner)
		// People's own words (the gate's question, todo texts, the log) are theirs; the page's
		// words are checked with those taken out.
		for _, own := range []string{"Publish the draft?", "Docs site", "Quiet corner", "Write the intro", "Check every link",
			"Please look at the footer too", "Draft of the intro", "https://example.test/intro", "intro drafted", "$ make intro", "wrote intro.md (412 words)"} {
			text = strings.ReplaceAll(text, own, "")
		}
		require.Empty(t, retired.FindAllString(text, -1), "retired English words on the Chinese %s page", p.name)
		checkAccessible(t, owner, axe, "the Chinese "+p.name+" page")
		shoot(owner, p.name+"-zh")
	}
	browse(t, phone, "switch the phone to Chinese", chromedp.Navigate(s.url+"/web/"), chromedp.WaitVisible(chromedp.CSS(`#lang-pick`)),
		fill(`#lang-pick`, "zh"), chromedp.Click(chromedp.CSS(`form[action="/web/lang"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`html[lang="zh-CN"] h1`)))
	for _, p := range []struct{ name, path, wait string }{
		{"home", "/web/", "#home-quiet"}, {"goals", "/web/goals", "h1"}, {"goal", "/web/goals/docs", "#h-needs"},
		{"turn", turnPath, "#h-log"}, {"proposal", proposalPath, "table.diff"},
	} {
		browse(t, phone, "the Chinese "+p.name+" page on a phone", chromedp.Navigate(s.url+p.path), chromedp.WaitVisible(chromedp.CSS(`html[lang="zh-CN"] `+p.wait)))
		over := value(t, phone, "measure the width", chromedp.Evaluate[int](`document.documentElement.scrollWidth - window.innerWidth`))
		require.LessOrEqual(t, over, 0, "the Chinese %s page fits a phone's width: %s", p.name, value(t, phone, "what is wider", chromedp.Evaluate[string](wider)))
		shoot(phone, p.name+"-zh-phone")
	}
}
