package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"loopx/store/devpg"
)

// pgCluster is the suite's own PostgreSQL cluster, on a fixed port so that it can be stopped
// and started again under the replicas' feet.
type pgCluster struct {
	bin, data, logPath string
	port               int
	cred               *syscall.Credential
	mu                 sync.Mutex
	cmd                *exec.Cmd
	exited             chan struct{}
}

// postgresCredential is the postgres system user when running as root (PostgreSQL and
// PgBouncer refuse to run as root), else nil.
func postgresCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root without a postgres system user: %w", err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func newPGCluster(ctx context.Context, dir string) (*pgCluster, error) {
	bin, err := devpg.BinDir()
	if err != nil {
		return nil, err
	}
	cred, err := postgresCredential()
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	c := &pgCluster{bin: bin, data: filepath.Join(dir, "data"), logPath: filepath.Join(dir, "postgres.log"), port: port, cred: cred}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, err
		}
	}
	init := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", c.data, "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--locale=C", "--no-sync")
	init.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	init.Env = pgEnv()
	if out, err := init.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %w: %s", err, out)
	}
	return c, c.start(ctx)
}

func pgEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") {
			env = append(env, kv)
		}
	}
	return append(env, "LC_ALL=C")
}

// URL is the superuser URL of database name.
func (c *pgCluster) URL(name string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.port, name)
}

func (c *pgCluster) start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	logFile, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd := exec.Command(filepath.Join(c.bin, "postgres"), "-D", c.data, "-p", strconv.Itoa(c.port),
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=", "-c", "max_connections=300",
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = pgEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred, Pdeathsig: syscall.SIGINT, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	c.cmd, c.exited = cmd, make(chan struct{})
	exited := c.exited
	go func() { _ = cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", c.port), time.Second)
		if err == nil {
			conn.Close()
			if ok := pgReady(ctx, c.URL("postgres")); ok {
				return nil
			}
		}
		select {
		case <-exited:
			b, _ := os.ReadFile(c.logPath)
			return fmt.Errorf("postgres exited at start: %s", tail(string(b), 2000))
		case <-time.After(50 * time.Millisecond):
		}
	}
	return errors.New("postgres not ready after 30 s")
}

// stop asks for a fast shutdown (SIGINT: abort transactions, close connections, checkpoint).
func (c *pgCluster) stop() error {
	c.mu.Lock()
	cmd, exited := c.cmd, c.exited
	c.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-exited:
		return nil
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
		return errors.New("postgres did not stop within 30 s")
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// pgBouncer is Debian's pgbouncer in transaction mode before the cluster.
type pgBouncer struct {
	port int
	cmd  *exec.Cmd
	done chan struct{}
	log  string
}

func startPgBouncer(ctx context.Context, dir string, pg *pgCluster, db string) (*pgBouncer, error) {
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		for _, p := range []string{"/usr/sbin/pgbouncer", "/usr/bin/pgbouncer"} {
			if _, e := os.Stat(p); e == nil {
				bin, err = p, nil
			}
		}
		if err != nil {
			return nil, errors.New("pgbouncer not installed (make chaos installs Debian's pgbouncer)")
		}
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	ini := filepath.Join(dir, "pgbouncer.ini")
	users := filepath.Join(dir, "userlist.txt")
	logPath := filepath.Join(dir, "pgbouncer.log")
	conf := fmt.Sprintf(`[databases]
%s = host=127.0.0.1 port=%d dbname=%s user=postgres

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = transaction
max_client_conn = 1000
default_pool_size = 20
server_reset_query =
ignore_startup_parameters = extra_float_digits
logfile = %s
pidfile = %s
`, db, pg.port, db, port, users, logPath, filepath.Join(dir, "pgbouncer.pid"))
	if err := os.WriteFile(ini, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(users, []byte(`"postgres" ""`+"\n"), 0o644); err != nil {
		return nil, err
	}
	if pg.cred != nil {
		for _, p := range []string{ini, users} {
			_ = os.Chown(p, int(pg.cred.Uid), int(pg.cred.Gid))
		}
		f, _ := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY, 0o644)
		if f != nil {
			f.Close()
			_ = os.Chown(logPath, int(pg.cred.Uid), int(pg.cred.Gid))
		}
	}
	cmd := exec.Command(bin, ini)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: pg.cred, Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start pgbouncer: %w", err)
	}
	b := &pgBouncer{port: port, cmd: cmd, done: make(chan struct{}), log: logPath}
	go func() { _ = cmd.Wait(); close(b.done) }()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if pgReady(ctx, b.URL(db)) {
			return b, nil
		}
		select {
		case <-b.done:
			l, _ := os.ReadFile(logPath)
			return nil, fmt.Errorf("pgbouncer exited: %s %s", out.String(), tail(string(l), 1500))
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil, errors.New("pgbouncer not ready after 15 s")
}

func (b *pgBouncer) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", b.port, db)
}

func (b *pgBouncer) stop() {
	_ = b.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-b.done:
	case <-time.After(5 * time.Second):
		_ = b.cmd.Process.Kill()
		<-b.done
	}
}

// replica is one `loopx serve` process.
type replica struct {
	name   string
	url    string // http://addr
	env    []string
	bin    string
	logDir string
	// argv, when set, is the whole command line instead of `bin serve`: the image's entry
	// point started by a launcher (image.go).
	argv []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan error
}

func (r *replica) start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	logFile, err := os.OpenFile(filepath.Join(r.logDir, r.name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close()
	argv := r.argv
	if len(argv) == 0 {
		argv = []string{r.bin, "serve"}
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = r.env
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", r.name, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	r.cmd, r.done = cmd, done
	return nil
}

// waitReady polls /readyz until 200 and returns how long that took.
func (r *replica) waitReady(ctx context.Context, limit time.Duration) (time.Duration, error) {
	start := time.Now()
	hc := &http.Client{Timeout: 2 * time.Second}
	for time.Since(start) < limit {
		r.mu.Lock()
		done := r.done
		r.mu.Unlock()
		select {
		case err := <-done:
			done <- err
			return 0, fmt.Errorf("%s exited: %v (log %s)", r.name, err, filepath.Join(r.logDir, r.name+".log"))
		default:
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, r.url+"/readyz", nil)
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return time.Since(start), nil
			}
		}
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		time.Sleep(25 * time.Millisecond)
	}
	return 0, fmt.Errorf("%s not ready after %s", r.name, limit)
}

// kill sends SIGKILL (kill -9) and waits for the exit.
func (r *replica) kill() {
	r.mu.Lock()
	cmd, done := r.cmd, r.done
	r.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	err := <-done
	done <- err
}

// term sends SIGTERM and returns the exit error (nil for a clean stop) and how long it took.
func (r *replica) term(limit time.Duration) (time.Duration, error) {
	r.mu.Lock()
	cmd, done := r.cmd, r.done
	r.mu.Unlock()
	start := time.Now()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		done <- err
		return time.Since(start), err
	case <-time.After(limit):
		_ = cmd.Process.Kill()
		err := <-done
		done <- err
		return time.Since(start), fmt.Errorf("%s did not stop within %s of SIGTERM", r.name, limit)
	}
}

func (r *replica) alive() bool {
	r.mu.Lock()
	done := r.done
	r.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case err := <-done:
		done <- err
		return false
	default:
		return true
	}
}
