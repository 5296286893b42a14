package devpg

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// ErrNoBinaries means no PostgreSQL server binaries were found on this machine.
var ErrNoBinaries = errors.New("no PostgreSQL server binaries (initdb, postgres) found on PATH or under /usr/lib/postgresql/*/bin: install the Debian package postgresql (apt-get install -y postgresql) or set DATABASE_URL")

// Options configures Start.
type Options struct {
	// Dir is the cluster home; the data directory is Dir/data. Required.
	Dir string
	// Fallback is the directory under which the cluster lives instead when the process runs
	// as root and the postgres system user cannot reach Dir (see Locate); "" means
	// DefaultFallback.
	Fallback string
	// Logger receives lifecycle messages. Nil discards them.
	Logger *slog.Logger
	// StartTimeout bounds how long Start waits for the server to accept connections.
	// Zero means 60 s.
	StartTimeout time.Duration
}

// Cluster is a running private PostgreSQL server.
type Cluster struct {
	dir    string
	url    string
	port   int
	cmd    *exec.Cmd
	logger *slog.Logger

	exited  chan struct{} // closed when the postgres process has exited
	waitErr error         // set before exited is closed

	stopOnce sync.Once
	stopErr  error
	endOnce  sync.Once
	watchEnd chan struct{} // closed by Stop so the context watcher returns
	watchWG  sync.WaitGroup
}

// DefaultFallback is where clusters go whose Dir the postgres system user cannot reach.
const DefaultFallback = "/var/lib/loopx"

// LocationFile is the file Start writes in Dir when the cluster lives elsewhere: it holds the
// cluster's directory, so a person looking in Dir finds it.
const LocationFile = "CLUSTER-LOCATION"

// Locate returns the cluster home Start uses for opts, creating nothing: opts.Dir, or, when
// the process runs as root and the postgres system user cannot search every parent of
// opts.Dir (a parent such as /root is closed to it), <Fallback>/devpg-<hash of opts.Dir>.
// moved reports the second case.
func Locate(opts Options) (dir string, moved bool, err error) {
	if opts.Dir == "" {
		return "", false, errors.New("locate private postgres: Options.Dir is empty")
	}
	home, err := filepath.Abs(opts.Dir)
	if err != nil {
		return "", false, fmt.Errorf("resolve cluster dir: %w", err)
	}
	cred, err := credential()
	if err != nil {
		return "", false, err
	}
	if cred == nil || reachable(home, cred) {
		return home, false, nil
	}
	return fallbackDir(opts, home), true, nil
}

func fallbackDir(opts Options, home string) string {
	sum := sha256.Sum256([]byte(home))
	root := opts.Fallback
	if root == "" {
		root = DefaultFallback
	}
	return filepath.Join(root, "devpg-"+hex.EncodeToString(sum[:6]))
}

// BinDir returns the directory holding initdb and postgres.
func BinDir() (string, error) { return findBinDir(exec.LookPath, "/usr/lib/postgresql/*/bin") }

// findBinDir looks on PATH (through lookPath), then in the newest directory matching pattern
// (Debian's /usr/lib/postgresql/<version>/bin); no version is assumed.
func findBinDir(lookPath func(string) (string, error), pattern string) (string, error) {
	if p, err := lookPath("initdb"); err == nil {
		if _, err := lookPath("postgres"); err == nil {
			return filepath.Dir(p), nil
		}
	}
	dirs, _ := filepath.Glob(pattern)
	// Newest major version first; names are numbers like "15" or "9.6".
	sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) > versionOf(dirs[j]) })
	for _, d := range dirs {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	return "", ErrNoBinaries
}

func versionOf(binDir string) float64 {
	v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(binDir)), 64)
	return v
}

func isExec(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// Start initialises the cluster when needed and starts the server. The server stops when ctx
// is cancelled or Stop is called; callers should call Stop (it is idempotent) to wait for it.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.Dir == "" {
		return nil, errors.New("start private postgres: Options.Dir is empty")
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	timeout := opts.StartTimeout
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	dir, moved, err := Locate(opts)
	if err != nil {
		return nil, err
	}
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	home, _ := filepath.Abs(opts.Dir)
	_, statErr := os.Stat(home)
	homeExisted := statErr == nil
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, fmt.Errorf("create cluster dir: %w", err)
	}
	if moved {
		logger.InfoContext(ctx, "the postgres user cannot reach the cluster dir; the cluster lives elsewhere",
			"dir", home, "cluster_dir", dir)
		if !homeExisted {
			// Dir was deleted (or never made) while its fallback cluster stayed: that cluster
			// belongs to a home that is gone, and must not be taken for this one's.
			if err := setAside(ctx, dir, logger); err != nil {
				return nil, err
			}
		}
		// Say where it is, in the directory a person looks in.
		if err := os.WriteFile(filepath.Join(home, LocationFile), []byte(dir+"\n"), 0o644); err != nil {
			return nil, fmt.Errorf("record cluster location: %w", err)
		}
		// The parent must be enterable by the postgres user; the cluster dir itself is its own.
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			return nil, fmt.Errorf("create cluster dir: %w", err)
		}
		if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil {
			return nil, fmt.Errorf("create cluster dir: %w", err)
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("create cluster dir: %w", err)
		}
	}
	if cred != nil {
		if err := chownTree(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	if _, err := os.Stat(filepath.Join(data, "PG_VERSION")); errors.Is(err, fs.ErrNotExist) {
		logger.InfoContext(ctx, "initialising private postgres cluster", "dir", data)
		if err := initdb(ctx, bin, data, cred); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, fmt.Errorf("inspect cluster: %w", err)
	}

	// A port picked from a closed listener can be taken before postgres binds it: retry.
	var lastErr error
	for range 3 {
		c, err := launch(ctx, bin, dir, data, cred, logger, timeout)
		if err == nil {
			return c, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, lastErr
}

// setAside renames a fallback cluster left by a deleted home to <dir>.orphaned-<time>, so
// that the home starts over as its deletion meant, and nothing is lost by surprise either.
func setAside(ctx context.Context, dir string, logger *slog.Logger) error {
	if _, err := os.Stat(filepath.Join(dir, "data", "PG_VERSION")); err != nil {
		return nil
	}
	aside := dir + ".orphaned-" + time.Now().UTC().Format("20060102T150405")
	if err := os.Rename(dir, aside); err != nil {
		return fmt.Errorf("set aside the cluster of a deleted home: %w", err)
	}
	logger.WarnContext(ctx, "the cluster dir was deleted but its cluster was kept elsewhere; that cluster was set aside and a new one starts (delete the old one when you no longer need it)",
		"set_aside", aside)
	return nil
}

func launch(ctx context.Context, bin, dir, data string, cred *syscall.Credential, logger *slog.Logger, timeout time.Duration) (*Cluster, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "postgres.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open postgres log: %w", err)
	}
	defer logFile.Close() // the child holds its own descriptor
	if cred != nil {
		_ = os.Chown(logPath, int(cred.Uid), int(cred.Gid))
	}
	logStart, _ := logFile.Seek(0, 2)

	cmd := exec.Command(filepath.Join(bin, "postgres"),
		"-D", data,
		"-p", strconv.Itoa(port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories=",
		"-c", "max_connections=200",
	)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Env = pgEnv()
	cmd.SysProcAttr = postgresAttr(cred)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	c := &Cluster{
		dir:      dir,
		url:      fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port),
		port:     port,
		cmd:      cmd,
		logger:   logger,
		exited:   make(chan struct{}),
		watchEnd: make(chan struct{}),
	}
	go func() { // owned by c: Stop waits on exited
		c.waitErr = cmd.Wait()
		close(c.exited)
	}()
	if err := c.waitReady(ctx, timeout); err != nil {
		_ = c.Stop()
		return nil, fmt.Errorf("start postgres: %w%s", err, logTail(logPath, logStart))
	}
	c.watchWG.Add(1)
	go func() {
		defer c.watchWG.Done()
		select {
		case <-ctx.Done():
			_ = c.stop()
		case <-c.watchEnd:
		case <-c.exited:
		}
	}()
	logger.InfoContext(ctx, "private postgres running", "port", port, "dir", data)
	return c, nil
}

func (c *Cluster) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-c.exited:
			return fmt.Errorf("postgres exited during start: %v", c.waitErr)
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := pgconn.Connect(cctx, c.url)
		cancel()
		if err == nil {
			_ = conn.Close(ctx)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres not accepting connections after %s: %w", timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// URL is the connection URL of the server (role postgres, database postgres).
func (c *Cluster) URL() string { return c.url }

// Port is the loopback TCP port the server listens on.
func (c *Cluster) Port() int { return c.port }

// Dir is the cluster home actually used (see the package doc for when it differs from
// Options.Dir).
func (c *Cluster) Dir() string { return c.dir }

// Done is closed when the server process has exited.
func (c *Cluster) Done() <-chan struct{} { return c.exited }

// Stop asks the server for a fast shutdown (SIGINT: disconnect clients, checkpoint) and waits
// for it, killing it after 15 s. It is safe to call more than once.
func (c *Cluster) Stop() error {
	err := c.stop()
	c.endOnce.Do(func() { close(c.watchEnd) })
	c.watchWG.Wait()
	return err
}

func (c *Cluster) stop() error {
	c.stopOnce.Do(func() {
		select {
		case <-c.exited:
			return
		default:
		}
		_ = c.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-c.exited:
		case <-time.After(15 * time.Second):
			_ = c.cmd.Process.Kill()
			<-c.exited
			c.stopErr = errors.New("stop postgres: killed after 15 s without shutting down")
		}
		c.logger.Info("private postgres stopped", "port", c.port)
	})
	return c.stopErr
}

func initdb(ctx context.Context, bin, data string, cred *syscall.Credential) error {
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "initdb"),
		"-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync")
	cmd.Env = pgEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		_ = os.RemoveAll(data) // a half-made cluster would block the next attempt
		return fmt.Errorf("initdb: %w: %s", err, strings.TrimSpace(out.String()))
	}
	return nil
}

// pgEnv is the environment for the server: PG* variables of the caller would redirect it.
func pgEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") {
			env = append(env, kv)
		}
	}
	return append(env, "LC_ALL=C")
}

// credential returns the postgres system user's identity when running as root, else nil.
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root and there is no postgres system user to run PostgreSQL as (install the Debian package postgresql): %w", err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
}

// reachable reports whether the user of cred can search every ancestor of dir. An ancestor
// that does not exist yet would be created by this (root) process, closed to others: it
// counts as unreachable.
func reachable(dir string, cred *syscall.Credential) bool {
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		st, err := os.Stat(p)
		if err != nil {
			return false
		}
		sys, ok := st.Sys().(*syscall.Stat_t)
		if !ok {
			return false
		}
		mode := st.Mode().Perm()
		switch {
		case sys.Uid == cred.Uid:
			if mode&0o100 == 0 {
				return false
			}
		case sys.Gid == cred.Gid:
			if mode&0o010 == 0 {
				return false
			}
		default:
			if mode&0o001 == 0 {
				return false
			}
		}
		if p == "/" || p == "." {
			return true
		}
	}
}

func chownTree(dir string, uid, gid int) error {
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
	if err != nil {
		return fmt.Errorf("hand cluster dir to the postgres user: %w", err)
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func logTail(path string, from int64) string {
	b, err := os.ReadFile(path)
	if err != nil || int64(len(b)) <= from {
		return ""
	}
	b = b[from:]
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return "\npostgres log:\n" + strings.TrimSpace(string(b))
}
