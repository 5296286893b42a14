package sandbox_test

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	larkim "github.com/larksuite/oapi-sdk-go/v3/service/im/v1"
	"github.com/stretchr/testify/require"

	"loopx/bot/sandbox"
)

// reopen closes sb and starts a new sandbox on the same state directory, as a restarted
// `loopx serve` does.
func reopen(t *testing.T, sb *sandbox.Sandbox, dir string) *sandbox.Sandbox {
	t.Helper()
	sb.Close()
	return start(t, sandbox.Options{StateDir: dir})
}

// utc makes times comparable with require.Equal: a time read back from the file is the same
// instant, in UTC and without a monotonic reading.
func utc(msgs []sandbox.Message) []sandbox.Message {
	for i := range msgs {
		m := &msgs[i]
		m.CreatedAt, m.UpdatedAt = m.CreatedAt.UTC().Round(0), m.UpdatedAt.UTC().Round(0)
		for j := range m.Reactions {
			m.Reactions[j].At = m.Reactions[j].At.UTC().Round(0)
		}
	}
	return msgs
}

func TestStateSurvivesARestart(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "sandbox")
	sb := start(t, sandbox.Options{StateDir: dir})
	cli := client(sb)
	chat := sb.DefaultChatID()

	said, err := sb.UserSays(chat, sandbox.ChatGroup, "ou_alice", "deploy please", sandbox.MentionBot())
	require.NoError(t, err)
	text := sendText(t, cli, chat, "on it", "row-1")
	require.True(t, text.Success())
	gate := sendCard(t, cli, chat, card("Deploy svc-a?", true, "Approve", "Reject"))
	reply, err := cli.Im.V1.Message.Reply(t.Context(), larkim.NewReplyMessageReqBuilder().MessageId(said.MessageID).
		Body(larkim.NewReplyMessageReqBodyBuilder().MsgType("text").Content(textContent("in thread")).ReplyInThread(true).Build()).Build())
	require.NoError(t, err)
	require.True(t, reply.Success())
	rc, err := cli.Im.V1.MessageReaction.Create(t.Context(), larkim.NewCreateMessageReactionReqBuilder().MessageId(said.MessageID).
		Body(larkim.NewCreateMessageReactionReqBodyBuilder().ReactionType(larkim.NewEmojiBuilder().EmojiType("OK").Build()).Build()).Build())
	require.NoError(t, err)
	require.True(t, rc.Success())
	dm, err := sb.UserSays("oc_p2p_ou_bob", sandbox.ChatP2P, "ou_bob", "hi bot")
	require.NoError(t, err)
	sb.RemoveBot("oc_p2p_ou_bob")
	recalled := sendText(t, cli, chat, "oops", "")
	del, err := cli.Im.V1.Message.Delete(t.Context(), larkim.NewDeleteMessageReqBuilder().MessageId(*recalled.Data.MessageId).Build())
	require.NoError(t, err)
	require.True(t, del.Success())

	before := sb.Chat(chat).Messages()
	beforeChats := sb.Chats()
	ctl, err := sandbox.NewClient(sb.URL(), "")
	require.NoError(t, err)
	page, err := ctl.Messages(t.Context(), "", 0, 0, 0)
	require.NoError(t, err)
	cursor := page.Cursor

	sb = reopen(t, sb, dir)
	cli = client(sb)
	require.Equal(t, utc(before), utc(sb.Chat(chat).Messages()), "every message, card, thread, reaction and recall is back")
	require.Equal(t, beforeChats, sb.Chats())
	m, found := sb.Message(dm.MessageID)
	require.True(t, found)
	require.Equal(t, "hi bot", m.Text())

	// The bot can go on where it stopped: patch the open card, reply to the old message,
	// and a retry of an old send (same uuid) finds the original instead of a duplicate.
	p, err := cli.Im.V1.Message.Patch(t.Context(), larkim.NewPatchMessageReqBuilder().MessageId(gate).
		Body(larkim.NewPatchMessageReqBodyBuilder().Content(card("Approved", true)).Build()).Build())
	require.NoError(t, err)
	require.True(t, p.Success(), "patch after a restart: %d %s", p.Code, p.Msg)
	r2, err := cli.Im.V1.Message.Reply(t.Context(), larkim.NewReplyMessageReqBuilder().MessageId(said.MessageID).
		Body(larkim.NewReplyMessageReqBodyBuilder().MsgType("text").Content(textContent("still here")).Build()).Build())
	require.NoError(t, err)
	require.True(t, r2.Success(), "reply after a restart: %d %s", r2.Code, r2.Msg)
	again := sendText(t, cli, chat, "on it", "row-1")
	require.Equal(t, *text.Data.MessageId, *again.Data.MessageId)
	require.Equal(t, sandbox.CodeBotNotInChat, sendText(t, cli, "oc_p2p_ou_bob", "x", "").Code, "the bot stays out of the chat it left")

	// The control API's cursor goes on: a client polling across the restart sees only what changed.
	ctl, err = sandbox.NewClient(sb.URL(), "")
	require.NoError(t, err)
	page, err = ctl.Messages(t.Context(), "", cursor, 0, 0)
	require.NoError(t, err)
	var changed []string
	for _, m := range page.Messages {
		changed = append(changed, m.MessageID)
	}
	require.ElementsMatch(t, []string{gate, *r2.Data.MessageId}, changed)
	// New ids never collide with the old ones.
	ids := map[string]bool{}
	for _, m := range sb.Chat(chat).Messages() {
		require.False(t, ids[m.ID], "duplicate id %s", m.ID)
		ids[m.ID] = true
	}

	// A third life sees the second one's changes.
	sb = reopen(t, sb, dir)
	got, _ := sb.Message(gate)
	require.Equal(t, "Approved", sandbox.RenderCard(got.Content).Title)
}

func TestClickARestoredCard(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sb := start(t, sandbox.Options{StateDir: dir})
	gate := sendCard(t, client(sb), sb.DefaultChatID(), card("Deploy svc-a?", true, "Approve", "Reject"))
	sb = reopen(t, sb, dir)
	require.NoError(t, sb.SetCallbackURLs(echoBot(t, sb), ""))
	res, err := sb.ClickButtonN(t.Context(), gate, sb.DemoUserOpenID(), 1)
	require.NoError(t, err)
	require.True(t, res.CardUpdated)
	require.Equal(t, "approved", res.Toast.Content)
}

func TestStateDirIsLockedAndCheckedOnOpen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sb := start(t, sandbox.Options{StateDir: dir})
	_, err := sandbox.New(sandbox.Options{StateDir: dir})
	require.ErrorContains(t, err, dir+" is in use by another sandbox")
	sendText(t, client(sb), sb.DefaultChatID(), "kept", "")
	sb.Close()

	path := filepath.Join(dir, "state.jsonl")
	good, err := os.ReadFile(path)
	require.NoError(t, err)

	// A line cut short by a crash is dropped; what came before it is kept.
	require.NoError(t, os.WriteFile(path, append(append([]byte{}, good...), `{"counter":9,"rev":9,"message":{"id":"om_x","chat_id`...), 0o600))
	sb2, err := sandbox.New(sandbox.Options{StateDir: dir})
	require.NoError(t, err)
	msgs := sb2.Chat(sb2.DefaultChatID()).Messages()
	require.Len(t, msgs, 1)
	require.Equal(t, "kept", msgs[0].Text())
	sb2.Close()

	// A damaged line inside the file, or another version, is refused with the file and line named.
	lines := strings.Split(string(good), "\n")
	bad := strings.Join(append([]string{lines[0], "not json"}, lines[1:]...), "\n")
	require.NoError(t, os.WriteFile(path, []byte(bad), 0o600))
	_, err = sandbox.New(sandbox.Options{StateDir: dir})
	require.ErrorContains(t, err, path+" line 2 is not a state record")
	require.NoError(t, os.WriteFile(path, []byte(`{"version":99,"counter":0,"rev":0}`+"\n"), 0o600))
	_, err = sandbox.New(sandbox.Options{StateDir: dir})
	require.ErrorContains(t, err, "state version 99")
	// Neither attempt took the lock for good.
	require.NoError(t, os.WriteFile(path, good, 0o600))
	sb3, err := sandbox.New(sandbox.Options{StateDir: dir})
	require.NoError(t, err)
	sb3.Close()
}

// TestStateFileStaysCompact changes one message many times: the file is rewritten once enough
// lines are superseded, so it does not grow with every change.
func TestStateFileStaysCompact(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sb := start(t, sandbox.Options{StateDir: dir})
	cli := client(sb)
	msg := *sendText(t, cli, sb.DefaultChatID(), "react to me", "").Data.MessageId
	const n = 3000
	for range n {
		rc, err := cli.Im.V1.MessageReaction.Create(context.Background(), larkim.NewCreateMessageReactionReqBuilder().MessageId(msg).
			Body(larkim.NewCreateMessageReactionReqBodyBuilder().ReactionType(larkim.NewEmojiBuilder().EmojiType("OK").Build()).Build()).Build())
		require.NoError(t, err)
		require.True(t, rc.Success())
		rd, err := cli.Im.V1.MessageReaction.Delete(context.Background(), larkim.NewDeleteMessageReactionReqBuilder().
			MessageId(msg).ReactionId(*rc.Data.ReactionId).Build())
		require.NoError(t, err)
		require.True(t, rd.Success())
	}
	b, err := os.ReadFile(filepath.Join(dir, "state.jsonl"))
	require.NoError(t, err)
	lines := strings.Count(string(b), "\n")
	require.LessOrEqual(t, lines, 2*3+4096+1, "superseded lines are compacted away (%d changes)", 2*n)
	_, err = cli.Im.V1.MessageReaction.Create(context.Background(), larkim.NewCreateMessageReactionReqBuilder().MessageId(msg).
		Body(larkim.NewCreateMessageReactionReqBodyBuilder().ReactionType(larkim.NewEmojiBuilder().EmojiType("DONE").Build()).Build()).Build())
	require.NoError(t, err)
	sb = reopen(t, sb, dir)
	got, _ := sb.Message(msg)
	require.Len(t, got.Reactions, 1)
	require.Equal(t, "DONE", got.Reactions[0].EmojiType)
}

// TestChatClientAcrossARestart keeps `loopx chat` running while its sandbox stops and a new one
// starts on the same address and state: the client reconnects, keeps its numbers, and shows
// only what is new.
func TestChatClientAcrossARestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	sb := start(t, sandbox.Options{Addr: addr, StateDir: dir})
	gate := sendCard(t, client(sb), sb.DefaultChatID(), card("Deploy svc-a?", true, "Approve", "Reject"))

	in, feed := io.Pipe()
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- sandbox.RunChat(t.Context(), sandbox.ChatOptions{URL: sb.URL(), PollWait: time.Second}, in, out)
	}()
	waitFor := func(want string) {
		t.Helper()
		require.Eventually(t, func() bool { return strings.Contains(out.String(), want) }, 30*time.Second, 10*time.Millisecond,
			"output lacks %q:\n%s", want, out.String())
	}
	waitFor("(/click 1 <button#>)")

	sb.Close()
	waitFor("! lost the sandbox")
	sb = start(t, sandbox.Options{Addr: addr, StateDir: dir})
	require.NoError(t, sb.SetCallbackURLs(echoBot(t, sb), ""))
	waitFor("! sandbox reachable again")
	_, err = io.WriteString(feed, "/click 1 1\n")
	require.NoError(t, err)
	waitFor("* toast [success]: approved")
	waitFor("Approved by " + sb.DemoUserOpenID())
	require.Equal(t, 1, strings.Count(out.String(), "(/click 1 <button#>)"), "the open card is not shown again after the restart:\n%s", out.String())
	m, _ := sb.Message(gate)
	require.True(t, m.Updated)

	_, err = io.WriteString(feed, "/quit\n")
	require.NoError(t, err)
	require.NoError(t, <-done)
}
