package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"loopx/api"
	"loopx/store"
)

// TestExitCodesFollowTheTable walks the table of error kinds: a server answering a command
// with an error of each kind, in the API's wire format, makes the CLI exit with that kind's
// code; a code this build does not know is judged by its status.
func TestExitCodesFollowTheTable(t *testing.T) {
	t.Parallel()
	answer := func(status int, code string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_ = json.NewEncoder(w).Encode(api.ErrorBody{Error: &api.Error{Code: code, Message: "as the table says"}})
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	for _, k := range store.ErrorKinds() {
		code, _, stderr := runInProcess(t, map[string]string{"LOOPX_URL": answer(k.Status, k.Code), "LOOPX_TOKEN": "x"}, "goal", "list")
		require.Equal(t, k.Exit, code, "%s: %s", k.Code, stderr)
		require.Contains(t, stderr, "("+k.Code+")")
	}
	for status, want := range map[int]int{http.StatusTeapot: exitUsage, http.StatusBadGateway: exitUnreachable} {
		code, _, stderr := runInProcess(t, map[string]string{"LOOPX_URL": answer(status, "newer_code"), "LOOPX_TOKEN": "x"}, "goal", "list")
		require.Equal(t, want, code, "%d: %s", status, stderr)
	}
}
