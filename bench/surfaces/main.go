// Command surfaces measures three surfaces of a real `loopx serve` (its built-in Lark sandbox,
// a fresh database), each beside a baseline measured in the same run:
//
//   - the permission gate: -hooks concurrent `loopx hook permission` processes (the real
//     binary, each in its own connected project, one goal and chat each) ask; the benchmark
//     clicks each card's Allow once as soon as the sandbox shows it and waits for the hook's
//     answer. The path excluding the human is (request → card in Lark) + (click → decision
//     returned). Baselines: one hook alone in the same run, and the floor Lark's message
//     limits set for that many cards (LoopX books 45 sends a second and 950 a minute).
//   - files: a -file-mb MB file uploaded through the API (POST evidence) and downloaded
//     (GET /v1/files/{id}) to a file on disk, beside `cp` of the same bytes on the same disk.
//   - progress cards: -turns live turns (-turn-goals goals, each with its own chat and
//     turns/goals agents) post progress notes for -progress-seconds; the sandbox counts every
//     send and card update per chat and every send of the app, which must stay within Lark's 5
//     a second per chat and 50 a second per app, and every turn's card must end showing its last note
//     (nothing dropped). Baseline: the time the app budgets (45 a second, 950 a minute) need
//     for the sends and updates the sandbox saw.
//
// Usage: go run ./bench/surfaces -loopx bin/loopx [-out bench/results/surfaces.json]
// The server comes from TEST_DATABASE_URL (default the local server on 127.0.0.1:5432).
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"loopx/bot/sandbox"
	"loopx/store"
	"loopx/store/storetest"
)

const (
	adminToken = "bench-surfaces-admin-token-0123456789"
	owner      = "ou_bench_owner"
)

func main() {
	bin := flag.String("loopx", "bin/loopx", "the loopx binary")
	hooks := flag.Int("hooks", 100, "concurrent permission hooks")
	fileMB := flag.Int("file-mb", 10, "size of the uploaded and downloaded file, MB")
	turns := flag.Int("turns", 1000, "live turns posting progress")
	turnGoals := flag.Int("turn-goals", 100, "goals (one chat each) the live turns spread over")
	progressFor := flag.Duration("progress-seconds", 30*time.Second, "how long the turns post progress")
	out := flag.String("out", "bench/results/surfaces.json", "result file")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *bin, *hooks, *fileMB, *turns, *turnGoals, *progressFor, *out); err != nil {
		fmt.Fprintln(os.Stderr, "surfaces:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, bin string, hooks, fileMB, turns, turnGoals int, progressFor time.Duration, out string) error {
	bin, err := filepath.Abs(bin)
	if err != nil {
		return err
	}
	dbURL, drop, err := storetest.CreateDatabase(ctx, storetest.ServerURL(), "loopx_bench_")
	if err != nil {
		return err
	}
	defer func() { _ = drop() }()
	pool, err := store.Open(ctx, dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	st := store.New(pool, store.Options{})
	w, err := startWorld(ctx, bin, dbURL)
	if err != nil {
		return err
	}
	defer w.stop()
	doc := map[string]any{"at": time.Now().UTC().Format(time.RFC3339), "cpus": runtime.NumCPU(), "load_before": loadAvg()}
	fmt.Fprintf(os.Stderr, "== permission gates: %d concurrent hooks, load %s\n", hooks, loadAvg())
	gates, err := w.gates(ctx, st, hooks)
	if err != nil {
		return fmt.Errorf("permission gates: %w", err)
	}
	doc["permission_gate"] = gates
	fmt.Fprintf(os.Stderr, "== files: %d MB through the API beside cp, load %s\n", fileMB, loadAvg())
	files, err := w.files(ctx, st, fileMB)
	if err != nil {
		return fmt.Errorf("files: %w", err)
	}
	doc["files"] = files
	fmt.Fprintf(os.Stderr, "== progress cards: %d live turns over %d chats, load %s\n", turns, turnGoals, loadAvg())
	prog, err := w.progress(ctx, st, turns, turnGoals, progressFor)
	if err != nil {
		return fmt.Errorf("progress cards: %w", err)
	}
	doc["progress_cards"] = prog
	doc["load_after"] = loadAvg()
	b, _ := json.MarshalIndent(doc, "", "  ")
	b = append(b, '\n')
	os.Stdout.Write(b)
	return os.WriteFile(out, b, 0o644)
}

// world is a running `loopx serve` with its sandbox.
type world struct {
	bin  string
	base string // serve's URL
	ctl  *sandbox.Client
	cmd  *exec.Cmd
	logs *bytes.Buffer
	home string // LOOPX_HOME and the hooks' HOME
	http *http.Client
	seq  atomic.Int64
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func startWorld(ctx context.Context, bin, dbURL string) (*world, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	sbAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	home, err := os.MkdirTemp("", "loopx-surfaces-")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "serve")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "DATABASE_URL=" + dbURL, "LOOPX_ADMIN_TOKEN=" + adminToken,
		"LOOPX_LISTEN=" + addr, "LOOPX_HOME=" + home, "LOOPX_SANDBOX_ADDR=" + sbAddr, "LOOPX_DEMO=off",
		"LOOPX_SANDBOX_STATE=off", "LOG_LEVEL=warn"}
	logs := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start loopx serve: %w", err)
	}
	w := &world{bin: bin, base: "http://" + addr, cmd: cmd, logs: logs, home: home,
		http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}, Timeout: 5 * time.Minute}}
	deadline := time.Now().Add(90 * time.Second)
	for {
		if resp, err := http.Get(w.base + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) || cmd.ProcessState != nil {
			w.stop()
			return nil, fmt.Errorf("loopx serve not ready:\n%s", logs.String())
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			w.stop()
			return nil, err
		}
	}
	if w.ctl, err = sandbox.NewClient("http://"+sbAddr, ""); err != nil {
		w.stop()
		return nil, err
	}
	return w, nil
}

func (w *world) stop() {
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	_ = w.cmd.Wait()
	_ = os.RemoveAll(w.home)
}

// call makes one API call with token; a mutating one gets a fresh Idempotency-Key.
func (w *world) call(ctx context.Context, token, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, w.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	if method != http.MethodGet {
		req.Header.Set("Idempotency-Key", fmt.Sprintf("bench-%d", w.seq.Add(1)))
	}
	resp, err := w.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, b)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// bindChat creates goal id (owned by owner) and binds a new sandbox group chat to it from the
// chat, as a person would; it returns the chat.
func (w *world) goalWithChat(ctx context.Context, st *store.Store, id string, progressCard bool) (string, error) {
	p := store.CreateGoalParams{ID: id, Owners: []string{owner}, Meta: store.Meta{Actor: "admin", Surface: "system"}}
	if progressCard {
		p.ProgressCard = &progressCard
	}
	if _, err := st.CreateGoal(ctx, p); err != nil {
		return "", err
	}
	chat := "oc_" + strings.ReplaceAll(id, "-", "_")
	if _, err := w.ctl.Post(ctx, sandbox.PostRequest{ChatID: chat, ChatType: sandbox.ChatGroup, OpenID: owner, Text: "/bind #" + id, MentionBot: true}); err != nil {
		return "", err
	}
	return chat, waitFor(ctx, time.Minute, func() (bool, error) {
		var n int
		err := st.DB().QueryRow(ctx, `SELECT count(*) FROM binding WHERE chat_id = $1 AND goal_id = $2`, chat, id).Scan(&n)
		return n == 1, err
	})
}

// hookRun is one permission hook's timeline.
type hookRun struct {
	start, cardAt, clickAt, end time.Time
	decision                    string
}

func (h hookRun) toCard() time.Duration     { return h.cardAt.Sub(h.start) }
func (h hookRun) toDecision() time.Duration { return h.end.Sub(h.clickAt) }
func (h hookRun) path() time.Duration       { return h.toCard() + h.toDecision() }

// gates measures the permission-gate path: one hook alone, then n at once.
func (w *world) gates(ctx context.Context, st *store.Store, n int) (map[string]any, error) {
	type project struct{ goal, chat, dir string }
	projects := make([]project, n+1)
	for i := range projects {
		id := fmt.Sprintf("gate-%03d", i)
		chat, err := w.goalWithChat(ctx, st, id, false)
		if err != nil {
			return nil, err
		}
		dir := filepath.Join(w.home, "projects", id)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		c := exec.CommandContext(ctx, w.bin, "connect", "--goal-id", id, "--agent-id", "agent")
		c.Dir, c.Env = dir, []string{"PATH=" + os.Getenv("PATH"), "HOME=" + w.home, "LOOPX_URL=" + w.base, "LOOPX_TOKEN=" + adminToken}
		if b, err := c.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("loopx connect: %v: %s", err, b)
		}
		projects[i] = project{goal: id, chat: chat, dir: dir}
	}
	hook := func(p project, i int) (hookRun, error) {
		var r hookRun
		in, _ := json.Marshal(map[string]any{"hook_event_name": "PermissionRequest", "session_id": fmt.Sprintf("bench-%d", i),
			"cwd": p.dir, "tool_name": "Bash", "tool_input": map[string]any{"command": fmt.Sprintf("touch made-%d.txt", i), "description": "bench"}})
		c := exec.CommandContext(ctx, w.bin, "hook", "permission", "--host", "claude-code")
		c.Dir, c.Env = p.dir, []string{"PATH=" + os.Getenv("PATH"), "HOME=" + w.home}
		c.Stdin = bytes.NewReader(in)
		var stdout, stderr bytes.Buffer
		c.Stdout, c.Stderr = &stdout, &stderr
		r.start = time.Now()
		if err := c.Start(); err != nil {
			return r, err
		}
		done := make(chan error, 1)
		go func() { done <- c.Wait() }()
		// The card, as the sandbox shows it: long-poll the chat until it appears.
		var cursor int64
		var card sandbox.MessageView
		for card.MessageID == "" {
			page, err := w.ctl.Messages(ctx, p.chat, cursor, 0, 5*time.Second)
			if err != nil {
				return r, err
			}
			cursor = page.Cursor
			for _, m := range page.Messages {
				if m.SenderType == "app" && m.Card != nil && strings.HasPrefix(m.Card.Title, "Permission needed") {
					card = m
				}
			}
			if time.Since(r.start) > 3*time.Minute {
				return r, fmt.Errorf("no permission card in %s after 3 minutes", p.chat)
			}
		}
		r.cardAt = card.CreatedAt
		button := 0
		for j, b := range card.Card.Buttons {
			if b.Text == "Allow once" {
				button = j + 1
			}
		}
		if button == 0 {
			return r, fmt.Errorf("no Allow once on the card: %+v", card.Card.Buttons)
		}
		r.clickAt = time.Now()
		res, err := w.ctl.Click(ctx, sandbox.ClickRequest{MessageID: card.MessageID, Button: button, OpenID: owner})
		if err != nil {
			return r, err
		}
		if res.Toast.Type != "success" {
			return r, fmt.Errorf("the owner's click was refused: %+v", res.Toast)
		}
		if err := <-done; err != nil {
			return r, fmt.Errorf("loopx hook permission: %v: %s", err, stderr.String())
		}
		r.end = time.Now()
		var d struct {
			Out struct {
				Decision struct {
					Behavior string `json:"behavior"`
				} `json:"decision"`
			} `json:"hookSpecificOutput"`
		}
		if err := json.Unmarshal(stdout.Bytes(), &d); err != nil {
			return r, fmt.Errorf("the hook's answer %q: %v (%s)", stdout.String(), err, stderr.String())
		}
		r.decision = d.Out.Decision.Behavior
		if r.decision != "allow" {
			return r, fmt.Errorf("the hook answered %q after the owner allowed", r.decision)
		}
		return r, nil
	}
	alone, err := hook(projects[n], n)
	if err != nil {
		return nil, err
	}
	runs := make([]hookRun, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	begin := time.Now()
	for i := range n {
		wg.Go(func() { runs[i], errs[i] = hook(projects[i], i) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	all := time.Since(begin)
	durs := func(f func(hookRun) time.Duration) []time.Duration {
		var out []time.Duration
		for _, r := range runs {
			out = append(out, f(r))
		}
		return out
	}
	path := durs(hookRun.path)
	floor := larkFloor(n)
	fmt.Fprintf(os.Stderr, "permission gate, %d concurrent hooks (excluding the human): path p50 %s p99 %s; request → card p50 %s p99 %s; click → decision p50 %s p99 %s; all answered in %s\n",
		n, pct(path, 50), pct(path, 99), pct(durs(hookRun.toCard), 50), pct(durs(hookRun.toCard), 99),
		pct(durs(hookRun.toDecision), 50), pct(durs(hookRun.toDecision), 99), all.Round(time.Millisecond))
	fmt.Fprintf(os.Stderr, "  baseline: one hook alone path %s (request → card %s, click → decision %s); Lark's floor for %d cards (45 a second, 950 a minute): %s\n",
		alone.path().Round(time.Millisecond), alone.toCard().Round(time.Millisecond), alone.toDecision().Round(time.Millisecond), n, floor.Round(time.Millisecond))
	return map[string]any{
		"hooks": n, "target_p99_ms": 1000,
		"path_ms":             summary(path),
		"request_to_card_ms":  summary(durs(hookRun.toCard)),
		"click_to_answer_ms":  summary(durs(hookRun.toDecision)),
		"all_answered_ms":     ms(all),
		"baseline_one_hook":   map[string]any{"path_ms": ms(alone.path()), "request_to_card_ms": ms(alone.toCard()), "click_to_answer_ms": ms(alone.toDecision())},
		"baseline_lark_floor": map[string]any{"cards": n, "app_sends_per_second": 45, "app_sends_per_minute": 950, "ms": ms(floor)},
		"p99_within_target":   pctDur(path, 99) <= time.Second,
		"note":                "the hook polls its gate once a second (loopx hook permission), so click → decision includes up to a second of that wait",
	}, nil
}

// files measures a file through the API against cp of the same bytes on the same disk.
func (w *world) files(ctx context.Context, st *store.Store, mb int) (map[string]any, error) {
	if _, err := st.CreateGoal(ctx, store.CreateGoalParams{ID: "files", Owners: []string{owner}, Meta: store.Meta{Actor: "admin", Surface: "system"}}); err != nil {
		return nil, err
	}
	ag, err := st.RegisterAgent(ctx, store.RegisterAgentParams{GoalID: "files", AgentID: "agent", Meta: store.Meta{Actor: "admin", Surface: "system"}})
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(w.home, "files")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	data := make([]byte, mb<<20)
	_, _ = rand.Read(data)
	src := filepath.Join(dir, "src.bin")
	if err := os.WriteFile(src, data, 0o644); err != nil {
		return nil, err
	}
	const rounds = 5
	var cps, ups, downs []time.Duration
	for i := range rounds {
		dst := filepath.Join(dir, fmt.Sprintf("cp-%d.bin", i))
		start := time.Now()
		if b, err := exec.CommandContext(ctx, "cp", src, dst).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("cp: %v: %s", err, b)
		}
		cps = append(cps, time.Since(start))
		// Upload: read the file and send it, as a client does (base64 in the JSON body).
		start = time.Now()
		raw, err := os.ReadFile(src)
		if err != nil {
			return nil, err
		}
		var ev struct {
			Files []store.Attachment `json:"files"`
		}
		err = w.call(ctx, ag.Token, http.MethodPost, "/v1/goals/files/evidence", map[string]any{"agent_id": "agent", "summary": "the build",
			"kind": "artifact", "file": map[string]any{"name": fmt.Sprintf("build-%d.bin", i), "mime": "application/octet-stream",
				"content_base64": base64.StdEncoding.EncodeToString(raw)}}, &ev)
		if err != nil {
			return nil, err
		}
		ups = append(ups, time.Since(start))
		if len(ev.Files) != 1 {
			return nil, fmt.Errorf("evidence answered %d files", len(ev.Files))
		}
		// Download to a file on the same disk.
		start = time.Now()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, w.base+"/v1/files/"+strconv.FormatInt(ev.Files[0].ID, 10), nil)
		req.Header.Set("Authorization", "Bearer "+ag.Token)
		resp, err := w.http.Do(req)
		if err != nil {
			return nil, err
		}
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("get-%d.bin", i)))
		if err != nil {
			resp.Body.Close()
			return nil, err
		}
		n, err := io.Copy(f, resp.Body)
		resp.Body.Close()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil || resp.StatusCode != http.StatusOK || n != int64(len(data)) {
			return nil, fmt.Errorf("download: status %d, %d of %d bytes, %v", resp.StatusCode, n, len(data), err)
		}
		downs = append(downs, time.Since(start))
		got, err := os.ReadFile(f.Name())
		if err != nil || !bytes.Equal(got, data) {
			return nil, fmt.Errorf("the downloaded file differs from the uploaded one (%v)", err)
		}
	}
	mbps := func(d time.Duration) float64 { return round(float64(mb) / d.Seconds()) }
	cp, up, down := pctDur(cps, 50), pctDur(ups, 50), pctDur(downs, 50)
	fmt.Fprintf(os.Stderr, "files of %d MB (median of %d): upload %.0f MB/s (%.0f%% of cp), download %.0f MB/s (%.0f%% of cp); cp on the same disk %.0f MB/s\n",
		mb, rounds, mbps(up), 100*cp.Seconds()/up.Seconds(), mbps(down), 100*cp.Seconds()/down.Seconds(), mbps(cp))
	return map[string]any{
		"megabytes": mb, "rounds": rounds, "target_share_of_cp": 0.5,
		"upload":      map[string]any{"ms": ms(up), "mb_per_s": mbps(up), "share_of_cp": round(cp.Seconds() / up.Seconds())},
		"download":    map[string]any{"ms": ms(down), "mb_per_s": mbps(down), "share_of_cp": round(cp.Seconds() / down.Seconds())},
		"baseline_cp": map[string]any{"ms": ms(cp), "mb_per_s": mbps(cp)},
	}, nil
}

// progress opens turns live turns over goals goals (one chat each) and has each post a note
// every few seconds for d, then a last one; it checks what the sandbox saw.
func (w *world) progress(ctx context.Context, st *store.Store, turns, goals int, d time.Duration) (map[string]any, error) {
	type liveTurn struct {
		goal, agent, token, chat, instance string
	}
	var live []liveTurn
	perGoal := (turns + goals - 1) / goals
	meta := store.Meta{Actor: "admin", Surface: "system"}
	chats := map[string]bool{}
	for g := range goals {
		id := fmt.Sprintf("prog-%03d", g)
		chat, err := w.goalWithChat(ctx, st, id, true)
		if err != nil {
			return nil, err
		}
		chats[chat] = true
		for a := range perGoal {
			if len(live) == turns {
				break
			}
			agent := fmt.Sprintf("a%02d", a)
			ag, err := st.RegisterAgent(ctx, store.RegisterAgentParams{GoalID: id, AgentID: agent, Meta: meta})
			if err != nil {
				return nil, err
			}
			if _, err := st.AddTodo(ctx, store.AddTodoParams{GoalID: id, Text: "work " + agent, ClaimFor: agent, Meta: meta}); err != nil {
				return nil, err
			}
			live = append(live, liveTurn{goal: id, agent: agent, token: ag.Token, chat: chat, instance: fmt.Sprintf("bench-%s-%s", id, agent)})
		}
	}
	// Open every turn the way an MCP host does.
	opened := time.Now()
	if err := forEach(ctx, len(live), 16, func(i int) error {
		t := live[i]
		var dec struct {
			Decision string `json:"decision"`
			Reason   string `json:"reason"`
		}
		err := w.call(ctx, t.token, http.MethodPost, "/v1/goals/"+t.goal+"/should-run", map[string]any{"agent_id": t.agent,
			"turn_instance_id": t.instance, "begin_turn": true, "via": "mcp"}, &dec)
		if err == nil && dec.Decision != "run" {
			err = fmt.Errorf("should-run for %s/%s answered %s (%s)", t.goal, t.agent, dec.Decision, dec.Reason)
		}
		return err
	}); err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "  %d turns live in %s\n", len(live), time.Since(opened).Round(time.Millisecond))
	// Notes: each turn every noteEvery, spread evenly, for d; then one last note each.
	const noteEvery = 10 * time.Second
	var notes atomic.Int64
	begin := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, len(live))
	note := func(i, k int) error {
		t := live[i]
		notes.Add(1)
		return w.call(ctx, t.token, http.MethodPost, "/v1/goals/"+t.goal+"/agents/"+t.agent+"/progress",
			map[string]any{"text": fmt.Sprintf("step %d of %s/%s", k, t.goal, t.agent), "turn_instance_id": t.instance}, nil)
	}
	for i := range live {
		wg.Go(func() {
			offset := time.Duration(i) * noteEvery / time.Duration(len(live))
			for k := 1; ; k++ {
				at := begin.Add(offset + time.Duration(k-1)*noteEvery)
				if at.Sub(begin) >= d {
					errs[i] = note(i, 0) // the last note: "step 0"
					return
				}
				if err := sleep(ctx, time.Until(at)); err != nil {
					errs[i] = err
					return
				}
				if err := note(i, k); err != nil {
					errs[i] = err
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	posted := time.Since(begin)
	// Nothing dropped: every turn's card ends showing its last note.
	lastShown := func() (int, error) {
		n := 0
		for chat := range chats {
			page, err := w.ctl.Messages(ctx, chat, 0, 0, 0)
			if err != nil {
				return 0, err
			}
			for _, m := range page.Messages {
				if m.SenderType == "app" && m.Card != nil && strings.Contains(cardText(m), "step 0 of ") {
					n += strings.Count(cardText(m), "step 0 of ")
				}
			}
		}
		return n, nil
	}
	var shown int
	err := waitFor(ctx, 10*time.Minute, func() (bool, error) {
		var err error
		shown, err = lastShown()
		return shown >= len(live), err
	})
	drained := time.Since(begin)
	if err != nil {
		return nil, fmt.Errorf("%d of %d cards show their last note: %w", shown, len(live), err)
	}
	var maxChat, chatLimited, sends, updates int
	var app sandbox.ChatStats
	for chat := range chats {
		s, err := w.ctl.Stats(ctx, chat)
		if err != nil {
			return nil, err
		}
		maxChat = max(maxChat, s.Chat.MaxWithUpdatesPerSecond)
		chatLimited += s.Chat.RateLimited
		sends += s.Chat.Accepted
		updates += s.Chat.Updates
		app = s.App
	}
	var failed int
	if err := st.DB().QueryRow(ctx, `SELECT count(*) FROM outbox WHERE state = 'failed'`).Scan(&failed); err != nil {
		return nil, err
	}
	floor := larkFloor(sends + updates)
	fmt.Fprintf(os.Stderr, "progress cards, %d live turns in %d chats, %d notes over %s: the sandbox saw %d sends and %d card updates; busiest chat %d sends and updates a second (Lark: 5), app %d sends a second (Lark: 50); refused by the limits: %d; failed rows %d; every card shows its last note %s after the first note\n",
		len(live), len(chats), notes.Load(), posted.Round(time.Second), sends, updates, maxChat, app.MaxPerSecond, app.RateLimited+chatLimited, failed, drained.Round(time.Second))
	fmt.Fprintf(os.Stderr, "  baseline: Lark's app limits need %s for those %d sends and updates (LoopX books 45 a second and 950 a minute)\n", floor.Round(time.Second), sends+updates)
	return map[string]any{
		"turns": len(live), "chats": len(chats), "notes": notes.Load(), "notes_for_s": round(posted.Seconds()),
		"sandbox_sends": sends, "sandbox_card_updates": updates,
		"max_sends_and_updates_per_chat_per_s": maxChat, "max_sends_per_app_per_s": app.MaxPerSecond, "lark_per_chat_limit": 5, "lark_per_app_limit": 50,
		"refused_by_rate_limits": app.RateLimited + chatLimited, "outbox_failed": failed,
		"cards_showing_last_note": shown, "nothing_dropped": shown >= len(live) && failed == 0,
		"within_limits":           maxChat <= 5 && app.MaxPerSecond <= 50 && app.RateLimited+chatLimited == 0,
		"last_note_shown_after_s": round(drained.Seconds()),
		"baseline_app_limit_s":    round(floor.Seconds()),
	}, nil
}

// larkFloor is the least time n message sends (cards and card updates share the budget) take
// under the app budgets LoopX books beneath Lark's: 45 a second, and 950 a minute with a burst
// of 95.
func larkFloor(n int) time.Duration {
	perSecond := float64(n) / 45
	perMinute := float64(max(n-95, 0)) * 60 / 950
	return time.Duration(max(perSecond, perMinute) * float64(time.Second))
}

func cardText(m sandbox.MessageView) string {
	var b strings.Builder
	b.WriteString(m.Card.Title)
	for _, l := range m.Card.Lines {
		b.WriteString("\n" + l.Text)
	}
	return b.String()
}

// forEach runs f(0..n-1) on at most par goroutines and returns the first error.
func forEach(ctx context.Context, n, par int, f func(i int) error) error {
	var next atomic.Int64
	errs := make([]error, par)
	var wg sync.WaitGroup
	for p := range par {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					errs[p] = err
					return
				}
			}
		})
	}
	wg.Wait()
	return cmpErr(ctx.Err(), errors.Join(errs...))
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// waitFor polls ok every 100 ms until it is true, fails or limit passes.
func waitFor(ctx context.Context, limit time.Duration, ok func() (bool, error)) error {
	deadline := time.Now().Add(limit)
	for {
		done, err := ok()
		if err != nil || done {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not done after %s", limit)
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

func pctDur(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

func pct(d []time.Duration, p int) time.Duration { return pctDur(d, p).Round(time.Millisecond) }

func summary(d []time.Duration) map[string]float64 {
	return map[string]float64{"p50": ms(pctDur(d, 50)), "p99": ms(pctDur(d, 99)), "max": ms(pctDur(d, 100))}
}

func ms(d time.Duration) float64 { return round(float64(d.Microseconds()) / 1000) }

func round(v float64) float64 { return float64(int64(v*10+0.5)) / 10 }

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
