package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loopx/bot/sandbox"
	"loopx/server"
	"loopx/store/devpg"
)

// buildLoopx links the real loopx binary. The demo agent runs it with a clean environment,
// where the test binary (which doubles as loopx only with LOOPX_E2E_MAIN=1) would not serve.
func buildLoopx(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "loopx")
	out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// proc is one real loopx process of the restart test, its output kept.
type proc struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	in   io.WriteCloser
	done chan error
}

func startProc(t *testing.T, bin string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin, args...), out: &syncBuffer{}, done: make(chan error, 1)}
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	in, err := p.cmd.StdinPipe()
	require.NoError(t, err)
	p.in = in
	require.NoError(t, p.cmd.Start())
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("loopx %s output:\n%s", strings.Join(args, " "), p.out.String())
		}
		p.stop(t)
	})
	return p
}

// stop ends the process with SIGTERM (serve shuts down gracefully) and waits for it.
func (p *proc) stop(t *testing.T) {
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.in.Close()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		p.done <- err
	case <-time.After(server.ShutdownGrace + stopRoom):
		_ = p.cmd.Process.Kill()
		t.Errorf("loopx %s did not stop within %s of SIGTERM", strings.Join(p.cmd.Args[1:], " "), server.ShutdownGrace+stopRoom)
	}
}

// waitLong bounds each wait of the walkthrough below for a state (a card, an answer, a todo
// done): it catches a stuck step, not a slow machine, where the demo agent's turns (each a few
// CLI processes) take many seconds.
const waitLong = 3 * time.Minute

// waitWhile polls cond until it holds: it fails at once, with the output, when one of procs
// (the processes the state depends on) has exited, and after waitLong otherwise.
func waitWhile(t *testing.T, what string, cond func() bool, procs ...*proc) {
	t.Helper()
	deadline := time.Now().Add(waitLong)
	for !cond() {
		for _, p := range procs {
			select {
			case err := <-p.done:
				p.done <- err
				t.Fatalf("waiting until %s: loopx %s exited (%v):\n%s", what, strings.Join(p.cmd.Args[1:], " "), err, p.out.String())
			default:
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting until %s", waitLong, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestSandboxSurvivesARestart follows the README walkthrough across a restart of serve on the
// same LOOPX_HOME: the demo agent asks its gate, serve stops and starts again, and then
// `loopx chat` (a real process) still shows the open gate card, the click answers it, the
// agent carries on, a message to the agent is answered in its thread, and `loopx doctor`
// finds no message Lark (the emulator) refused.
func TestSandboxSurvivesARestart(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("process-level test")
	}
	if _, err := devpg.BinDir(); errors.Is(err, devpg.ErrNoBinaries) {
		t.Skip("no PostgreSQL server binaries on this machine")
	}
	bin := buildLoopx(t)
	home := filepath.Join(reachableTempDir(t), "home")
	require.NoError(t, os.Mkdir(home, 0o755))
	sandboxURL := "http://" + freeAddr(t)
	// The scheduler runs 60x (a minute every second) on a clock both lives of serve share.
	clock := fmt.Sprintf("LOOPX_TEST_CLOCK=%s,%d,60", time.Now().UTC().Format(time.RFC3339), time.Now().UnixNano())
	env := func(extra ...string) []string {
		return append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "LOOPX_HOME=" + home}, extra...)
	}
	serveEnv := func(listen string) []string {
		return env(clock, "LOOPX_LISTEN="+listen, "LOOPX_SANDBOX_ADDR="+strings.TrimPrefix(sandboxURL, "http://"), "LOG_LEVEL=info")
	}
	ctl, err := sandbox.NewClient(sandboxURL, "")
	require.NoError(t, err)
	gateCard := func() (sandbox.MessageView, bool) {
		page, err := ctl.Messages(t.Context(), sandbox.DefaultChatID, 0, 0, 0)
		if err != nil {
			return sandbox.MessageView{}, false
		}
		for _, m := range page.Messages {
			if m.Card != nil && len(m.Card.Buttons) > 0 && strings.HasPrefix(m.Card.Title, "Decision needed") && strings.Contains(m.Card.Title, "#demo-release") {
				return m, true
			}
		}
		return sandbox.MessageView{}, false
	}

	first := startProc(t, bin, serveEnv(freeAddr(t)), "serve")
	var card sandbox.MessageView
	waitWhile(t, "the demo agent asks its gate", func() bool {
		var ok bool
		card, ok = gateCard()
		return ok
	}, first)
	first.stop(t)
	require.NoError(t, <-first.done, "serve stops cleanly")

	listen := freeAddr(t)
	second := startProc(t, bin, serveEnv(listen), "serve")
	waitWhile(t, "the sandbox is back with its chat", func() bool { _, ok := gateCard(); return ok }, second)
	require.NotContains(t, second.out.String(), "level=ERROR")

	chat := startProc(t, bin, env("LOOPX_SANDBOX_URL="+sandboxURL), "chat")
	// The card is shown again with its number; clicking it is the README's next step.
	clickHint := regexp.MustCompile(`\(/click (\d+) <button#>\)`)
	var n string
	waitWhile(t, "loopx chat shows the open gate card", func() bool {
		out := chat.out.String()
		if !strings.Contains(out, card.Card.Title) {
			return false
		}
		m := clickHint.FindAllStringSubmatch(out[strings.Index(out, card.Card.Title):], 1)
		if len(m) == 0 {
			return false
		}
		n = m[0][1]
		return true
	}, second, chat)
	_, err = fmt.Fprintf(chat.in, "/click %s 1\n", n)
	require.NoError(t, err)
	waitWhile(t, "the click is answered", func() bool { return strings.Contains(chat.out.String(), "* toast [success]") }, second, chat)

	token, err := server.ReadAdminToken(home)
	require.NoError(t, err)
	cli := func(args ...string) cliResult {
		c := exec.CommandContext(t.Context(), bin, args...)
		c.Env = env("LOOPX_URL=http://"+listen, "LOOPX_TOKEN="+token)
		var out, errb strings.Builder
		c.Stdout, c.Stderr = &out, &errb
		err := c.Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else {
			require.NoError(t, err)
		}
		return cliResult{code: code, stdout: out.String(), stderr: errb.String()}
	}
	waitWhile(t, "the agent carries on after the approval and finishes both todos", func() bool {
		r := cli("todo", "list", "--goal-id", "demo-release", "--status", "done", "--format", "json")
		var list struct{ Todos []map[string]any }
		return r.code == 0 && json.Unmarshal([]byte(r.stdout), &list) == nil && len(list.Todos) == 2
	}, second)

	// A plain message to the agent is answered in its thread on a next heartbeat.
	_, err = fmt.Fprintln(chat.in, "hello agent, what did you publish?")
	require.NoError(t, err)
	waitWhile(t, "the agent answers in the chat", func() bool {
		return strings.Contains(chat.out.String(), "Hi! I am the demo agent")
	}, second, chat)

	// The chat reads like Lark: the answered card, titled with its outcome, was printed once
	// (the bot answers the click with it and also updates the message to it), and its
	// markdown was rendered, not shown as markup.
	out := chat.out.String()
	require.Equal(t, 1, strings.Count(out, "┃ Approved · g1 · #demo-release"), "the answered card once:\n%s", out)
	require.Contains(t, out, "┃ Owners: @ou_demo_owner")
	require.NotContains(t, out, "**")

	r := cli("doctor")
	require.Equal(t, 0, r.code, "doctor after the restart:\n%s%s", r.stdout, r.stderr)
	require.Contains(t, r.stdout, "no message failed")
}
