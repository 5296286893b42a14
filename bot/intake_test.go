package bot_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"loopx/bot"
	"loopx/bot/sandbox"
)

func TestConfigValidateNamesTheBadSetting(t *testing.T) {
	t.Parallel()
	valid := func(c bot.Config) error { return c.WithDefaults().Validate() }

	err := valid(bot.Config{})
	require.ErrorContains(t, err, "LARK_APP_ID")
	require.ErrorContains(t, err, "LARK_APP_SECRET")

	require.ErrorContains(t, valid(bot.Config{AppID: "cli_x", AppSecret: "s", Transport: "http"}), "LARK_VERIFICATION_TOKEN")
	require.ErrorContains(t, valid(bot.Config{AppID: "cli_x", AppSecret: "s", Transport: "carrier-pigeon"}), "LARK_TRANSPORT")
	require.ErrorContains(t, valid(bot.Config{AppID: "cli_x", AppSecret: "s", BaseURL: "open.feishu.cn"}), "LARK_BASE_URL")

	c := bot.Config{AppID: "cli_x", AppSecret: "s"}.WithDefaults()
	require.NoError(t, c.Validate())
	require.Equal(t, bot.TransportWS, c.Transport)
	require.Equal(t, "https://open.feishu.cn", c.BaseURL)
}

// A mention in a group → one effect and one reply; the same event again → still one.
func TestMessageHandledOnceOverBothTransports(t *testing.T) {
	t.Parallel()
	for _, tr := range []string{bot.TransportHTTP, bot.TransportWS} {
		t.Run(tr, func(t *testing.T) {
			t.Parallel()
			e := setup(t, bundleOpts{transport: tr})
			e.startSender("s1", bot.DefaultRateLimits)
			chat := e.sb.DefaultChatID()

			d, err := e.sb.UserSays(chat, sandbox.ChatGroup, owner, "#demo deploy svc-a", sandbox.MentionBot())
			require.NoError(t, err)
			res := waitDelivery(t, d)
			require.True(t, res.Acked, res.Err)
			require.Equal(t, 1, res.Attempts)

			require.Equal(t, 1, e.count(`SELECT count(*) FROM unrouted WHERE message_id = $1`, d.MessageID))
			var text, sender string
			require.NoError(t, e.st.DB().QueryRow(t.Context(), `SELECT text, sender FROM unrouted WHERE message_id = $1`, d.MessageID).Scan(&text, &sender))
			require.Equal(t, "@_user_1 #demo deploy svc-a", text)
			require.Equal(t, owner, sender)

			require.Eventually(t, func() bool { return len(e.sb.Chat(chat).BotMessages()) == 1 }, settle, 10*time.Millisecond)

			again := waitDelivery(t, e.sb.Redeliver(d))
			require.True(t, again.Acked, again.Err)
			require.Equal(t, 1, e.count(`SELECT count(*) FROM unrouted WHERE message_id = $1`, d.MessageID))
			e.drained() // a second reply, if the redelivery queued one, has been sent by now
			msgs := e.sb.Chat(chat).BotMessages()
			require.Len(t, msgs, 1, "one reply only")
			require.Equal(t, d.MessageID, msgs[0].ParentID, "the reply answers the user's message")
			require.Equal(t, "reply-"+d.MessageID, msgs[0].UUID)
			require.Equal(t, "got: @_user_1 #demo deploy svc-a", msgs[0].Text())
		})
	}
}

// The same event reaching two replicas (two intakes on one database) has one effect.
func TestSameEventOnTwoReplicasHasOneEffect(t *testing.T) {
	t.Parallel()
	e := setup(t, bundleOpts{transport: bot.TransportHTTP})
	_, second := e.startIntake(bot.TransportHTTP)
	e.startSender("s1", bot.DefaultRateLimits)
	e.startSender("s2", bot.DefaultRateLimits)
	chat := e.sb.DefaultChatID()

	d, err := e.sb.UserSays(chat, sandbox.ChatGroup, owner, "hello", sandbox.MentionBot())
	require.NoError(t, err)
	require.True(t, waitDelivery(t, d).Acked)
	// Lark pushes it again, this time to the other replica, concurrently with a third push.
	results := make(chan int, 2)
	for _, u := range []string{second, e.srvURL} {
		go func() {
			status, _, err := e.sb.PushHTTP(t.Context(), u+"/lark/events", d.Payload)
			if err != nil {
				status = -1
			}
			results <- status
		}()
	}
	require.Equal(t, http.StatusOK, <-results)
	require.Equal(t, http.StatusOK, <-results)
	require.Equal(t, 1, e.count(`SELECT count(*) FROM unrouted WHERE message_id = $1`, d.MessageID))
	require.Equal(t, 1, e.count(`SELECT count(*) FROM outbox WHERE reply_to = $1`, d.MessageID))
	require.Eventually(t, func() bool { return len(e.sb.Chat(chat).BotMessages()) == 1 }, settle, 10*time.Millisecond)
	e.drained()
	require.Len(t, e.sb.Chat(chat).BotMessages(), 1)
}

// A handler error is answered so that Lark redelivers, and the redelivery is handled once.
func TestHandlerErrorMakesLarkRedeliver(t *testing.T) {
	t.Parallel()
	for _, tr := range []string{bot.TransportHTTP, bot.TransportWS} {
		t.Run(tr, func(t *testing.T) {
			t.Parallel()
			e := setup(t, bundleOpts{transport: tr})
			e.rt.failNext.Store(1)
			d, err := e.sb.UserSays(e.sb.DefaultChatID(), sandbox.ChatGroup, owner, "retry me", sandbox.MentionBot())
			require.NoError(t, err)
			res := waitDelivery(t, d)
			require.True(t, res.Acked, res.Err)
			require.Equal(t, 2, res.Attempts, "the failed push was redelivered")
			require.Equal(t, 1, e.count(`SELECT count(*) FROM unrouted WHERE message_id = $1`, d.MessageID))
		})
	}
}

func TestForgedCallbacksAreRejectedAndStoreNothing(t *testing.T) {
	t.Parallel()
	e := setup(t, bundleOpts{transport: bot.TransportHTTP})
	tok := setup(t, bundleOpts{transport: bot.TransportHTTP, noKey: true})

	payload := func(token string) []byte {
		b, _ := json.Marshal(map[string]any{"schema": "2.0",
			"header": map[string]any{"event_id": "ev_forged_" + token, "event_type": "im.message.receive_v1", "token": token},
			"event": map[string]any{"sender": map[string]any{"sender_id": map[string]any{"open_id": "ou_evil"}, "sender_type": "user"},
				"message": map[string]any{"message_id": "om_forged", "chat_id": "oc_x", "chat_type": "group",
					"message_type": "text", "content": `{"text":"pwn"}`}}})
		return b
	}
	post := func(url string, body []byte, hdr map[string]string) int {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, bytes.NewReader(body))
		require.NoError(t, err)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}

	// Encrypt key configured: a correctly encrypted body with a wrong signature.
	enc, err := sandbox.Encrypt(payload(testToken), testKey)
	require.NoError(t, err)
	body, _ := json.Marshal(map[string]string{"encrypt": enc})
	ts := time.Now().Unix()
	require.Equal(t, http.StatusUnauthorized, post(e.srvURL+"/lark/events", body, map[string]string{
		"X-Lark-Request-Timestamp": itoa(ts), "X-Lark-Request-Nonce": "n", "X-Lark-Signature": "deadbeef"}))
	// ... no signature at all, or plaintext instead of the encrypted envelope.
	require.Equal(t, http.StatusUnauthorized, post(e.srvURL+"/lark/events", body, nil))
	require.Equal(t, http.StatusUnauthorized, post(e.srvURL+"/lark/cards", payload(testToken), nil))
	// ... signed with the right key but encrypted with another.
	enc2, err := sandbox.Encrypt(payload(testToken), "other-key")
	require.NoError(t, err)
	body2, _ := json.Marshal(map[string]string{"encrypt": enc2})
	require.Equal(t, http.StatusUnauthorized, post(e.srvURL+"/lark/events", body2, map[string]string{
		"X-Lark-Request-Timestamp": itoa(ts), "X-Lark-Request-Nonce": "n",
		"X-Lark-Signature": sandbox.Sign(itoa(ts), "n", testKey, body2)}))

	// ... signed and encrypted with the right key, but what it carries is not JSON (refused: a
	// wrong key decrypts to that), or is JSON of the wrong shape (Lark signed it: acknowledged
	// and counted as malformed, never redelivered).
	signedPost := func(plain []byte) int {
		enc, err := sandbox.Encrypt(plain, testKey)
		require.NoError(t, err)
		body, _ := json.Marshal(map[string]string{"encrypt": enc})
		return post(e.srvURL+"/lark/events", body, map[string]string{
			"X-Lark-Request-Timestamp": itoa(ts), "X-Lark-Request-Nonce": "n",
			"X-Lark-Signature": sandbox.Sign(itoa(ts), "n", testKey, body)})
	}
	require.Equal(t, http.StatusUnauthorized, signedPost([]byte(`{"header": {"event_id": "ev_cut`)))
	require.Equal(t, http.StatusOK, signedPost([]byte(`{"header": "not an object"}`)))
	for reason, n := range map[string]float64{"bad_signature": 2, "not_encrypted": 1, "bad_encryption": 2, "malformed": 1} {
		require.Equal(t, n, e.counter("loopx_lark_events_rejected_total", map[string]string{"transport": bot.TransportHTTP, "reason": reason}), reason)
	}

	// Token only: a wrong verification token.
	require.Equal(t, http.StatusUnauthorized, post(tok.srvURL+"/lark/events", payload("WRONG-TOKEN"), nil))
	require.Equal(t, http.StatusUnauthorized, post(tok.srvURL+"/lark/events", payload(""), nil))
	require.Equal(t, http.StatusUnauthorized, post(tok.srvURL+"/lark/events", []byte(`{"header":`), nil))
	require.Equal(t, 2.0, tok.counter("loopx_lark_events_rejected_total", map[string]string{"transport": bot.TransportHTTP, "reason": "bad_token"}))
	require.Equal(t, 1.0, tok.counter("loopx_lark_events_rejected_total", map[string]string{"transport": bot.TransportHTTP, "reason": "malformed"}))

	for _, x := range []*testBundle{e, tok} {
		require.Zero(t, x.count(`SELECT count(*) FROM lark_event`))
		require.Zero(t, x.count(`SELECT count(*) FROM unrouted`))
		require.Zero(t, x.rt.calls.Load(), "the router never saw a forged event")
	}

	// The genuine article still passes on the token-only intake.
	status := post(tok.srvURL+"/lark/events", payload(testToken), nil)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, 1, tok.count(`SELECT count(*) FROM unrouted`))
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestURLVerificationChallenge(t *testing.T) {
	t.Parallel()
	for _, noKey := range []bool{false, true} {
		e := setup(t, bundleOpts{transport: bot.TransportHTTP, noKey: noKey})
		good, _ := json.Marshal(map[string]string{"type": "url_verification", "challenge": "ch-42", "token": testToken})
		status, body, err := e.sb.PushHTTP(t.Context(), e.srvURL+"/lark/events", good)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, status)
		require.JSONEq(t, `{"challenge":"ch-42"}`, string(body))

		bad, _ := json.Marshal(map[string]string{"type": "url_verification", "challenge": "ch-42", "token": "nope"})
		status, _, err = e.sb.PushHTTP(t.Context(), e.srvURL+"/lark/events", bad)
		require.NoError(t, err)
		require.Equal(t, http.StatusUnauthorized, status)
	}
}

func TestUnknownEventIsAcknowledged(t *testing.T) {
	t.Parallel()
	for _, tr := range []string{bot.TransportHTTP, bot.TransportWS} {
		t.Run(tr, func(t *testing.T) {
			t.Parallel()
			e := setup(t, bundleOpts{transport: tr})
			for _, typ := range []string{"im.chat.updated_v1", "vc.meeting.all_meeting_started_v1"} {
				d, err := e.sb.Deliver(typ, map[string]any{"chat_id": "oc_1"})
				require.NoError(t, err)
				res := waitDelivery(t, d)
				if tr == bot.TransportWS && typ == "vc.meeting.all_meeting_started_v1" {
					// The SDK acks types nobody registered with 500 over WS; only subscribed
					// types reach an app, and the common ones are registered.
					continue
				}
				require.True(t, res.Acked, "%s: %s", typ, res.Err)
				require.Equal(t, 1, res.Attempts)
			}
			require.Zero(t, e.rt.calls.Load())
		})
	}
}

// Owner clicks Approve → gate approved, card updated in place; a stranger → refusal, no change.
func TestGateCardClickOverBothTransports(t *testing.T) {
	t.Parallel()
	for _, tr := range []string{bot.TransportHTTP, bot.TransportWS} {
		t.Run(tr, func(t *testing.T) {
			t.Parallel()
			e := setup(t, bundleOpts{transport: tr})
			e.startSender("s1", bot.DefaultRateLimits)
			ctx := t.Context()
			chat := e.sb.DefaultChatID()
			_, err := e.st.DB().Exec(ctx, `INSERT INTO goal (id, owners) VALUES ('demo', $1)`, []string{owner})
			require.NoError(t, err)
			var gate int64
			require.NoError(t, e.st.DB().QueryRow(ctx, `INSERT INTO gate (goal_id, question) VALUES ('demo', 'Ship it?') RETURNING id`).Scan(&gate))
			card := `{"schema":"2.0","body":{"elements":[{"tag":"markdown","content":"Ship it?"},{"tag":"button","text":{"tag":"plain_text","content":"Approve"},"behaviors":[{"type":"callback","value":{"gate":"` + itoa(gate) + `"}}]}]}}`
			e.insertOutbox("card", chat, card, "gate-card-1")
			var cardMsg sandbox.Message
			require.Eventually(t, func() bool {
				ms := e.sb.Chat(chat).BotMessages()
				if len(ms) == 1 {
					cardMsg = ms[0]
					return true
				}
				return false
			}, settle, 10*time.Millisecond)
			require.Equal(t, "interactive", cardMsg.MsgType)
			require.Contains(t, cardMsg.Content, `"update_multi":true`, "cards are sent patchable")
			require.Eventually(t, func() bool {
				return e.count(`SELECT count(*) FROM outbox WHERE uuid = 'gate-card-1' AND state = 'sent' AND lark_message_id = $1`, cardMsg.ID) == 1
			}, settle, 10*time.Millisecond, "the Lark message id is recorded on the row")

			// A stranger's click: refused with a toast, nothing changes.
			res, err := e.sb.ClickButton(ctx, cardMsg.ID, stranger, map[string]any{"gate": itoa(gate)})
			require.NoError(t, err)
			require.Equal(t, "error", res.Toast.Type)
			require.Contains(t, res.Toast.Content, "Only an owner")
			require.False(t, res.CardUpdated)
			require.Equal(t, 1, e.count(`SELECT count(*) FROM gate WHERE id = $1 AND status = 'open'`, gate))
			require.Equal(t, 1, e.count(`SELECT count(*) FROM audit WHERE actor = $1 AND NOT allowed`, stranger))
			m, _ := e.sb.Message(cardMsg.ID)
			require.Equal(t, cardMsg.Content, m.Content)

			// The owner approves: gate approved, card replaced in place.
			res, err = e.sb.ClickButton(ctx, cardMsg.ID, owner, map[string]any{"gate": itoa(gate)})
			require.NoError(t, err)
			require.Equal(t, "success", res.Toast.Type)
			require.True(t, res.CardUpdated)
			require.Equal(t, 1, e.count(`SELECT count(*) FROM gate WHERE id = $1 AND status = 'approved' AND answered_by = $2`, gate, owner))
			m, _ = e.sb.Message(cardMsg.ID)
			require.Contains(t, m.Content, "Approved by "+owner)
			require.Len(t, e.sb.Chat(chat).BotMessages(), 1, "updated in place, no new message")
		})
	}
}

func TestCardAnswerIsNeverNil(t *testing.T) {
	t.Parallel()
	e := setup(t, bundleOpts{transport: bot.TransportHTTP})
	e.startSender("s1", bot.DefaultRateLimits)
	chat := e.sb.DefaultChatID()
	e.insertOutbox("card", chat, `{"schema":"2.0","body":{"elements":[]}}`, "card-nil")
	require.Eventually(t, func() bool { return len(e.sb.Chat(chat).BotMessages()) == 1 }, settle, 10*time.Millisecond)
	msg := e.sb.Chat(chat).BotMessages()[0]
	// The router fails (no such gate): the user still gets a toast, not null.
	res, err := e.sb.ClickButton(context.Background(), msg.ID, owner, map[string]any{"gate": "999"})
	require.NoError(t, err)
	require.NotEqual(t, "null", strings.TrimSpace(string(res.Answer)))
	require.Equal(t, "error", res.Toast.Type)
	require.Contains(t, res.Toast.Content, "nothing changed")
	// The bot cannot tell the clicker's language: Lark shows the toast in the client's.
	require.Equal(t, map[string]string{"en_us": "LoopX could not record this click (nothing changed). Please try again.",
		"zh_cn": "LoopX 没能记录这次点击（没有做任何改动），请再试一次。"}, res.Toast.I18n)
}

// The intake needs the words of the toasts it answers alone with.
func TestIntakeNeedsItsToasts(t *testing.T) {
	t.Parallel()
	cfg := bot.Config{AppID: "cli_toasts", AppSecret: "s", VerificationToken: testToken, BaseURL: "http://127.0.0.1:1", Transport: bot.TransportHTTP}
	_, err := bot.NewIntake(cfg, noopHandler{}, bot.IntakeOptions{})
	require.ErrorContains(t, err, "toast")
	_, err = bot.NewIntake(cfg, noopHandler{}, bot.IntakeOptions{ClickFailures: clickFailures(t)})
	require.NoError(t, err)
}

// A dropped long connection reconnects, and an event redelivered after it is handled once.
func TestWSDropReconnectsAndRedeliveryHandledOnce(t *testing.T) {
	t.Parallel()
	e := setup(t, bundleOpts{transport: bot.TransportWS})
	chat := e.sb.DefaultChatID()
	d := e.ownerSays("before drop")
	connects := e.sb.WSConnects()

	require.Equal(t, 1, e.sb.DropConnections())
	require.Eventually(t, func() bool { return e.sb.WSConnects() > connects && len(e.sb.WSConnections()) == 1 },
		settle, 10*time.Millisecond, "the SDK did not reconnect")
	require.Eventually(t, e.intake.Connected, settle, 10*time.Millisecond)

	again := waitDelivery(t, e.sb.Redeliver(d))
	require.True(t, again.Acked, again.Err)
	require.Equal(t, 1, e.count(`SELECT count(*) FROM unrouted WHERE message_id = $1`, d.MessageID))
	d2, err := e.sb.UserSays(chat, sandbox.ChatGroup, owner, "after drop", sandbox.MentionBot())
	require.NoError(t, err)
	require.True(t, waitDelivery(t, d2).Acked)
	require.Equal(t, 2, e.count(`SELECT count(*) FROM unrouted`))
}

func TestPostMessageFlattenedToText(t *testing.T) {
	t.Parallel()
	e := setup(t, bundleOpts{transport: bot.TransportHTTP})
	post := `{"title":"Plan","content":[[{"tag":"at","user_id":"@_user_1","user_name":"LoopX"},{"tag":"text","text":" #demo ship "},{"tag":"a","text":"docs","href":"https://x"}],[{"tag":"text","text":"second line"}]]}`
	d, err := e.sb.Deliver("im.message.receive_v1", map[string]any{
		"sender": map[string]any{"sender_id": map[string]any{"open_id": owner}, "sender_type": "user"},
		"message": map[string]any{"message_id": "om_post_1", "chat_id": "oc_p", "chat_type": "group", "message_type": "post",
			"content": post, "create_time": "1700000000000",
			"mentions": []any{map[string]any{"key": "@_user_1", "id": map[string]any{"open_id": e.sb.BotOpenID()}, "name": "LoopX"}}},
	})
	require.NoError(t, err)
	require.True(t, waitDelivery(t, d).Acked)
	var text string
	require.NoError(t, e.st.DB().QueryRow(t.Context(), `SELECT text FROM unrouted WHERE message_id = 'om_post_1'`).Scan(&text))
	require.Equal(t, "Plan\n@_user_1 #demo ship docs\nsecond line", text)
}

// The watchdog replaces a client whose link stays down: the SDK's own reconnects keep failing
// (handshakes refused), the watchdog starts a fresh client, and events flow again.
func TestWSWatchdogReplacesAStalledLink(t *testing.T) {
	t.Parallel()
	e := setup(t, bundleOpts{transport: bot.TransportHTTP}) // HTTP intake unused; a WS one below
	reg := prometheus.NewRegistry()
	cfg := e.cfg
	cfg.Transport = bot.TransportWS
	require.NoError(t, e.sb.SetCallbackURLs("", ""))
	in, err := bot.NewIntake(cfg, e.rt, bot.IntakeOptions{Logger: quietLogger(), Metrics: bot.NewMetrics(reg), ClickFailures: clickFailures(t),
		WS: bot.WSOptions{StallAfter: 400 * time.Millisecond, Check: 50 * time.Millisecond, RestartBackoff: 50 * time.Millisecond}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- in.RunWS(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	require.Eventually(t, in.Connected, settle, 10*time.Millisecond)

	e.sb.RejectNextHandshake(4, http.StatusServiceUnavailable)
	require.Equal(t, 1, e.sb.DropConnections())
	require.Eventually(t, func() bool { return !in.Connected() }, settle, 5*time.Millisecond)
	require.Eventually(t, in.Connected, settle, 10*time.Millisecond, "link restored")
	mf, err := reg.Gather()
	require.NoError(t, err)
	var reconnects float64
	for _, f := range mf {
		if f.GetName() == "loopx_lark_ws_reconnects_total" {
			reconnects = f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	require.GreaterOrEqual(t, reconnects, 1.0)

	d, err := e.sb.UserSays(e.sb.DefaultChatID(), sandbox.ChatGroup, owner, "after the stall", sandbox.MentionBot())
	require.NoError(t, err)
	res := waitDelivery(t, d)
	require.True(t, res.Acked, res.Err)
	require.Equal(t, 1, e.count(`SELECT count(*) FROM unrouted WHERE message_id = $1`, d.MessageID))
}
