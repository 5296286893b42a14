package main

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"loopx/bot/sandbox"
)

func TestDoctorLarkChecks(t *testing.T) {
	t.Parallel()
	sb, err := sandbox.New(sandbox.Options{})
	require.NoError(t, err)
	sb.Start(t.Context())
	t.Cleanup(sb.Close)
	c := larkAppCheck(t.Context(), doctorEnvFor(t, map[string]string{"LARK_APP_ID": sb.AppID(), "LARK_APP_SECRET": sb.AppSecret(), "LARK_BASE_URL": sb.URL()}))
	require.True(t, c.OK, c.Detail)
	require.Contains(t, c.Detail, sb.BotOpenID())

	c = larkAppCheck(t.Context(), doctorEnvFor(t, map[string]string{"LARK_APP_ID": sb.AppID(), "LARK_APP_SECRET": "wrong", "LARK_BASE_URL": sb.URL()}))
	require.False(t, c.OK)
	require.Contains(t, c.Detail, "LARK_APP_SECRET")

	c = larkAppCheck(t.Context(), doctorEnvFor(t, map[string]string{"LARK_APP_ID": "cli_x", "LARK_APP_SECRET": "s", "LARK_TRANSPORT": "http"}))
	require.False(t, c.OK)
	require.Contains(t, c.Detail, "LARK_VERIFICATION_TOKEN")

	require.True(t, larkAppCheck(t.Context(), doctorEnvFor(t, nil)).OK, "sandbox: nothing to check")

	for _, tc := range []struct {
		status int
		body   string
		ok     bool
	}{
		{200, `{"status":"ok","transport":"ws","sandbox":false,"connected":true}`, true},
		{503, `{"status":"lark long connection down","transport":"ws"}`, false},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			require.Equal(t, "/readyz/lark", r.URL.Path)
			w.WriteHeader(tc.status)
			_, _ = w.Write([]byte(tc.body))
		}))
		c := larkLinkCheck(t.Context(), doctorEnvFor(t, map[string]string{"LOOPX_URL": srv.URL}))
		srv.Close()
		require.Equal(t, tc.ok, c.OK, c.Detail)
	}

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("# HELP x\nloopx_outbox_failed_rows{code=\"230002\"} 3\nloopx_outbox_failed_rows{code=\"0\"} 0\n"))
	}))
	defer srv.Close()
	c = larkOutboxCheck(t.Context(), doctorEnvFor(t, map[string]string{"LOOPX_URL": srv.URL}))
	require.False(t, c.OK)
	require.Contains(t, c.Detail, "3 failed with code 230002 (the bot is not in the chat")
}
