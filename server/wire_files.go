package server

import (
	"context"
	"fmt"

	"loopx/bot"
	"loopx/server/larkstore"
	"loopx/store"
	"loopx/store/s3blob"
)

// blobStore is where file contents live: nil (PostgreSQL) unless LOOPX_FILE_STORE=s3, whose
// bucket is checked before anything starts.
func blobStore(ctx context.Context, cfg FilesConfig) (store.BlobStore, error) {
	if cfg.Store != "s3" {
		return nil, nil
	}
	s, err := s3blob.New(s3blob.Config{Endpoint: cfg.S3.Endpoint, Region: cfg.S3.Region, Bucket: cfg.S3.Bucket,
		Prefix: cfg.S3.Prefix, AccessKey: cfg.S3.AccessKey, SecretKey: string(cfg.S3.SecretKey)})
	if err != nil {
		return nil, fmt.Errorf("LOOPX_FILE_STORE=s3: %w", err)
	}
	if err := s.Check(ctx); err != nil {
		return nil, fmt.Errorf("LOOPX_FILE_STORE=s3: %w", err)
	}
	return s, nil
}

// fetcher downloads the files people send the bot (bot.Fetcher over larkstore.Fetches).
func fetcher(d *deps, client *bot.Client) (component, error) {
	f, err := bot.NewFetcher(client, larkstore.Fetches{Store: d.store, Templates: d.templates, DefaultLang: d.cfg.Lang},
		bot.FetcherOptions{Owner: d.cfg.Replica + "/" + randomHex(3), Logger: d.logger})
	if err != nil {
		return component{}, err
	}
	return component{name: "file-fetcher", run: f.Run}, nil
}
