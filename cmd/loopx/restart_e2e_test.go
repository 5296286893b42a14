package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"loopx/mcp"
	"loopx/store/storetest"
)

// losingProxy forwards to the API and loses the answer of every POST whose path ends in
// suffix, after the server handled it: the connection breaks, as a network does (the
// client's own retries lose theirs too, so the host sees the call fail).
func losingProxy(t *testing.T, target, suffix string) string {
	t.Helper()
	u, err := url.Parse(target)
	require.NoError(t, err)
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, suffix) {
			body, _ := io.ReadAll(r.Body)
			req, _ := http.NewRequestWithContext(r.Context(), r.Method, target+r.URL.RequestURI(), strings.NewReader(string(body)))
			req.Header = r.Header.Clone()
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			_ = resp.Body.Close()
			conn, _, err := http.NewResponseController(w).Hijack()
			require.NoError(t, err)
			_ = conn.Close() // the write happened; its answer is lost
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestWriteRetriedAfterRestartLeavesOneRow: `loopx mcp` records evidence mid-turn, the answer
// is lost, the host restarts `loopx mcp` and retries the same call: one row (SQL). The same
// outside a turn.
func TestWriteRetriedAfterRestartLeavesOneRow(t *testing.T) {
	t.Parallel()
	dbURL := storetest.NewDatabase(t)
	s := startServe(t, map[string]string{"DATABASE_URL": dbURL, "LOOPX_ADMIN_TOKEN": e2eAdminToken, "LOOPX_SCHEDULER": "off"})
	db, err := pgxpool.New(t.Context(), dbURL)
	require.NoError(t, err)
	t.Cleanup(db.Close)
	home, dir := t.TempDir(), t.TempDir()
	r := s.cliIn(t, dir, e2eAdminToken, []string{"HOME=" + home}, "connect", "--goal-id", "restart", "--agent-id", "agent")
	require.Equal(t, 0, r.code, r.stderr)
	r = s.cli(t, e2eAdminToken, "todo", "add", "--goal-id", "restart", "--text", "the work")
	require.Equal(t, 0, r.code, r.stderr)
	count := func(summary string) int {
		var n int
		require.NoError(t, db.QueryRow(t.Context(), `SELECT count(*) FROM evidence WHERE summary = $1`, summary).Scan(&n))
		return n
	}

	for _, inTurn := range []bool{false, true} {
		summary := map[bool]string{false: "between turns", true: "in the turn"}[inTurn]
		// Through the proxy the server's address differs from the connection's: the token is
		// given, as a host's environment can.
		env := []string{"HOME=" + home, "LOOPX_URL=" + losingProxy(t, s.url, "/evidence"), "LOOPX_TOKEN=" + storedToken(t, home)}
		first := stdioSession(t, dir, env...)
		if inTurn {
			d := toolOK[mcp.ShouldRunOut](t, first, "should_run", nil)
			require.True(t, d.ShouldRun, d.NextStep)
		}
		args := map[string]any{"summary": summary}
		res := callTool(t, first, "evidence_add", args)
		require.True(t, res.IsError, "the answer was lost: %s", toolText(res))
		require.Contains(t, toolText(res), "safe")
		require.Equal(t, 1, count(summary), "%s: the write whose answer was lost happened", summary)
		require.NoError(t, first.Close()) // the host restarts loopx mcp

		again := stdioSession(t, dir, "HOME="+home, "LOOPX_URL="+s.url)
		toolOK[mcp.EvidenceOut](t, again, "evidence_add", args)
		require.Equal(t, 1, count(summary), "%s: one row", summary)
		if inTurn {
			spent := toolOK[mcp.SpendSlotOut](t, again, "spend_slot", nil)
			require.Equal(t, "settled", spent.Receipt.Turn.Outcome, "the restarted process settles the turn it adopted")
		}
	}
}
