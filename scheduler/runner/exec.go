package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"loopx/scheduler"
	"loopx/store"
)

// ExecSettings are an exec agent's runner_config.
type ExecSettings struct {
	// Argv is the command and its arguments, run without a shell. An argument "{{prompt}}"
	// is replaced by the rendered prompt.
	Argv []string `json:"argv"`
	// Shell is a command line for /bin/sh -c; only accepted when the server allows shells.
	Shell string `json:"shell"`
	// Dir is the working directory; "" is the server's.
	Dir string `json:"dir"`
	// Env adds variables to the agent's environment.
	Env map[string]string `json:"env"`
	// Timeout bounds the turn (Go duration, e.g. "20m"); "" is the runner's default. It is
	// capped by the turn's lease.
	Timeout string `json:"timeout"`
	// Stdin is what the agent reads: "packet" (the turn packet JSON, default), "prompt" or
	// "none".
	Stdin string `json:"stdin"`
}

// reservedEnv are the variables the runner sets for each turn.
var reservedEnv = map[string]bool{"LOOPX_URL": true, "LOOPX_TOKEN": true, "LOOPX_GOAL_ID": true,
	"LOOPX_AGENT_ID": true, "LOOPX_TURN_ID": true, "LOOPX_TURN_NUMBER": true, "LOOPX_PROMPT_FILE": true,
	"LOOPX_PACKET_FILE": true, "LOOPX_DEADLINE": true, "LOOPX_ACTION": true, "LOOPX_TODO_ID": true}

// ParseExecSettings reads and checks an exec runner_config; the API may call it before it
// saves an agent. allowShell is the server's setting.
func ParseExecSettings(raw json.RawMessage, allowShell bool) (ExecSettings, error) {
	var s ExecSettings
	if len(raw) > 0 {
		dec := json.NewDecoder(strings.NewReader(string(raw)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&s); err != nil {
			return s, fmt.Errorf("runner_config: %s", err.Error())
		}
	}
	switch {
	case len(s.Argv) == 0 && s.Shell == "":
		return s, errors.New(`runner_config.argv: empty; give the command as a list, e.g. ["codex", "exec", "{{prompt}}"]`)
	case len(s.Argv) > 0 && s.Shell != "":
		return s, errors.New("runner_config.shell: set argv or shell, not both")
	case s.Shell != "" && !allowShell:
		return s, errors.New("runner_config.shell: shell commands are off on this server (LOOPX_EXEC_SHELL=1 allows them); use argv")
	case s.Stdin != "" && s.Stdin != "packet" && s.Stdin != "prompt" && s.Stdin != "none":
		return s, fmt.Errorf("runner_config.stdin: %q is not packet, prompt or none", s.Stdin)
	}
	if s.Timeout != "" {
		if d, err := time.ParseDuration(s.Timeout); err != nil || d <= 0 {
			return s, fmt.Errorf("runner_config.timeout: %q is not a positive duration such as 20m", s.Timeout)
		}
	}
	for k := range s.Env {
		if reservedEnv[k] {
			return s, fmt.Errorf("runner_config.env.%s: set by the runner for each turn", k)
		}
	}
	return s, nil
}

// Exec runs an agent as a local process per turn: the turn packet on stdin, the prompt as an
// argument or file, LOOPX_* in the environment. The process gets its own process group; a
// timeout (or shutdown) sends SIGTERM to the group and SIGKILL after Grace, and the group is
// killed when the leader exits so nothing the turn started outlives it.
type Exec struct {
	Base
	AllowShell bool
	// Timeout is the default turn timeout; 0 means 20 minutes.
	Timeout time.Duration
	// Grace is the wait between SIGTERM and SIGKILL; 0 means 5 s.
	Grace time.Duration
	// TailBytes is how much of the end of stdout+stderr is kept on the turn; 0 means 8 KiB.
	TailBytes int
	// PassEnv names the server's environment variables the agent inherits; nil means PATH,
	// HOME, USER, LANG, LC_ALL, TMPDIR, TERM. Nothing else leaks (database URL, Lark secrets).
	PassEnv []string
	Logger  *slog.Logger
}

var _ scheduler.Runner = (*Exec)(nil)

// Run carries out one turn and reports how it ended.
func (e *Exec) Run(ctx context.Context, job scheduler.Job) scheduler.Result {
	settings, err := ParseExecSettings(job.Schedule.RunnerConfig, e.AllowShell)
	if err != nil {
		return scheduler.Result{State: store.TurnFailed, Outcome: "runner settings: " + err.Error()}
	}
	timeout := e.Timeout
	if timeout <= 0 {
		timeout = 20 * time.Minute
	}
	if settings.Timeout != "" {
		timeout, _ = time.ParseDuration(settings.Timeout)
	}
	if lease := time.Until(job.Turn.LeaseExpiresAt); lease > 0 && lease < timeout {
		timeout = lease
	}
	deadline := time.Now().Add(timeout)
	packet, token, err := e.prepare(ctx, job, deadline)
	if err != nil {
		return scheduler.Result{State: store.TurnFailed, Outcome: "prepare turn: " + err.Error()}
	}
	body, _ := json.Marshal(packet)

	dir, err := os.MkdirTemp("", "loopx-turn-")
	if err != nil {
		return scheduler.Result{State: store.TurnFailed, Outcome: "prepare turn: " + err.Error()}
	}
	defer os.RemoveAll(dir)
	promptFile, packetFile := filepath.Join(dir, "prompt.txt"), filepath.Join(dir, "packet.json")
	if err := os.WriteFile(promptFile, []byte(packet.Prompt), 0o600); err != nil {
		return scheduler.Result{State: store.TurnFailed, Outcome: "prepare turn: " + err.Error()}
	}
	if err := os.WriteFile(packetFile, body, 0o600); err != nil {
		return scheduler.Result{State: store.TurnFailed, Outcome: "prepare turn: " + err.Error()}
	}

	var cmd *exec.Cmd
	if settings.Shell != "" {
		cmd = exec.Command("/bin/sh", "-c", settings.Shell)
	} else {
		argv := make([]string, len(settings.Argv))
		for i, a := range settings.Argv {
			argv[i] = strings.ReplaceAll(a, "{{prompt}}", packet.Prompt)
		}
		cmd = exec.Command(argv[0], argv[1:]...)
	}
	cmd.Dir = settings.Dir
	cmd.Env = e.env(settings, map[string]string{
		"LOOPX_URL": e.URL, "LOOPX_TOKEN": token, "LOOPX_GOAL_ID": packet.GoalID,
		"LOOPX_AGENT_ID": packet.AgentID, "LOOPX_TURN_ID": packet.TurnInstanceID,
		"LOOPX_TURN_NUMBER": strconv.FormatInt(packet.TurnID, 10),
		"LOOPX_PROMPT_FILE": promptFile, "LOOPX_PACKET_FILE": packetFile,
		"LOOPX_DEADLINE": deadline.UTC().Format(time.RFC3339),
		"LOOPX_ACTION":   job.Decision.EffectiveAction,
		"LOOPX_TODO_ID":  todoID(job),
	})
	switch settings.Stdin {
	case "", "packet":
		cmd.Stdin = strings.NewReader(string(body) + "\n")
	case "prompt":
		cmd.Stdin = strings.NewReader(packet.Prompt)
	}
	tail := newTail(e.tailBytes())
	cmd.Stdout, cmd.Stderr = tail, tail
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Wait returns at most this long after the leader exits, even when a grandchild holds
	// the output pipes (it is killed with the group anyway).
	cmd.WaitDelay = 2 * time.Second

	if err := cmd.Start(); err != nil {
		return scheduler.Result{State: store.TurnFailed, Outcome: "start agent: " + err.Error()}
	}
	pgid := cmd.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var why string
	select {
	case err = <-exited:
	case <-timer.C:
		why = "timed out after " + timeout.String()
		err = e.killGroup(pgid, exited)
	case <-ctx.Done():
		why = "interrupted: the scheduler stopped"
		err = e.killGroup(pgid, exited)
	}
	// Whatever the leader left behind in its group ends with the turn.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)

	res := scheduler.Result{LogTail: tail.String()}
	switch {
	case why != "":
		res.State, res.Outcome = store.TurnFailed, why+"; process group killed"
	case err == nil:
		res.State, res.Outcome = store.TurnOK, "exit 0"
	default:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			res.State, res.Outcome = store.TurnFailed, "exit status "+strconv.Itoa(ee.ExitCode())
		} else {
			res.State, res.Outcome = store.TurnFailed, "wait for agent: "+err.Error()
		}
	}
	return res
}

// todoID is the selected todo's id for shell agents, "" when the turn has none (an inbox
// reply turn may not).
func todoID(job scheduler.Job) string {
	if job.Decision.SelectedTodo == nil {
		return ""
	}
	return strconv.FormatInt(job.Decision.SelectedTodo.ID, 10)
}

// killGroup asks the group to stop, then kills it after Grace, and returns the leader's exit.
func (e *Exec) killGroup(pgid int, exited <-chan error) error {
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	grace := e.Grace
	if grace <= 0 {
		grace = 5 * time.Second
	}
	select {
	case err := <-exited:
		return err
	case <-time.After(grace):
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	return <-exited
}

func (e *Exec) tailBytes() int {
	if e.TailBytes > 0 {
		return e.TailBytes
	}
	return 8 << 10
}

func (e *Exec) env(s ExecSettings, loopx map[string]string) []string {
	pass := e.PassEnv
	if pass == nil {
		pass = []string{"PATH", "HOME", "USER", "LANG", "LC_ALL", "TMPDIR", "TERM"}
	}
	var env []string
	for _, k := range pass {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	for k, v := range s.Env {
		env = append(env, k+"="+v)
	}
	for k, v := range loopx {
		env = append(env, k+"="+v)
	}
	return env
}

// tail keeps the last n bytes written to it.
type tail struct {
	mu  sync.Mutex
	n   int
	buf []byte
}

func newTail(n int) *tail { return &tail{n: n} }

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.n; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.ToValidUTF8(string(t.buf), "")
}
