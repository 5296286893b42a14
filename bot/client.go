package bot

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	lark "github.com/larksuite/oapi-sdk-go/v3"
	larkcore "github.com/larksuite/oapi-sdk-go/v3/core"
	larkim "github.com/larksuite/oapi-sdk-go/v3/service/im/v1"
)

// Lark codes the sender acts on (open platform error codes).
const (
	codeRateLimited        = 99991400 // request frequency limit (HTTP 429)
	codeChatRateLimited    = 230020   // per-chat send limit
	codeServiceRateLimited = 11232    // message service limit
	codeTokenInvalid       = 99991663 // tenant access token invalid or expired
	codeAppTokenInvalid    = 99991664
	codeAuthMissing        = 99991661 // Authorization header missing or malformed
	codeTokenFormat        = 99991671
	codeScopeMissing       = 99991672
	codeBadRequest         = 230001
	codeBotNotInChat       = 230002
	codeWrongAppID         = 10003
	codeWrongSecret        = 10014
	codeReplyRecalled      = 230011 // reply target recalled
	codeReplyGone          = 230017
	codeReplyNotInChat     = 230040
)

// apiResult is what a Lark call answered: Code 0 is success.
type apiResult struct {
	Code       int
	Msg        string
	HTTPStatus int
	Header     http.Header
	MessageID  string
	calls      int // Lark calls the sender made for this answer (send)
}

// retryAfter reads x-ogw-ratelimit-reset (seconds to wait); def when absent.
func (r apiResult) retryAfter(def time.Duration) time.Duration {
	if r.Header == nil {
		return def
	}
	v := r.Header.Get("x-ogw-ratelimit-reset")
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return def
	}
	return max(time.Duration(n)*time.Second, 100*time.Millisecond)
}

// Client is the Lark REST client the sender uses: the SDK client with its own tenant token,
// fetched on first use and cleared when Lark rejects it.
type Client struct {
	cfg    Config
	sdk    *lark.Client
	tokens *tokenSource
}

// NewClient builds a REST client for cfg. It makes no network call.
func NewClient(cfg Config, timeout time.Duration) *Client {
	cfg = cfg.WithDefaults()
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	sdk := lark.NewClient(cfg.AppID, cfg.AppSecret,
		lark.WithOpenBaseUrl(cfg.BaseURL),
		lark.WithReqTimeout(timeout), // the SDK default has no timeout at all
		// The SDK's token cache is one process-global map that cannot be cleared and that
		// lark.WithTokenCache would replace for every client in the process; each Client keeps
		// its own token instead and passes it on every call.
		lark.WithEnableTokenCache(false),
		lark.WithLogLevel(larkcore.LogLevelError),
	)
	return &Client{cfg: cfg, sdk: sdk, tokens: &tokenSource{sdk: sdk, appID: cfg.AppID, secret: cfg.AppSecret}}
}

// ClearToken forgets the cached tenant token; the next call fetches a new one.
func (c *Client) ClearToken() { c.tokens.clear() }

// BotInfo asks Lark who the bot is (a credentials check for doctor and readiness).
func (c *Client) BotInfo(ctx context.Context) (openID, name string, err error) {
	tok, err := c.tokens.get(ctx)
	if err != nil {
		return "", "", err
	}
	resp, err := c.sdk.Get(ctx, "/open-apis/bot/v3/info", nil, larkcore.AccessTokenTypeTenant, larkcore.WithTenantAccessToken(tok))
	if err != nil {
		return "", "", fmt.Errorf("get bot info: %w", err)
	}
	var body struct {
		Code int    `json:"code"`
		Msg  string `json:"msg"`
		Bot  struct {
			OpenID  string `json:"open_id"`
			AppName string `json:"app_name"`
		} `json:"bot"`
	}
	if err := json.Unmarshal(resp.RawBody, &body); err != nil {
		return "", "", fmt.Errorf("decode bot info (HTTP %d): %w", resp.StatusCode, err)
	}
	if body.Code != 0 {
		if isTokenCode(body.Code) {
			c.tokens.clear()
		}
		return "", "", fmt.Errorf("get bot info: lark code %d: %s", body.Code, body.Msg)
	}
	return body.Bot.OpenID, body.Bot.AppName, nil
}

func isTokenCode(code int) bool {
	switch code {
	case codeTokenInvalid, codeAppTokenInvalid, codeAuthMissing, codeTokenFormat:
		return true
	}
	return false
}

// call runs one Lark API call with the current token; when Lark rejects the token it clears
// the cache and tries exactly once more with a fresh one (the SDK's own retry reuses the stale
// token, so it cannot recover from a revocation).
func (c *Client) call(ctx context.Context, do func(opt larkcore.RequestOptionFunc) (apiResult, error)) (apiResult, error) {
	var res apiResult
	for attempt := 0; attempt < 2; attempt++ {
		tok, err := c.tokens.get(ctx)
		if err != nil {
			return apiResult{}, err
		}
		res, err = do(larkcore.WithTenantAccessToken(tok))
		if err != nil {
			return apiResult{}, err
		}
		if !isTokenCode(res.Code) {
			return res, nil
		}
		c.tokens.clearIf(tok)
	}
	return res, nil
}

func resultOf(r *larkcore.ApiResp, code int, msg string) apiResult {
	res := apiResult{Code: code, Msg: msg}
	if r != nil {
		res.HTTPStatus = r.StatusCode
		res.Header = r.Header
	}
	return res
}

// createMessage sends a new message (msgType "text" or "interactive") with Lark's uuid dedupe.
func (c *Client) createMessage(ctx context.Context, receiveIDType, receiveID, msgType, content, uuid string) (apiResult, error) {
	return c.call(ctx, func(opt larkcore.RequestOptionFunc) (apiResult, error) {
		req := larkim.NewCreateMessageReqBuilder().ReceiveIdType(receiveIDType).
			Body(larkim.NewCreateMessageReqBodyBuilder().ReceiveId(receiveID).MsgType(msgType).
				Content(content).Uuid(uuid).Build()).Build()
		resp, err := c.sdk.Im.V1.Message.Create(ctx, req, opt)
		if err != nil {
			return apiResult{}, fmt.Errorf("create message: %w", err)
		}
		res := resultOf(resp.ApiResp, resp.Code, resp.Msg)
		if resp.Success() && resp.Data != nil && resp.Data.MessageId != nil {
			res.MessageID = *resp.Data.MessageId
		}
		return res, nil
	})
}

func (c *Client) replyMessage(ctx context.Context, messageID, msgType, content string, inThread bool, uuid string) (apiResult, error) {
	return c.call(ctx, func(opt larkcore.RequestOptionFunc) (apiResult, error) {
		req := larkim.NewReplyMessageReqBuilder().MessageId(messageID).
			Body(larkim.NewReplyMessageReqBodyBuilder().MsgType(msgType).Content(content).
				ReplyInThread(inThread).Uuid(uuid).Build()).Build()
		resp, err := c.sdk.Im.V1.Message.Reply(ctx, req, opt)
		if err != nil {
			return apiResult{}, fmt.Errorf("reply to message: %w", err)
		}
		res := resultOf(resp.ApiResp, resp.Code, resp.Msg)
		if resp.Success() && resp.Data != nil && resp.Data.MessageId != nil {
			res.MessageID = *resp.Data.MessageId
		}
		return res, nil
	})
}

func (c *Client) patchCard(ctx context.Context, messageID, card string) (apiResult, error) {
	return c.call(ctx, func(opt larkcore.RequestOptionFunc) (apiResult, error) {
		req := larkim.NewPatchMessageReqBuilder().MessageId(messageID).
			Body(larkim.NewPatchMessageReqBodyBuilder().Content(card).Build()).Build()
		resp, err := c.sdk.Im.V1.Message.Patch(ctx, req, opt)
		if err != nil {
			return apiResult{}, fmt.Errorf("patch card: %w", err)
		}
		res := resultOf(resp.ApiResp, resp.Code, resp.Msg)
		res.MessageID = messageID
		return res, nil
	})
}

func (c *Client) addReaction(ctx context.Context, messageID, emoji string) (apiResult, error) {
	return c.call(ctx, func(opt larkcore.RequestOptionFunc) (apiResult, error) {
		req := larkim.NewCreateMessageReactionReqBuilder().MessageId(messageID).
			Body(larkim.NewCreateMessageReactionReqBodyBuilder().
				ReactionType(larkim.NewEmojiBuilder().EmojiType(emoji).Build()).Build()).Build()
		resp, err := c.sdk.Im.V1.MessageReaction.Create(ctx, req, opt)
		if err != nil {
			return apiResult{}, fmt.Errorf("add reaction: %w", err)
		}
		return resultOf(resp.ApiResp, resp.Code, resp.Msg), nil
	})
}

// findReaction looks for a reaction of emoji this app already put on the message (the
// first page of that emoji's reactions is enough: one app adds it once). Lark marks an app's
// reaction with operator_type "app" (or names the app id as the operator).
func (c *Client) findReaction(ctx context.Context, messageID, emoji string) (apiResult, bool, error) {
	var found bool
	res, err := c.call(ctx, func(opt larkcore.RequestOptionFunc) (apiResult, error) {
		req := larkim.NewListMessageReactionReqBuilder().MessageId(messageID).ReactionType(emoji).PageSize(50).Build()
		resp, err := c.sdk.Im.V1.MessageReaction.List(ctx, req, opt)
		if err != nil {
			return apiResult{}, fmt.Errorf("list reactions: %w", err)
		}
		res := resultOf(resp.ApiResp, resp.Code, resp.Msg)
		if resp.Success() && resp.Data != nil {
			for _, r := range resp.Data.Items {
				if r == nil || r.Operator == nil {
					continue
				}
				if str(r.Operator.OperatorType) == "app" || str(r.Operator.OperatorId) == c.cfg.AppID {
					found = true
				}
			}
		}
		return res, nil
	})
	return res, found, err
}

// tokenSource holds one app's tenant access token.
type tokenSource struct {
	sdk    *lark.Client
	appID  string
	secret string

	mu      sync.Mutex
	token   string
	expires time.Time
}

// errToken wraps a failure to obtain a tenant token; Code is Lark's when it answered one.
type errToken struct {
	Code int
	Msg  string
}

func (e *errToken) Error() string {
	return fmt.Sprintf("get tenant access token: lark code %d: %s", e.Code, e.Msg)
}

func (t *tokenSource) get(ctx context.Context) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	// Refresh three minutes early, as Lark advises, so a token never expires mid-call.
	if t.token != "" && time.Until(t.expires) > 3*time.Minute {
		return t.token, nil
	}
	resp, err := t.sdk.Post(ctx, larkcore.TenantAccessTokenInternalUrlPath,
		map[string]string{"app_id": t.appID, "app_secret": t.secret}, larkcore.AccessTokenTypeNone)
	if err != nil {
		return "", fmt.Errorf("get tenant access token: %w", err)
	}
	var body struct {
		Code   int    `json:"code"`
		Msg    string `json:"msg"`
		Token  string `json:"tenant_access_token"`
		Expire int    `json:"expire"`
	}
	if err := json.Unmarshal(resp.RawBody, &body); err != nil {
		return "", fmt.Errorf("decode tenant access token (HTTP %d): %w", resp.StatusCode, err)
	}
	if body.Code != 0 || body.Token == "" {
		return "", &errToken{Code: body.Code, Msg: body.Msg}
	}
	t.token = body.Token
	t.expires = time.Now().Add(time.Duration(body.Expire) * time.Second)
	return t.token, nil
}

func (t *tokenSource) clear() {
	t.mu.Lock()
	t.token = ""
	t.mu.Unlock()
}

// clearIf clears only the token a failed call used, so concurrent failures of one stale token
// cause one refetch, not one each.
func (t *tokenSource) clearIf(tok string) {
	t.mu.Lock()
	if t.token == tok {
		t.token = ""
	}
	t.mu.Unlock()
}
