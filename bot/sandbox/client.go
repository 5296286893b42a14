package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Client calls a sandbox's control API (/sandbox/v1) over HTTP; `loopx chat` uses it.
type Client struct {
	base  string
	token string
	http  *http.Client
}

// NewClient returns a client of the sandbox at baseURL (e.g. "http://127.0.0.1:7378"); token
// is the control token, "" when the sandbox has none.
func NewClient(baseURL, token string) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("sandbox url %q: want http://host:port", baseURL)
	}
	// No client timeout: long polls last up to MaxLongPoll; every call carries a context.
	return &Client{base: strings.TrimRight(baseURL, "/"), token: token, http: &http.Client{}}, nil
}

// ControlError is an error answer of the control API.
type ControlError struct {
	Status int
	Msg    string
	Field  string
}

func (e *ControlError) Error() string {
	if e.Field != "" {
		return e.Msg // already names the field
	}
	return fmt.Sprintf("sandbox answered %d: %s", e.Status, e.Msg)
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("call sandbox: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return fmt.Errorf("read sandbox answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		var ce controlError
		_ = json.Unmarshal(b, &ce)
		if ce.Error == "" {
			ce.Error = strings.TrimSpace(string(b))
		}
		return &ControlError{Status: resp.StatusCode, Msg: ce.Error, Field: ce.Field}
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("decode sandbox answer: %w", err)
	}
	return nil
}

// Info returns the sandbox's bot, demo user and default chat.
func (c *Client) Info(ctx context.Context) (Info, error) {
	var out Info
	return out, c.do(ctx, http.MethodGet, "/sandbox/v1/info", nil, &out)
}

// Chats lists the sandbox's chats.
func (c *Client) Chats(ctx context.Context) ([]ChatInfo, error) {
	var out struct{ Chats []ChatInfo }
	return out.Chats, c.do(ctx, http.MethodGet, "/sandbox/v1/chats", nil, &out)
}

// Messages returns the messages of chatID ("" for all) changed after the cursor, the newest
// limit of them when limit > 0, waiting up to wait for a change.
func (c *Client) Messages(ctx context.Context, chatID string, after int64, limit int, wait time.Duration) (MessagesPage, error) {
	q := url.Values{"after": {strconv.FormatInt(after, 10)}}
	if chatID != "" {
		q.Set("chat_id", chatID)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if wait > 0 {
		q.Set("wait", wait.String())
	}
	var out MessagesPage
	return out, c.do(ctx, http.MethodGet, "/sandbox/v1/messages?"+q.Encode(), nil, &out)
}

// Post sends a message as a user.
func (c *Client) Post(ctx context.Context, req PostRequest) (PostAnswer, error) {
	var out PostAnswer
	return out, c.do(ctx, http.MethodPost, "/sandbox/v1/messages", req, &out)
}

// PostFile sends a file (an image when its content is one) as a user.
func (c *Client) PostFile(ctx context.Context, req FileRequest) (PostAnswer, error) {
	var out PostAnswer
	return out, c.do(ctx, http.MethodPost, "/sandbox/v1/files", req, &out)
}

// Stats reads the send counters of chatID and of the app.
func (c *Client) Stats(ctx context.Context, chatID string) (Stats, error) {
	var out Stats
	return out, c.do(ctx, http.MethodGet, "/sandbox/v1/stats?"+url.Values{"chat_id": {chatID}}.Encode(), nil, &out)
}

// Click clicks a card button as a user.
func (c *Client) Click(ctx context.Context, req ClickRequest) (ClickAnswer, error) {
	var out ClickAnswer
	return out, c.do(ctx, http.MethodPost, "/sandbox/v1/click", req, &out)
}
