package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"loopx/api"
)

// ErrUnreachable marks a call whose answer never arrived: the server is down, the URL is
// wrong, or the connection broke. Test with errors.Is.
var ErrUnreachable = errors.New("loopx server unreachable")

// maxAnswerBytes bounds an answer read into memory.
const maxAnswerBytes = 32 << 20

// Options configures a Client.
type Options struct {
	// BaseURL is the server, e.g. http://127.0.0.1:7377. Required: http or https.
	BaseURL string
	// Token is the bearer token: the admin token, an agent token or a turn token.
	Token string
	// HTTPClient sends the requests; nil means one with a 60 s timeout.
	HTTPClient *http.Client
}

// Client calls the /v1 API as one token. It is safe for concurrent use.
type Client struct {
	base  string
	token string
	http  *http.Client
}

// New checks opts and returns a Client.
func New(opts Options) (*Client, error) {
	u, err := url.Parse(opts.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%q is not an http(s) URL like http://127.0.0.1:7377", opts.BaseURL)
	}
	if opts.Token == "" {
		return nil, errors.New("no token: the API needs the admin token or an agent token")
	}
	hc := opts.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: 60 * time.Second}
	}
	return &Client{base: strings.TrimRight(opts.BaseURL, "/"), token: opts.Token, http: hc}, nil
}

// BaseURL is the server the client calls, without a trailing slash.
func (c *Client) BaseURL() string { return c.base }

// Token is the bearer token the client sends.
func (c *Client) Token() string { return c.token }

// WithToken returns a client of the same server and transport that sends token.
func (c *Client) WithToken(token string) (*Client, error) {
	if token == "" {
		return nil, errors.New("no token: the API needs the admin token or an agent token")
	}
	return &Client{base: c.base, token: token, http: c.http}, nil
}

// Request is one API call.
type Request struct {
	Method string // GET, POST, PATCH
	Path   string // e.g. GoalPath("demo", "todos")
	Query  url.Values
	// Body is encoded as JSON; nil sends no body.
	Body any
	// IdempotencyKey is required for every method but GET: the same key and request replay
	// the first answer.
	IdempotencyKey string
}

// Do sends r and returns the answer's JSON. A non-2xx answer is an *api.Error.
func (c *Client) Do(ctx context.Context, r Request) (json.RawMessage, error) {
	var body io.Reader
	if r.Body != nil {
		b, err := json.Marshal(r.Body)
		if err != nil {
			return nil, fmt.Errorf("encode request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	u := c.base + r.Path
	if len(r.Query) > 0 {
		u += "?" + r.Query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, u, body)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json")
	if r.Body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if r.Method != http.MethodGet {
		if r.IdempotencyKey == "" {
			return nil, fmt.Errorf("%s %s: no idempotency key", r.Method, r.Path)
		}
		req.Header.Set("Idempotency-Key", r.IdempotencyKey)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, &unreachable{fmt.Errorf("reach loopx server at %s: %w (is loopx serve running? LOOPX_URL)", c.base, err)}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return nil, &unreachable{fmt.Errorf("read answer from %s: %w", c.base, err)}
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

// DoJSON sends r and decodes the answer into out.
func (c *Client) DoJSON(ctx context.Context, r Request, out any) error {
	raw, err := c.Do(ctx, r)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("decode answer of %s %s: %w", r.Method, r.Path, err)
	}
	return nil
}

// GoalPath is /v1/goals/{goal}[/rest...] with each part escaped; the server validates ids.
func GoalPath(goal string, rest ...string) string {
	p := "/v1/goals/" + url.PathEscape(goal)
	for _, r := range rest {
		p += "/" + url.PathEscape(r)
	}
	return p
}

// unreachable is an error whose answer never arrived; errors.Is(err, ErrUnreachable).
type unreachable struct{ err error }

func (e *unreachable) Error() string        { return e.err.Error() }
func (e *unreachable) Unwrap() error        { return e.err }
func (e *unreachable) Is(target error) bool { return target == ErrUnreachable }

// Download fetches a file's content (GET path) whole, at most max bytes; the answer's headers
// name it (Content-Disposition, X-Loopx-Sha256). A non-2xx answer is an *api.Error.
func (c *Client) Download(ctx context.Context, path string, max int64) ([]byte, http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, nil, &unreachable{fmt.Errorf("reach loopx server at %s: %w (is loopx serve running? LOOPX_URL)", c.base, err)}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return nil, nil, &unreachable{fmt.Errorf("read file from %s: %w", c.base, err)}
	}
	if resp.StatusCode/100 != 2 {
		var eb api.ErrorBody
		if json.Unmarshal(b, &eb) != nil || eb.Error == nil {
			return nil, nil, &api.Error{Status: resp.StatusCode, Code: api.CodeInternal,
				Message: fmt.Sprintf("server answered %s", resp.Status)}
		}
		eb.Error.Status = resp.StatusCode
		return nil, nil, eb.Error
	}
	if int64(len(b)) > max {
		return nil, nil, fmt.Errorf("the file is larger than %d bytes", max)
	}
	return b, resp.Header, nil
}
