package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"loopx/bot/sandbox"
	"loopx/store/storetest"
)

// chromiumPath finds Debian's chromium (.ci/run installs it); "" when the machine has none.
func chromiumPath() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// artifactsDir is where the browser test saves its screenshots: LOOPX_TEST_ARTIFACTS, else
// test-artifacts/workspace at the repository root (ignored by git).
func artifactsDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("LOOPX_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "..", "test-artifacts", "workspace")
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	abs, err := filepath.Abs(dir)
	require.NoError(t, err)
	return abs
}

// newBrowser starts a headless Chromium of its own (a fresh profile) for one person.
func newBrowser(t *testing.T, exe string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.Headless, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1200, 900))
	alloc, cancelAlloc := chromedp.NewExecAllocator(t.Context(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	require.NoError(t, chromedp.Do(ctx), "start chromium")
	return ctx
}

func browse(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 2*time.Minute) // bounds a stuck page, not a slow machine
	defer cancel()
	require.NoError(t, chromedp.Do(c, steps...), what)
}

// value runs one action that returns a value.
func value[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 2*time.Minute) // bounds a stuck page, not a slow machine
	defer cancel()
	v, err := chromedp.Run(c, a)
	require.NoError(t, err, what)
	return v
}

func screenshot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	png := value(t, ctx, "screenshot "+name, chromedp.FullScreenshot(100))
	path := filepath.Join(dir, name+".png")
	require.NoError(t, os.WriteFile(path, png, 0o644))
	t.Logf("screenshot: %s", path)
}

// fill sets a form field's value as typing would leave it.
func fill(selector, v string) chromedp.Action[chromedp.Void] {
	js := fmt.Sprintf(`(() => { const e = document.querySelector(%q); e.value = %q; e.dispatchEvent(new Event("input", {bubbles: true})); return true })()`, selector, v)
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Evaluate[bool](js)(ctx, t)
		return chromedp.Void{}, err
	}
}

func bodyText(t *testing.T, ctx context.Context) string {
	t.Helper()
	return value(t, ctx, "read the page", chromedp.Text(chromedp.CSS("body")))
}

var signInLink = regexp.MustCompile(`https?://\S+/web/signin\?t=[0-9a-f]+`)

// TestWorkspaceInChromium drives the workspace in real headless Chromium against a real
// `loopx serve --sandbox`: sign-in links from the sandbox bot, the home listing the open
// gate, answering it in the page (the Lark card in the sandbox is updated), a budget change
// through preview and confirm, a stale proposal refused, a member without controls, a
// stranger who sees nothing, live updates, and the Chinese UI.
func TestWorkspaceInChromium(t *testing.T) {
	t.Parallel()
	exe := chromiumPath()
	if exe == "" {
		t.Skip("chromium is not installed (apt-get install chromium); .ci/run installs it so CI runs this test")
	}
	sandboxURL := "http://" + freeAddr(t)
	s := startServe(t, map[string]string{
		"DATABASE_URL": storetest.NewDatabase(t), "LOOPX_ADMIN_TOKEN": e2eAdminToken, "LOOPX_HOME": t.TempDir(),
		"LOOPX_SANDBOX_ADDR": strings.TrimPrefix(sandboxURL, "http://"), "LOOPX_DEMO": "off", "LOOPX_SCHEDULER": "off",
		"LOOPX_SANDBOX_STATE": "off",
	})
	admin := e2eAdminToken
	s.ok(t, admin, "goal", "create", "--goal-id", "docs", "--title", "Docs site", "--owner", "ou_owner", "--member", "ou_member", "--allowed-slots", "12")
	agentTok := s.ok(t, admin, "agent", "register", "--goal-id", "docs", "--agent-id", "codex")["token"].(string)
	s.ok(t, agentTok, "gate", "ask", "--goal-id", "docs", "--agent-id", "codex", "--question", "Publish the draft?")

	ctl, err := sandbox.NewClient(sandboxURL, "")
	require.NoError(t, err)
	ownerChat := "oc_p2p_ou_owner"
	// The gate card reaches the owner in a direct message (the goal is bound to no chat).
	var gateCard sandbox.MessageView
	require.Eventually(t, func() bool {
		page, err := ctl.Messages(t.Context(), ownerChat, 0, 0, 0)
		if err != nil {
			return false
		}
		for _, m := range page.Messages {
			if m.Card != nil && strings.Contains(m.Card.Title, "Decision needed") {
				gateCard = m
				return true
			}
		}
		return false
	}, 2*time.Minute, 100*time.Millisecond, "the gate card reaches the owner")

	// link asks the bot for a sign-in link in a direct chat, as a person would (/web).
	link := func(openID string) string {
		chat := "oc_p2p_" + openID
		before, err := ctl.Messages(t.Context(), chat, 0, 0, 0)
		require.NoError(t, err)
		_, err = ctl.Post(t.Context(), sandbox.PostRequest{ChatID: chat, ChatType: sandbox.ChatP2P, OpenID: openID, Text: "/web"})
		require.NoError(t, err)
		var found string
		require.Eventually(t, func() bool {
			page, err := ctl.Messages(t.Context(), chat, before.Cursor, 0, time.Second)
			if err != nil {
				return false
			}
			for _, m := range page.Messages {
				if m.SenderType == "app" {
					found = signInLink.FindString(m.Text + m.Content)
				}
			}
			return found != ""
		}, 2*time.Minute, 100*time.Millisecond, "the bot answers /web with a link")
		return found
	}
	signIn := func(ctx context.Context, openID string) {
		browse(t, ctx, "open the link of "+openID, chromedp.Navigate(link(openID)),
			chromedp.WaitVisible(chromedp.CSS(`form[action="/web/signin"] button`)),
			chromedp.Click(chromedp.CSS(`form[action="/web/signin"] button`)),
			chromedp.WaitVisible(chromedp.CSS(`form[action="/web/signout"] button`)))
	}
	shots := artifactsDir(t)

	owner := newBrowser(t, exe)
	signIn(owner, "ou_owner")
	text := bodyText(t, owner)
	require.Contains(t, text, "What needs you")
	require.Contains(t, text, "Publish the draft?")
	screenshot(t, owner, shots, "home")

	// Live: a new gate appears on the open page without a reload.
	s.ok(t, agentTok, "gate", "ask", "--goal-id", "docs", "--agent-id", "codex", "--question", "Rename the site?")
	value(t, owner, "the new gate appears live", chromedp.Poll[bool](`document.body.innerText.includes("Rename the site?")`,
		chromedp.WithPollingTimeout(20*time.Second)))

	// Answer the first gate in the page; the Lark card in the sandbox shows the answer.
	browse(t, owner, "open the goal", chromedp.Navigate(s.url+"/web/goals/docs"), chromedp.WaitVisible(chromedp.CSS(`#h-gates`)))
	screenshot(t, owner, shots, "goal")
	browse(t, owner, "approve the gate",
		fill(`#gate-1 input[name="comment"]`, "looks good"),
		chromedp.Click(chromedp.CSS(`#gate-1 button[value="approve"]`)),
		chromedp.WaitVisible(chromedp.CSS(`p.flash`)))
	require.Contains(t, bodyText(t, owner), "Gate approved.")
	require.Eventually(t, func() bool {
		page, err := ctl.Messages(t.Context(), ownerChat, 0, 0, 0)
		if err != nil {
			return false
		}
		for _, m := range page.Messages {
			if m.MessageID == gateCard.MessageID {
				return m.Updated && m.Card != nil && strings.HasPrefix(m.Card.Title, "Approved · g1 · #docs") && len(m.Card.Buttons) == 0
			}
		}
		return false
	}, 2*time.Minute, 100*time.Millisecond, "the Lark card is updated in place")

	// Change the quota through preview → confirm.
	browse(t, owner, "preview a budget of 50", chromedp.Navigate(s.url+"/web/goals/docs"),
		chromedp.WaitVisible(chromedp.CSS(`#f-allowed_slots`)), fill(`#f-allowed_slots`, "50"),
		chromedp.Click(chromedp.CSS(`form.settings > button.primary`)), chromedp.WaitVisible(chromedp.CSS(`table.diff`)))
	text = bodyText(t, owner)
	require.Contains(t, text, "Turns per window", "the setting starts with a capital, like every label")
	require.Contains(t, text, "quota 12 of 12 left in 24 h → 50 of 50 in 24 h")
	screenshot(t, owner, shots, "preview")
	require.Equal(t, float64(12), s.ok(t, admin, "goal", "show", "--goal-id", "docs")["allowed_slots"], "nothing applies before Confirm")
	browse(t, owner, "confirm", chromedp.Click(chromedp.CSS(`form[action$="/confirm"] button`)), chromedp.WaitVisible(chromedp.CSS(`p.receipt`)))
	require.Contains(t, bodyText(t, owner), "Receipt: proposed by ou_owner, confirmed by ou_owner")
	require.Equal(t, float64(50), s.ok(t, admin, "goal", "show", "--goal-id", "docs")["allowed_slots"])

	// A stale proposal is refused: the goal changes between preview and confirm.
	browse(t, owner, "preview a budget of 60", chromedp.Navigate(s.url+"/web/goals/docs"),
		chromedp.WaitVisible(chromedp.CSS(`#f-allowed_slots`)), fill(`#f-allowed_slots`, "60"),
		chromedp.Click(chromedp.CSS(`form.settings > button.primary`)), chromedp.WaitVisible(chromedp.CSS(`table.diff`)))
	s.ok(t, admin, "goal", "set", "--goal-id", "docs", "--window-hours", "48")
	browse(t, owner, "confirm the stale one", chromedp.Click(chromedp.CSS(`form[action$="/confirm"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`p.flash`)))
	require.Contains(t, bodyText(t, owner), "The goal changed since this preview; nothing was applied.")
	g := s.ok(t, admin, "goal", "show", "--goal-id", "docs")
	require.Equal(t, float64(50), g["allowed_slots"])
	require.Equal(t, float64(48), g["window_hours"])

	// On a phone: one column, nothing wider than the screen.
	browse(t, owner, "a phone-sized screen", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2)),
		chromedp.Navigate(s.url+"/web/goals/docs"), chromedp.WaitVisible(chromedp.CSS(`#h-gates`)))
	overflow := value(t, owner, "measure the width", chromedp.Evaluate[int](`document.documentElement.scrollWidth - window.innerWidth`))
	require.LessOrEqual(t, overflow, 0, "the goal page fits a phone's width")
	screenshot(t, owner, shots, "goal-phone")
	browse(t, owner, "back to a desktop screen", chromedp.EmulateViewport(1200, 900))

	// A member sees the goal, without protected controls.
	member := newBrowser(t, exe)
	signIn(member, "ou_member")
	browse(t, member, "open the goal as a member", chromedp.Navigate(s.url+"/web/goals/docs"), chromedp.WaitVisible(chromedp.CSS(`#h-gates`)))
	controls := value(t, member, "count controls", chromedp.Evaluate[int](`document.querySelectorAll("form.settings, button[value=approve], form[action$='/proposals']").length`))
	require.Zero(t, controls)
	require.Contains(t, bodyText(t, member), "Rename the site?")

	// A stranger's link signs them in to nothing.
	stranger := newBrowser(t, exe)
	signIn(stranger, "ou_stranger")
	text = bodyText(t, stranger)
	require.Contains(t, text, "0 goals you can see")
	require.NotContains(t, text, "Publish the draft?")
	browse(t, stranger, "open the goal as a stranger", chromedp.Navigate(s.url+"/web/goals/docs"), chromedp.WaitVisible(chromedp.CSS(`h1`)))
	text = bodyText(t, stranger)
	require.Contains(t, text, "There is nothing here you can see.")
	require.NotContains(t, text, "Docs site")

	// The Chinese UI.
	browse(t, owner, "switch to Chinese", chromedp.Navigate(s.url+"/web/"), chromedp.WaitVisible(chromedp.CSS(`#lang-pick`)),
		fill(`#lang-pick`, "zh"), chromedp.Click(chromedp.CSS(`form[action="/web/lang"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`html[lang="zh-CN"] h1`)))
	require.Contains(t, bodyText(t, owner), "待你处理")
	screenshot(t, owner, shots, "home-zh")

	// The workspace acts through the same records: the audit has the web's actions.
	audit := s.ok(t, admin, "audit", "--goal-id", "docs")
	raw, _ := json.Marshal(audit)
	require.Contains(t, string(raw), `"surface":"web"`)
}
