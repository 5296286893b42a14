package main

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"loopx/store/storetest"
)

// TestDashboardSignsInWithAFreshLink: `loopx dashboard` on the serving machine prints a
// one-time link that signs the admin in (or the person --as names) and lands on --next; a
// token that is not the admin's gets no link.
func TestDashboardSignsInWithAFreshLink(t *testing.T) {
	t.Parallel()
	s := startServe(t, map[string]string{
		"DATABASE_URL": storetest.NewDatabase(t), "LOOPX_ADMIN_TOKEN": e2eAdminToken, "LOOPX_HOME": t.TempDir(),
		"LOOPX_BOT": "off", "LOOPX_DEMO": "off", "LOOPX_SCHEDULER": "off",
	})
	s.ok(t, e2eAdminToken, "goal", "create", "--goal-id", "docs", "--title", "Docs site", "--owner", "ou_owner")
	r := s.cli(t, e2eAdminToken, "dashboard", "--no-open", "--next", "/web/goals")
	require.Equal(t, 0, r.code, r.stderr)
	link := strings.TrimSpace(r.stdout)
	require.True(t, strings.HasPrefix(link, s.url+"/web/signin?t="), link)

	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	c := &http.Client{Jar: jar}
	u, err := url.Parse(link)
	require.NoError(t, err)
	res, err := c.PostForm(s.url+"/web/signin", url.Values{"t": {u.Query().Get("t")}})
	require.NoError(t, err)
	body := readAll(t, res)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Equal(t, "/web/goals", res.Request.URL.Path, "the link lands on --next")
	require.Contains(t, body, "#docs")
	require.Contains(t, body, "admin")

	agentTok := s.ok(t, e2eAdminToken, "agent", "register", "--goal-id", "docs", "--agent-id", "codex")["token"].(string)
	r = s.cli(t, agentTok, "dashboard", "--no-open")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "needs the admin token")
}

func readAll(t *testing.T, res *http.Response) string {
	t.Helper()
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return string(b)
}
