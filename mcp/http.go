package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"loopx/api"
	"loopx/api/client"
	"loopx/store"
	"loopx/templates"
)

// HandlerOptions configures Handler.
type HandlerOptions struct {
	// API serves /v1 in this process (the serve mux). Each session's client calls it with the
	// session's bearer token, through the same authentication and receipts as the network.
	API http.Handler
	// Templates renders the turn prompt; nil means the embedded set.
	Templates *templates.Set
	Version   string
	Logger    *slog.Logger
	// SessionTimeout closes a session idle that long; 0 means 30 minutes.
	SessionTimeout time.Duration
}

// Handler serves the MCP server over Streamable HTTP (mount it at /mcp). Every request needs
// an agent's bearer token (an agent token or a turn token): the session works as that agent
// on its goal, and a session stays bound to the agent that opened it. The admin token and
// unknown tokens are refused with 401 and a message saying which token to use.
func Handler(opts HandlerOptions) http.Handler {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.SessionTimeout == 0 {
		opts.SessionTimeout = 30 * time.Minute
	}
	verify := func(ctx context.Context, token string, r *http.Request) (*auth.TokenInfo, error) {
		c, err := inProcessClient(opts.API, r, token)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", auth.ErrInvalidToken, err)
		}
		var who api.Whoami
		if err := c.DoJSON(ctx, client.Request{Method: http.MethodGet, Path: "/v1/whoami"}, &who); err != nil {
			var ae *api.Error
			if errors.As(err, &ae) && ae.Code == api.CodeUnauthenticated {
				return nil, fmt.Errorf("%w: %s", auth.ErrInvalidToken, ae.Message)
			}
			return nil, errors.New("check the token: the server failed; see its log")
		}
		if who.Admin {
			return nil, fmt.Errorf("%w: /mcp works as one agent: use that agent's token (loopx connect or loopx agent register prints one), not the admin token", auth.ErrInvalidToken)
		}
		return &auth.TokenInfo{
			UserID:     store.AgentActor(who.GoalID, who.AgentID),
			Expiration: time.Now().Add(time.Hour),
			Extra:      map[string]any{"goal_id": who.GoalID, "agent_id": who.AgentID},
		}, nil
	}
	streamable := sdk.NewStreamableHTTPHandler(func(r *http.Request) *sdk.Server {
		ti := auth.TokenInfoFromContext(r.Context())
		if ti == nil {
			return nil
		}
		goal, _ := ti.Extra["goal_id"].(string)
		agent, _ := ti.Extra["agent_id"].(string)
		token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		c, err := inProcessClient(opts.API, r, strings.TrimSpace(token))
		if err != nil {
			return nil
		}
		srv, err := New(Options{API: c, GoalID: goal, AgentID: agent, Templates: opts.Templates,
			Version: opts.Version, Logger: opts.Logger})
		if err != nil {
			opts.Logger.Error("start mcp session", "err", err)
			return nil
		}
		return srv
	}, &sdk.StreamableHTTPOptions{SessionTimeout: opts.SessionTimeout, Logger: opts.Logger})
	return auth.RequireBearerToken(verify, nil)(streamable)
}

// inProcessClient calls api in this process as token; its base URL names the host the
// request reached, for the server's instructions.
func inProcessClient(h http.Handler, r *http.Request, token string) (*client.Client, error) {
	host := r.Host
	if host == "" {
		host = "localhost"
	}
	return client.New(client.Options{BaseURL: "http://" + host, Token: token,
		HTTPClient: &http.Client{Transport: client.InProcess(h), Timeout: time.Minute}})
}
