package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"loopx/bot"
)

// larkAppCheck asks Lark, with the configured app, who the bot is: it proves the App ID and
// Secret obtain a tenant token from LARK_BASE_URL and that the app has the bot feature.
// Without LARK_APP_ID the server runs the sandbox and there is nothing to ask.
func larkAppCheck(ctx context.Context, getenv func(string) string) check {
	c := check{Name: "lark app"}
	if !bot.Configured(getenv) {
		c.OK, c.Detail = true, "no Lark app configured (sandbox)"
		return c
	}
	cfg, err := bot.ConfigFromEnv(getenv)
	if err != nil {
		c.Detail = err.Error()
		return c
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	openID, name, err := bot.NewClient(cfg, 5*time.Second).BotInfo(ctx)
	if err != nil {
		c.Detail = fmt.Sprintf("%s: %v (check LARK_APP_ID, LARK_APP_SECRET, LARK_BASE_URL; codes 10003/10014 mean a wrong id or secret)", cfg.BaseURL, err)
		return c
	}
	c.OK, c.Detail = true, fmt.Sprintf("bot %q (%s) via %s, transport %s", name, openID, cfg.BaseURL, cfg.Transport)
	return c
}

// larkLinkCheck asks the running server whether its Lark side takes events (GET /readyz/lark):
// the long connection is up, or the HTTP callbacks are mounted, or it runs the sandbox.
func larkLinkCheck(ctx context.Context, getenv func(string) string) check {
	c := check{Name: "lark link"}
	base := strings.TrimRight(cmp.Or(getenv("LOOPX_URL"), "http://"+DefaultListen), "/")
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/readyz/lark", nil)
	if err != nil {
		c.Detail = err.Error()
		return c
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.Detail = "reach " + base + "/readyz/lark: " + err.Error()
		return c
	}
	defer resp.Body.Close()
	var a struct {
		Status    string `json:"status"`
		Transport string `json:"transport"`
		Sandbox   bool   `json:"sandbox"`
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode == http.StatusNotFound {
		c.Detail = "the server runs without the Lark bot (LOOPX_BOT=off)"
		c.OK = true
		return c
	}
	if err := json.Unmarshal(b, &a); err != nil {
		c.Detail = fmt.Sprintf("/readyz/lark answered %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))
		return c
	}
	c.OK = resp.StatusCode == http.StatusOK
	c.Detail = fmt.Sprintf("%s (transport %s, sandbox %t)", a.Status, a.Transport, a.Sandbox)
	return c
}
