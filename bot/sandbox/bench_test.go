package sandbox_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	larkcore "github.com/larksuite/oapi-sdk-go/v3/core"
	"github.com/larksuite/oapi-sdk-go/v3/core/httpserverext"
	larkevent "github.com/larksuite/oapi-sdk-go/v3/event"
	"github.com/larksuite/oapi-sdk-go/v3/event/dispatcher"
	larkim "github.com/larksuite/oapi-sdk-go/v3/service/im/v1"
	larkws "github.com/larksuite/oapi-sdk-go/v3/ws"
	"github.com/stretchr/testify/require"

	"loopx/bot/sandbox"
)

func benchSandbox(b *testing.B, opts sandbox.Options) *sandbox.Sandbox {
	b.Helper()
	opts.ChatRateLimit, opts.AppRateLimit = -1, -1
	opts.VerificationToken, opts.EncryptKey = testToken, testKey
	sb, err := sandbox.New(opts)
	require.NoError(b, err)
	sb.Start(context.Background())
	b.Cleanup(sb.Close)
	return sb
}

// BenchmarkCreateMessage: one SDK Message.Create round trip (token cached).
func BenchmarkCreateMessage(b *testing.B) { benchCreate(b, sandbox.Options{}) }

// BenchmarkCreateMessageKept: the same with the model kept in a state directory (one line
// appended per message, compaction included).
func BenchmarkCreateMessageKept(b *testing.B) { benchCreate(b, sandbox.Options{StateDir: b.TempDir()}) }

func benchCreate(b *testing.B, opts sandbox.Options) {
	sb := benchSandbox(b, opts)
	cli := client(sb)
	req := larkim.NewCreateMessageReqBuilder().ReceiveIdType("chat_id").Body(larkim.NewCreateMessageReqBodyBuilder().
		ReceiveId(sb.DefaultChatID()).MsgType("text").Content(textContent("bench")).Build()).Build()
	for b.Loop() {
		resp, err := cli.Im.V1.Message.Create(b.Context(), req)
		if err != nil || !resp.Success() {
			b.Fatalf("create: %v %v", err, resp)
		}
	}
}

// BenchmarkHTTPEventPushAck: one signed, encrypted push answered by the SDK's HTTP handler.
func BenchmarkHTTPEventPushAck(b *testing.B) {
	d := dispatcher.NewEventDispatcher(testToken, testKey).
		OnP2MessageReceiveV1(func(ctx context.Context, ev *larkim.P2MessageReceiveV1) error { return nil })
	bot := httptest.NewServer(http.HandlerFunc(httpserverext.NewEventHandlerFunc(d, larkevent.WithLogLevel(larkcore.LogLevelError))))
	b.Cleanup(bot.Close)
	sb := benchSandbox(b, sandbox.Options{EventURL: bot.URL})
	for b.Loop() {
		del, err := sb.UserSays("oc_b", sandbox.ChatP2P, "ou_b", "hi")
		require.NoError(b, err)
		res, err := del.Wait(b.Context())
		if err != nil || !res.Acked {
			b.Fatalf("push: %v %+v", err, res)
		}
	}
}

// BenchmarkWSEventPushAck: one pbbp2 frame pushed to the SDK's WS client and acked.
func BenchmarkWSEventPushAck(b *testing.B) {
	sb := benchSandbox(b, sandbox.Options{})
	d := dispatcher.NewEventDispatcher("", "").
		OnP2MessageReceiveV1(func(ctx context.Context, ev *larkim.P2MessageReceiveV1) error { return nil })
	cli := larkws.NewClient(sb.AppID(), sb.AppSecret(), larkws.WithDomain(sb.URL()), larkws.WithEventHandler(d),
		larkws.WithLogLevel(larkcore.LogLevelError))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = cli.Start(ctx) }()
	b.Cleanup(func() { cancel(); <-done })
	for len(sb.WSConnections()) == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	for b.Loop() {
		del, err := sb.UserSays("oc_b", sandbox.ChatP2P, "ou_b", "hi")
		require.NoError(b, err)
		res, err := del.Wait(b.Context())
		if err != nil || !res.Acked {
			b.Fatalf("push: %v %+v", err, res)
		}
	}
}
