package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"loopx/store"
)

// ImageResult is the container image run as built (scripts/image.sh check): one container
// walked through the API and the Lark sandbox, then the replicas of deploy/replicas behind
// nginx.
type ImageResult struct {
	Image        string         `json:"image"`
	SizeBytes    int64          `json:"size_bytes"`
	RunBy        string         `json:"run_by"`
	User         string         `json:"user"`
	ReadySeconds float64        `json:"readyz_seconds"`
	Healthz      map[string]any `json:"healthz"`
	StartLog     string         `json:"start_log"`
	Doctor       string         `json:"doctor_version"`
	Walkthrough  []string       `json:"walkthrough"`
	StopSeconds  float64        `json:"sigterm_exit_seconds"`
	Compose      *ComposeResult `json:"compose,omitempty"`
}

// imageConfig is the part of an image's configuration (podman image inspect .Config) that
// says how a container of it starts.
type imageConfig struct {
	User       string   `json:"User"`
	Env        []string `json:"Env"`
	Entrypoint []string `json:"Entrypoint"`
	Cmd        []string `json:"Cmd"`
	WorkingDir string   `json:"WorkingDir"`
}

// imageRun starts containers of the image the way a runtime would: with podman run where the
// machine permits it, else (crun's setrlimit refused) by chroot into a copy of the image's
// exported filesystem, as the image's user, with exactly the image's environment plus what a
// `-e` would add, /proc and /dev bind-mounted in a private mount namespace, on the host's
// network.
type imageRun struct {
	podman string // the image's tag, when podman run works
	rootfs string // the exported filesystem otherwise
	cfg    imageConfig
	dir    string
}

func loadImageRun(o options, dir string) (*imageRun, error) {
	b, err := os.ReadFile(o.imageConfig)
	if err != nil {
		return nil, fmt.Errorf("the image's configuration: %w", err)
	}
	ir := &imageRun{podman: o.imagePodman, rootfs: o.imageRootfs, dir: dir}
	if err := json.Unmarshal(b, &ir.cfg); err != nil {
		return nil, fmt.Errorf("the image's configuration %s: %w", o.imageConfig, err)
	}
	if len(ir.cfg.Entrypoint)+len(ir.cfg.Cmd) == 0 {
		return nil, errors.New("the image has no entry point and no command")
	}
	if (ir.podman == "") == (ir.rootfs == "") {
		return nil, errors.New("give the image as -image-podman (a tag podman run can start) or -image-rootfs (its exported filesystem)")
	}
	return ir, nil
}

// numericUser is the image's user as this launcher takes it: uid[:gid].
var numericUser = regexp.MustCompile(`^([0-9]+)(?::([0-9]+))?$`)

// command is the command line that starts a container named name of the image with the
// image's command replaced by args (none: the image's own), and the environment of that
// command.
func (ir *imageRun) command(name string, env map[string]string, args ...string) ([]string, []string, error) {
	if len(args) == 0 {
		args = ir.cfg.Cmd
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if ir.podman != "" {
		argv := []string{"podman", "run", "--rm", "--network", "host", "--name", "loopx-chaos-" + name}
		for _, k := range keys {
			argv = append(argv, "-e", k+"="+env[k])
		}
		return append(append(argv, ir.podman), args...), os.Environ(), nil
	}
	if os.Geteuid() != 0 {
		return nil, nil, errors.New("running the image's filesystem needs root (a mount namespace and chroot, as a container runtime uses): run as root, or where podman run works")
	}
	m := numericUser.FindStringSubmatch(ir.cfg.User)
	if m == nil {
		return nil, nil, fmt.Errorf("the image's user %q is not numeric (uid[:gid]); this launcher runs numeric users only", ir.cfg.User)
	}
	uid, gid := m[1], m[2]
	if gid == "" {
		gid = uid
	}
	// Each container has a writable filesystem of its own: a copy of the image's.
	root := filepath.Join(ir.dir, "container-"+name)
	if _, err := os.Stat(root); errors.Is(err, os.ErrNotExist) {
		if out, err := exec.Command("cp", "-a", ir.rootfs, root).CombinedOutput(); err != nil {
			return nil, nil, fmt.Errorf("copy the image's filesystem: %v: %s", err, out)
		}
		for _, d := range []string{"proc", "dev"} {
			if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
				return nil, nil, err
			}
		}
	}
	wd := ir.cfg.WorkingDir
	if wd == "" {
		wd = "/"
	}
	// chroot starts the entry point in /; this launcher supports images that say nothing else.
	if wd != "/" {
		return nil, nil, fmt.Errorf("the image's working directory %s is not /; this launcher starts in / only", wd)
	}
	// unshare gives the mounts a namespace of their own (they vanish with the process); each
	// step execs the next, so the entry point keeps the launcher's pid and gets its signals.
	argv := []string{"/usr/bin/unshare", "--mount", "/bin/sh", "-c",
		`root=$0 user=$1 groups=$2; shift 2; /usr/bin/mount --bind /proc "$root/proc" && /usr/bin/mount --bind /dev "$root/dev" && ` +
			`exec /usr/sbin/chroot --userspec="$user" --groups="$groups" "$root" "$@"`,
		root, uid + ":" + gid, gid}
	argv = append(append(argv, ir.cfg.Entrypoint...), args...)
	var environ []string
	seen := map[string]bool{}
	for _, k := range keys {
		environ = append(environ, k+"="+env[k])
		seen[k] = true
	}
	for _, kv := range ir.cfg.Env {
		if k, _, _ := strings.Cut(kv, "="); !seen[k] {
			environ = append(environ, kv)
		}
	}
	return argv, environ, nil
}

// replica prepares a container of the image running its default command, with env added.
func (ir *imageRun) replica(s *suite, name string, env map[string]string) (*replica, error) {
	argv, environ, err := ir.command(name, env)
	if err != nil {
		return nil, err
	}
	listen := env["LOOPX_LISTEN"]
	if listen == "" {
		return nil, errors.New("a container on the host's network needs LOOPX_LISTEN")
	}
	return &replica{name: name, url: "http://" + listen, env: environ, argv: argv, logDir: s.dir}, nil
}

func (ir *imageRun) runBy() string {
	if ir.podman != "" {
		return "podman run --network host " + ir.podman
	}
	return fmt.Sprintf("the image's exported filesystem: its entry point %v %v chrooted as user %s with the image's environment (podman run is refused on this machine)",
		ir.cfg.Entrypoint, ir.cfg.Cmd, ir.cfg.User)
}

func (s *suite) imageScenario(ctx context.Context, res *Results) error {
	ir, err := loadImageRun(s.o, s.dir)
	if err != nil {
		return err
	}
	r := &ImageResult{Image: s.o.imageVersion, SizeBytes: s.o.imageSize, RunBy: ir.runBy(), User: ir.cfg.User}
	res.Image = r
	if err := s.imageWalkthrough(ctx, ir, r, res); err != nil {
		return fmt.Errorf("walkthrough: %w", err)
	}
	c := &ComposeResult{}
	r.Compose = c
	if err := s.composeScenario(ctx, ir, c, res); err != nil {
		return fmt.Errorf("compose: %w", err)
	}
	return nil
}

// imageWalkthrough runs one container of the image as `docker run -e DATABASE_URL=... image`
// would, with no Lark app (the built-in sandbox), and walks a goal through the API and chat:
// a gate asked by the agent is answered with the card's button, a message reaches the agent.
func (s *suite) imageWalkthrough(ctx context.Context, ir *imageRun, r *ImageResult, res *Results) error {
	if err := createDatabase(ctx, s.pg.URL("postgres"), "image"); err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	sbPort, err := freePort()
	if err != nil {
		return err
	}
	const sbToken = "image-sandbox-token-0123456789"
	env := map[string]string{
		"DATABASE_URL":      s.pg.URL("image"),
		"LOOPX_ADMIN_TOKEN": adminToken,
		// The image listens on 0.0.0.0:7377; on the host's network each container takes a port.
		"LOOPX_LISTEN":        fmt.Sprintf("127.0.0.1:%d", port),
		"LOOPX_SANDBOX_ADDR":  fmt.Sprintf("127.0.0.1:%d", sbPort),
		"LOOPX_SANDBOX_TOKEN": sbToken,
	}
	rep, err := ir.replica(s, "walkthrough", env)
	if err != nil {
		return err
	}
	if err := rep.start(); err != nil {
		return err
	}
	stopped := false
	defer func() {
		if !stopped && rep.alive() {
			_, _ = rep.term(10 * time.Second)
		}
	}()
	took, err := rep.waitReady(ctx, 90*time.Second)
	if err != nil {
		return err
	}
	r.ReadySeconds = took.Seconds()
	step := func(format string, args ...any) { r.Walkthrough = append(r.Walkthrough, fmt.Sprintf(format, args...)) }

	hz, err := s.getJSON(ctx, rep.url+"/healthz", "")
	if err != nil {
		return err
	}
	r.Healthz = hz
	res.check(hz["version"] == s.o.imageVersion, "image: /healthz says version %v, the image is %s", hz["version"], s.o.imageVersion)
	res.check(hz["schema"] == float64(store.LatestMigration()), "image: /healthz says schema %v, this tree's newest migration is %d", hz["schema"], store.LatestMigration())
	step("ready in %.1f s; /healthz: version %v, commit %v, schema %v", took.Seconds(), hz["version"], hz["commit"], hz["schema"])
	if err := s.imageSaysItsVersion(ctx, rep, r, res); err != nil {
		return err
	}
	step("the start log and loopx doctor name version %s", s.o.imageVersion)

	sb := "http://" + env["LOOPX_SANDBOX_ADDR"]
	info, err := s.getJSON(ctx, sb+"/sandbox/v1/info", sbToken)
	if err != nil {
		return fmt.Errorf("the built-in sandbox: %w", err)
	}
	owner, chat := info["demo_user_open_id"].(string), info["default_chat_id"].(string)
	call := func(method, path, token string, body any, want int) (map[string]any, error) {
		status, out, err := s.api(ctx, rep.url, method, path, token, fmt.Sprintf("walk-%d", time.Now().UnixNano()), body)
		if err != nil {
			return nil, err
		}
		if status != want {
			return nil, fmt.Errorf("%s %s: %d %s", method, path, status, out)
		}
		var m map[string]any
		_ = json.Unmarshal(out, &m)
		return m, nil
	}
	if _, err := call("POST", "/v1/goals", adminToken, map[string]any{"goal_id": "shipit", "title": "Ship it",
		"owners": []string{owner}, "allowed_slots": 5}, 201); err != nil {
		return err
	}
	reg, err := call("POST", "/v1/goals/shipit/agents", adminToken, map[string]any{"agent_id": "a1", "is_default": true}, 201)
	if err != nil {
		return err
	}
	agentTok, _ := reg["token"].(string)
	if _, err := call("POST", "/v1/goals/shipit/todos", adminToken, map[string]any{"text": "Write the release notes"}, 201); err != nil {
		return err
	}
	step("goal, agent and todo created through the API")

	cursor, err := s.sandboxCursor(ctx, sb, sbToken, chat)
	if err != nil {
		return err
	}
	if _, err := s.sandboxPost(ctx, sb, sbToken, map[string]any{"chat_id": chat, "open_id": owner, "text": "/bind #shipit", "mention_bot": true}); err != nil {
		return err
	}
	if _, err := s.sandboxWait(ctx, sb, sbToken, chat, cursor, func(m sandboxMessage) bool { return m.SenderType == "app" }); err != nil {
		return fmt.Errorf("no answer to /bind in the chat: %w", err)
	}
	step("the chat bound to the goal with /bind (answered in the sandbox chat)")

	dec, err := call("POST", "/v1/goals/shipit/should-run", agentTok, map[string]any{"turn_instance_id": "t1", "begin_turn": true}, 200)
	if err != nil {
		return err
	}
	if dec["decision"] != "run" {
		return fmt.Errorf("should-run decided %v (%v), want run", dec["decision"], dec["reason"])
	}
	step("should-run: run, turn t1 begun")

	cursor, err = s.sandboxCursor(ctx, sb, sbToken, chat)
	if err != nil {
		return err
	}
	gate, err := call("POST", "/v1/goals/shipit/gates", agentTok, map[string]any{"question": "Publish the release notes?", "agent_id": "a1"}, 201)
	if err != nil {
		return err
	}
	card, err := s.sandboxWait(ctx, sb, sbToken, chat, cursor, func(m sandboxMessage) bool {
		return m.SenderType == "app" && m.Card != nil && len(m.Card.Buttons) > 0 && strings.HasPrefix(m.Card.Title, "Decision needed")
	})
	if err != nil {
		return fmt.Errorf("no gate card in the chat: %w", err)
	}
	var click struct {
		Error string `json:"error"`
	}
	if err := s.sandboxDo(ctx, sb+"/sandbox/v1/click", sbToken, map[string]any{"message_id": card.MessageID, "button": 1, "open_id": owner}, &click); err != nil || click.Error != "" {
		return fmt.Errorf("click the gate card: %v %s", err, click.Error)
	}
	gateID, err := idOf(gate, "gate_id")
	if err != nil {
		return err
	}
	if err := waitFor(ctx, 30*time.Second, func() (bool, error) {
		m, err := call("GET", "/v1/goals/shipit/gates?status=approved", adminToken, nil, 200)
		if err != nil {
			return false, err
		}
		gates, _ := m["gates"].([]any)
		for _, g := range gates {
			if gm, _ := g.(map[string]any); fmt.Sprint(gm["gate_id"]) == gateID {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		return fmt.Errorf("the gate was not approved by the card's button: %w", err)
	}
	step("the agent's gate posted as a card, approved with its first button")

	if _, err := s.sandboxPost(ctx, sb, sbToken, map[string]any{"chat_id": chat, "open_id": owner, "text": "#shipit/a1 add the checksums please", "mention_bot": true}); err != nil {
		return err
	}
	if err := waitFor(ctx, 30*time.Second, func() (bool, error) {
		m, err := call("GET", "/v1/goals/shipit/agents/a1/inbox", agentTok, nil, 200)
		if err != nil {
			return false, err
		}
		counts, _ := m["inbox"].(map[string]any)
		n, _ := counts["pending"].(float64)
		return n >= 1, nil
	}); err != nil {
		return fmt.Errorf("the chat message did not reach the agent's inbox: %w", err)
	}
	step("a chat message addressed #shipit/a1 is in the agent's inbox")

	if _, err := call("POST", "/v1/goals/shipit/evidence", agentTok, map[string]any{"summary": "release notes written", "agent_id": "a1"}, 201); err != nil {
		return err
	}
	if _, err := call("POST", "/v1/goals/shipit/spend-slot", agentTok, map[string]any{"turn_instance_id": "t1"}, 200); err != nil {
		return err
	}
	step("evidence added, the turn's slot spent once")

	stopped = true
	took, err = rep.term(15 * time.Second)
	r.StopSeconds = took.Seconds()
	res.check(err == nil, "image: the container did not stop cleanly on SIGTERM: %v", err)
	step("SIGTERM: exited cleanly in %.1f s", took.Seconds())
	return nil
}

// imageSaysItsVersion checks the release version where an operator reads it besides
// /healthz: the container's start log ("loopx serving", JSON as the image logs) and `loopx
// doctor` run with the release binary against the container.
func (s *suite) imageSaysItsVersion(ctx context.Context, rep *replica, r *ImageResult, res *Results) error {
	logPath := filepath.Join(rep.logDir, rep.name+".log")
	err := waitFor(ctx, 30*time.Second, func() (bool, error) {
		b, err := os.ReadFile(logPath)
		if err != nil {
			return false, err
		}
		for _, line := range strings.Split(string(b), "\n") {
			var l struct {
				Msg, Version string
			}
			if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "loopx serving" {
				r.StartLog = line
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("no \"loopx serving\" line in the container's log %s: %w", logPath, err)
	}
	var l struct{ Version string }
	_ = json.Unmarshal([]byte(r.StartLog), &l)
	res.check(l.Version == s.o.imageVersion, "image: the start log says version %q, the image is %s", l.Version, s.o.imageVersion)

	doctor := exec.CommandContext(ctx, s.bin, "doctor", "--format", "json")
	doctor.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + s.dir, "LOOPX_URL=" + rep.url, "LOOPX_TOKEN=" + adminToken}
	out, err := doctor.Output()
	var d struct {
		Checks []struct{ Name, Detail string } `json:"checks"`
	}
	if jerr := json.Unmarshal(out, &d); jerr != nil {
		return fmt.Errorf("loopx doctor against the container: %v %v: %s", err, jerr, out)
	}
	for _, c := range d.Checks {
		if c.Name == "version" {
			r.Doctor = c.Detail
		}
	}
	res.check(strings.HasPrefix(r.Doctor, "server "+s.o.imageVersion+" (") && strings.HasSuffix(r.Doctor, ", the same as this loopx"),
		"image: loopx doctor's version check says %q, want the server's %s, the same as the release binary", r.Doctor, s.o.imageVersion)
	return nil
}

// getJSON GETs url (with a bearer token when given) and decodes a JSON object.
func (s *suite) getJSON(ctx context.Context, url, token string) (map[string]any, error) {
	var m map[string]any
	return m, s.sandboxDo(ctx, url, token, nil, &m)
}

// sandboxDo calls the sandbox's control API (GET without a body, POST with one) and decodes
// the answer into out.
func (s *suite) sandboxDo(ctx context.Context, url, token string, body, out any) error {
	method, rd := http.MethodGet, io.Reader(nil)
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		method, rd = http.MethodPost, bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, b)
	}
	return json.Unmarshal(b, out)
}

// sandboxMessage is a message as the control API shows it.
type sandboxMessage struct {
	MessageID  string `json:"message_id"`
	SenderType string `json:"sender_type"`
	MsgType    string `json:"msg_type"`
	Text       string `json:"text"`
	Card       *struct {
		Title   string            `json:"title"`
		Buttons []json.RawMessage `json:"buttons"`
	} `json:"card"`
}

func (s *suite) sandboxPost(ctx context.Context, sb, token string, body map[string]any) (string, error) {
	var a struct {
		MessageID string `json:"message_id"`
		Delivered bool   `json:"delivered"`
	}
	if err := s.sandboxDo(ctx, sb+"/sandbox/v1/messages", token, body, &a); err != nil {
		return "", err
	}
	if !a.Delivered {
		return "", fmt.Errorf("the sandbox did not deliver %q to the bot", body["text"])
	}
	return a.MessageID, nil
}

// sandboxCursor is the control API's cursor now, for waiting on what comes after.
func (s *suite) sandboxCursor(ctx context.Context, sb, token, chat string) (int64, error) {
	var page struct {
		Cursor int64 `json:"cursor"`
	}
	err := s.sandboxDo(ctx, fmt.Sprintf("%s/sandbox/v1/messages?chat_id=%s&limit=1", sb, chat), token, nil, &page)
	return page.Cursor, err
}

// sandboxWait long-polls the chat's messages after cursor until one matches.
func (s *suite) sandboxWait(ctx context.Context, sb, token, chat string, cursor int64, match func(sandboxMessage) bool) (sandboxMessage, error) {
	deadline := time.Now().Add(45 * time.Second)
	for time.Now().Before(deadline) {
		var page struct {
			Cursor   int64            `json:"cursor"`
			Messages []sandboxMessage `json:"messages"`
		}
		if err := s.sandboxDo(ctx, fmt.Sprintf("%s/sandbox/v1/messages?chat_id=%s&after=%d&wait=5s", sb, chat, cursor), token, nil, &page); err != nil {
			return sandboxMessage{}, err
		}
		for _, m := range page.Messages {
			if match(m) {
				return m, nil
			}
		}
		cursor = page.Cursor
	}
	return sandboxMessage{}, errors.New("nothing within 45 s")
}

// idOf is the id field key of an API answer, which must have one.
func idOf(m map[string]any, key string) (string, error) {
	v, ok := m[key].(float64)
	if !ok || v <= 0 {
		return "", fmt.Errorf("the answer has no %s: %v", key, m)
	}
	return fmt.Sprint(int64(v)), nil
}

// waitFor polls cond until it holds or limit passes.
func waitFor(ctx context.Context, limit time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(limit)
	var last error
	for time.Now().Before(deadline) {
		ok, err := cond()
		if ok {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	if last != nil {
		return fmt.Errorf("not within %s: %w", limit, last)
	}
	return fmt.Errorf("not within %s", limit)
}
