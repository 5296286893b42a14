// Package s3blob keeps file contents in an S3-compatible object store (AWS S3, MinIO, Ceph,
// R2, ...) for deployments whose files outgrow PostgreSQL: store.Options.Blobs. Objects are
// named by their SHA-256 (content-addressed: a second Put of the same content rewrites the
// same object), under a prefix. It uses MinIO's Go client (github.com/minio/minio-go/v7): one
// module that speaks the S3 API to every S3-compatible store, with far fewer dependencies than
// the AWS SDK.
//
// Guarantees: Put returns only once the object is stored (store.StageBlob calls it before the
// transaction that records the file, never inside one); Get streams the object; Delete of a
// missing object succeeds.
package s3blob

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"loopx/store"
)

// Config names the bucket and how to reach it.
type Config struct {
	// Endpoint is the store's URL: https://s3.amazonaws.com, http://127.0.0.1:9000, ...
	Endpoint  string
	Region    string // "" = the client's default
	Bucket    string
	Prefix    string // object names start with it ("" = none); e.g. "loopx/"
	AccessKey string
	SecretKey string
}

// Store is a store.BlobStore on an S3-compatible bucket.
type Store struct {
	cli    *minio.Client
	bucket string
	prefix string
}

var _ store.BlobStore = (*Store)(nil)

// New checks cfg and builds the client; it makes no network call (Check does).
func New(cfg Config) (*Store, error) {
	u, err := url.Parse(cfg.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("s3 endpoint %q is not an http(s) URL such as https://s3.amazonaws.com", cfg.Endpoint)
	}
	if cfg.Bucket == "" {
		return nil, errors.New("s3 bucket is empty")
	}
	cli, err := minio.New(u.Host, &minio.Options{
		Creds:  credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""),
		Secure: u.Scheme == "https",
		Region: cfg.Region,
	})
	if err != nil {
		return nil, fmt.Errorf("s3 client: %w", err)
	}
	return &Store{cli: cli, bucket: cfg.Bucket, prefix: strings.TrimPrefix(cfg.Prefix, "/")}, nil
}

// Check tells whether the bucket exists and the credentials reach it.
func (s *Store) Check(ctx context.Context) error {
	ok, err := s.cli.BucketExists(ctx, s.bucket)
	if err != nil {
		return fmt.Errorf("reach s3 bucket %s: %w", s.bucket, err)
	}
	if !ok {
		return fmt.Errorf("s3 bucket %s does not exist; create it first", s.bucket)
	}
	return nil
}

// Name is the backend's name in file_blob.backend.
func (s *Store) Name() string { return "s3" }

func (s *Store) key(sum []byte) string { return s.prefix + hex.EncodeToString(sum) }

// Put stores data under its SHA-256.
func (s *Store) Put(ctx context.Context, sum []byte, data []byte) error {
	_, err := s.cli.PutObject(ctx, s.bucket, s.key(sum), bytes.NewReader(data), int64(len(data)),
		minio.PutObjectOptions{ContentType: "application/octet-stream"})
	if err != nil {
		return fmt.Errorf("put %s: %w", s.key(sum), err)
	}
	return nil
}

// Get streams the object stored under sum.
func (s *Store) Get(ctx context.Context, sum []byte) (io.ReadCloser, error) {
	obj, err := s.cli.GetObject(ctx, s.bucket, s.key(sum), minio.GetObjectOptions{})
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", s.key(sum), err)
	}
	if _, err := obj.Stat(); err != nil {
		obj.Close()
		return nil, fmt.Errorf("get %s: %w", s.key(sum), err)
	}
	return obj, nil
}

// Delete removes the object stored under sum.
func (s *Store) Delete(ctx context.Context, sum []byte) error {
	if err := s.cli.RemoveObject(ctx, s.bucket, s.key(sum), minio.RemoveObjectOptions{}); err != nil {
		return fmt.Errorf("delete %s: %w", s.key(sum), err)
	}
	return nil
}
