package runner

import (
	"context"
	"encoding/json"
	"errors"
	"io"
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

// ExecSettings are an exec agent's runner_config; the rules they follow live in store.
type ExecSettings = store.ExecSettings

// ParseExecSettings reads and checks an exec runner_config (store.ParseExecSettings) and
// refuses a shell command line when the server does not allow shells (allowShell).
func ParseExecSettings(raw json.RawMessage, allowShell bool) (ExecSettings, error) {
	s, err := store.ParseExecSettings(raw)
	if err != nil {
		return s, err
	}
	if s.Shell != "" && !allowShell {
		return s, errors.New("runner_config.shell: shell commands are off on this server (LOOPX_EXEC_SHELL=1 allows them); use argv")
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
	// Notes records the progress lines the agent prints (ProgressMark); nil drops them.
	Notes NoteSink
}

var _ scheduler.Runner = (*Exec)(nil)

// Run carries out one turn and reports how it ended.
func (e *Exec) Run(ctx context.Context, job scheduler.Job) scheduler.Result {
	cfg, err := e.runnerConfig(ctx, job)
	if err != nil {
		return scheduler.Result{State: store.TurnFailed, Outcome: "runner settings: " + err.Error()}
	}
	settings, err := ParseExecSettings(cfg, e.AllowShell)
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
	var handoff, decision string
	if c := job.Decision.Continuation; c != nil {
		handoff = strconv.FormatInt(c.ID, 10)
	}
	if oc := job.Decision.ObjectiveChanged; oc != nil {
		decision = strconv.FormatInt(oc.DecisionID, 10)
	}
	cmd.Env = e.env(settings, map[string]string{
		"LOOPX_URL": e.URL, "LOOPX_TOKEN": token, "LOOPX_GOAL_ID": packet.GoalID,
		"LOOPX_AGENT_ID": packet.AgentID, "LOOPX_TURN_ID": packet.TurnInstanceID,
		"LOOPX_TURN_NUMBER": strconv.FormatInt(packet.TurnID, 10),
		"LOOPX_PROMPT_FILE": promptFile, "LOOPX_PACKET_FILE": packetFile,
		"LOOPX_DEADLINE": deadline.UTC().Format(time.RFC3339),
		"LOOPX_ACTION":   job.Decision.EffectiveAction,
		"LOOPX_TODO_ID":  todoID(job),
		// What the turn acknowledges once it has read them ("" when none).
		"LOOPX_HANDOFF_ID": handoff, "LOOPX_DECISION_ID": decision,
		"LOOPX_PROGRESS": ProgressMark,
	})
	switch settings.Stdin {
	case "", "packet":
		cmd.Stdin = strings.NewReader(string(body) + "\n")
	case "prompt":
		cmd.Stdin = strings.NewReader(packet.Prompt)
	}
	tail := newTail(e.tailBytes())
	secrets := append(envSecrets(settings.Env), token)
	notes, notesDone := e.progress(ctx, job.Turn.ID, secrets)
	out := &markedLines{next: tail, notes: notes}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Wait returns at most this long after the leader exits, even when a grandchild holds
	// the output pipes (it is killed with the group anyway).
	cmd.WaitDelay = 2 * time.Second

	if err := cmd.Start(); err != nil {
		close(notes)
		<-notesDone
		return scheduler.Result{State: store.TurnFailed, Outcome: "start agent: " + err.Error()}
	}
	pgid := cmd.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var why string
	var stop *scheduler.Stop
	select {
	case err = <-exited:
	case <-timer.C:
		why = "timed out after " + timeout.String()
		err = e.killGroup(pgid, exited)
	case <-ctx.Done():
		why = "interrupted: the scheduler stopped"
		if stop = scheduler.StopOf(ctx); stop != nil {
			why = stop.Error()
		}
		err = e.killGroup(pgid, exited)
	}
	// Whatever the leader left behind in its group ends with the turn.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	out.flush()
	close(notes)
	<-notesDone

	res := scheduler.Result{LogTail: redact(tail.String(), secrets...)}
	switch {
	case stop != nil:
		res.State, res.Outcome = store.TurnStopped, why+"; "+store.OutcomeKilled
	case why != "":
		res.State, res.Outcome = store.TurnFailed, why+"; "+store.OutcomeKilled
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

// ProgressMark starts an output line an exec agent writes to report progress: the rest of
// the line becomes a progress note on its turn (the live progress card shows the latest).
const ProgressMark = "::progress::"

// NoteSink records progress notes on a live turn. *store.Store implements it.
type NoteSink interface {
	AddTurnNoteByID(ctx context.Context, turnID int64, text string) error
}

// progress returns the channel marked lines go to; a goroutine owned by the turn writes them
// as notes (in order; a burst beyond the buffer drops the oldest waiting ones, the card only
// shows the latest anyway) until the channel is closed. A note is redacted like the log tail:
// the progress card shows it to the whole chat.
func (e *Exec) progress(ctx context.Context, turnID int64, secrets []string) (chan string, <-chan struct{}) {
	ch := make(chan string, 32)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for text := range ch {
			if e.Notes == nil {
				continue
			}
			// The note outlives a stop or a timeout of the turn by a moment: record it anyway.
			nctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			if err := e.Notes.AddTurnNoteByID(nctx, turnID, redact(text, secrets...)); err != nil && e.Logger != nil {
				e.Logger.Warn("record progress note", "turn_id", turnID, "err", err)
			}
			cancel()
		}
	}()
	return ch, done
}

// markedLines passes output on to next and sends the text of each line that starts with
// ProgressMark to notes.
type markedLines struct {
	mu    sync.Mutex
	next  io.Writer
	notes chan string
	line  []byte
}

func (m *markedLines) Write(p []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, b := range p {
		if b == '\n' {
			m.emit()
			continue
		}
		if len(m.line) < 4096 {
			m.line = append(m.line, b)
		}
	}
	return m.next.Write(p)
}

// flush takes the last line when the output did not end with a newline.
func (m *markedLines) flush() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.emit()
}

func (m *markedLines) emit() {
	line := strings.TrimSpace(string(m.line))
	m.line = m.line[:0]
	text, ok := strings.CutPrefix(line, ProgressMark)
	if !ok || strings.TrimSpace(text) == "" {
		return
	}
	select {
	case m.notes <- strings.TrimSpace(text):
	default: // the sink is behind: this note is dropped, later ones carry on
	}
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
