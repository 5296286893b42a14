package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"loopx/router/api"
)

// client calls the server's /v1 API.
type client struct {
	base    string
	token   string
	idemKey string
	http    *http.Client
}

// newClient resolves LOOPX_URL and LOOPX_TOKEN. With no LOOPX_TOKEN and the default URL, it
// uses the admin token that `loopx serve` keeps under LOOPX_HOME.
func (a *app) newClient() (*client, error) {
	base, isDefault, err := a.serverURL()
	if err != nil {
		return nil, err
	}
	token := a.getenv("LOOPX_TOKEN")
	if token == "" && isDefault {
		home := a.getenv("LOOPX_HOME")
		if home == "" && a.getenv("HOME") != "" {
			home = filepath.Join(a.getenv("HOME"), ".loopx")
		}
		if home != "" {
			token, _ = readToken(filepath.Join(home, tokenFile))
		}
	}
	if token == "" {
		return nil, usageError{errors.New("LOOPX_TOKEN: not set; set it to the admin token or an agent token (loopx agent register prints one)")}
	}
	key := a.idemKey
	if err := checkIdempotencyFlag(key); err != nil {
		return nil, err
	}
	if key == "" {
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		key = hex.EncodeToString(b)
	}
	return &client{
		base: base, token: token, idemKey: key,
		http: &http.Client{Timeout: 60 * time.Second},
	}, nil
}

// serverURL is LOOPX_URL without a trailing slash, or the default server (isDefault).
func (a *app) serverURL() (base string, isDefault bool, err error) {
	base = a.getenv("LOOPX_URL")
	isDefault = base == ""
	if isDefault {
		base = "http://" + DefaultListen
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", false, usageError{fmt.Errorf("LOOPX_URL: %q is not an http(s) URL like http://%s", base, DefaultListen)}
	}
	return strings.TrimRight(base, "/"), isDefault, nil
}

// call sends one request and returns the raw JSON answer. A non-2xx answer is an *api.Error;
// no answer at all is an unreachableError.
func (c *client) call(ctx context.Context, method, path string, query url.Values, body any) (json.RawMessage, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("encode request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if method != http.MethodGet {
		req.Header.Set("Idempotency-Key", c.idemKey)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, unreachableError{fmt.Errorf("reach loopx server at %s: %w (is loopx serve running? LOOPX_URL)", c.base, err)}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return nil, unreachableError{fmt.Errorf("read answer from %s: %w", c.base, err)}
	}
	if resp.StatusCode/100 != 2 {
		var eb api.ErrorBody
		if json.Unmarshal(b, &eb) != nil || eb.Error == nil {
			return nil, &api.Error{Status: resp.StatusCode, Code: api.CodeInternal,
				Message: fmt.Sprintf("server answered %s: %s", resp.Status, strings.TrimSpace(string(b)))}
		}
		eb.Error.Status = resp.StatusCode
		return nil, eb.Error
	}
	return b, nil
}

// checkIdempotencyFlag refuses an --idempotency-key the server would refuse (or that could
// not even travel in a header) as a usage error, before anything is sent.
func checkIdempotencyFlag(k string) error {
	switch {
	case len(k) > 200:
		return usageError{fmt.Errorf("--idempotency-key: is %d characters; at most 200", len(k))}
	case !utf8.ValidString(k):
		return usageError{errors.New("--idempotency-key: is not UTF-8 text; use printable characters")}
	case strings.IndexFunc(k, unicode.IsControl) >= 0:
		return usageError{errors.New("--idempotency-key: contains a control character; use printable characters")}
	}
	return nil
}
