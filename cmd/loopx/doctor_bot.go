package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"loopx/bot"
	"loopx/server"
)

// larkAppCheck asks Lark, with the configured app, who the bot is: it proves the App ID and
// Secret obtain a tenant token from LARK_BASE_URL and that the app has the bot feature.
// Without LARK_APP_ID the server runs the sandbox and there is nothing to ask.
func larkAppCheck(ctx context.Context, e doctorEnv) check {
	c := check{Name: "lark app"}
	lark, sandboxed, err := server.LoadLarkConfig(e.getenv)
	switch {
	case err != nil:
		c.Detail = err.Error()
		return c
	case sandboxed:
		c.OK, c.Detail = true, "no Lark app configured (sandbox)"
		return c
	}
	cfg := lark.BotConfig()
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

// larkLinkCheck asks the server being checked whether its Lark side takes events (GET
// /readyz/lark): the long connection is up, or the HTTP callbacks are mounted, or it runs the
// sandbox.
func larkLinkCheck(ctx context.Context, e doctorEnv) check {
	c := check{Name: "lark link"}
	base := e.client.Server
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

// failedRowsRE matches the failed-outbox gauge lines of /metrics.
var failedRowsRE = regexp.MustCompile(`(?m)^loopx_outbox_failed_rows\{code="(-?\d+)"\} ([0-9.e+]+)$`)

// failureAdvice says what to do about a Lark code the sender gave up on.
func failureAdvice(code string) string {
	n, err := strconv.Atoi(code)
	if err != nil {
		return "see the outbox rows' last_error"
	}
	_, text := bot.Advice(n)
	return text
}

// larkOutboxCheck reports messages the sender gave up on (from the /metrics of the server
// being checked, which reads them from the database), with Lark's code and what to do.
func larkOutboxCheck(ctx context.Context, e doctorEnv) check {
	c := check{Name: "lark sends"}
	base := e.client.Server
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		c.Detail = err.Error()
		return c
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.Detail = "reach " + base + "/metrics: " + err.Error()
		return c
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	var parts []string
	for _, m := range failedRowsRE.FindAllStringSubmatch(string(b), -1) {
		n, _ := strconv.ParseFloat(m[2], 64)
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d failed with code %s (%s)", int64(n), m[1], failureAdvice(m[1])))
		}
	}
	if len(parts) == 0 {
		c.OK, c.Detail = true, "no message failed"
		return c
	}
	sort.Strings(parts)
	c.Detail = strings.Join(parts, "; ")
	return c
}
