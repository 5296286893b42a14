package sandbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	larkcore "github.com/larksuite/oapi-sdk-go/v3/core"
	"github.com/larksuite/oapi-sdk-go/v3/core/httpserverext"
	larkevent "github.com/larksuite/oapi-sdk-go/v3/event"
	"github.com/larksuite/oapi-sdk-go/v3/event/dispatcher"
	"github.com/larksuite/oapi-sdk-go/v3/event/dispatcher/callback"
	larkim "github.com/larksuite/oapi-sdk-go/v3/service/im/v1"
	"github.com/stretchr/testify/require"

	"loopx/bot/sandbox"
)

// syncBuffer is an io.Writer the test can read while the client writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// echoBot is a small bot on the real SDK: "deploy" gets a gate card, other text an echo
// reply (in the thread when the message is in one); only the demo user may approve.
func echoBot(t *testing.T, sb *sandbox.Sandbox) string {
	t.Helper()
	cli := client(sb)
	d := dispatcher.NewEventDispatcher(testToken, testKey).
		OnP2MessageReceiveV1(func(ctx context.Context, ev *larkim.P2MessageReceiveV1) error {
			var c struct{ Text string }
			_ = json.Unmarshal([]byte(*ev.Event.Message.Content), &c)
			text := strings.TrimSpace(strings.ReplaceAll(c.Text, "@_user_1", ""))
			msgType, content := "text", textContent("echo: "+text)
			if strings.HasPrefix(text, "deploy") {
				msgType, content = "interactive", card("Deploy svc-a?", true, "Approve", "Reject")
			}
			resp, err := cli.Im.V1.Message.Reply(ctx, larkim.NewReplyMessageReqBuilder().MessageId(*ev.Event.Message.MessageId).
				Body(larkim.NewReplyMessageReqBodyBuilder().MsgType(msgType).Content(content).
					ReplyInThread(ev.Event.Message.ThreadId != nil).Uuid("r-"+*ev.Event.Message.MessageId).Build()).Build())
			if err != nil {
				return err
			}
			if !resp.Success() {
				return fmt.Errorf("reply: %d %s", resp.Code, resp.Msg)
			}
			return nil
		}).
		OnP2CardActionTrigger(func(ctx context.Context, ev *callback.CardActionTriggerEvent) (*callback.CardActionTriggerResponse, error) {
			if ev.Event.Operator.OpenID != sb.DemoUserOpenID() {
				return &callback.CardActionTriggerResponse{Toast: &callback.Toast{Type: "error", Content: "only an owner may answer"}}, nil
			}
			var data map[string]any
			_ = json.Unmarshal([]byte(card("Approved by "+ev.Event.Operator.OpenID, true)), &data)
			return &callback.CardActionTriggerResponse{Toast: &callback.Toast{Type: "success", Content: "approved"},
				Card: &callback.Card{Type: "raw", Data: data}}, nil
		})
	bot := httptest.NewServer(http.HandlerFunc(httpserverext.NewEventHandlerFunc(d, larkevent.WithLogLevel(larkcore.LogLevelError))))
	t.Cleanup(bot.Close)
	return bot.URL
}

func TestChatClientAgainstSandbox(t *testing.T) {
	t.Parallel()
	sb := start(t, sandbox.Options{})
	require.NoError(t, sb.SetCallbackURLs(echoBot(t, sb), ""))
	for i := 1; i <= 12; i++ {
		_, err := sb.UserSays(sb.DefaultChatID(), sandbox.ChatGroup, "ou_carol", fmt.Sprintf("history %02d", i))
		require.NoError(t, err)
	}

	in, feed := io.Pipe()
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- sandbox.RunChat(t.Context(), sandbox.ChatOptions{URL: sb.URL(), PollWait: 2 * time.Second}, in, out)
	}()
	say := func(line string) {
		t.Helper()
		_, err := io.WriteString(feed, line+"\n")
		require.NoError(t, err)
	}
	waitFor := func(want string) {
		t.Helper()
		require.Eventually(t, func() bool { return strings.Contains(out.String(), want) }, 30*time.Second, 10*time.Millisecond,
			"output lacks %q:\n%s", want, out.String())
	}

	waitFor("You are " + sb.DemoUserOpenID() + " in chat " + sb.DefaultChatID())
	waitFor("history 12")
	require.NotContains(t, out.String(), "history 02", "only the last 10 messages are shown on start")
	require.Contains(t, out.String(), "#1 ")
	require.Contains(t, out.String(), "history 03")

	say("deploy svc-a")
	waitFor("   ┃ Deploy svc-a?")
	waitFor("[1 Approve] [2 Reject]   (/click 12 <button#>)")
	require.Contains(t, out.String(), "#11 ")
	require.Contains(t, out.String(), "@LoopX deploy svc-a", "the group message mentions the bot")

	say("/as ou_stranger")
	waitFor("* you are now ou_stranger")
	say("/click 12 1")
	waitFor("* toast [error]: only an owner may answer")

	say("/as " + sb.DemoUserOpenID())
	say("/click 12 1")
	waitFor("* toast [success]: approved")
	waitFor("[reply to #11, updated]")
	waitFor("   ┃ Approved by " + sb.DemoUserOpenID())

	say("/help")
	waitFor("echo: /help")

	say("/thread 11 more details please")
	waitFor("[in thread of #11]")
	waitFor("echo: more details please")

	// A bot message in another chat is announced, not shown.
	dm, err := client(sb).Im.V1.Message.Create(t.Context(), larkim.NewCreateMessageReqBuilder().ReceiveIdType("open_id").
		Body(larkim.NewCreateMessageReqBodyBuilder().ReceiveId(sb.DemoUserOpenID()).MsgType("text").Content(textContent("psst\nsecond line")).Build()).Build())
	require.NoError(t, err)
	require.True(t, dm.Success())
	waitFor("* new in oc_p2p_" + sb.DemoUserOpenID() + " from LoopX: psst …   (/chat oc_p2p_" + sb.DemoUserOpenID() + ")")
	say("/dm")
	waitFor("* now in your one-to-one chat with the bot")
	waitFor("second line")
	say("/chat " + sb.DefaultChatID())
	waitFor("* now in chat " + sb.DefaultChatID())

	say("/click 99 1")
	waitFor("! there is no message #99: use a number shown as #N (#1 to #17)")

	say("/quit")
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("RunChat did not return after /quit")
	}

	// The model agrees with what the client showed.
	msgs := sb.Chat(sb.DefaultChatID()).Messages()
	var texts []string
	for _, m := range msgs[12:] {
		texts = append(texts, m.SenderType+":"+m.Text())
	}
	require.Equal(t, []string{"user:@_user_1 deploy svc-a", "app:", "user:@_user_1 /help", "app:echo: /help",
		"user:@_user_1 more details please", "app:echo: more details please"}, texts)
	require.Equal(t, msgs[12].ThreadID, msgs[16].ThreadID)
	require.NotEmpty(t, msgs[16].ThreadID)
}

func TestChatClientReportsAnUnreachableSandbox(t *testing.T) {
	t.Parallel()
	err := sandbox.RunChat(t.Context(), sandbox.ChatOptions{URL: "http://127.0.0.1:1"}, strings.NewReader(""), io.Discard)
	require.ErrorContains(t, err, "loopx serve --sandbox")
	err = sandbox.RunChat(t.Context(), sandbox.ChatOptions{URL: "ftp://x"}, strings.NewReader(""), io.Discard)
	require.ErrorContains(t, err, "want http://host:port")
}

func TestChatClientStopsOnContextEnd(t *testing.T) {
	t.Parallel()
	sb := start(t, sandbox.Options{})
	in, _ := io.Pipe()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	out := &syncBuffer{}
	go func() { done <- sandbox.RunChat(ctx, sandbox.ChatOptions{URL: sb.URL()}, in, out) }()
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "(no messages in") }, 30*time.Second, 10*time.Millisecond)
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("RunChat did not return after the context ended")
	}
}

func TestChatClientShowsMentionTagsAsNames(t *testing.T) {
	t.Parallel()
	sb := start(t, sandbox.Options{})
	cli := client(sb)
	require.True(t, sendText(t, cli, sb.DefaultChatID(), `Owners: <at user_id="ou_ann"></at> and <at user_id="ou_bo">Bo</at>`, "").Success())
	sendCard(t, cli, sb.DefaultChatID(), `{"schema":"2.0","body":{"elements":[{"tag":"markdown","content":"**Owners:** <at id=ou_ann></at>"}]}}`)
	out := &syncBuffer{}
	require.NoError(t, sandbox.RunChat(t.Context(), sandbox.ChatOptions{URL: sb.URL()}, strings.NewReader("/quit\n"), out))
	require.Contains(t, out.String(), "   Owners: @ou_ann and @Bo\n")
	require.Contains(t, out.String(), "   ┃ Owners: @ou_ann\n")
}

// TestChatClientReadsLikeLark: card markdown is rendered (plain in a pipe, styled on a
// terminal), a card the bot answers a click with and then updates to the same content is
// printed once, and /click mistakes are explained with the numbers on screen.
func TestChatClientReadsLikeLark(t *testing.T) {
	t.Parallel()
	sb := start(t, sandbox.Options{})
	cli := client(sb)
	chat := sb.DefaultChatID()
	require.True(t, sendText(t, cli, chat, "plain text", "").Success())
	rich := `{"schema":"2.0","config":{"update_multi":true},"header":{"title":{"tag":"plain_text","content":"Decision needed · g1"}},
		"body":{"elements":[{"tag":"markdown","content":"**Owners:** <at id=ou_demo_owner></at>\n- draft **done**\n- publish next\nReply ` + "`/approve g1`" + `"},
		{"tag":"div","text":{"tag":"plain_text","content":"2 * 3 is **not** bold here"}},
		{"tag":"button","text":{"tag":"plain_text","content":"Approve"},"behaviors":[{"type":"callback","value":{"o":"approve"}}]},
		{"tag":"button","text":{"tag":"plain_text","content":"Reject"},"behaviors":[{"type":"callback","value":{"o":"reject"}}]}]}}`
	gate := sendCard(t, cli, chat, rich)
	require.NoError(t, sb.SetCallbackURLs(echoBot(t, sb), ""))

	in, feed := io.Pipe()
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- sandbox.RunChat(t.Context(), sandbox.ChatOptions{URL: sb.URL(), PollWait: time.Second}, in, out)
	}()
	say := func(line string) {
		t.Helper()
		_, err := io.WriteString(feed, line+"\n")
		require.NoError(t, err)
	}
	waitFor := func(want string) {
		t.Helper()
		require.Eventually(t, func() bool { return strings.Contains(out.String(), want) }, 30*time.Second, 10*time.Millisecond,
			"output lacks %q:\n%s", want, out.String())
	}
	waitFor("   ┃ Decision needed · g1\n" +
		"   ┃ Owners: @ou_demo_owner\n" +
		"   ┃ • draft done\n" +
		"   ┃ • publish next\n" +
		"   ┃ Reply /approve g1\n" +
		"   ┃ 2 * 3 is **not** bold here\n" +
		"   [1 Approve] [2 Reject]   (/click 2 <button#>)\n")

	// Mistakes speak of what is on screen.
	say("/click 1 1")
	waitFor("! #1 is a message, not a card: only cards have buttons")
	say("/click 2 5")
	waitFor("! card #2 has buttons [1] to [2]; there is no button [5]")
	say("/click 7 1")
	waitFor("! there is no message #7: use a number shown as #N (#1 to #2)")

	// The click's answer replaces the card; the bot's later update to the same content (what
	// the outbox sender does) shows nothing new, so the card is printed once.
	say("/click 2 1")
	waitFor("* toast [success]: approved")
	waitFor("[updated]\n   ┃ Approved by " + sb.DemoUserOpenID())
	answered, _ := sb.Message(gate)
	p, err := cli.Im.V1.Message.Patch(t.Context(), larkim.NewPatchMessageReqBuilder().MessageId(gate).
		Body(larkim.NewPatchMessageReqBodyBuilder().Content(answered.Content).Build()).Build())
	require.NoError(t, err)
	require.True(t, p.Success(), "%d %s", p.Code, p.Msg)
	require.True(t, sendText(t, cli, chat, "after the update", "").Success())
	waitFor("after the update") // changes arrive in order: the update was seen before it
	say("/click 2 1")
	waitFor("! card #2 has no buttons (an answered card has none)")
	require.Equal(t, 1, strings.Count(out.String(), "[updated]"), "the answered card is printed once:\n%s", out.String())

	// A bot that fails the callback: the error names #2, never the message id.
	fresh := sendCard(t, cli, chat, rich)
	waitFor("(/click 4 <button#>)")
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusInternalServerError) }))
	t.Cleanup(broken.Close)
	require.NoError(t, sb.SetCallbackURLs("", broken.URL))
	say("/click 4 2")
	waitFor("* toast [error]: the bot did not answer the click")
	waitFor("! click button on #4: bad card callback answer: answered HTTP 500")
	require.NotContains(t, out.String(), fresh)
	require.NotContains(t, out.String(), gate)

	say("/quit")
	require.NoError(t, <-done)
}

// TestChatClientStylesMarkdownOnATerminal: with Color, card markdown is ANSI-styled.
func TestChatClientStylesMarkdownOnATerminal(t *testing.T) {
	t.Parallel()
	sb := start(t, sandbox.Options{})
	sendCard(t, client(sb), sb.DefaultChatID(), `{"schema":"2.0","header":{"title":{"tag":"plain_text","content":"Report"}},"body":{"elements":[{"tag":"markdown","content":"**Todos** done 1 · `+"`loopx runs`"+`"}]}}`)
	out := &syncBuffer{}
	require.NoError(t, sandbox.RunChat(t.Context(), sandbox.ChatOptions{URL: sb.URL(), Color: true}, strings.NewReader("/quit\n"), out))
	require.Contains(t, out.String(), "   ┃ \x1b[1mReport\x1b[22m\n   ┃ \x1b[1mTodos\x1b[22m done 1 · \x1b[36mloopx runs\x1b[39m\n")
}

// /file sends a file as the user: an image in a group goes in a post that mentions the bot;
// a file in a direct chat is a file message; the chat shows what was sent.
func TestChatClientSendsFiles(t *testing.T) {
	t.Parallel()
	sb := start(t, sandbox.Options{})
	dir := t.TempDir()
	img := filepath.Join(dir, "shot.png")
	require.NoError(t, os.WriteFile(img, append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, 100)...), 0o644))
	doc := filepath.Join(dir, "notes.txt")
	require.NoError(t, os.WriteFile(doc, []byte("some notes"), 0o644))
	in, feed := io.Pipe()
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- sandbox.RunChat(t.Context(), sandbox.ChatOptions{URL: sb.URL(), PollWait: 2 * time.Second}, in, out)
	}()
	say := func(line string) {
		t.Helper()
		_, err := io.WriteString(feed, line+"\n")
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "You are") }, 30*time.Second, 10*time.Millisecond)
	say("/file " + img + " the screenshot")
	var post sandbox.Message
	require.Eventually(t, func() bool {
		for _, m := range sb.Chat(sb.DefaultChatID()).Messages() {
			if m.MsgType == "post" {
				post = m
				return true
			}
		}
		return false
	}, 30*time.Second, 10*time.Millisecond, "the image goes in a post")
	require.Contains(t, post.Content, `"tag":"img"`)
	require.Contains(t, post.Content, "the screenshot")
	require.Len(t, post.Mentions, 1, "it mentions the bot")
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "@LoopX the screenshot\n   📎 image") }, 30*time.Second,
		10*time.Millisecond, "the post shows as a person reads it:\n%s", out.String())
	require.NotContains(t, out.String(), "(post)", "not as its JSON")

	say("/dm")
	say("/file " + doc)
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "📎 file notes.txt (10 bytes)") }, 30*time.Second, 10*time.Millisecond,
		"the file message shows:\n%s", out.String())
	say("/quit")
	require.NoError(t, <-done)
}
