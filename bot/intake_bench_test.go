package bot_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loopx/bot"
	"loopx/bot/sandbox"
)

// BenchmarkCallbackMessage is one signed, encrypted im.message.receive_v1 callback through the
// HTTP intake (read, signature, decryption, decode, conversion to the router's message, the
// answer) with a handler that does nothing: the intake's own CPU and allocations per event,
// without the HTTP server or the database. Run: go test ./bot -run X -bench CallbackMessage
func BenchmarkCallbackMessage(b *testing.B) {
	in, err := bot.NewIntake(bot.Config{AppID: "cli_bench", AppSecret: "s", VerificationToken: testToken, EncryptKey: testKey,
		BaseURL: "http://127.0.0.1:1", Transport: bot.TransportHTTP}, noopHandler{}, bot.IntakeOptions{ClickFailures: clickFailures(b)})
	require.NoError(b, err)
	h := in.EventsHandler()
	payload, err := json.Marshal(map[string]any{"schema": "2.0",
		"header": map[string]any{"event_id": "ev_bench_1", "event_type": "im.message.receive_v1",
			"token": testToken, "create_time": "1700000000000", "app_id": "cli_bench", "tenant_key": "t"},
		"event": map[string]any{
			"sender": map[string]any{"sender_id": map[string]any{"open_id": "ou_bench"}, "sender_type": "user"},
			"message": map[string]any{"message_id": "om_bench_1", "chat_id": "oc_bench_001", "chat_type": "group",
				"message_type": "text", "content": `{"text":"@_user_1 please look at build 1"}`, "create_time": "1700000000000",
				"mentions": []any{map[string]any{"key": "@_user_1", "id": map[string]any{"open_id": "ou_bot"}, "name": "LoopX"}}}}})
	require.NoError(b, err)
	enc, err := sandbox.Encrypt(payload, testKey)
	require.NoError(b, err)
	body, err := json.Marshal(map[string]string{"encrypt": enc})
	require.NoError(b, err)
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	sig := sandbox.Sign(ts, "nonce", testKey, body)
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, "/lark/events", bytes.NewReader(body))
		req.Header.Set("X-Lark-Request-Timestamp", ts)
		req.Header.Set("X-Lark-Request-Nonce", "nonce")
		req.Header.Set("X-Lark-Signature", sig)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("answered %d: %s", w.Code, w.Body)
		}
	}
}
