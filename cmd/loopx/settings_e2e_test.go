package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loopx/server"
	"loopx/store/devpg"
)

// TestClientsFindAServeOnMovedPorts: serve runs as `make run` does (private database, sandbox)
// but on LOOPX_LISTEN and LOOPX_SANDBOX_ADDR off the default ports. On the same machine, with
// only the same HOME and LOOPX_HOME (no LOOPX_URL, no LOOPX_TOKEN), `loopx goal list`,
// `loopx doctor` and `loopx chat` find it, its admin token and its sandbox.
func TestClientsFindAServeOnMovedPorts(t *testing.T) {
	t.Parallel()
	if _, err := devpg.BinDir(); errors.Is(err, devpg.ErrNoBinaries) {
		t.Skip("no PostgreSQL server binaries on this machine")
	}
	home := filepath.Join(reachableTempDir(t), "home")
	require.NoError(t, os.Mkdir(home, 0o755))
	listen, sandboxAddr := freeAddr(t), freeAddr(t)
	s := startServe(t, map[string]string{"HOME": home, "LOOPX_HOME": home, "LOOPX_LISTEN": listen, "LOOPX_SANDBOX_ADDR": sandboxAddr})

	// serve recorded where it listens, and no secret.
	rec, found, err := server.ReadServing(home)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, server.Serving{PID: s.cmd.Process.Pid, URL: "http://" + listen, SandboxURL: "http://" + sandboxAddr, Since: rec.Since}, rec)
	raw, err := os.ReadFile(server.ServingPath(home))
	require.NoError(t, err)
	admin, err := server.ReadAdminToken(home)
	require.NoError(t, err)
	require.NotContains(t, string(raw), admin)

	user := []string{"PATH=" + os.Getenv("PATH"), "LOOPX_E2E_MAIN=1", "HOME=" + home, "LOOPX_HOME=" + home}
	cwd := t.TempDir() // no project connection here or above

	list := runBinary(t, cwd, user, "goal", "list", "--format", "json")
	require.Equal(t, 0, list.code, "%s%s", list.stdout, list.stderr)
	require.Contains(t, list.stdout, `"demo-release"`, "the seeded demo goal, listed with the admin token")

	doc := runBinary(t, cwd, user, "doctor", "--format", "json")
	require.Equal(t, 0, doc.code, "%s%s", doc.stdout, doc.stderr)
	var report struct {
		OK     bool    `json:"ok"`
		Checks []check `json:"checks"`
	}
	require.NoError(t, json.Unmarshal([]byte(doc.stdout), &report), doc.stdout)
	require.True(t, report.OK, doc.stdout)
	names := map[string]string{}
	for _, c := range report.Checks {
		require.True(t, c.OK, "%s: %s", c.Name, c.Detail)
		names[c.Name] = c.Detail
	}
	for _, want := range []string{"server", "database", "migrations", "token", "secrets", "pooler", "settings", "private-db", "lark app", "lark link", "lark sends"} {
		require.Contains(t, names, want)
	}
	require.Contains(t, names["server"], "http://"+listen+"/healthz answered 200 (address from loopx serve's record "+server.ServingPath(home)+")")
	require.Contains(t, names["token"], "(from "+server.AdminTokenPath(home)+")")
	require.Contains(t, names["lark link"], "sandbox true")

	// loopx chat joins the sandbox's demo chat; the bot answers /help there.
	chat := startProc(t, loopxBinary(t), user, "chat")
	_, err = fmt.Fprintln(chat.in, "/help")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return strings.Contains(chat.out.String(), "LoopX commands") }, 30*time.Second, 50*time.Millisecond,
		"the bot's answer to /help arrives in loopx chat")
	require.Contains(t, chat.out.String(), "Lark sandbox at http://"+sandboxAddr)
	_, err = fmt.Fprintln(chat.in, "/quit")
	require.NoError(t, err)
	select {
	case err := <-chat.done:
		chat.done <- err
		require.NoError(t, err, chat.out.String())
	case <-time.After(10 * time.Second):
		t.Fatalf("loopx chat did not quit:\n%s", chat.out.String())
	}

	// A clean stop removes the record: clients no longer take the stopped server's address.
	s.stop(t)
	_, err = os.Stat(server.ServingPath(home))
	require.ErrorIs(t, err, os.ErrNotExist)
}
