package bot

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path"
	"strings"
	"sync"
	"time"

	larkcore "github.com/larksuite/oapi-sdk-go/v3/core"
	larkim "github.com/larksuite/oapi-sdk-go/v3/service/im/v1"
)

// Files both ways: the images and files people send the bot are downloaded through the
// message resource API by the Fetcher; the files agents send back are uploaded (im/v1/images
// or im/v1/files) by the sender before it sends the image or file message.

// downloadResource fetches one resource of a message (type image or file) whole: the SDK
// buffers it. name is the file name Lark's Content-Disposition gives, "" when none.
func (c *Client) downloadResource(ctx context.Context, messageID, key, kind string) (data []byte, name string, res apiResult, err error) {
	res, err = c.call(ctx, func(opt larkcore.RequestOptionFunc) (apiResult, error) {
		req := larkim.NewGetMessageResourceReqBuilder().MessageId(messageID).FileKey(key).Type(kind).Build()
		resp, err := c.sdk.Im.V1.MessageResource.Get(ctx, req, opt)
		if err != nil {
			return apiResult{}, fmt.Errorf("download message resource: %w", err)
		}
		r := resultOf(resp.ApiResp, resp.Code, resp.Msg)
		if resp.ApiResp != nil && resp.StatusCode == 200 && resp.File != nil {
			data, err = io.ReadAll(resp.File)
			name = resp.FileName
			return r, err
		}
		if r.Code == 0 {
			r.Code = -1 // an error answer without a code: not a download
			r.Msg = fmt.Sprintf("HTTP %d", r.HTTPStatus)
		}
		return r, nil
	})
	return data, name, res, err
}

// uploadImage uploads an image for sending in a message and returns its image_key.
func (c *Client) uploadImage(ctx context.Context, data []byte) (string, apiResult, error) {
	var key string
	res, err := c.call(ctx, func(opt larkcore.RequestOptionFunc) (apiResult, error) {
		req := larkim.NewCreateImageReqBuilder().Body(larkim.NewCreateImageReqBodyBuilder().
			ImageType(larkim.CreateImageImageTypeMessage).Image(bytes.NewReader(data)).Build()).Build()
		resp, err := c.sdk.Im.V1.Image.Create(ctx, req, opt)
		if err != nil {
			return apiResult{}, fmt.Errorf("upload image: %w", err)
		}
		if resp.Success() && resp.Data != nil && resp.Data.ImageKey != nil {
			key = *resp.Data.ImageKey
		}
		return resultOf(resp.ApiResp, resp.Code, resp.Msg), nil
	})
	return key, res, err
}

// uploadFile uploads a file for sending in a message and returns its file_key.
func (c *Client) uploadFile(ctx context.Context, name string, data []byte) (string, apiResult, error) {
	var key string
	res, err := c.call(ctx, func(opt larkcore.RequestOptionFunc) (apiResult, error) {
		req := larkim.NewCreateFileReqBuilder().Body(larkim.NewCreateFileReqBodyBuilder().
			FileType(larkFileType(name)).FileName(name).File(bytes.NewReader(data)).Build()).Build()
		resp, err := c.sdk.Im.V1.File.Create(ctx, req, opt)
		if err != nil {
			return apiResult{}, fmt.Errorf("upload file: %w", err)
		}
		if resp.Success() && resp.Data != nil && resp.Data.FileKey != nil {
			key = *resp.Data.FileKey
		}
		return resultOf(resp.ApiResp, resp.Code, resp.Msg), nil
	})
	return key, res, err
}

// larkFileType is the file_type Lark's file upload wants: the types it knows by name, else
// stream.
func larkFileType(name string) string {
	switch ext := strings.ToLower(strings.TrimPrefix(path.Ext(name), ".")); ext {
	case "opus", "mp4", "pdf", "doc", "xls", "ppt":
		return ext
	case "docx":
		return "doc"
	case "xlsx", "csv":
		return "xls"
	case "pptx":
		return "ppt"
	}
	return "stream"
}

// OutboxFile is a file the sender uploads and sends (an outbox row of kind file).
type OutboxFile struct {
	Name  string
	Image bool // sent as an image message (else a file message)
	Data  []byte
}

// fileContent is the content of an outbox row of kind file.
type fileContent struct {
	FileID int64 `json:"file_id"`
}

// sendFile uploads the row's file and sends it as an image or file message (with the row's
// uuid, so a retry is one message). An upload is repeated on a retry; Lark keeps unused keys.
func (s *Sender) sendFile(ctx context.Context, c OutboxMessage) (apiResult, error) {
	var fc fileContent
	if err := json.Unmarshal([]byte(c.Content), &fc); err != nil || fc.FileID <= 0 {
		return apiResult{Code: codeBadRequest, Msg: "file row names no file"}, nil
	}
	f, err := s.ob.OpenFile(ctx, fc.FileID)
	if err != nil {
		return apiResult{}, fmt.Errorf("read file %d: %w", fc.FileID, err)
	}
	var key string
	var res apiResult
	msgType, field := "file", "file_key"
	if f.Image {
		msgType, field = "image", "image_key"
		key, res, err = s.cli.uploadImage(ctx, f.Data)
	} else {
		key, res, err = s.cli.uploadFile(ctx, f.Name, f.Data)
	}
	if err != nil || res.Code != 0 || res.HTTPStatus >= 300 {
		return res, err
	}
	if key == "" {
		return apiResult{Code: -1, Msg: "lark answered the upload without a key", HTTPStatus: res.HTTPStatus}, nil
	}
	body, _ := json.Marshal(map[string]string{field: key})
	if c.ReplyTo != "" {
		return s.cli.replyMessage(ctx, c.ReplyTo, msgType, string(body), c.ReplyInThread, c.UUID)
	}
	idType := c.ReceiveIDType
	if idType == "" {
		idType = "chat_id"
	}
	return s.cli.createMessage(ctx, idType, c.ReceiveID, msgType, string(body), c.UUID)
}

// Fetch is one file to download from Lark: a resource of a message a person sent.
type Fetch struct {
	ID        int64
	MessageID string
	Key       string
	Kind      string // image | file
	Name      string
	Attempts  int
}

// Fetches is the fetcher's view of the files to download (implemented over the store by
// server/larkstore).
type Fetches interface {
	// Claim takes up to limit due downloads for owner until the lease ends.
	Claim(ctx context.Context, owner string, lease time.Duration, limit int) ([]Fetch, error)
	// Save stores a downloaded file (a file over the size cap fails for good, and the
	// chat is told).
	Save(ctx context.Context, id int64, owner, name string, data []byte) error
	// Fail records a failed download: permanent, or due again after retry.
	Fail(ctx context.Context, id int64, owner, reason string, permanent bool, retry time.Duration) error
	// NextDue tells how long until the next download is due; ok=false when none is.
	NextDue(ctx context.Context) (wait time.Duration, ok bool, err error)
	// Listen calls wake whenever a message brought files, until ctx ends or it fails.
	Listen(ctx context.Context, wake func()) error
}

// FetcherOptions tunes a Fetcher. Zero values take the defaults.
type FetcherOptions struct {
	Owner       string        // this replica's name on its claims
	Lease       time.Duration // how long a claimed download is this replica's; 0 = 2 min
	Concurrency int           // downloads at once; 0 = 2
	Logger      *slog.Logger
}

// Fetcher downloads the files people send the bot, through the official SDK's message
// resource API, and stores them (content-addressed) with the inbox item they came with,
// which then goes to its agent. Guarantees: a download is claimed before it is made (a
// replica that dies leaves it to another after the lease); a Lark rate limit or a 5xx is
// retried later, a refusal (the resource is gone, too large) fails the file for good and
// the chat is told; no database transaction is open during a download.
type Fetcher struct {
	cli  *Client
	f    Fetches
	opt  FetcherOptions
	log  *slog.Logger
	wake chan struct{}
}

// NewFetcher builds a fetcher over cli and f.
func NewFetcher(cli *Client, f Fetches, opt FetcherOptions) (*Fetcher, error) {
	if cli == nil || f == nil {
		return nil, errors.New("new fetcher: client and fetches are required")
	}
	if opt.Owner == "" {
		opt.Owner = "fetcher"
	}
	if opt.Lease <= 0 {
		opt.Lease = 2 * time.Minute
	}
	if opt.Concurrency <= 0 {
		opt.Concurrency = 2
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	return &Fetcher{cli: cli, f: f, opt: opt, log: opt.Logger.With("component", "fetcher"), wake: make(chan struct{}, 1)}, nil
}

// Run downloads due files until ctx ends, woken by new ones; it returns after the downloads
// in flight ended.
func (fe *Fetcher) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			err := fe.f.Listen(ctx, fe.poke)
			if ctx.Err() != nil {
				return
			}
			fe.log.Warn("file notifications lost; reconnecting", "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			fe.poke()
		}
	}()
	defer wg.Wait()
	for {
		n, err := fe.Step(ctx)
		if err != nil && ctx.Err() == nil {
			fe.log.Warn("download files", "err", err)
		}
		wait := 30 * time.Second
		if err != nil {
			wait = 5 * time.Second
		} else if n == 0 {
			if d, ok, err := fe.f.NextDue(ctx); err == nil && ok {
				wait = min(wait, max(d, 50*time.Millisecond))
			}
		} else {
			wait = 0
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-fe.wake:
			t.Stop()
		case <-t.C:
		}
	}
}

func (fe *Fetcher) poke() {
	select {
	case fe.wake <- struct{}{}:
	default:
	}
}

// Step claims the due downloads and makes them, Concurrency at a time; it returns how many.
func (fe *Fetcher) Step(ctx context.Context) (int, error) {
	list, err := fe.f.Claim(ctx, fe.opt.Owner, fe.opt.Lease, 4*fe.opt.Concurrency)
	if err != nil || len(list) == 0 {
		return 0, err
	}
	sem := make(chan struct{}, fe.opt.Concurrency)
	var wg sync.WaitGroup
	for _, f := range list {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			fe.fetch(ctx, f)
		}()
	}
	wg.Wait()
	return len(list), nil
}

// fetch downloads one file and records the outcome; it never returns an error (a record
// that fails leaves the claim to lapse, and the download is made again).
func (fe *Fetcher) fetch(ctx context.Context, f Fetch) {
	log := fe.log.With("file", f.ID, "message_id", f.MessageID)
	data, name, res, err := fe.cli.downloadResource(ctx, f.MessageID, f.Key, f.Kind)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	switch {
	case err != nil:
		retry := min(time.Second<<min(f.Attempts, 8), 5*time.Minute)
		log.Warn("download failed; retrying", "err", err, "in", retry)
		err = fe.f.Fail(rctx, f.ID, fe.opt.Owner, err.Error(), false, retry)
	case res.Code == 0 && res.HTTPStatus < 300:
		if name == "" {
			name = f.Name
		}
		err = fe.f.Save(rctx, f.ID, fe.opt.Owner, name, data)
	case isRateCode(res.Code) || res.HTTPStatus == 429 || res.HTTPStatus >= 500:
		err = fe.f.Fail(rctx, f.ID, fe.opt.Owner, fmt.Sprintf("lark code %d: %s", res.Code, res.Msg), false, res.retryAfter(time.Duration(f.Attempts+1)*time.Second))
	default:
		log.Warn("lark refused the download", "code", res.Code, "msg", res.Msg)
		err = fe.f.Fail(rctx, f.ID, fe.opt.Owner, fmt.Sprintf("lark code %d: %s", res.Code, res.Msg), true, 0)
	}
	if err != nil {
		log.Error("record download", "err", err)
	}
}

// messageFiles reads the files a message brought: an image or file message, media and audio
// (as files), and the images and media inside a post.
func messageFiles(msgType, content string) ([]fileRef, error) {
	switch msgType {
	case "image":
		var c struct {
			ImageKey string `json:"image_key"`
		}
		if err := json.Unmarshal([]byte(content), &c); err != nil {
			return nil, fmt.Errorf("image content is not JSON: %w", err)
		}
		if c.ImageKey == "" {
			return nil, nil
		}
		return []fileRef{{Key: c.ImageKey, Kind: "image"}}, nil
	case "file", "media", "audio":
		var c struct {
			FileKey  string `json:"file_key"`
			FileName string `json:"file_name"`
		}
		if err := json.Unmarshal([]byte(content), &c); err != nil {
			return nil, fmt.Errorf("%s content is not JSON: %w", msgType, err)
		}
		if c.FileKey == "" {
			return nil, nil
		}
		name := c.FileName
		if name == "" && msgType == "audio" {
			name = "audio.opus"
		}
		return []fileRef{{Key: c.FileKey, Kind: "file", Name: name}}, nil
	case "post":
		return postFiles(content)
	}
	return nil, nil
}

type fileRef struct{ Key, Kind, Name string }

// postFiles lists the img and media runs of a post (either shape, see postText).
func postFiles(content string) ([]fileRef, error) {
	type run struct {
		Tag      string `json:"tag"`
		ImageKey string `json:"image_key"`
		FileKey  string `json:"file_key"`
		FileName string `json:"file_name"`
	}
	type post struct {
		Content [][]run `json:"content"`
	}
	var p post
	if err := json.Unmarshal([]byte(content), &p); err != nil {
		return nil, fmt.Errorf("post content is not JSON: %w", err)
	}
	if p.Content == nil {
		var byLang map[string]post
		if err := json.Unmarshal([]byte(content), &byLang); err == nil {
			for _, q := range byLang {
				if q.Content != nil {
					p = q
					break
				}
			}
		}
	}
	var out []fileRef
	for _, para := range p.Content {
		for _, r := range para {
			switch {
			case r.Tag == "img" && r.ImageKey != "":
				out = append(out, fileRef{Key: r.ImageKey, Kind: "image"})
			case r.Tag == "media" && r.FileKey != "":
				out = append(out, fileRef{Key: r.FileKey, Kind: "file", Name: r.FileName})
			}
		}
	}
	return out, nil
}
