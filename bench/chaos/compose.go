package main

import (
	"bufio"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"go.yaml.in/yaml/v3"

	"loopx/bot/sandbox"
)

// composeSpec is the Compose Specification's JSON schema (draft-07), as published by the
// compose-spec project (github.com/compose-spec/compose-spec, schema/compose-spec.json,
// Apache License 2.0): what Docker Compose and Podman Compose validate a file against.
//
//go:embed compose-spec.json
var composeSpec []byte

// composeDir is the replica recipe this scenario checks and runs.
const composeDir = "deploy/replicas"

// ComposeResult is deploy/replicas checked by the Compose schema and by what it promises,
// then its topology run with the image: the loopx replicas it defines behind nginx with its
// nginx.conf, Lark's callbacks through the proxy, and every event delivered once through
// the proxy and once straight to each replica.
type ComposeResult struct {
	Valid            bool     `json:"valid"`
	Problems         []string `json:"problems"`
	Replicas         []string `json:"replicas"`
	Events           int      `json:"events"`
	DeliveriesEach   int      `json:"deliveries_of_each_event"`
	DirectAcked      int      `json:"direct_deliveries_acknowledged"`
	NotAcked         int      `json:"not_acked"`
	Lost             int      `json:"lost"`
	Doubled          int      `json:"doubled_effects"`
	ReceiptsDoubled  int      `json:"doubled_receipts"`
	ReceiptsMissing  int      `json:"missing_receipts"`
	FailoverEvents   int      `json:"events_with_one_replica_stopped"`
	FailoverNotAcked int      `json:"not_acked_with_one_replica_stopped"`
	FailoverLost     int      `json:"lost_with_one_replica_stopped"`
}

// composeFile is what the scenario reads of compose.yaml once the schema passed.
type composeFile struct {
	Services map[string]composeService `yaml:"services"`
}

type composeService struct {
	Image       string        `yaml:"image"`
	Build       *composeBuild `yaml:"build"`
	Environment listOrMap     `yaml:"environment"`
	DependsOn   listOrMap     `yaml:"depends_on"`
	Volumes     []string      `yaml:"volumes"`
}

// listOrMap is a Compose field written as a mapping or as a list ("KEY=VALUE" or names).
type listOrMap map[string]string

func (l *listOrMap) UnmarshalYAML(n *yaml.Node) error {
	*l = listOrMap{}
	switch n.Kind {
	case yaml.MappingNode:
		var m map[string]any
		if err := n.Decode(&m); err != nil {
			return err
		}
		for k, v := range m {
			(*l)[k] = fmt.Sprint(v)
		}
	case yaml.SequenceNode:
		var items []string
		if err := n.Decode(&items); err != nil {
			return err
		}
		for _, it := range items {
			k, v, _ := strings.Cut(it, "=")
			(*l)[k] = v
		}
	default:
		return fmt.Errorf("line %d: neither a list nor a mapping", n.Line)
	}
	return nil
}

type composeBuild struct {
	Context    string `yaml:"context"`
	Dockerfile string `yaml:"dockerfile"`
}

var interpolation = regexp.MustCompile(`\$\{([A-Z_][A-Z0-9_]*)\}`)

// checkCompose validates compose.yaml against the Compose schema and checks what the recipe
// relies on: the files it names exist, every ${VAR} is in example.env, depends_on names
// services, every loopx replica has its own LOOPX_REPLICA and the HTTP transport, and
// nginx.conf balances over exactly the loopx replicas. It returns the loopx services (their
// environment interpolated with example.env) and the problems found.
func checkCompose(dir string) (map[string]composeService, map[string]string, []string, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "compose.yaml"))
	if err != nil {
		return nil, nil, nil, err
	}
	var problems []string
	var doc any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, nil, []string{"compose.yaml is not YAML: " + err.Error()}, nil
	}
	var schema jsonschema.Schema
	if err := json.Unmarshal(composeSpec, &schema); err != nil {
		return nil, nil, nil, fmt.Errorf("the Compose schema: %w", err)
	}
	// The schema names draft-07 with https and no fragment; the validator knows the draft by
	// its canonical URI.
	schema.Schema = "http://json-schema.org/draft-07/schema#"
	resolved, err := schema.Resolve(&jsonschema.ResolveOptions{BaseURI: "https://compose-spec.io/"})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("the Compose schema: %w", err)
	}
	asJSON, err := json.Marshal(doc)
	if err != nil {
		return nil, nil, []string{"compose.yaml has keys that are not strings: " + err.Error()}, nil
	}
	var inst any
	_ = json.Unmarshal(asJSON, &inst)
	if err := resolved.Validate(inst); err != nil {
		problems = append(problems, "compose.yaml does not follow the Compose Specification: "+err.Error())
	}

	vars, err := readEnvFile(filepath.Join(dir, "example.env"))
	if err != nil {
		return nil, nil, nil, err
	}
	for _, m := range interpolation.FindAllStringSubmatch(string(raw), -1) {
		if _, ok := vars[m[1]]; !ok {
			problems = append(problems, "compose.yaml uses ${"+m[1]+"}, which example.env does not define")
		}
	}
	var cf composeFile
	if err := yaml.Unmarshal([]byte(interpolation.ReplaceAllStringFunc(string(raw), func(v string) string {
		return vars[interpolation.FindStringSubmatch(v)[1]]
	})), &cf); err != nil {
		return nil, nil, append(problems, "compose.yaml's services do not read as services: "+err.Error()), nil
	}
	loopx := map[string]composeService{}
	replicaNames := map[string]string{}
	for name, svc := range cf.Services {
		for dep := range svc.DependsOn {
			if _, ok := cf.Services[dep]; !ok {
				problems = append(problems, fmt.Sprintf("%s depends on %s, which is no service", name, dep))
			}
		}
		for _, v := range svc.Volumes {
			if src, _, _ := strings.Cut(v, ":"); strings.HasPrefix(src, ".") {
				if _, err := os.Stat(filepath.Join(dir, src)); err != nil {
					problems = append(problems, fmt.Sprintf("%s mounts %s, which is not beside compose.yaml", name, src))
				}
			}
		}
		if svc.Build == nil {
			continue
		}
		for _, p := range []string{svc.Build.Context, filepath.Join(svc.Build.Context, svc.Build.Dockerfile)} {
			if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
				problems = append(problems, fmt.Sprintf("%s builds from %s, which does not exist", name, p))
			}
		}
		loopx[name] = svc
		rep := svc.Environment["LOOPX_REPLICA"]
		if other, dup := replicaNames[rep]; dup || rep == "" {
			problems = append(problems, fmt.Sprintf("%s has LOOPX_REPLICA %q (the same as %s): each replica needs its own", name, rep, other))
		}
		replicaNames[rep] = name
		if svc.Environment["LARK_TRANSPORT"] != "http" {
			problems = append(problems, name+" does not take Lark's callbacks over HTTP (LARK_TRANSPORT=http), which the balancer is for")
		}
	}
	if len(loopx) < 2 {
		problems = append(problems, fmt.Sprintf("compose.yaml has %d loopx replicas; the recipe is for several", len(loopx)))
	}
	conf, err := os.ReadFile(filepath.Join(dir, "nginx.conf"))
	if err != nil {
		return nil, nil, nil, err
	}
	var upstream []string
	for _, m := range nginxServer.FindAllStringSubmatch(string(conf), -1) {
		upstream = append(upstream, m[1])
	}
	var names []string
	for name := range loopx {
		names = append(names, name)
	}
	slices.Sort(names)
	slices.Sort(upstream)
	if !slices.Equal(names, upstream) {
		problems = append(problems, fmt.Sprintf("nginx.conf balances over %v, the loopx replicas are %v", upstream, names))
	}
	return loopx, vars, problems, nil
}

var nginxServer = regexp.MustCompile(`(?m)^\s*server\s+([A-Za-z0-9._-]+):7377\b`)

// readEnvFile reads KEY=VALUE lines ('#' comments, blank lines skipped).
func readEnvFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("%s: %q is not KEY=VALUE", path, line)
		}
		out[k] = v
	}
	return out, sc.Err()
}

// composeScenario checks the recipe, then runs its topology with the image's binary on the
// host's network: each loopx service a container with the recipe's environment (the
// database, the listen port and Lark's address are the only things the host's network and
// the sandbox change), nginx with the recipe's nginx.conf (its upstreams pointed at those
// ports), and the sandbox posting Lark's callbacks to nginx.
func (s *suite) composeScenario(ctx context.Context, ir *imageRun, r *ComposeResult, res *Results) error {
	services, vars, problems, err := checkCompose(composeDir)
	if err != nil {
		return err
	}
	r.Problems = append([]string{}, problems...)
	r.Valid = len(problems) == 0
	for _, p := range problems {
		res.check(false, "compose: %s", p)
	}
	if len(services) == 0 {
		return errors.New("no loopx replica to run")
	}
	if err := createDatabase(ctx, s.pg.URL("postgres"), "compose"); err != nil {
		return err
	}
	test := map[string]string{ // what example.env leaves to fill in
		"LOOPX_ADMIN_TOKEN": adminToken, "LOOPX_SECRET_KEY": s.secretKey,
		"LARK_APP_ID": s.sb.AppID(), "LARK_APP_SECRET": s.sb.AppSecret(),
		"LARK_VERIFICATION_TOKEN": verifyToken, "LARK_ENCRYPT_KEY": encryptKey,
	}
	ports := map[string]int{}
	var reps []*replica
	defer func() {
		for _, rep := range reps {
			if rep.alive() {
				_, _ = rep.term(10 * time.Second)
			}
		}
	}()
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range services {
			if !yield(n) {
				return
			}
		}
	}) {
		env := map[string]string{}
		for k, v := range vars {
			if k == "POSTGRES_PASSWORD" {
				continue // the postgres service's, not the replicas'
			}
			if t, ok := test[k]; ok && strings.Contains(v, "CHANGE-ME") {
				v = t
			}
			env[k] = v
		}
		for k, v := range services[name].Environment {
			env[k] = v
		}
		port, err := freePort()
		if err != nil {
			return err
		}
		ports[name] = port
		env["DATABASE_URL"] = s.pg.URL("compose")
		env["LOOPX_LISTEN"] = fmt.Sprintf("127.0.0.1:%d", port)
		env["LARK_BASE_URL"], env["LARK_BOT_OPEN_ID"] = s.sb.URL(), s.sb.BotOpenID()
		rep, err := ir.replica(s, name, env)
		if err != nil {
			return err
		}
		if err := rep.start(); err != nil {
			return err
		}
		reps = append(reps, rep)
		r.Replicas = append(r.Replicas, name)
	}
	for _, rep := range reps {
		if _, err := rep.waitReady(ctx, 90*time.Second); err != nil {
			return err
		}
	}
	proxy, stopProxy, err := startNginx(ctx, s.dir, ports)
	if err != nil {
		return err
	}
	defer stopProxy()
	if err := s.sb.SetCallbackURLs(proxy+"/lark/events", proxy+"/lark/cards"); err != nil {
		return err
	}
	defer func() { _ = s.sb.SetCallbackURLs("", "") }()

	post := func(path string, body any, want int) error {
		status, out, err := s.api(ctx, proxy, "POST", path, adminToken, fmt.Sprintf("compose-%d", time.Now().UnixNano()), body)
		if err == nil && status != want {
			err = fmt.Errorf("POST %s through nginx: %d %s", path, status, out)
		}
		return err
	}
	if err := post("/v1/goals", map[string]any{"goal_id": "compose", "title": "Compose", "owners": []string{ownerID}, "allowed_slots": 100}, 201); err != nil {
		return err
	}
	if err := post("/v1/goals/compose/agents", map[string]any{"agent_id": agentID, "is_default": true}, 201); err != nil {
		return err
	}
	const chats = 4
	var binds []*sandbox.Delivery
	for i := range chats {
		chat := fmt.Sprintf("oc_compose_%d", i)
		_ = s.sb.AddChat(chat, sandbox.ChatGroup, chat)
		d, err := s.sb.UserSays(chat, sandbox.ChatGroup, ownerID, "/bind #compose", sandbox.MentionBot())
		if err != nil {
			return err
		}
		binds = append(binds, d)
	}
	if _, failed := waitDelivered(ctx, binds); failed > 0 {
		return fmt.Errorf("%d /bind messages not acknowledged through nginx", failed)
	}

	// Every event once through nginx and once straight to each replica, at the same time.
	const events = 60
	r.DeliveriesEach = 1 + len(reps)
	var msgs []sent
	var extra []*sandbox.Delivery
	for i := range events {
		chat := fmt.Sprintf("oc_compose_%d", i%chats)
		d, err := s.sb.UserSays(chat, sandbox.ChatGroup, ownerID, fmt.Sprintf("compose message %d", i), sandbox.MentionBot())
		if err != nil {
			return err
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		for _, rep := range reps {
			wg.Go(func() {
				if status, _, err := s.sb.PushHTTP(ctx, rep.url+"/lark/events", d.Payload); err == nil && status == http.StatusOK {
					mu.Lock()
					r.DirectAcked++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		msgs = append(msgs, sent{chat: chat, messageID: d.MessageID, d: d})
	}
	r.Events = len(msgs)
	for _, m := range msgs {
		extra = append(extra, m.d)
	}
	_, r.NotAcked = waitDelivered(ctx, extra)
	st, err := s.storeOf(ctx, "compose")
	if err != nil {
		return err
	}
	if _, err := waitDrainedOf(ctx, st, 2*time.Minute); err != nil {
		res.check(false, "compose: %v", err)
	}
	if err := s.checkMessagesOf(ctx, st, "compose", msgs, &r.Lost, &r.Doubled, &r.ReceiptsDoubled, &r.ReceiptsMissing); err != nil {
		return err
	}

	// One replica stops (SIGTERM); nginx takes the next one and nothing is lost.
	if _, err := reps[0].term(15 * time.Second); err != nil {
		res.check(false, "compose: %s did not stop cleanly: %v", reps[0].name, err)
	}
	var after []sent
	var ds []*sandbox.Delivery
	for i := range 20 {
		chat := fmt.Sprintf("oc_compose_%d", i%chats)
		d, err := s.sb.UserSays(chat, sandbox.ChatGroup, ownerID, fmt.Sprintf("compose failover message %d", i), sandbox.MentionBot())
		if err != nil {
			return err
		}
		after = append(after, sent{chat: chat, messageID: d.MessageID, d: d})
		ds = append(ds, d)
	}
	r.FailoverEvents = len(after)
	_, r.FailoverNotAcked = waitDelivered(ctx, ds)
	var doubled, rd, rm int
	if _, err := waitDrainedOf(ctx, st, 2*time.Minute); err != nil {
		res.check(false, "compose: %v", err)
	}
	if err := s.checkMessagesOf(ctx, st, "compose", after, &r.FailoverLost, &doubled, &rd, &rm); err != nil {
		return err
	}
	r.Doubled += doubled
	r.ReceiptsDoubled += rd
	r.ReceiptsMissing += rm

	res.check(r.DirectAcked == r.Events*len(reps), "compose: %d of %d deliveries straight to a replica acknowledged", r.DirectAcked, r.Events*len(reps))
	res.check(r.NotAcked == 0, "compose: %d events not acknowledged", r.NotAcked)
	res.check(r.Lost == 0, "compose: %d events lost", r.Lost)
	res.check(r.Doubled == 0, "compose: %d events delivered to every replica had more than one effect", r.Doubled)
	res.check(r.ReceiptsDoubled == 0, "compose: %d receipts doubled", r.ReceiptsDoubled)
	res.check(r.ReceiptsMissing == 0, "compose: %d receipts missing", r.ReceiptsMissing)
	res.check(r.FailoverNotAcked == 0 && r.FailoverLost == 0, "compose: with %s stopped, %d events not acknowledged and %d lost", reps[0].name, r.FailoverNotAcked, r.FailoverLost)
	return nil
}

// startNginx runs Debian's nginx with deploy/replicas/nginx.conf, its upstream servers
// pointed at the replicas' ports and its listener at a free loopback port, and returns its
// URL once it answers /readyz through a replica.
func startNginx(ctx context.Context, dir string, ports map[string]int) (string, func(), error) {
	bin, err := exec.LookPath("nginx")
	if err != nil {
		bin = "/usr/sbin/nginx"
		if _, err := os.Stat(bin); err != nil {
			return "", nil, errors.New("nginx is not installed (scripts/image.sh installs Debian's nginx)")
		}
	}
	conf, err := os.ReadFile(filepath.Join(composeDir, "nginx.conf"))
	if err != nil {
		return "", nil, err
	}
	port, err := freePort()
	if err != nil {
		return "", nil, err
	}
	text := nginxServer.ReplaceAllStringFunc(string(conf), func(line string) string {
		name := nginxServer.FindStringSubmatch(line)[1]
		return strings.Replace(line, name+":7377", fmt.Sprintf("127.0.0.1:%d", ports[name]), 1)
	})
	listen := regexp.MustCompile(`(?m)^(\s*)listen\s+8080;`)
	if !listen.MatchString(text) {
		return "", nil, errors.New("nginx.conf does not listen on 8080 as compose.yaml publishes")
	}
	text = listen.ReplaceAllString(text, fmt.Sprintf("${1}listen 127.0.0.1:%d;", port))
	prefix := filepath.Join(dir, "nginx")
	if err := os.MkdirAll(filepath.Join(prefix, "logs"), 0o755); err != nil {
		return "", nil, err
	}
	path := filepath.Join(prefix, "nginx.conf")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		return "", nil, err
	}
	cmd := exec.Command(bin, "-p", prefix, "-c", path, "-g", "daemon off; pid "+filepath.Join(prefix, "nginx.pid")+"; error_log "+filepath.Join(prefix, "logs", "error.log")+";")
	out, _ := os.Create(filepath.Join(prefix, "logs", "stdout.log"))
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("start nginx: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		out.Close()
	}
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	hc := &http.Client{Timeout: 2 * time.Second}
	err = waitFor(ctx, 20*time.Second, func() (bool, error) {
		select {
		case <-done:
			b, _ := os.ReadFile(filepath.Join(prefix, "logs", "error.log"))
			return false, fmt.Errorf("nginx exited: %s", tail(string(b), 1500))
		default:
		}
		resp, err := hc.Get(url + "/readyz")
		if err != nil {
			return false, err
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		stop()
		return "", nil, err
	}
	return url, stop, nil
}
