package bot_test

import (
	"cmp"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loopx/bot/sandbox"
)

// serveTarget starts the Lark sandbox and `loopx serve` (binary bin) on the HTTP transport
// against dbURL, whose goals and bindings must already exist, and returns the target that
// pushes to serve's /lark/events. Cleanup stops serve before the sandbox and the database.
func serveTarget(t *testing.T, bin, dbURL string) ingestTarget {
	t.Helper()
	// Serve asks the sandbox for the tenant token and the bot's identity, and sends the receipt
	// reactions to it; the events themselves are pushed by the benchmark, not the sandbox.
	sb, err := sandbox.New(sandbox.Options{VerificationToken: testToken, EncryptKey: testKey})
	require.NoError(t, err)
	sb.Start(t.Context())
	t.Cleanup(sb.Close)

	env := map[string]string{
		"DATABASE_URL":      dbURL,
		"LOOPX_HOME":        t.TempDir(), // nothing of the run lands in the user's ~/.loopx
		"LOOPX_ADMIN_TOKEN": "bench-admin-token-0123456789",
		"LARK_APP_ID":       sb.AppID(), "LARK_APP_SECRET": sb.AppSecret(), "LARK_BASE_URL": sb.URL(),
		"LARK_TRANSPORT": "http", "LARK_VERIFICATION_TOKEN": testToken, "LARK_ENCRYPT_KEY": testKey,
		"LOOPX_SCHEDULER": "off", "LOG_LEVEL": "warn",
		// As the in-process mode: a few hundred items per agent stay pending, none refused.
	}
	if os.Getenv("LOOPX_BENCH_PPROF") != "" { // serve's Go profiles, on a second loopback listener
		env["LOOPX_TEST_PPROF"] = freeAddr(t)
	}
	s := startServe(t, bin, env)
	return ingestTarget{eventsURL: s.url + "/lark/events", appID: sb.AppID(), botOpenID: sb.BotOpenID(), serve: s, sb: sb,
		// The message is stored in the sandbox (a group message without the mention is not
		// delivered by it), so serve's receipt reaction lands on a live message as on Lark.
		messageID: func(n int64, chatID string) string {
			d, err := sb.UserSays(chatID, sandbox.ChatGroup, "ou_bench", fmt.Sprintf("please look at build %d", n))
			require.NoError(t, err)
			return d.MessageID
		},
	}
}

// serveProcess is a running `loopx serve` child.
type serveProcess struct {
	url  string
	cmd  *exec.Cmd
	logs *sampleLog // the first few KB of its output
	done chan error // cmd.Wait's result, sent once
}

func (s *serveProcess) pid() int { return s.cmd.Process.Pid }

// profileURL is where serve serves its Go profiles ("" unless LOOPX_BENCH_PPROF is set).
func (s *serveProcess) profileURL() string {
	for _, kv := range s.cmd.Env {
		if v, ok := strings.CutPrefix(kv, "LOOPX_TEST_PPROF="); ok {
			return "http://" + v + "/debug/pprof/"
		}
	}
	return ""
}

// freeAddr is a loopback address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

// startServe starts `bin serve` on a free loopback port with env and returns once /readyz
// answers 200. Cleanup sends SIGTERM and waits for the exit.
func startServe(t *testing.T, bin string, env map[string]string) *serveProcess {
	t.Helper()
	addr := freeAddr(t)

	cmd := exec.Command(bin, "serve")
	// Only what serve is given: no DATABASE_URL or LARK_* of the caller's shell leaks in.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "LOOPX_LISTEN=" + addr}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	s := &serveProcess{url: "http://" + addr, cmd: cmd, logs: &sampleLog{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = s.logs, s.logs
	require.NoError(t, cmd.Start(), "start %s serve", bin)
	// Owned by the cleanup below, which waits for its result.
	go func() { s.done <- cmd.Wait() }()
	t.Cleanup(func() { s.stop(t) })

	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-s.done:
			s.done <- err // for stop
			t.Fatalf("loopx serve exited during start: %v\n%s", err, s.logs.String())
		default:
		}
		if resp, err := http.Get(s.url + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("loopx serve not ready after 60 s:\n%s", s.logs.String())
	return nil
}

// stop sends SIGTERM and waits for the exit; serve's own shutdown grace is 5 s.
func (s *serveProcess) stop(t *testing.T) {
	_ = s.cmd.Process.Signal(syscall.SIGTERM) // fails only if it has exited already
	select {
	case err := <-s.done:
		if err != nil {
			t.Errorf("loopx serve exit: %v\n%s", err, s.logs.String())
		}
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
		t.Errorf("loopx serve did not stop within 10 s of SIGTERM\n%s", s.logs.String())
	}
}

// serveProfiles fetches serve's CPU profile and allocation delta over the same seconds, for
// one phase of the benchmark.
type serveProfiles struct {
	wg   sync.WaitGroup
	errs [2]error
}

// startProfiles starts fetching the profiles from base (serve's /debug/pprof/) into dir as
// cpu-<senders>.pprof and allocs-<senders>.pprof.
func startProfiles(t *testing.T, base, dir string, senders int) *serveProfiles {
	t.Helper()
	require.NotEmpty(t, base, "serve was started without LOOPX_TEST_PPROF")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	secs := cmp.Or(os.Getenv("LOOPX_BENCH_PPROF_SECONDS"), "10")
	p := &serveProfiles{}
	for i, kind := range [2]struct{ endpoint, file string }{{"profile", "cpu"}, {"allocs", "allocs"}} {
		file := filepath.Join(dir, fmt.Sprintf("%s-%d.pprof", kind.file, senders))
		p.wg.Go(func() { p.errs[i] = fetchTo(base+kind.endpoint+"?seconds="+secs, file) })
	}
	return p
}

func (p *serveProfiles) wait(t *testing.T) {
	p.wg.Wait()
	for _, err := range p.errs {
		require.NoError(t, err)
	}
}

func fetchTo(url, file string) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%s: %s: %s", url, resp.Status, b)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
