package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"loopx/bot/sandbox"
)

func TestChatCommandTalksToTheSandbox(t *testing.T) {
	t.Parallel()
	sb, err := sandbox.New(sandbox.Options{})
	require.NoError(t, err)
	sb.Start(context.Background())
	t.Cleanup(sb.Close)

	env := map[string]string{"LOOPX_SANDBOX_URL": sb.URL()}
	var out, errOut bytes.Buffer
	code := run(t.Context(), []string{"chat", "--as", "ou_stranger", "--chat", "oc_cli"},
		func(k string) string { return env[k] }, strings.NewReader("hello from the terminal\n/quit\n"), &out, &errOut)
	require.Equal(t, exitOK, code, errOut.String())
	require.Contains(t, out.String(), "You are ou_stranger in chat oc_cli")

	msgs := sb.Chat("oc_cli").Messages()
	require.Len(t, msgs, 1)
	require.Equal(t, "ou_stranger", msgs[0].SenderID)
	require.Equal(t, "@_user_1 hello from the terminal", msgs[0].Text())
}

func TestChatCommandWithoutSandboxExits3(t *testing.T) {
	t.Parallel()
	env := map[string]string{"LOOPX_SANDBOX_URL": "http://127.0.0.1:1"}
	var out, errOut bytes.Buffer
	code := run(t.Context(), []string{"chat"}, func(k string) string { return env[k] }, strings.NewReader(""), &out, &errOut)
	require.Equal(t, exitUnreachable, code)
	require.Contains(t, errOut.String(), "LOOPX_SANDBOX_URL")
}

func TestChatCommandNeedsTheControlToken(t *testing.T) {
	t.Parallel()
	sb, err := sandbox.New(sandbox.Options{ControlToken: "s3cret"})
	require.NoError(t, err)
	sb.Start(context.Background())
	t.Cleanup(sb.Close)
	env := map[string]string{"LOOPX_SANDBOX_URL": sb.URL()}
	var out, errOut bytes.Buffer
	code := run(t.Context(), []string{"chat"}, func(k string) string { return env[k] }, strings.NewReader("/quit\n"), &out, &errOut)
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut.String(), "set LOOPX_SANDBOX_TOKEN")

	env["LOOPX_SANDBOX_TOKEN"] = "s3cret"
	out.Reset()
	code = run(t.Context(), []string{"chat"}, func(k string) string { return env[k] }, strings.NewReader("/quit\n"), &out, &errOut)
	require.Equal(t, exitOK, code)
	require.Contains(t, out.String(), "You are "+sb.DemoUserOpenID())
}
