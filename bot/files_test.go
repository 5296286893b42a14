package bot_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loopx/bot"
	"loopx/bot/sandbox"
	"loopx/server/larkstore"
	"loopx/store"
	"loopx/templates"
)

// startFetcher runs one file fetcher until the test ends.
func (e *testBundle) startFetcher(name string) {
	t := e.t
	tpl, err := templates.New()
	require.NoError(t, err)
	f, err := bot.NewFetcher(bot.NewClient(e.cfg, 5*time.Second), larkstore.Fetches{Store: e.st, Templates: tpl, DefaultLang: "en"},
		bot.FetcherOptions{Owner: name, Logger: quietLogger()})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(settle):
			t.Errorf("fetcher did not stop within %s", settle)
		}
	})
}

// Files both ways through the official SDK and the sandbox: an image a person sends (inside a
// post that mentions the bot) is downloaded through the message resource API and reaches the
// agent's inbox with its bytes; a file too large is refused in the thread, the message goes on
// without it; an agent's file reply is uploaded and sent as an image message.
func TestFilesBothWays(t *testing.T) {
	t.Parallel()
	e := setup(t, bundleOpts{transport: bot.TransportWS, realRouter: true})
	ctx := t.Context()
	_, err := e.st.CreateGoal(ctx, store.CreateGoalParams{ID: "g", Owners: []string{owner}, Meta: store.Meta{Actor: "admin", Surface: "api"}})
	require.NoError(t, err)
	_, err = e.st.RegisterAgent(ctx, store.RegisterAgentParams{GoalID: "g", AgentID: "a", Meta: store.Meta{Actor: "admin", Surface: "api"}})
	require.NoError(t, err)
	const chat = "oc_files"
	waitDelivery(t, e.ownerSaysIn(chat, "/bind #g"))
	e.startSender("s1", bot.DefaultRateLimits)
	e.startFetcher("f1")
	e.startFetcher("f2") // a second replica's fetcher: each file is still downloaded once

	image := make([]byte, 200<<10)
	_, _ = rand.Read(image)
	image = append([]byte("\x89PNG\r\n\x1a\n"), image...)
	d, err := e.sb.UserSendsFile(chat, sandbox.ChatGroup, owner, "screen.png", image, "look at this", sandbox.MentionBot())
	require.NoError(t, err)
	waitDelivery(t, d)
	var item store.InboxItem
	require.Eventually(t, func() bool {
		items, err := store.ListInbox(ctx, e.st.DB(), "g", "a", store.InboxPending)
		if err != nil || len(items) == 0 {
			return false
		}
		item = items[0]
		return true
	}, settle, 10*time.Millisecond, "the item is handed over once its image is stored")
	require.Equal(t, "look at this", item.Text)
	items, err := store.WithItemFiles(ctx, e.st.DB(), []store.InboxItem{item})
	require.NoError(t, err)
	require.Len(t, items[0].Files, 1)
	_, got, err := e.st.ReadAttachment(ctx, items[0].Files[0].ID)
	require.NoError(t, err)
	require.True(t, bytes.Equal(image, got), "the bytes that were sent")
	downloads := 0
	for _, r := range e.sb.Requests() {
		if r.Route == sandbox.RouteResourceGet {
			downloads++
		}
	}
	require.Equal(t, 1, downloads, "downloaded once by two fetchers")

	// The agent answers with a file: uploaded, then sent as an image message in the thread.
	b, err := e.st.NewBlob(image)
	require.NoError(t, err)
	require.NoError(t, e.st.StageBlob(ctx, b))
	var fileID int64
	require.NoError(t, e.st.WithTx(ctx, func(tx *store.Tx) error {
		f, err := e.st.In(tx).AttachReply(ctx, item, store.FileUpload{Name: "annotated.png", Blob: b}, time.Now())
		if err != nil {
			return err
		}
		fileID = f.ID
		content, _ := json.Marshal(map[string]int64{"file_id": f.ID})
		_, _, err = store.InsertOutbox(ctx, tx, store.OutboxInsert{DedupeKey: "reply-file-1", Kind: "file", ReceiveID: chat,
			ReplyTo: item.SourceMessage, Content: string(content), GoalID: "g", AgentID: "a"})
		return err
	}))
	require.NotZero(t, fileID)
	var sent sandbox.Message
	require.Eventually(t, func() bool {
		for _, m := range e.sb.Chat(chat).BotMessages() {
			if m.MsgType == "image" {
				sent = m
				return true
			}
		}
		return false
	}, settle, 10*time.Millisecond, "an image message")
	require.Equal(t, d.MessageID, sent.ParentID, "a reply to the person's message")
	var key struct {
		ImageKey string `json:"image_key"`
	}
	require.NoError(t, json.Unmarshal([]byte(sent.Content), &key))
	res, ok := e.sb.Resource(key.ImageKey)
	require.True(t, ok)
	require.True(t, bytes.Equal(image, res.Data), "the uploaded bytes")
	require.Empty(t, e.sb.Unmatched())
}

// ownerSaysIn sends text from the owner to chat, mentioning the bot.
func (e *testBundle) ownerSaysIn(chat, text string) *sandbox.Delivery {
	e.t.Helper()
	d, err := e.sb.UserSays(chat, sandbox.ChatGroup, owner, text, sandbox.MentionBot())
	require.NoError(e.t, err)
	return d
}
