package sandbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	lark "github.com/larksuite/oapi-sdk-go/v3"
	larkcore "github.com/larksuite/oapi-sdk-go/v3/core"
	"github.com/larksuite/oapi-sdk-go/v3/core/httpserverext"
	larkevent "github.com/larksuite/oapi-sdk-go/v3/event"
	"github.com/larksuite/oapi-sdk-go/v3/event/dispatcher"
	"github.com/larksuite/oapi-sdk-go/v3/event/dispatcher/callback"
	larkim "github.com/larksuite/oapi-sdk-go/v3/service/im/v1"
	larkws "github.com/larksuite/oapi-sdk-go/v3/ws"
	"github.com/stretchr/testify/require"

	"loopx/bot/sandbox"
)

const (
	testToken = "verify-token"
	testKey   = "encrypt-key"
)

// start runs a sandbox for one test; its app id is random, so the SDK's process-global token
// cache never mixes two tests.
func start(t *testing.T, opts sandbox.Options) *sandbox.Sandbox {
	t.Helper()
	if opts.VerificationToken == "" {
		opts.VerificationToken = testToken
	}
	if opts.EncryptKey == "" {
		opts.EncryptKey = testKey
	}
	sb, err := sandbox.New(opts)
	require.NoError(t, err)
	sb.Start(context.Background())
	t.Cleanup(func() {
		sb.Close()
		require.Empty(t, sb.Unmatched(), "calls to routes the sandbox does not emulate")
	})
	return sb
}

func client(sb *sandbox.Sandbox) *lark.Client {
	return lark.NewClient(sb.AppID(), sb.AppSecret(), lark.WithOpenBaseUrl(sb.URL()),
		lark.WithReqTimeout(5*time.Second), lark.WithLogLevel(larkcore.LogLevelError))
}

func textContent(s string) string {
	b, _ := json.Marshal(map[string]string{"text": s})
	return string(b)
}

func sendText(t *testing.T, cli *lark.Client, chatID, text, uuid string) *larkim.CreateMessageResp {
	t.Helper()
	body := larkim.NewCreateMessageReqBodyBuilder().ReceiveId(chatID).MsgType(larkim.MsgTypeText).Content(textContent(text))
	if uuid != "" {
		body = body.Uuid(uuid)
	}
	resp, err := cli.Im.V1.Message.Create(t.Context(), larkim.NewCreateMessageReqBuilder().
		ReceiveIdType("chat_id").Body(body.Build()).Build())
	require.NoError(t, err)
	return resp
}

func card(title string, updateMulti bool, buttons ...string) string {
	elems := []any{map[string]any{"tag": "markdown", "content": "**" + title + "**"}}
	for _, b := range buttons {
		elems = append(elems, map[string]any{
			"tag": "button", "text": map[string]any{"tag": "plain_text", "content": b},
			"behaviors": []any{map[string]any{"type": "callback", "value": map[string]any{"action": b}}},
		})
	}
	c, _ := json.Marshal(map[string]any{
		"schema": "2.0", "config": map[string]any{"update_multi": updateMulti},
		"header": map[string]any{"title": map[string]any{"tag": "plain_text", "content": title}},
		"body":   map[string]any{"elements": elems},
	})
	return string(c)
}

func sendCard(t *testing.T, cli *lark.Client, chatID, content string) string {
	t.Helper()
	resp, err := cli.Im.V1.Message.Create(t.Context(), larkim.NewCreateMessageReqBuilder().
		ReceiveIdType("chat_id").Body(larkim.NewCreateMessageReqBodyBuilder().
		ReceiveId(chatID).MsgType(larkim.MsgTypeInteractive).Content(content).Build()).Build())
	require.NoError(t, err)
	require.True(t, resp.Success(), "create card: %d %s", resp.Code, resp.Msg)
	return *resp.Data.MessageId
}

func TestTokenFetchAndRevocation(t *testing.T) {
	t.Parallel()
	sb := start(t, sandbox.Options{})
	cli := client(sb)

	resp := sendText(t, cli, sb.DefaultChatID(), "hello", "")
	require.True(t, resp.Success(), "%d %s", resp.Code, resp.Msg)
	require.Equal(t, 1, sb.TokenIssues())

	sb.Revoke()
	resp = sendText(t, cli, sb.DefaultChatID(), "after revoke", "")
	require.False(t, resp.Success())
	require.Equal(t, sandbox.CodeTokenInvalid, resp.Code)
	require.Len(t, sb.Chat(sb.DefaultChatID()).Messages(), 1, "a refused call stores nothing")

	// A raw call without the token is refused as Lark does.
	r, err := http.Get(sb.URL() + "/open-apis/bot/v3/info")
	require.NoError(t, err)
	defer r.Body.Close()
	var body struct{ Code int }
	require.NoError(t, json.NewDecoder(r.Body).Decode(&body))
	require.Equal(t, sandbox.CodeTokenMissing, body.Code)
	require.Equal(t, "application/json; charset=utf-8", r.Header.Get("Content-Type"))
}

func TestBadAppSecretIsACodeError(t *testing.T) {
	t.Parallel()
	sb := start(t, sandbox.Options{})
	cli := lark.NewClient(sb.AppID(), "wrong", lark.WithOpenBaseUrl(sb.URL()), lark.WithLogLevel(larkcore.LogLevelError))
	_, err := cli.Im.V1.Message.Create(t.Context(), larkim.NewCreateMessageReqBuilder().ReceiveIdType("chat_id").
		Body(larkim.NewCreateMessageReqBodyBuilder().ReceiveId(sb.DefaultChatID()).MsgType("text").Content(textContent("x")).Build()).Build())
	var ce larkcore.CodeError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, sandbox.CodeAppSecretInvalid, ce.Code)
	require.Equal(t, 0, sb.TokenIssues())
}

func TestCreateDedupeReplyPatchRecall(t *testing.T) {
	t.Parallel()
	sb := start(t, sandbox.Options{})
	cli := client(sb)
	chat := sb.DefaultChatID()

	first := sendText(t, cli, chat, "once", "row-1")
	again := sendText(t, cli, chat, "once", "row-1")
	require.True(t, again.Success())
	require.Equal(t, *first.Data.MessageId, *again.Data.MessageId, "a repeated uuid returns the original message")
	msgs := sb.Chat(chat).Messages()
	require.Len(t, msgs, 1)
	require.Equal(t, "once", msgs[0].Text())
	require.Equal(t, "row-1", msgs[0].UUID)
	require.Equal(t, sandbox.SenderApp, msgs[0].SenderType)

	// Reply in thread opens a thread on the root.
	reply, err := cli.Im.V1.Message.Reply(t.Context(), larkim.NewReplyMessageReqBuilder().MessageId(*first.Data.MessageId).
		Body(larkim.NewReplyMessageReqBodyBuilder().MsgType("text").Content(textContent("in thread")).ReplyInThread(true).Build()).Build())
	require.NoError(t, err)
	require.True(t, reply.Success(), "%d %s", reply.Code, reply.Msg)
	require.NotEmpty(t, *reply.Data.ThreadId)
	require.Equal(t, *first.Data.MessageId, *reply.Data.RootId)
	root, _ := sb.Message(*first.Data.MessageId)
	require.Equal(t, *reply.Data.ThreadId, root.ThreadID)

	// PATCH: a text message cannot be patched; a card without update_multi neither.
	patch := func(id, content string) *larkim.PatchMessageResp {
		resp, err := cli.Im.V1.Message.Patch(t.Context(), larkim.NewPatchMessageReqBuilder().MessageId(id).
			Body(larkim.NewPatchMessageReqBodyBuilder().Content(content).Build()).Build())
		require.NoError(t, err)
		return resp
	}
	require.Equal(t, sandbox.CodeBadRequest, patch(*first.Data.MessageId, card("x", true)).Code)
	fixed := sendCard(t, cli, chat, card("Gate", false, "Approve"))
	require.Equal(t, sandbox.CodeBadRequest, patch(fixed, card("Gate 2", true)).Code)
	shared := sendCard(t, cli, chat, card("Gate", true, "Approve", "Reject"))
	p := patch(shared, card("Approved", true))
	require.True(t, p.Success(), "%d %s", p.Code, p.Msg)
	got, _ := sb.Message(shared)
	require.True(t, got.Updated)
	require.Equal(t, "Approved", sandbox.RenderCard(got.Content).Title)

	// GET returns the stored message.
	g, err := cli.Im.V1.Message.Get(t.Context(), larkim.NewGetMessageReqBuilder().MessageId(shared).Build())
	require.NoError(t, err)
	require.True(t, g.Success())
	require.Equal(t, "interactive", *g.Data.Items[0].MsgType)
	require.True(t, *g.Data.Items[0].Updated)

	// Reactions.
	rc, err := cli.Im.V1.MessageReaction.Create(t.Context(), larkim.NewCreateMessageReactionReqBuilder().MessageId(*first.Data.MessageId).
		Body(larkim.NewCreateMessageReactionReqBodyBuilder().ReactionType(larkim.NewEmojiBuilder().EmojiType("OK").Build()).Build()).Build())
	require.NoError(t, err)
	require.True(t, rc.Success(), "%d %s", rc.Code, rc.Msg)
	root, _ = sb.Message(*first.Data.MessageId)
	require.Equal(t, "OK", root.Reactions[0].EmojiType)
	rd, err := cli.Im.V1.MessageReaction.Delete(t.Context(), larkim.NewDeleteMessageReactionReqBuilder().
		MessageId(*first.Data.MessageId).ReactionId(*rc.Data.ReactionId).Build())
	require.NoError(t, err)
	require.True(t, rd.Success())

	// Recall, then a reply to the recalled message is 230011.
	del, err := cli.Im.V1.Message.Delete(t.Context(), larkim.NewDeleteMessageReqBuilder().MessageId(*first.Data.MessageId).Build())
	require.NoError(t, err)
	require.True(t, del.Success())
	r2, err := cli.Im.V1.Message.Reply(t.Context(), larkim.NewReplyMessageReqBuilder().MessageId(*first.Data.MessageId).
		Body(larkim.NewReplyMessageReqBodyBuilder().MsgType("text").Content(textContent("late")).Build()).Build())
	require.NoError(t, err)
	require.Equal(t, sandbox.CodeMessageRecalled, r2.Code)

	// Bot info and an unknown chat.
	info, err := cli.Get(t.Context(), "/open-apis/bot/v3/info", nil, larkcore.AccessTokenTypeTenant)
	require.NoError(t, err)
	require.Contains(t, string(info.RawBody), sb.BotOpenID())
	require.Equal(t, sandbox.CodeBotNotInChat, sendText(t, cli, "oc_unknown", "x", "").Code)
}

func TestContentValidation(t *testing.T) {
	t.Parallel()
	sb := start(t, sandbox.Options{})
	cli := client(sb)
	create := func(msgType, content string) *larkim.CreateMessageResp {
		resp, err := cli.Im.V1.Message.Create(t.Context(), larkim.NewCreateMessageReqBuilder().ReceiveIdType("chat_id").
			Body(larkim.NewCreateMessageReqBodyBuilder().ReceiveId(sb.DefaultChatID()).MsgType(msgType).Content(content).Build()).Build())
		require.NoError(t, err)
		return resp
	}
	require.Equal(t, sandbox.CodeBadRequest, create("text", "not json").Code)
	require.Equal(t, sandbox.CodeBadRequest, create("text", `{"title":"no text"}`).Code)
	big := make([]byte, sandbox.MaxCardBytes)
	for i := range big {
		big[i] = 'a'
	}
	require.Equal(t, sandbox.CodeContentTooLong, create("interactive", `{"x":"`+string(big)+`"}`).Code)
	require.True(t, create("text", textContent(string(big))).Success(), "text may be up to 150 KB")
	require.Len(t, sb.Chat(sb.DefaultChatID()).Messages(), 1)
}

func TestRateLimitPerChat(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 100e6, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	sb := start(t, sandbox.Options{Now: clock})
	cli := client(sb)
	chat := sb.DefaultChatID()
	for i := range 5 {
		require.True(t, sendText(t, cli, chat, "burst", "").Success(), "send %d", i)
	}
	resp := sendText(t, cli, chat, "one too many", "")
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Equal(t, sandbox.CodeRateLimited, resp.Code)
	require.Equal(t, "1", resp.Header.Get("x-ogw-ratelimit-reset"))
	require.Equal(t, "5", resp.Header.Get("x-ogw-ratelimit-limit"))

	mu.Lock()
	now = now.Add(time.Second)
	mu.Unlock()
	require.True(t, sendText(t, cli, chat, "next second", "").Success())
	st := sb.Chat(chat).Stats()
	require.Equal(t, sandbox.ChatStats{Accepted: 6, RateLimited: 1, MaxPerSecond: 5, MaxAttemptsPerSecond: 6}, st)
	require.Equal(t, 5, sb.MaxPerSecond(chat))
}

func TestFailNext(t *testing.T) {
	t.Parallel()
	sb := start(t, sandbox.Options{})
	cli := client(sb)
	sb.FailNext(sandbox.RouteCreate, 1, sandbox.Fail{HTTP: 429, Code: sandbox.CodeRateLimited, Headers: map[string]string{"x-ogw-ratelimit-reset": "3"}})
	sb.FailNext(sandbox.RouteCreate, 1, sandbox.Fail{Code: sandbox.CodeBotNotInChat, Msg: "Bot is not in the chat"})
	r1 := sendText(t, cli, sb.DefaultChatID(), "a", "u1")
	require.Equal(t, 429, r1.StatusCode)
	require.Equal(t, "3", r1.Header.Get("x-ogw-ratelimit-reset"))
	require.Equal(t, sandbox.CodeBotNotInChat, sendText(t, cli, sb.DefaultChatID(), "a", "u1").Code)
	require.True(t, sendText(t, cli, sb.DefaultChatID(), "a", "u1").Success())
	require.Len(t, sb.Chat(sb.DefaultChatID()).Messages(), 1, "injected failures store nothing")

	sb.FailNext(sandbox.RouteCreate, 1, sandbox.Fail{HTTP: 504})
	_, err := cli.Im.V1.Message.Create(t.Context(), larkim.NewCreateMessageReqBuilder().ReceiveIdType("chat_id").
		Body(larkim.NewCreateMessageReqBodyBuilder().ReceiveId(sb.DefaultChatID()).MsgType("text").Content(textContent("b")).Build()).Build())
	var timeout *larkcore.ServerTimeoutError
	require.ErrorAs(t, err, &timeout)

	slow := lark.NewClient(sb.AppID(), sb.AppSecret(), lark.WithOpenBaseUrl(sb.URL()), lark.WithReqTimeout(100*time.Millisecond), lark.WithLogLevel(larkcore.LogLevelError))
	sb.FailNext(sandbox.RouteCreate, 1, sandbox.Fail{Delay: 300 * time.Millisecond})
	_, err = slow.Im.V1.Message.Create(t.Context(), larkim.NewCreateMessageReqBuilder().ReceiveIdType("chat_id").
		Body(larkim.NewCreateMessageReqBodyBuilder().ReceiveId(sb.DefaultChatID()).MsgType("text").Content(textContent("c")).Build()).Build())
	require.Error(t, err)
}

// eventRecorder collects the events a bot handler saw, by event id.
type eventRecorder struct {
	mu   sync.Mutex
	seen []string
	got  chan string
}

func newRecorder() *eventRecorder { return &eventRecorder{got: make(chan string, 100)} }

func (r *eventRecorder) add(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, id)
	r.got <- id
	return len(r.seen)
}

func TestHTTPEventDeliveryWithRedelivery(t *testing.T) {
	t.Parallel()
	rec := newRecorder()
	var lastText string
	d := dispatcher.NewEventDispatcher(testToken, testKey).
		OnP2MessageReceiveV1(func(ctx context.Context, ev *larkim.P2MessageReceiveV1) error {
			n := rec.add(ev.EventV2Base.Header.EventID)
			lastText = *ev.Event.Message.Content
			if n == 1 {
				return errors.New("database down") // the SDK answers 500, Lark redelivers
			}
			return nil
		})
	bot := httptest.NewServer(http.HandlerFunc(httpserverext.NewEventHandlerFunc(d, larkevent.WithLogLevel(larkcore.LogLevelError))))
	t.Cleanup(bot.Close)
	sb := start(t, sandbox.Options{EventURL: bot.URL})

	del, err := sb.UserSays("oc_team", sandbox.ChatGroup, "ou_alice", "deploy svc-a", sandbox.MentionBot())
	require.NoError(t, err)
	res, err := del.Wait(t.Context())
	require.NoError(t, err)
	require.True(t, res.Acked, res.Err)
	require.Equal(t, 2, res.Attempts)
	require.Equal(t, sandbox.TransportHTTP, res.Transport)
	require.Equal(t, []string{del.EventID, del.EventID}, rec.seen, "a redelivery keeps the event id")
	require.JSONEq(t, `{"text":"@_user_1 deploy svc-a"}`, lastText)

	// A forged signature is rejected by the SDK.
	req, err := sb.BuildHTTPRequest(t.Context(), bot.URL, del.Payload)
	require.NoError(t, err)
	req.Header.Set("X-Lark-Signature", "forged")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusInternalServerError, resp.StatusCode)

	// A group message without a mention is stored but not delivered.
	skip, err := sb.UserSays("oc_team", sandbox.ChatGroup, "ou_alice", "chatter")
	require.NoError(t, err)
	sres, err := skip.Wait(t.Context())
	require.NoError(t, err)
	require.True(t, sres.Skipped)
	require.Len(t, sb.Chat("oc_team").Messages(), 2)
}

func TestHTTPSlowAnswerIsRedelivered(t *testing.T) {
	t.Parallel()
	rec := newRecorder()
	// The first answer comes only after the sandbox gave up on it and pushed again: slower
	// than the ack budget however busy the machine, while the budget leaves the second,
	// immediate answer ample time.
	pushedAgain := make(chan struct{})
	var again sync.Once
	d := dispatcher.NewEventDispatcher(testToken, testKey).
		OnP2MessageReceiveV1(func(ctx context.Context, ev *larkim.P2MessageReceiveV1) error {
			if rec.add(ev.EventV2Base.Header.EventID) == 1 {
				select {
				case <-pushedAgain:
				case <-time.After(time.Minute):
				}
				return nil
			}
			again.Do(func() { close(pushedAgain) })
			return nil
		})
	bot := httptest.NewServer(http.HandlerFunc(httpserverext.NewEventHandlerFunc(d, larkevent.WithLogLevel(larkcore.LogLevelError))))
	t.Cleanup(bot.Close)
	sb := start(t, sandbox.Options{EventURL: bot.URL, AckBudget: 2 * time.Second})
	del, err := sb.UserSays("ou_bob_p2p", sandbox.ChatP2P, "ou_bob", "hi")
	require.NoError(t, err)
	res, err := del.Wait(t.Context())
	require.NoError(t, err)
	require.True(t, res.Acked)
	require.Equal(t, 2, res.Attempts)
}

func wsClient(t *testing.T, sb *sandbox.Sandbox, d *dispatcher.EventDispatcher) {
	t.Helper()
	cli := larkws.NewClient(sb.AppID(), sb.AppSecret(), larkws.WithDomain(sb.URL()),
		larkws.WithEventHandler(d), larkws.WithLogLevel(larkcore.LogLevelError))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cli.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("ws client did not stop within 30 s")
		}
	})
	require.Eventually(t, func() bool { return len(sb.WSConnections()) > 0 }, 30*time.Second, 10*time.Millisecond)
}

func TestWSDeliveryAckAndReconnect(t *testing.T) {
	t.Parallel()
	sb := start(t, sandbox.Options{})
	rec := newRecorder()
	release := make(chan struct{})
	d := dispatcher.NewEventDispatcher("", "").
		OnP2MessageReceiveV1(func(ctx context.Context, ev *larkim.P2MessageReceiveV1) error {
			if rec.add(ev.EventV2Base.Header.EventID) == 2 {
				<-release // hold the second event until the connection is dropped
			}
			return nil
		})
	wsClient(t, sb, d)

	first, err := sb.UserSays("oc_ws", sandbox.ChatGroup, "ou_alice", "hello", sandbox.MentionBot())
	require.NoError(t, err)
	res, err := first.Wait(t.Context())
	require.NoError(t, err)
	require.True(t, res.Acked, res.Err)
	require.Equal(t, 1, res.Attempts)
	require.Equal(t, sandbox.TransportWS, res.Transport)
	require.Equal(t, 200, res.Status)

	second, err := sb.UserSays("oc_ws", sandbox.ChatGroup, "ou_alice", "held", sandbox.MentionBot())
	require.NoError(t, err)
	require.Equal(t, first.EventID, <-rec.got)
	require.Equal(t, second.EventID, <-rec.got)
	connects := sb.WSConnects()
	require.Equal(t, 1, sb.DropConnections())
	close(release)

	res, err = second.Wait(t.Context())
	require.NoError(t, err)
	require.True(t, res.Acked, res.Err)
	require.GreaterOrEqual(t, res.Attempts, 2)
	require.Equal(t, second.EventID, <-rec.got, "the redelivered event arrives after the reconnect")
	require.Greater(t, sb.WSConnects(), connects)
}

func TestWSUnknownEventAckedWith500IsRedelivered(t *testing.T) {
	t.Parallel()
	sb := start(t, sandbox.Options{RetryIntervals: []time.Duration{10 * time.Millisecond}})
	wsClient(t, sb, dispatcher.NewEventDispatcher("", ""))
	del, err := sb.Deliver("im.chat.member.bot.added_v1", map[string]any{"chat_id": "oc_x"})
	require.NoError(t, err)
	res, err := del.Wait(t.Context())
	require.NoError(t, err)
	require.False(t, res.Acked)
	require.Equal(t, 2, res.Attempts)
	require.Equal(t, 500, res.Status)
}

func cardHandler(rec *eventRecorder, tokens chan<- string) func(context.Context, *callback.CardActionTriggerEvent) (*callback.CardActionTriggerResponse, error) {
	return func(ctx context.Context, ev *callback.CardActionTriggerEvent) (*callback.CardActionTriggerResponse, error) {
		rec.add(ev.EventV2Base.Header.EventID)
		tokens <- ev.Event.Token
		if ev.Event.Operator.OpenID != "ou_owner" {
			return &callback.CardActionTriggerResponse{Toast: &callback.Toast{Type: "error", Content: "only owners may answer"}}, nil
		}
		var data map[string]any
		_ = json.Unmarshal([]byte(card("Approved by "+ev.Event.Operator.OpenID, true)), &data)
		return &callback.CardActionTriggerResponse{
			Toast: &callback.Toast{Type: "success", Content: "approved " + ev.Event.Action.Value["action"].(string)},
			Card:  &callback.Card{Type: "raw", Data: data},
		}, nil
	}
}

func TestClickButtonOverHTTPAndWS(t *testing.T) {
	t.Parallel()
	for _, transport := range []string{sandbox.TransportHTTP, sandbox.TransportWS} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			rec := newRecorder()
			tokens := make(chan string, 10)
			d := dispatcher.NewEventDispatcher(testToken, testKey).OnP2CardActionTrigger(cardHandler(rec, tokens))
			var sb *sandbox.Sandbox
			if transport == sandbox.TransportHTTP {
				bot := httptest.NewServer(http.HandlerFunc(httpserverext.NewEventHandlerFunc(d, larkevent.WithLogLevel(larkcore.LogLevelError))))
				t.Cleanup(bot.Close)
				sb = start(t, sandbox.Options{CardURL: bot.URL, EventURL: bot.URL})
			} else {
				sb = start(t, sandbox.Options{})
				wsClient(t, sb, d)
			}
			cli := client(sb)
			id := sendCard(t, cli, sb.DefaultChatID(), card("Deploy?", true, "Approve", "Reject"))

			refused, err := sb.ClickButtonN(t.Context(), id, "ou_stranger", 1)
			require.NoError(t, err)
			require.Equal(t, sandbox.Toast{Type: "error", Content: "only owners may answer"}, refused.Toast)
			require.False(t, refused.CardUpdated)
			m, _ := sb.Message(id)
			require.Equal(t, "Deploy?", sandbox.RenderCard(m.Content).Title)
			<-tokens

			res, err := sb.ClickButtonN(t.Context(), id, "ou_owner", 1)
			require.NoError(t, err)
			require.Equal(t, transport, res.Transport)
			require.Equal(t, "approved Approve", res.Toast.Content)
			require.True(t, res.CardUpdated)
			m, _ = sb.Message(id)
			require.Equal(t, "Approved by ou_owner", sandbox.RenderCard(m.Content).Title)
			require.True(t, m.Updated)

			// The delayed update works twice with the click's token, then is refused.
			tok := <-tokens
			require.Equal(t, res.Token, tok)
			for i := range 3 {
				resp, err := cli.Post(t.Context(), "/open-apis/interactive/v1/card/update",
					map[string]any{"token": tok, "card": json.RawMessage(card("Later "+string(rune('A'+i)), true))}, larkcore.AccessTokenTypeTenant)
				require.NoError(t, err)
				var body struct{ Code int }
				require.NoError(t, json.Unmarshal(resp.RawBody, &body))
				if i < 2 {
					require.Equal(t, 0, body.Code)
				} else {
					require.Equal(t, sandbox.CodeBadRequest, body.Code)
				}
			}
			m, _ = sb.Message(id)
			require.Equal(t, "Later B", sandbox.RenderCard(m.Content).Title)
		})
	}
}
