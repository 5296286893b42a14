package storetest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"loopx/store"
)

// DefaultURL is used when TEST_DATABASE_URL is empty.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// ServerURL returns the admin URL of the test server.
func ServerURL() string {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// NewDatabase creates a fresh migrated database and returns its URL. It is dropped in
// t.Cleanup. Use it when a test starts real `loopx serve` processes that need a URL.
func NewDatabase(t testing.TB) string {
	t.Helper()
	u, drop, err := CreateDatabase(context.Background(), ServerURL(), "loopx_t_")
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	t.Cleanup(func() {
		if err := drop(); err != nil {
			t.Logf("storetest: %v", err)
		}
	})
	return u
}

// CreateDatabase creates a fresh migrated database named prefix plus a random suffix on the
// server at admin (an administrator's URL, such as ServerURL), from a template built once per
// migration set, and returns its URL and a function that drops it. Benchmarks that are
// programs rather than tests use it too.
func CreateDatabase(ctx context.Context, admin, prefix string) (string, func() error, error) {
	tpl, err := template(ctx, admin)
	if err != nil {
		return "", nil, fmt.Errorf("prepare template database: %w", err)
	}
	name := prefix + randomHex(6)
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", nil, fmt.Errorf("connect to %s: %w", redacted(admin), err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s", name, tpl)); err != nil {
		return "", nil, fmt.Errorf("create database: %w", err)
	}
	drop := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, admin)
		if err != nil {
			return fmt.Errorf("drop %s: %w", name, err)
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			return fmt.Errorf("drop %s: %w", name, err)
		}
		return nil
	}
	return withDatabase(admin, name), drop, nil
}

// NewPool returns a pool on a fresh migrated database, closed when the test ends.
func NewPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	u := NewDatabase(t)
	pool, err := store.Open(context.Background(), u)
	if err != nil {
		t.Fatalf("storetest: open pool: %v", err)
	}
	t.Cleanup(pool.Close) // registered after the drop, so it runs before it
	return pool
}

// New returns a Store on a fresh migrated database.
func New(t testing.TB, opts store.Options) *store.Store {
	t.Helper()
	return store.New(NewPool(t), opts)
}

func template(ctx context.Context, admin string) (string, error) {
	sum, err := migrationsHash()
	if err != nil {
		return "", err
	}
	name := "loopx_tpl_" + sum[:12]
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", fmt.Errorf("connect to %s: %w", redacted(admin), err)
	}
	defer conn.Close(ctx)
	// One builder at a time across all test processes.
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(727274001)"); err != nil {
		return "", fmt.Errorf("lock: %w", err)
	}
	defer conn.Exec(context.Background(), "SELECT pg_advisory_unlock(727274001)") //nolint:errcheck
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return "", fmt.Errorf("look up template: %w", err)
	}
	if exists {
		return name, nil
	}
	building := name + "_b"
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+building+" WITH (FORCE)"); err != nil {
		return "", fmt.Errorf("drop stale template: %w", err)
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+building); err != nil {
		return "", fmt.Errorf("create template: %w", err)
	}
	pool, err := store.Open(ctx, withDatabase(admin, building))
	if err != nil {
		return "", err
	}
	err = store.Migrate(ctx, pool)
	pool.Close()
	if err != nil {
		return "", err
	}
	if _, err := conn.Exec(ctx, fmt.Sprintf("ALTER DATABASE %s RENAME TO %s", building, name)); err != nil {
		return "", fmt.Errorf("publish template: %w", err)
	}
	return name, nil
}

func migrationsHash() (string, error) {
	h := sha256.New()
	err := fs.WalkDir(store.MigrationFS(), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(store.MigrationFS(), path)
		if err != nil {
			return err
		}
		h.Write([]byte(path))
		h.Write(b)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("hash migrations: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func withDatabase(admin, name string) string {
	u, err := url.Parse(admin)
	if err != nil || !strings.HasPrefix(u.Scheme, "postgres") {
		// keyword/value form
		return admin + " dbname=" + name
	}
	u.Path = "/" + name
	return u.String()
}

func redacted(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(database url)"
	}
	return u.Redacted()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
