package bot_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loopx/bot"
	"loopx/bot/sandbox"
	"loopx/server/larkstore"
)

// withEventID returns an event payload with another event id: Lark redelivering the same
// message under a new event.
func withEventID(t *testing.T, payload []byte, id string) []byte {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(payload, &m))
	m["header"].(map[string]any)["event_id"] = id
	b, err := json.Marshal(m)
	require.NoError(t, err)
	return b
}

// A validly signed message event that can never succeed (no chat_id) is acknowledged,
// counted and logged, not answered 500 for Lark to redeliver for hours.
func TestUnusableMessageEventIsAcknowledged(t *testing.T) {
	t.Parallel()
	e := setup(t, bundleOpts{transport: bot.TransportHTTP, realRouter: true})
	payload := []byte(`{"schema":"2.0","header":{"event_id":"ev_nochat","token":"` + testToken + `","create_time":"1","event_type":"im.message.receive_v1","tenant_key":"t","app_id":"` + e.sb.AppID() + `"},` +
		`"event":{"sender":{"sender_id":{"open_id":"ou_owner"},"sender_type":"user"},"message":{"message_id":"om_nochat","chat_id":"","chat_type":"group","message_type":"text","content":"{\"text\":\"hi\"}"}}}`)
	status, body, err := e.sb.PushHTTP(t.Context(), e.srvURL+"/lark/events", payload)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status, "%s", body)
	require.Equal(t, 1.0, e.counter("loopx_lark_events_rejected_total", map[string]string{"transport": "http", "reason": "unusable"}))
	require.Zero(t, e.count(`SELECT count(*) FROM lark_event`))
}

// HTTP callbacks outside the timestamp window are refused as replays and counted; oversized
// ones are 413.
func TestStaleAndOversizedCallbacksAreRefused(t *testing.T) {
	t.Parallel()
	e := setup(t, bundleOpts{transport: bot.TransportHTTP})
	// A second sandbox whose clock is two hours behind signs its pushes with that time.
	old, err := sandbox.New(sandbox.Options{VerificationToken: testToken, EncryptKey: testKey, AppID: e.sb.AppID(),
		AppSecret: e.sb.AppSecret(), Now: func() time.Time { return time.Now().Add(-2 * time.Hour) }})
	require.NoError(t, err)
	old.Start(t.Context())
	t.Cleanup(old.Close)
	payload := []byte(`{"schema":"2.0","header":{"event_id":"ev_old","token":"` + testToken + `","event_type":"im.message.receive_v1"},` +
		`"event":{"sender":{"sender_id":{"open_id":"ou_owner"},"sender_type":"user"},"message":{"message_id":"om_old","chat_id":"oc_1","chat_type":"p2p","message_type":"text","content":"{\"text\":\"hi\"}"}}}`)
	status, body, err := old.PushHTTP(t.Context(), e.srvURL+"/lark/events", payload)
	require.NoError(t, err)
	require.Equal(t, http.StatusUnauthorized, status, "%s", body)
	require.Equal(t, 1.0, e.counter("loopx_lark_events_rejected_total", map[string]string{"transport": "http", "reason": "stale"}))
	require.Zero(t, e.rt.calls.Load())
	// The same event stamped now passes.
	status, _, err = e.sb.PushHTTP(t.Context(), e.srvURL+"/lark/events", payload)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status)

	big := bytes.Repeat([]byte("x"), 1<<20+10)
	resp, err := http.Post(e.srvURL+"/lark/events", "application/json", bytes.NewReader(big))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
}

// Lark may redeliver a message under a new event id; the message id makes it a repeat: one
// inbox item, one receipt, one command reply.
func TestMessageRedeliveredUnderNewEventIDHasOneEffect(t *testing.T) {
	t.Parallel()
	e := setup(t, bundleOpts{transport: bot.TransportHTTP, realRouter: true})
	e.startSender("s1", bot.DefaultRateLimits)
	chat := e.seedGoal()
	for _, text := range []string{"please refresh the changelog", "/status"} {
		d, err := e.sb.UserSays(chat, sandbox.ChatGroup, owner, text, sandbox.MentionBot())
		require.NoError(t, err)
		require.True(t, waitDelivery(t, d).Acked)
		before := e.count(`SELECT count(*) FROM outbox`)
		items := e.count(`SELECT count(*) FROM inbox_item`)
		for i, id := range []string{"ev_again_1", "ev_again_2"} {
			status, body, err := e.sb.PushHTTP(t.Context(), e.srvURL+"/lark/events", withEventID(t, d.Payload, id+text[:1]))
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, status, "%d: %s", i, body)
		}
		require.Equal(t, before, e.count(`SELECT count(*) FROM outbox`), "%q: no second reply or receipt", text)
		require.Equal(t, items, e.count(`SELECT count(*) FROM inbox_item`), "%q: no second inbox item", text)
	}
	require.Equal(t, 4.0, e.counter("loopx_lark_events_duplicate_total", map[string]string{"transport": "http", "kind": "message"}))
}

// blipOutbox loses the database after Lark accepted a send, before the row is marked sent:
// the claim lapses meanwhile and the row is tried again. The blip lasts until the row has
// been claimed again after its claim lapsed (a state, not a span of time, so a slow machine
// cannot end it before the retry).
type blipOutbox struct {
	larkstore.Outbox
	row       int64 // the row whose recording is lost until it is reclaimed
	reclaimed atomic.Bool
	blips     atomic.Int32
}

func (o *blipOutbox) Claim(ctx context.Context, lane bot.Lane, owner string, limit int, lease time.Duration) ([]bot.OutboxMessage, error) {
	claims, err := o.Outbox.Claim(ctx, lane, owner, limit, lease)
	for _, c := range claims {
		if c.ID == o.row && c.Reclaimed {
			o.reclaimed.Store(true)
		}
	}
	return claims, err
}

func (o *blipOutbox) MarkSent(ctx context.Context, id int64, larkMessageID string) error {
	if id == o.row && !o.reclaimed.Load() {
		o.blips.Add(1)
		return errors.New("database blip: connection reset")
	}
	return o.Outbox.MarkSent(ctx, id, larkMessageID)
}

// A reaction carries no Lark uuid: after a blip between adding it and recording it, the
// retry looks first and adds nothing.
func TestReactionNotDoubledAfterDatabaseBlip(t *testing.T) {
	t.Parallel()
	e := setup(t, bundleOpts{transport: bot.TransportHTTP})
	chat := e.sb.DefaultChatID()
	d := e.ownerSays("hello")
	var id int64
	require.NoError(t, e.st.DB().QueryRow(t.Context(),
		`INSERT INTO outbox (uuid, kind, receive_id, target_message, content) VALUES ('r-1', 'reaction', $1, $2, 'OK') RETURNING id`,
		chat, d.MessageID).Scan(&id))
	ob := &blipOutbox{Outbox: larkstore.Outbox{Store: e.st}, row: id}
	s, err := bot.NewSender(bot.NewClient(e.cfg, 5*time.Second), ob, larkstore.Limiter{Store: e.st},
		bot.SenderOptions{Owner: "blip", Logger: quietLogger(), Lease: 300 * time.Millisecond, Poll: 100 * time.Millisecond})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	require.Eventually(t, func() bool {
		return e.count(`SELECT count(*) FROM outbox WHERE id = $1 AND state = 'sent'`, id) == 1
	}, settle, 20*time.Millisecond, "the reaction row is recorded sent after the blip")
	cancel()
	require.NoError(t, <-done)
	m, ok := e.sb.Message(d.MessageID)
	require.True(t, ok)
	require.Len(t, m.Reactions, 1, "one reaction, not two")
	require.Greater(t, ob.blips.Load(), int32(1), "the blip outlasted the claim: the row was tried again")
}

// A gateway 5xx whose JSON body says code 0 is a failure to retry, not a send: the row must
// not be marked sent until Lark stored the message.
func TestGateway5xxWithCodeZeroIsRetried(t *testing.T) {
	t.Parallel()
	e := setup(t, bundleOpts{transport: bot.TransportHTTP})
	e.sb.FailNext(sandbox.RouteCreate, 5, sandbox.Fail{HTTP: http.StatusServiceUnavailable, Msg: "upstream busy"})
	chat := e.sb.DefaultChatID()
	id := e.insertOutbox("text", chat, "after the storm", "u-5xx")
	e.startSender("s1", bot.DefaultRateLimits)
	require.Eventually(t, func() bool {
		return e.count(`SELECT count(*) FROM outbox WHERE id = $1 AND state = 'sent'`, id) == 1
	}, settle, 20*time.Millisecond)
	var texts []string
	for _, m := range e.sb.Chat(chat).BotMessages() {
		texts = append(texts, m.Text())
	}
	require.Equal(t, []string{"after the storm"}, texts, "the message reached the chat once")
}

// Validly signed callbacks whose fields have the wrong types (a fuzzer's, never Lark's) or
// whose ids are absurdly long can never be handled: each is acknowledged 200, logged and
// counted, never answered 5xx for Lark to redeliver, and nothing is written.
func TestWrongTypedSignedCallbacksAreAcknowledged(t *testing.T) {
	t.Parallel()
	e := setup(t, bundleOpts{transport: bot.TransportHTTP, realRouter: true})
	head := func(id, typ string) string {
		return `"schema":"2.0","header":{"event_id":"` + id + `","token":"` + testToken + `","create_time":"1","event_type":"` + typ + `","tenant_key":"t","app_id":"` + e.sb.AppID() + `"}`
	}
	msg := func(id, message string) string {
		return `{` + head(id, "im.message.receive_v1") + `,"event":{"sender":{"sender_id":{"open_id":"ou_owner"},"sender_type":"user"},"message":` + message + `}}`
	}
	card := func(id, event string) string {
		return `{` + head(id, "card.action.trigger") + `,"event":` + event + `}`
	}
	long := strings.Repeat("c", 300000)
	cases := map[string]struct{ body, kind string }{
		"mentions a string":     {msg("ev1", `{"message_id":"om_1","chat_id":"oc_1","chat_type":"group","message_type":"text","content":"{\"text\":\"hi\"}","mentions":"x"}`), "malformed"},
		"message a string":      {msg("ev2", `"str"`), "malformed"},
		"chat_id a number":      {msg("ev3", `{"message_id":"om_3","chat_id":7,"chat_type":"group","message_type":"text","content":"{}"}`), "malformed"},
		"a huge chat_id":        {msg("ev4", `{"message_id":"om_4","chat_id":"`+long+`","chat_type":"p2p","message_type":"text","content":"{\"text\":\"hi\"}"}`), "unusable"},
		"header token a number": {`{"schema":"2.0","header":{"event_id":"ev5","token":5,"event_type":"im.message.receive_v1"},"event":{}}`, "malformed"},
		"operator a string":     {card("ev6", `{"operator":"x","token":"t","action":{"value":{}},"context":{"open_chat_id":"oc_1"}}`), "malformed"},
		"context a string":      {card("ev7", `{"operator":{"open_id":"ou_owner"},"token":"t","context":"x"}`), "malformed"},
		"action.value a string": {card("ev8", `{"operator":{"open_id":"ou_owner"},"token":"t","action":{"value":"x"}}`), "malformed"},
		"card token a number":   {card("ev9", `{"operator":{"open_id":"ou_owner"},"token":123,"action":{"value":{}}}`), "malformed"},
	}
	want := map[string]float64{}
	for name, c := range cases {
		path := "/lark/events"
		if strings.Contains(c.body, "card.action.trigger") {
			path = "/lark/cards"
		}
		status, body, err := e.sb.PushHTTP(t.Context(), e.srvURL+path, []byte(c.body))
		require.NoError(t, err, name)
		require.Equal(t, http.StatusOK, status, "%s: %s", name, body)
		if path == "/lark/cards" {
			// The clicker reads why in their client's language: nothing changed.
			var ans struct{ Toast sandbox.Toast }
			require.NoError(t, json.Unmarshal(body, &ans), name)
			require.Equal(t, "This button could not be read; nothing was changed.", ans.Toast.Content, name)
			require.Equal(t, "无法读取这个按钮，没有做任何改动。", ans.Toast.I18n["zh_cn"], name)
			require.Equal(t, ans.Toast.Content, ans.Toast.I18n["en_us"], name)
		}
		want[c.kind]++
	}
	for kind, n := range want {
		require.Equal(t, n, e.counter("loopx_lark_events_rejected_total", map[string]string{"transport": "http", "reason": kind}), kind)
	}
	require.Zero(t, e.count(`SELECT count(*) FROM lark_event`))
	require.Zero(t, e.count(`SELECT count(*) FROM outbox`))
}

// The same message events over the long connection: acknowledged (200), logged and counted,
// nothing written. (A card callback or an envelope of the wrong shape over the long
// connection is decoded by the SDK's dispatcher before LoopX sees it, and answered 500 by the
// SDK with an error line in the log; only Lark writes to the long connection, and Lark never
// pushes a card callback again.)
func TestWrongTypedEventsOverTheLongConnectionAreAcknowledged(t *testing.T) {
	t.Parallel()
	e := setup(t, bundleOpts{transport: bot.TransportWS, realRouter: true})
	msg := func(id, message string) string {
		return `{"schema":"2.0","header":{"event_id":"` + id + `","token":"` + testToken + `","create_time":"1","event_type":"im.message.receive_v1","tenant_key":"t","app_id":"` +
			e.sb.AppID() + `"},"event":{"sender":{"sender_id":{"open_id":"ou_owner"},"sender_type":"user"},"message":` + message + `}}`
	}
	cases := map[string]struct{ body, kind string }{
		"mentions a string": {msg("ev1", `{"message_id":"om_1","chat_id":"oc_1","chat_type":"group","message_type":"text","content":"{\"text\":\"hi\"}","mentions":"x"}`), "malformed"},
		"message a string":  {msg("ev2", `"str"`), "malformed"},
		"chat_id a number":  {msg("ev3", `{"message_id":"om_3","chat_id":7,"chat_type":"group","message_type":"text","content":"{}"}`), "malformed"},
		"a huge chat_id": {msg("ev4", `{"message_id":"om_4","chat_id":"`+strings.Repeat("c", 300000)+
			`","chat_type":"p2p","message_type":"text","content":"{\"text\":\"hi\"}"}`), "unusable"},
	}
	want := map[string]float64{}
	for name, c := range cases {
		ack, err := e.sb.PushWS(t.Context(), "", []byte(c.body))
		require.NoError(t, err, name)
		require.Equal(t, http.StatusOK, ack.Code, name)
		want[c.kind]++
	}
	for kind, n := range want {
		require.Equal(t, n, e.counter("loopx_lark_events_rejected_total", map[string]string{"transport": "ws", "reason": kind}), kind)
	}
	require.Zero(t, e.count(`SELECT count(*) FROM lark_event`))
	require.Zero(t, e.count(`SELECT count(*) FROM outbox`))
}
