package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Store is the only holder of SQL in the project. It is safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
	now  func() time.Time
	// tx, when set, is the caller's transaction every operation of this Store joins (see In).
	tx *Tx
	// keys seal and open runner secrets.
	keys *Keyring
	// txPooling: the database is reached through a pooler in transaction mode (PgBouncer),
	// where LISTEN does not work: Listen polls instead.
	txPooling bool
	// blobs is where file contents live (PostgreSQL unless an S3-compatible store is set).
	blobs BlobStore
	// maxFile caps one file's size in bytes.
	maxFile int64
}

// Options configures a Store.
type Options struct {
	// Now is the clock for values the store computes in Go. Nil means time.Now.
	// Where replicas must agree, SQL uses now() instead.
	Now func() time.Time
	// Keyring seals runner secrets at rest. Nil means a random key known only to this Store:
	// fine for tests, never for a server (a restart could not read what it sealed).
	Keyring *Keyring
	// TransactionPooling says the database is reached through a pooler in transaction mode
	// (see DetectTransactionPooling): Listen then polls instead of LISTENing.
	TransactionPooling bool
	// Blobs holds file contents; nil: PostgreSQL (file_chunk).
	Blobs BlobStore
	// MaxFileBytes caps one file; 0: DefaultMaxFileBytes.
	MaxFileBytes int64
}

// New wraps an open pool. The caller owns the pool and closes it after the store is done.
func New(pool *pgxpool.Pool, opts Options) *Store {
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	keys := opts.Keyring
	if keys == nil {
		keys = NewRandomKeyring()
	}
	maxFile := opts.MaxFileBytes
	if maxFile <= 0 {
		maxFile = DefaultMaxFileBytes
	}
	st := &Store{pool: pool, now: now, keys: keys, txPooling: opts.TransactionPooling, maxFile: maxFile}
	st.blobs = opts.Blobs
	if st.blobs == nil {
		st.blobs = pgBlobs{}
	}
	return st
}

// Open connects to url, checks the connection and returns the pool. It does not migrate. It
// assumes PostgreSQL itself (or a session pooler) answers; see OpenWith for PgBouncer in
// transaction mode.
func Open(ctx context.Context, url string) (*pgxpool.Pool, error) {
	return open(ctx, url, false)
}

// Now returns the store's clock reading.
func (s *Store) Now() time.Time { return s.now() }

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error { return s.pool.Ping(ctx) }

// DB is the executor the Store's statements run on: its joined transaction (In), else the
// pool. Plain reads outside any operation pass it to the store's read functions.
func (s *Store) DB() DB {
	if s.tx != nil {
		return s.tx
	}
	return s.pool
}

// redactErr keeps a password in a malformed URL out of logs: pgx quotes the URL in parse errors.
func redactErr(err error) error {
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) {
		return errors.New("invalid connection string")
	}
	return err
}
