package main

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"loopx/bot/sandbox"
	"loopx/store/storetest"
)

// room is a sandbox chat seen from a test: post as a person, wait for what the bot shows.
type room struct {
	t      *testing.T
	ctl    *sandbox.Client
	id     string
	cursor int64
}

func (r *room) say(who, text string) string {
	r.t.Helper()
	ans, err := r.ctl.Post(r.t.Context(), sandbox.PostRequest{ChatID: r.id, OpenID: who, Text: text, MentionBot: true})
	require.NoError(r.t, err)
	require.True(r.t, ans.Delivered)
	return ans.MessageID
}

// botMessages are the bot's messages of the room, as they are now.
func (r *room) botMessages() []sandbox.MessageView {
	r.t.Helper()
	page, err := r.ctl.Messages(r.t.Context(), r.id, 0, 0, 0)
	require.NoError(r.t, err)
	var out []sandbox.MessageView
	for _, m := range page.Messages {
		if m.SenderType == sandbox.SenderApp {
			out = append(out, m)
		}
	}
	return out
}

// wait waits (long-polling) until the bot's messages of the room satisfy ok, and returns the
// one ok chose.
func (r *room) wait(what string, d time.Duration, ok func(sandbox.MessageView) bool) sandbox.MessageView {
	r.t.Helper()
	var found sandbox.MessageView
	if !assert.Eventually(r.t, func() bool {
		for _, m := range r.botMessages() {
			if ok(m) {
				found = m
				return true
			}
		}
		_, _ = r.ctl.Messages(r.t.Context(), r.id, r.cursor, 0, 500*time.Millisecond)
		return false
	}, d, 10*time.Millisecond, what) {
		for _, m := range r.botMessages() {
			r.t.Logf("bot message %s: %s", m.MessageID, cardText(m))
		}
		r.t.FailNow()
	}
	return found
}

func cardText(m sandbox.MessageView) string {
	if m.Card == nil {
		return m.Text
	}
	var b strings.Builder
	b.WriteString(m.Card.Title + "\n")
	for _, l := range m.Card.Lines {
		b.WriteString(l.Text + "\n")
	}
	return b.String()
}

func writeScript(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755))
	return p
}

// TestRunTheWorkFromChat is issue 23's acceptance, with real processes: a real `loopx serve
// --sandbox`, exec agents that are shell scripts calling the real CLI, and the sandbox chat.
//
//   - An exec agent that fails three times posts three failure cards (one per turn, each with
//     its log's last lines and owner-only [Retry now] [Pause agent]); then it is held: one
//     breaker card, /status says held, /run does not start it; the owner's [Resume agent]
//     clears it.
//   - /run fires a turn at once; its live progress card (the agent's ::progress:: lines)
//     changes in place at least twice during a 20 s turn and ends with the outcome and the
//     evidence; no chat takes more than 5 messages and updates in a second, and the sandbox
//     refuses nothing.
//   - /stop during a long exec turn kills its process group (a child that ignores SIGTERM
//     included) within the grace period, and the turn is recorded as stopped.
//   - An image sent in the chat reaches the agent's inbox drain as a file whose bytes match;
//     a file attached to evidence downloads from the workspace with the same SHA-256 for the
//     owner, and is refused to a stranger.
func TestRunTheWorkFromChat(t *testing.T) {
	t.Parallel()
	sandboxURL := "http://" + freeAddr(t)
	s := startServe(t, map[string]string{
		"DATABASE_URL": storetest.NewDatabase(t), "LOOPX_ADMIN_TOKEN": e2eAdminToken, "LOOPX_HOME": t.TempDir(),
		"LOOPX_SANDBOX_ADDR": strings.TrimPrefix(sandboxURL, "http://"), "LOOPX_DEMO": "off", "LOOPX_SANDBOX_STATE": "off",
	})
	admin := e2eAdminToken
	ctl, err := sandbox.NewClient(sandboxURL, "")
	require.NoError(t, err)
	ctx := t.Context()
	dir := t.TempDir()
	bin := loopxBinary(t)
	env := func(extra string) string {
		return `"env":{"LOOPX_BIN":` + strconv.Quote(bin) + `,"LOOPX_E2E_MAIN":"1","OUT":` + strconv.Quote(dir) + extra + `}`
	}

	s.ok(t, admin, "goal", "create", "--goal-id", "g", "--title", "Widgets", "--owner", "ou_owner", "--allowed-slots", "50")
	bad := writeScript(t, dir, "bad.sh", `echo "compiling module 1"
echo "error: the widget is broken" >&2
exit 3`)
	worker := writeScript(t, dir, "worker.sh", `i=1
while [ $i -le 10 ]; do echo "::progress:: step $i of 10"; sleep 2; i=$((i+1)); done
"$LOOPX_BIN" evidence add --goal-id "$LOOPX_GOAL_ID" --agent-id "$LOOPX_AGENT_ID" --summary "built the widget" >/dev/null
echo done`)
	long := writeScript(t, dir, "long.sh", `trap '' TERM
sleep 300 &
echo $! > "$OUT/child"
echo "::progress:: working for a long time"
wait`)
	for agent, script := range map[string]string{"bad": bad, "worker": worker, "long": long} {
		s.ok(t, admin, "agent", "register", "--goal-id", "g", "--agent-id", agent, "--runner", "exec",
			"--runner-config", `{"argv":["/bin/sh",`+strconv.Quote(script)+`],`+env("")+`}`)
	}
	s.ok(t, admin, "todo", "add", "--goal-id", "g", "--text", "build the widget")

	r := &room{t: t, ctl: ctl, id: "oc_team"}
	r.say("ou_owner", "/bind #g")
	r.wait("the bind is answered", time.Minute, func(m sandbox.MessageView) bool { return strings.Contains(m.Text, "#g") })

	// 1. Three failures: one failure card per turn, each with its log tail.
	failed := func() []sandbox.MessageView {
		var out []sandbox.MessageView
		for _, m := range r.botMessages() {
			if m.Card != nil && strings.HasPrefix(m.Card.Title, "Failed · bad · #g") {
				out = append(out, m)
			}
		}
		return out
	}
	for i := 1; i <= 3; i++ {
		r.say("ou_owner", "/run #g/bad")
		require.Eventually(t, func() bool { return len(failed()) == i }, 90*time.Second, 50*time.Millisecond, "failure card %d", i)
	}
	cards := failed()
	require.Len(t, cards, 3, "one card per turn")
	for _, c := range cards {
		text := cardText(c)
		require.Contains(t, text, "error: the widget is broken", "the log's last lines")
		require.Contains(t, text, "exit status 3")
	}
	require.Len(t, cards[0].Card.Buttons, 3, "[Retry now] [Pause agent] [Open in workspace] on a failure card")
	require.Equal(t, "Retry now", cards[0].Card.Buttons[0].Text)
	require.Equal(t, "Open in workspace", cards[0].Card.Buttons[2].Text)
	// A stranger's click changes nothing.
	res, err := ctl.Click(ctx, sandbox.ClickRequest{MessageID: cards[0].MessageID, Button: 1, OpenID: "ou_stranger"})
	require.NoError(t, err)
	require.Equal(t, "error", res.Toast.Type)
	// [Open in workspace] signs the owner in on the failed turn's page, its log there.
	owner := cardLinkClient(t, s, ctl, cards[0].MessageID, 3, "ou_owner")
	turnPage := owner.landed
	require.Regexp(t, `^/web/goals/g/turns/\d+$`, turnPage, "the card's link lands on its turn")
	page := owner.page(t, turnPage)
	require.Contains(t, page, "error: the widget is broken", "the turn page shows the log")

	// 2. The breaker: one card, /status says held, /run does not start it.
	breaker := r.wait("the breaker card", time.Minute, func(m sandbox.MessageView) bool {
		return m.Card != nil && m.Card.Title == "Agent held · bad · #g"
	})
	require.Contains(t, cardText(breaker), "3 turns in a row")
	r.say("ou_owner", "/status #g")
	r.wait("/status says held", time.Minute, func(m sandbox.MessageView) bool {
		return strings.Contains(m.Text, "Agent bad") && strings.Contains(m.Text, "held after 3 failed or empty turns in a row")
	})
	r.say("ou_owner", "/runs #g")
	r.wait("/runs says held", time.Minute, func(m sandbox.MessageView) bool {
		return strings.Contains(m.Text, "Held: bad after 3 failed or empty turns in a row")
	})
	require.Contains(t, owner.page(t, "/web/goals/g"), "Held after 3 failed or empty turns in a row", "the workspace shows the hold")
	r.say("ou_owner", "/run #g/bad")
	r.wait("/run answers held", time.Minute, func(m sandbox.MessageView) bool {
		return strings.Contains(m.Text, "No turn started for bad on #g: the agent is held")
	})
	require.Len(t, failed(), 3, "no fourth turn while held")
	// The owner resumes it from the breaker card.
	res, err = ctl.Click(ctx, sandbox.ClickRequest{MessageID: breaker.MessageID, Button: 1, OpenID: "ou_owner"})
	require.NoError(t, err)
	require.Equal(t, "Agent resumed", res.Toast.Content)
	r.wait("the breaker card shows the resume", time.Minute, func(m sandbox.MessageView) bool {
		return m.MessageID == breaker.MessageID && m.Card != nil && m.Card.Title == "Agent resumed · bad · #g"
	})
	heldAt := func() any {
		for _, a := range s.ok(t, admin, "agent", "list", "--goal-id", "g")["agents"].([]any) {
			if a := a.(map[string]any); a["agent_id"] == "bad" {
				require.NotEmpty(t, a["resumed_at"])
				return a["held_at"]
			}
		}
		t.Fatal("no agent bad")
		return nil
	}
	require.Nil(t, heldAt(), "resumed: not held any more")
	// The CLI holds and resumes it too.
	s.ok(t, admin, "agent", "pause", "--goal-id", "g", "--agent-id", "bad")
	require.NotNil(t, heldAt(), "loopx agent pause holds it")
	s.ok(t, admin, "agent", "resume", "--goal-id", "g", "--agent-id", "bad")
	require.Nil(t, heldAt(), "loopx agent resume clears it")

	// 3. /run fires a turn at once; its progress card changes in place during the turn.
	start := time.Now()
	r.say("ou_owner", "/run #g/worker")
	r.wait("the run is answered", time.Minute, func(m sandbox.MessageView) bool {
		return strings.Contains(m.Text, "Started a turn of worker on #g")
	})
	card := r.wait("the progress card", time.Minute, func(m sandbox.MessageView) bool {
		return m.Card != nil && strings.HasPrefix(m.Card.Title, "Working · worker · #g")
	})
	require.Less(t, time.Since(start), 20*time.Second, "the turn started at once")
	shown := map[string]bool{cardText(card): true}
	var final sandbox.MessageView
	require.Eventually(t, func() bool {
		page, err := ctl.Messages(ctx, r.id, 0, 0, 0)
		if err != nil {
			return false
		}
		for _, m := range page.Messages {
			if m.MessageID != card.MessageID {
				continue
			}
			if m.Card != nil && strings.HasPrefix(m.Card.Title, "Working") {
				shown[cardText(m)] = true
			}
			if m.Card != nil && strings.HasPrefix(m.Card.Title, "Done · worker · #g") {
				final = m
				return true
			}
		}
		return false
	}, 2*time.Minute, 200*time.Millisecond, "the card ends with the outcome")
	require.GreaterOrEqual(t, len(shown), 3, "the live card changed in place at least twice: %v", shown)
	require.Contains(t, cardText(final), "built the widget", "the outcome shows the evidence")
	require.Contains(t, cardText(final), "step 10 of 10")
	stats, err := ctl.Stats(ctx, r.id)
	require.NoError(t, err)
	require.LessOrEqual(t, stats.Chat.MaxWithUpdatesPerSecond, 5, "messages and updates per second in the chat")
	require.Zero(t, stats.Chat.RateLimited, "the sandbox refused no send")
	require.Zero(t, stats.App.RateLimited, "the sandbox refused no send in any chat")
	require.Zero(t, stats.PatchesRefused, "the sandbox refused no update")

	// 4. /stop during a long turn kills its process group and records it as stopped.
	r.say("ou_owner", "/run #g/long")
	childFile := filepath.Join(dir, "child")
	require.Eventually(t, func() bool { _, err := os.Stat(childFile); return err == nil }, time.Minute, 20*time.Millisecond, "the long turn runs")
	raw, err := os.ReadFile(childFile)
	require.NoError(t, err)
	child, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	require.NoError(t, err)
	stopAt := time.Now()
	r.say("ou_owner", "/stop #g/long")
	require.Eventually(t, func() bool { return syscall.Kill(child, 0) == syscall.ESRCH }, 30*time.Second, 20*time.Millisecond, "the child dies")
	require.Less(t, time.Since(stopAt), 5*time.Second+5*time.Second, "killed within the grace period (5 s) and a moment")
	r.wait("/stop is answered", time.Minute, func(m sandbox.MessageView) bool {
		return strings.Contains(m.Text, "Stopping the turn of long on #g")
	})
	require.Eventually(t, func() bool {
		turns := s.ok(t, admin, "runs", "--goal-id", "g", "--agent-id", "long")["turns"].([]any)
		return len(turns) == 1 && turns[0].(map[string]any)["state"] == "stopped"
	}, time.Minute, 100*time.Millisecond, "the turn is recorded as stopped")

	// 5. An image sent in the chat reaches the agent's inbox drain, bytes intact.
	image := pngBytes(t)
	ans, err := ctl.PostFile(ctx, sandbox.FileRequest{ChatID: r.id, OpenID: "ou_owner", Name: "screen.png", Data: image,
		Caption: "#g/worker the screenshot", MentionBot: true})
	require.NoError(t, err)
	require.True(t, ans.Delivered)
	var item map[string]any
	require.Eventually(t, func() bool {
		items := s.ok(t, admin, "inbox", "drain", "--goal-id", "g", "--agent-id", "worker")["items"].([]any)
		if len(items) == 0 {
			return false
		}
		item = items[0].(map[string]any)
		return true
	}, time.Minute, 100*time.Millisecond, "the message reaches the inbox once its image is fetched")
	require.Equal(t, "the screenshot", item["text"])
	files := item["files"].([]any)
	require.Len(t, files, 1)
	f := files[0].(map[string]any)
	require.Equal(t, "image", f["kind"])
	sum := sha256.Sum256(image)
	require.Equal(t, hex.EncodeToString(sum[:]), f["sha256"])
	out := filepath.Join(dir, "got.png")
	s.ok(t, admin, "file", "get", "--file-id", fmt.Sprint(f["file_id"]), "--out", out)
	got, err := os.ReadFile(out)
	require.NoError(t, err)
	require.True(t, bytes.Equal(image, got), "the agent gets the bytes that were sent")

	// 6. A deliverable downloads from the workspace for the owner, not for a stranger.
	report := bytes.Repeat([]byte("widget report line\n"), 5000)
	reportPath := filepath.Join(dir, "report.txt")
	require.NoError(t, os.WriteFile(reportPath, report, 0o644))
	ev := s.ok(t, admin, "evidence", "add", "--goal-id", "g", "--agent-id", "worker", "--summary", "the report", "--file", reportPath)
	fileID := ev["files"].([]any)[0].(map[string]any)["file_id"]
	reportSum := sha256.Sum256(report)
	resp, err := owner.Get(s.url + "/web/files/" + fmt.Sprint(fileID))
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	gotSum := sha256.Sum256(body)
	require.Equal(t, reportSum, gotSum, "the same SHA-256")
	require.Equal(t, hex.EncodeToString(reportSum[:]), resp.Header.Get("X-Loopx-Sha256"))
	stranger := workspaceClient(t, s, ctl, "ou_stranger")
	resp, err = stranger.Get(s.url + "/web/files/" + fmt.Sprint(fileID))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "a stranger gets nothing")
}

// browserClient is a person signed in to the workspace; landed is the path the sign-in
// link led to.
type browserClient struct {
	*http.Client
	url    string
	landed string
}

// page reads a workspace page as the person.
func (c *browserClient) page(t *testing.T, path string) string {
	t.Helper()
	resp, err := c.Get(c.url + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, path)
	return string(b)
}

// cardLinkClient clicks button (1-based) of a card as openID, reads the sign-in link the bot
// then sends them in a direct chat and follows it.
func cardLinkClient(t *testing.T, s *serveProc, ctl *sandbox.Client, messageID string, button int, openID string) *browserClient {
	t.Helper()
	chat := "oc_p2p_" + openID
	before, err := ctl.Messages(t.Context(), chat, 0, 0, 0)
	require.NoError(t, err)
	res, err := ctl.Click(t.Context(), sandbox.ClickRequest{MessageID: messageID, Button: button, OpenID: openID})
	require.NoError(t, err)
	require.Equal(t, "success", res.Toast.Type, "the link is sent")
	return followLink(t, s, ctl, chat, before.Cursor, openID)
}

// followLink waits for the bot's sign-in link in chat after cursor and signs in with it.
func followLink(t *testing.T, s *serveProc, ctl *sandbox.Client, chat string, cursor int64, openID string) *browserClient {
	t.Helper()
	var link string
	require.Eventually(t, func() bool {
		page, err := ctl.Messages(t.Context(), chat, cursor, 0, time.Second)
		if err != nil {
			return false
		}
		for _, m := range page.Messages {
			if m.SenderType == sandbox.SenderApp {
				link = signInLink.FindString(m.Text + m.Content)
			}
		}
		return link != ""
	}, time.Minute, 50*time.Millisecond, "a sign-in link for %s", openID)
	u, err := url.Parse(link)
	require.NoError(t, err)
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	c := &browserClient{Client: &http.Client{Jar: jar}, url: s.url}
	resp, err := c.PostForm(s.url+"/web/signin", url.Values{"t": {u.Query().Get("t")}})
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "signed in")
	c.landed = resp.Request.URL.Path
	return c
}

// pngBytes is an image as Lark and LoopX tell one: PNG's signature, then random bytes.
func pngBytes(t *testing.T) []byte {
	t.Helper()
	b := make([]byte, 70000)
	_, _ = rand.Read(b)
	return append([]byte("\x89PNG\r\n\x1a\n"), b...)
}

// workspaceClient signs openID into the workspace the way a person does: /web in a direct
// chat with the bot, then the link.
func workspaceClient(t *testing.T, s *serveProc, ctl *sandbox.Client, openID string) *browserClient {
	t.Helper()
	chat := "oc_p2p_" + openID
	before, err := ctl.Messages(t.Context(), chat, 0, 0, 0)
	require.NoError(t, err)
	_, err = ctl.Post(t.Context(), sandbox.PostRequest{ChatID: chat, ChatType: sandbox.ChatP2P, OpenID: openID, Text: "/web"})
	require.NoError(t, err)
	return followLink(t, s, ctl, chat, before.Cursor, openID)
}
