package client_test

import (
	"errors"
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"loopx/api"
	"loopx/api/client"
)

// echo answers what it received, or an API error for /fail.
func echo() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/echo", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if len(body) == 0 {
			body = []byte("null")
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"method":"` + r.Method + `","auth":"` + r.Header.Get("Authorization") +
			`","key":"` + r.Header.Get("Idempotency-Key") + `","query":"` + r.URL.RawQuery + `","body":` + string(body) + `}`))
	})
	mux.HandleFunc("/v1/fail", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusConflict)
		_, _ = w.Write([]byte(`{"error":{"code":"conflict","field":"version","message":"changed"}}`))
	})
	return mux
}

func TestInProcessCallsTheHandler(t *testing.T) {
	t.Parallel()
	c, err := client.New(client.Options{BaseURL: "http://loopx.local/", Token: "tok",
		HTTPClient: &http.Client{Transport: client.InProcess(echo())}})
	require.NoError(t, err)
	require.Equal(t, "http://loopx.local", c.BaseURL())
	var got map[string]any
	require.NoError(t, c.DoJSON(t.Context(), client.Request{Method: "POST", Path: "/v1/echo",
		Query: map[string][]string{"a": {"1"}}, Body: map[string]int{"n": 1}, IdempotencyKey: "k1"}, &got))
	require.Equal(t, map[string]any{"method": "POST", "auth": "Bearer tok", "key": "k1", "query": "a=1", "body": map[string]any{"n": float64(1)}}, got)

	_, err = c.Do(t.Context(), client.Request{Method: "POST", Path: "/v1/echo"})
	require.ErrorContains(t, err, "no idempotency key", "a mutating call without a key is refused before it is sent")

	_, err = c.Do(t.Context(), client.Request{Method: "GET", Path: "/v1/fail"})
	var ae *api.Error
	require.True(t, errors.As(err, &ae))
	require.Equal(t, api.Error{Status: 409, Code: api.CodeConflict, Field: "version", Message: "changed"}, *ae)

	other, err := c.WithToken("tok2")
	require.NoError(t, err)
	require.NoError(t, other.DoJSON(t.Context(), client.Request{Method: "GET", Path: "/v1/echo"}, &got))
	require.Equal(t, "Bearer tok2", got["auth"])
}

func TestUnreachableAndBadOptions(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close()) // nobody listens there now
	c, err := client.New(client.Options{BaseURL: "http://" + addr, Token: "tok"})
	require.NoError(t, err)
	_, err = c.Do(t.Context(), client.Request{Method: "GET", Path: "/v1/whoami"})
	require.ErrorIs(t, err, client.ErrUnreachable)
	require.ErrorContains(t, err, "is loopx serve running?")

	_, err = client.New(client.Options{BaseURL: "ftp://x", Token: "tok"})
	require.Error(t, err)
	_, err = client.New(client.Options{BaseURL: "http://x"})
	require.Error(t, err)
	require.Equal(t, "/v1/goals/a%2Fb/todos/7", client.GoalPath("a/b", "todos", "7"))
}
