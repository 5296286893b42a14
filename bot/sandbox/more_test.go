package sandbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
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
	larkws "github.com/larksuite/oapi-sdk-go/v3/ws"
	"github.com/stretchr/testify/require"

	"loopx/bot/sandbox"
)

// testClock is a settable clock for the sandbox.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *testClock {
	return &testClock{now: time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)}
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func TestNewRejectsBadOptionsNamingTheField(t *testing.T) {
	t.Parallel()
	cases := map[string]sandbox.Options{
		"Addr":              {Addr: "0.0.0.0:0"},
		"AckBudget":         {AckBudget: -time.Second},
		"TokenTTL":          {TokenTTL: 500 * time.Millisecond},
		"WS.PingInterval":   {WS: &sandbox.WSConfig{PingInterval: 0}},
		"EventURL":          {EventURL: "ftp://bot"},
		"RetryIntervals[1]": {RetryIntervals: []time.Duration{time.Millisecond, -time.Millisecond}},
	}
	for field, opts := range cases {
		_, err := sandbox.New(opts)
		require.ErrorContains(t, err, field, "options %+v", opts)
	}
	sb, err := sandbox.New(sandbox.Options{})
	require.NoError(t, err)
	require.NotEqual(t, sb.AppID(), func() string { o, _ := sandbox.New(sandbox.Options{}); defer o.Close(); return o.AppID() }(),
		"default app ids are unique per sandbox")
	sb.Close()
}

func TestShortTokenTTLMakesTheSDKRefetch(t *testing.T) {
	t.Parallel()
	sb := start(t, sandbox.Options{TokenTTL: 60 * time.Second})
	cli := client(sb)
	for range 3 {
		require.True(t, sendText(t, cli, sb.DefaultChatID(), "x", "").Success())
	}
	require.Equal(t, 3, sb.TokenIssues(), "with expire ≤ 180 s the SDK fetches a token before every call")
}

func TestUUIDDedupeLastsOneHour(t *testing.T) {
	t.Parallel()
	clock := newClock()
	sb := start(t, sandbox.Options{Now: clock.Now, TokenTTL: 24 * time.Hour})
	cli := client(sb)
	a := sendText(t, cli, sb.DefaultChatID(), "x", "same")
	clock.Add(59 * time.Minute)
	require.Equal(t, *a.Data.MessageId, *sendText(t, cli, sb.DefaultChatID(), "x", "same").Data.MessageId)
	clock.Add(time.Minute)
	b := sendText(t, cli, sb.DefaultChatID(), "x", "same")
	require.NotEqual(t, *a.Data.MessageId, *b.Data.MessageId, "after an hour the uuid is free again")
	require.Len(t, sb.Chat(sb.DefaultChatID()).Messages(), 2)
}

func TestTokenExpiresOnTheClock(t *testing.T) {
	t.Parallel()
	clock := newClock()
	sb := start(t, sandbox.Options{Now: clock.Now})
	cli := client(sb)
	require.True(t, sendText(t, cli, sb.DefaultChatID(), "x", "").Success())
	clock.Add(sandbox.DefaultTokenTTL)
	// The SDK still holds the token by its own (real) clock; the sandbox says it expired.
	require.Equal(t, sandbox.CodeTokenInvalid, sendText(t, cli, sb.DefaultChatID(), "y", "").Code)
}

func TestAppWideRateLimit(t *testing.T) {
	t.Parallel()
	clock := newClock()
	sb := start(t, sandbox.Options{Now: clock.Now})
	cli := client(sb)
	for i := range 10 {
		chat := fmt.Sprintf("oc_many_%d", i)
		require.NoError(t, sb.AddChat(chat, sandbox.ChatGroup, chat))
		for range 5 {
			require.True(t, sendText(t, cli, chat, "x", "").Success())
		}
	}
	require.NoError(t, sb.AddChat("oc_one_more", sandbox.ChatGroup, ""))
	resp := sendText(t, cli, "oc_one_more", "x", "")
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Equal(t, "50", resp.Header.Get("x-ogw-ratelimit-limit"))
	require.Equal(t, 50, sb.AppStats().MaxPerSecond)
	require.Equal(t, 1, sb.AppStats().RateLimited)
}

func TestSendToOpenIDOpensTheP2PChat(t *testing.T) {
	t.Parallel()
	sb := start(t, sandbox.Options{})
	cli := client(sb)
	resp, err := cli.Im.V1.Message.Create(t.Context(), larkim.NewCreateMessageReqBuilder().ReceiveIdType("open_id").
		Body(larkim.NewCreateMessageReqBodyBuilder().ReceiveId("ou_dave").MsgType("text").Content(textContent("hi dave")).Build()).Build())
	require.NoError(t, err)
	require.True(t, resp.Success(), "%d %s", resp.Code, resp.Msg)
	require.Equal(t, "oc_p2p_ou_dave", *resp.Data.ChatId)
	require.Equal(t, "hi dave", sb.Chat("oc_p2p_ou_dave").BotMessages()[0].Text())

	bad, err := cli.Im.V1.Message.Create(t.Context(), larkim.NewCreateMessageReqBuilder().ReceiveIdType("email").
		Body(larkim.NewCreateMessageReqBodyBuilder().ReceiveId("d@x").MsgType("text").Content(textContent("x")).Build()).Build())
	require.NoError(t, err)
	require.Equal(t, sandbox.CodeBadRequest, bad.Code)
	require.Contains(t, bad.Msg, "receive_id_type")
}

func TestListPutAndRemovedBot(t *testing.T) {
	t.Parallel()
	sb := start(t, sandbox.Options{ChatRateLimit: -1})
	cli := client(sb)
	chat := sb.DefaultChatID()
	var ids []string
	for i := range 5 {
		ids = append(ids, *sendText(t, cli, chat, fmt.Sprintf("m%d", i), "").Data.MessageId)
	}
	var listed []string
	it, err := cli.Im.V1.Message.ListByIterator(t.Context(), larkim.NewListMessageReqBuilder().
		ContainerIdType("chat").ContainerId(chat).PageSize(2).Build())
	require.NoError(t, err)
	for {
		more, m, err := it.Next()
		require.NoError(t, err)
		if !more {
			break
		}
		listed = append(listed, *m.MessageId)
	}
	require.Equal(t, ids, listed)

	put, err := cli.Im.V1.Message.Update(t.Context(), larkim.NewUpdateMessageReqBuilder().MessageId(ids[0]).
		Body(larkim.NewUpdateMessageReqBodyBuilder().MsgType("text").Content(textContent("edited")).Build()).Build())
	require.NoError(t, err)
	require.True(t, put.Success(), "%d %s", put.Code, put.Msg)
	m, _ := sb.Message(ids[0])
	require.Equal(t, "edited", m.Text())
	require.True(t, m.Updated)

	cardID := sendCard(t, cli, chat, card("c", true))
	put, err = cli.Im.V1.Message.Update(t.Context(), larkim.NewUpdateMessageReqBuilder().MessageId(cardID).
		Body(larkim.NewUpdateMessageReqBodyBuilder().MsgType("text").Content(textContent("x")).Build()).Build())
	require.NoError(t, err)
	require.Equal(t, sandbox.CodeBadRequest, put.Code, "PUT does not edit cards")

	sb.RemoveBot(chat)
	require.Equal(t, sandbox.CodeBotNotInChat, sendText(t, cli, chat, "x", "").Code)
}

func TestUnmatchedRouteAnswers404JSONAndIsRecorded(t *testing.T) {
	t.Parallel()
	sb, err := sandbox.New(sandbox.Options{})
	require.NoError(t, err)
	sb.Start(t.Context())
	t.Cleanup(sb.Close)
	cli := client(sb)
	resp, err := cli.Get(t.Context(), "/open-apis/contact/v3/users/ou_x", nil, larkcore.AccessTokenTypeTenant)
	require.NoError(t, err)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.Equal(t, "application/json; charset=utf-8", resp.Header.Get("Content-Type"))
	un := sb.Unmatched()
	require.Len(t, un, 1)
	require.Equal(t, "/open-apis/contact/v3/users/ou_x", un[0].Path)
}

func TestUserSaysRejectsBadInputNamingTheField(t *testing.T) {
	t.Parallel()
	sb := start(t, sandbox.Options{})
	var ie *sandbox.InputError
	_, err := sb.UserSays("oc_x", "channel", "ou_a", "hi")
	require.ErrorAs(t, err, &ie)
	require.Equal(t, "chatType", ie.Field)
	_, err = sb.UserSays("oc_x", sandbox.ChatGroup, "", "hi")
	require.ErrorAs(t, err, &ie)
	require.Equal(t, "senderOpenID", ie.Field)
	_, err = sb.UserSays("oc_x", sandbox.ChatGroup, "ou_a", "hi", sandbox.ReplyInThread("om_nope"))
	require.ErrorAs(t, err, &ie)
	require.Equal(t, "ReplyTo", ie.Field)
	_, err = sb.UserSays(sb.DefaultChatID(), sandbox.ChatP2P, "ou_a", "hi")
	require.ErrorAs(t, err, &ie)
	require.Empty(t, sb.Chat("oc_x").Messages(), "a refused call changes nothing")
	require.Empty(t, sb.Chat(sb.DefaultChatID()).Messages())
}

func TestUserSaysEventShape(t *testing.T) {
	t.Parallel()
	got := make(chan *larkim.P2MessageReceiveV1, 4)
	d := dispatcher.NewEventDispatcher(testToken, testKey).
		OnP2MessageReceiveV1(func(ctx context.Context, ev *larkim.P2MessageReceiveV1) error { got <- ev; return nil })
	bot := httptest.NewServer(http.HandlerFunc(httpserverext.NewEventHandlerFunc(d, larkevent.WithLogLevel(larkcore.LogLevelError))))
	t.Cleanup(bot.Close)
	sb := start(t, sandbox.Options{EventURL: bot.URL})

	root, err := sb.UserSays("oc_g", sandbox.ChatGroup, "ou_alice", "deploy", sandbox.MentionBot(), sandbox.MentionUser("ou_bob", "Bob"))
	require.NoError(t, err)
	ev := <-got
	require.Equal(t, root.EventID, ev.EventV2Base.Header.EventID)
	require.Equal(t, sandbox.EventMessageReceive, ev.EventV2Base.Header.EventType)
	require.Equal(t, testToken, ev.EventV2Base.Header.Token)
	require.Equal(t, sb.AppID(), ev.EventV2Base.Header.AppID)
	msg := ev.Event.Message
	require.Equal(t, root.MessageID, *msg.MessageId)
	require.Equal(t, "group", *msg.ChatType)
	require.Equal(t, "oc_g", *msg.ChatId)
	require.JSONEq(t, `{"text":"@_user_1 @_user_2 deploy"}`, *msg.Content)
	require.Len(t, msg.Mentions, 2)
	require.Equal(t, "@_user_1", *msg.Mentions[0].Key)
	require.Equal(t, sb.BotOpenID(), *msg.Mentions[0].Id.OpenId)
	require.Equal(t, "ou_bob", *msg.Mentions[1].Id.OpenId)
	require.Equal(t, "ou_alice", *ev.Event.Sender.SenderId.OpenId)
	require.Equal(t, "user", *ev.Event.Sender.SenderType)

	reply, err := sb.UserSays("oc_g", sandbox.ChatGroup, "ou_alice", "more", sandbox.MentionBot(), sandbox.ReplyInThread(root.MessageID))
	require.NoError(t, err)
	ev = <-got
	require.Equal(t, reply.MessageID, *ev.Event.Message.MessageId)
	require.Equal(t, root.MessageID, *ev.Event.Message.RootId)
	require.Equal(t, root.MessageID, *ev.Event.Message.ParentId)
	require.NotEmpty(t, *ev.Event.Message.ThreadId)
	require.NotEqual(t, root.EventID, reply.EventID, "each new event has its own id")

	// A p2p message reaches the bot without a mention.
	_, err = sb.UserSays("oc_p2p_ou_alice", sandbox.ChatP2P, "ou_alice", "hello")
	require.NoError(t, err)
	ev = <-got
	require.Equal(t, "p2p", *ev.Event.Message.ChatType)
	require.Empty(t, ev.Event.Message.Mentions)
}

func TestCardUpdateBeforeTheAnswerIsReverted(t *testing.T) {
	t.Parallel()
	var sb *sandbox.Sandbox
	var updateCode int
	d := dispatcher.NewEventDispatcher(testToken, testKey).
		OnP2CardActionTrigger(func(ctx context.Context, ev *callback.CardActionTriggerEvent) (*callback.CardActionTriggerResponse, error) {
			// Wrong order: the delayed update is sent before the callback is answered.
			resp, err := client(sb).Post(ctx, "/open-apis/interactive/v1/card/update",
				map[string]any{"token": ev.Event.Token, "card": json.RawMessage(card("Too early", true))}, larkcore.AccessTokenTypeTenant)
			if err != nil {
				return nil, err
			}
			var body struct{ Code int }
			_ = json.Unmarshal(resp.RawBody, &body)
			updateCode = body.Code
			return &callback.CardActionTriggerResponse{Toast: &callback.Toast{Type: "info", Content: "ok"}}, nil
		})
	bot := httptest.NewServer(http.HandlerFunc(httpserverext.NewEventHandlerFunc(d, larkevent.WithLogLevel(larkcore.LogLevelError))))
	t.Cleanup(bot.Close)
	sb = start(t, sandbox.Options{CardURL: bot.URL})
	id := sendCard(t, client(sb), sb.DefaultChatID(), card("Original", true, "Go"))
	res, err := sb.ClickButtonN(t.Context(), id, "ou_alice", 1)
	require.NoError(t, err)
	require.Equal(t, sandbox.TransportHTTP, res.Transport, "card callbacks go to the card URL even when events use WS")
	require.Equal(t, 0, updateCode)
	m, _ := sb.Message(id)
	require.Equal(t, "Original", sandbox.RenderCard(m.Content).Title, "Lark reverts an update sent before the answer")
}

func TestClickWithANullAnswerIsAnError(t *testing.T) {
	t.Parallel()
	d := dispatcher.NewEventDispatcher(testToken, testKey).
		OnP2CardActionTrigger(func(ctx context.Context, ev *callback.CardActionTriggerEvent) (*callback.CardActionTriggerResponse, error) {
			return nil, nil
		})
	bot := httptest.NewServer(http.HandlerFunc(httpserverext.NewEventHandlerFunc(d, larkevent.WithLogLevel(larkcore.LogLevelError))))
	t.Cleanup(bot.Close)
	sb := start(t, sandbox.Options{EventURL: bot.URL})
	id := sendCard(t, client(sb), sb.DefaultChatID(), card("Gate", true, "Go"))
	_, err := sb.ClickButtonN(t.Context(), id, "ou_alice", 1)
	require.ErrorIs(t, err, sandbox.ErrBadCallbackAnswer)
	_, err = sb.ClickButtonN(t.Context(), id, "ou_alice", 2)
	var ie *sandbox.InputError
	require.ErrorAs(t, err, &ie)
	require.Equal(t, "button", ie.Field)
}

func TestWSClusterModeSpreadsEventsOverConnections(t *testing.T) {
	t.Parallel()
	sb := start(t, sandbox.Options{})
	var mu sync.Mutex
	perClient := map[int]int{}
	seen := map[string]int{}
	for i := range 2 {
		d := dispatcher.NewEventDispatcher("", "").
			OnP2MessageReceiveV1(func(ctx context.Context, ev *larkim.P2MessageReceiveV1) error {
				mu.Lock()
				defer mu.Unlock()
				perClient[i]++
				seen[ev.EventV2Base.Header.EventID]++
				return nil
			})
		wsClient(t, sb, d)
		require.Eventually(t, func() bool { return len(sb.WSConnections()) == i+1 }, 30*time.Second, 10*time.Millisecond)
	}
	var dels []*sandbox.Delivery
	for i := range 30 {
		d, err := sb.UserSays("oc_c", sandbox.ChatGroup, "ou_a", fmt.Sprint("n", i), sandbox.MentionBot())
		require.NoError(t, err)
		dels = append(dels, d)
	}
	for _, d := range dels {
		res, err := d.Wait(t.Context())
		require.NoError(t, err)
		require.True(t, res.Acked)
	}
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, seen, 30)
	for id, n := range seen {
		require.Equal(t, 1, n, "event %s delivered to one connection only", id)
	}
	require.Positive(t, perClient[0])
	require.Positive(t, perClient[1])
}

func TestWSHandshakeRejections(t *testing.T) {
	t.Parallel()
	sb := start(t, sandbox.Options{})
	sb.RejectNextHandshake(1, 500)
	wsClient(t, sb, dispatcher.NewEventDispatcher("", ""))
	require.Equal(t, 1, sb.WSConnects(), "a 5xx handshake is retried by the SDK")

	sb2 := start(t, sandbox.Options{})
	sb2.RejectNextHandshake(1, 403)
	cli := larkws.NewClient(sb2.AppID(), sb2.AppSecret(), larkws.WithDomain(sb2.URL()), larkws.WithLogLevel(larkcore.LogLevelError),
		larkws.WithEventHandler(dispatcher.NewEventDispatcher("", "")))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	err := cli.Start(ctx)
	var ce *larkws.ClientError
	require.ErrorAs(t, err, &ce, "403 is fatal to the SDK")
	require.Zero(t, sb2.WSConnects())

	wrong := larkws.NewClient(sb2.AppID(), "bad-secret", larkws.WithDomain(sb2.URL()), larkws.WithLogLevel(larkcore.LogLevelError),
		larkws.WithEventHandler(dispatcher.NewEventDispatcher("", "")))
	require.ErrorAs(t, wrong.Start(ctx), &ce, "a wrong app secret is refused at discovery")
}

func TestControlAPI(t *testing.T) {
	t.Parallel()
	sb := start(t, sandbox.Options{ControlToken: "ctl"})
	anon, err := sandbox.NewClient(sb.URL(), "")
	require.NoError(t, err)
	_, err = anon.Info(t.Context())
	var ce *sandbox.ControlError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, http.StatusUnauthorized, ce.Status)

	c, err := sandbox.NewClient(sb.URL(), "ctl")
	require.NoError(t, err)
	info, err := c.Info(t.Context())
	require.NoError(t, err)
	require.Equal(t, sb.DemoUserOpenID(), info.DemoUserOpenID)

	_, err = c.Post(t.Context(), sandbox.PostRequest{ChatID: "oc_x", OpenID: "ou_a", Text: "  "})
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "text", ce.Field)

	page, err := c.Messages(t.Context(), sb.DefaultChatID(), 0, 0, 0)
	require.NoError(t, err)
	require.Empty(t, page.Messages)

	// A long poll returns as soon as the bot posts: well before its 60 s wait is over (the
	// bound has room for a busy machine; a poll that waited its time out would take 60 s).
	cli := client(sb)
	go func() {
		time.Sleep(100 * time.Millisecond) // usually after the poll started; before it, the poll answers at once
		_, _ = cli.Im.V1.Message.Create(context.Background(), larkim.NewCreateMessageReqBuilder().ReceiveIdType("chat_id").
			Body(larkim.NewCreateMessageReqBodyBuilder().ReceiveId(sb.DefaultChatID()).MsgType("text").Content(textContent("late news")).Build()).Build())
	}()
	start := time.Now()
	page2, err := c.Messages(t.Context(), sb.DefaultChatID(), page.Cursor, 0, 60*time.Second)
	require.NoError(t, err)
	require.Less(t, time.Since(start), 30*time.Second)
	require.Len(t, page2.Messages, 1)
	require.Equal(t, "late news", page2.Messages[0].Text)
	require.Equal(t, sandbox.SenderApp, page2.Messages[0].SenderType)

	ans, err := c.Post(t.Context(), sandbox.PostRequest{ChatID: sb.DefaultChatID(), OpenID: "ou_a", Text: "no mention"})
	require.NoError(t, err)
	require.False(t, ans.Delivered)

	_, err = c.Messages(t.Context(), "", 0, 0, time.Hour)
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "wait", ce.Field)
	chats, err := c.Chats(t.Context())
	require.NoError(t, err)
	require.Equal(t, sb.DefaultChatID(), chats[0].ID)
}

func TestCloseStopsDeliveriesAndRun(t *testing.T) {
	t.Parallel()
	sb, err := sandbox.New(sandbox.Options{RetryIntervals: []time.Duration{time.Hour}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- sb.Run(ctx) }()
	d, err := sb.UserSays("oc_p", sandbox.ChatP2P, "ou_a", "nobody listens")
	require.NoError(t, err)
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return")
	}
	res, err := d.Wait(t.Context())
	require.NoError(t, err)
	require.False(t, res.Acked)
	_, err = http.Get(sb.URL() + "/sandbox/v1/info")
	require.Error(t, err, "the listener is closed")
	require.True(t, strings.HasPrefix(sb.URL(), "http://127.0.0.1:"))
}

func TestAddBotToChatDeliversTheEvent(t *testing.T) {
	t.Parallel()
	got := make(chan *larkim.P2ChatMemberBotAddedV1, 1)
	d := dispatcher.NewEventDispatcher("", "").
		OnP2ChatMemberBotAddedV1(func(ctx context.Context, ev *larkim.P2ChatMemberBotAddedV1) error { got <- ev; return nil })
	sb := start(t, sandbox.Options{})
	wsClient(t, sb, d)
	del, err := sb.AddBotToChat("oc_new", sandbox.ChatGroup, "New team", "ou_admin")
	require.NoError(t, err)
	res, err := del.Wait(t.Context())
	require.NoError(t, err)
	require.True(t, res.Acked, res.Err)
	ev := <-got
	require.Equal(t, "oc_new", *ev.Event.ChatId)
	require.Equal(t, "ou_admin", *ev.Event.OperatorId.OpenId)
	require.True(t, sb.Chats()[1].BotIn)
	_, err = sb.AddBotToChat("oc_new", sandbox.ChatP2P, "x", "ou_admin")
	var ie *sandbox.InputError
	require.ErrorAs(t, err, &ie)
}

func TestPatchIsLimitedPerMessage(t *testing.T) {
	t.Parallel()
	clock := newClock()
	sb := start(t, sandbox.Options{Now: clock.Now})
	cli := client(sb)
	id := sendCard(t, cli, sb.DefaultChatID(), card("v0", true))
	patch := func(n int) *larkim.PatchMessageResp {
		resp, err := cli.Im.V1.Message.Patch(t.Context(), larkim.NewPatchMessageReqBuilder().MessageId(id).
			Body(larkim.NewPatchMessageReqBodyBuilder().Content(card(fmt.Sprint("v", n), true)).Build()).Build())
		require.NoError(t, err)
		return resp
	}
	for i := 1; i <= sandbox.PatchPerMessage; i++ {
		require.True(t, patch(i).Success())
	}
	require.Equal(t, http.StatusTooManyRequests, patch(6).StatusCode)
	clock.Add(time.Second)
	require.True(t, patch(7).Success())
	m, _ := sb.Message(id)
	require.Equal(t, "v7", sandbox.RenderCard(m.Content).Title)
}

func TestVerifyCallbackURL(t *testing.T) {
	t.Parallel()
	d := dispatcher.NewEventDispatcher(testToken, testKey)
	bot := httptest.NewServer(http.HandlerFunc(httpserverext.NewEventHandlerFunc(d, larkevent.WithLogLevel(larkcore.LogLevelError))))
	t.Cleanup(bot.Close)
	sb := start(t, sandbox.Options{})
	require.NoError(t, sb.VerifyCallbackURL(t.Context(), bot.URL))

	wrong := start(t, sandbox.Options{VerificationToken: "other"})
	require.ErrorContains(t, wrong.VerifyCallbackURL(t.Context(), bot.URL), "answered 500")
}
