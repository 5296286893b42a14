package server

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"loopx/bot/sandbox"
	"loopx/store"
	"loopx/web"
)

// webURL is the address people open the workspace at: LOOPX_WEB_URL, else the listener
// (a wildcard host read as 127.0.0.1).
func webURL(cfg Config) string {
	if cfg.Web.URL != "" {
		return cfg.Web.URL
	}
	host, port, err := net.SplitHostPort(cfg.Listen)
	if err != nil {
		return "http://" + cfg.Listen
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// signInLinks issues the workspace's one-time sign-in links for the chat router (/web and
// the gate card's button); nil when the workspace is off. The bot is wired before the
// workspace, so this does not need the workspace's server.
func signInLinks(d *deps) func(ctx context.Context, db store.DB, p store.SignInParams) (string, error) {
	if !d.cfg.Web.Enabled {
		return nil
	}
	base := webURL(d.cfg)
	return func(ctx context.Context, db store.DB, p store.SignInParams) (string, error) {
		token, err := store.CreateSignIn(ctx, db, p, d.now())
		if err != nil {
			return "", err
		}
		return web.SignInURL(base, token), nil
	}
}

// wireWeb serves the workspace under /web/ on the listener and runs its live-update
// listener. In sandbox mode it prints a sign-in link for the demo owner. LOOPX_WEB=off
// leaves it out.
func wireWeb(ctx context.Context, d *deps) ([]component, error) {
	if !d.cfg.Web.Enabled {
		d.logger.Info("workspace off (LOOPX_WEB=off)")
		return nil, nil
	}
	token, err := AdminToken(d.cfg)
	if err != nil {
		return nil, err
	}
	base := webURL(d.cfg)
	opts := web.Options{
		Store: d.store, Changes: d.changes, Cards: d.cards, Templates: d.templates, Inbox: d.inbox,
		AdminToken: token, Admins: d.cfg.Admins, DefaultLang: d.cfg.Lang, BaseURL: base,
		SecureCookies: strings.HasPrefix(base, "https://"), Now: d.now, Logger: d.logger.With("component", "web"),
	}
	if d.lark != nil {
		opts.Lark = d.lark // sign in with Lark, through the bot's client (web may not import bot)
	}
	srv, err := web.New(opts)
	if err != nil {
		return nil, fmt.Errorf("create workspace: %w", err)
	}
	d.mux.Handle("/web/", srv)
	d.mux.Handle("/web", srv)
	d.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/web/", http.StatusFound)
	})
	if d.cfg.Sandbox {
		link, err := srv.SignInLink(ctx, d.store.DB(), store.SignInParams{OpenID: sandbox.DefaultDemoUserOpenID})
		if err != nil {
			return nil, fmt.Errorf("issue the sandbox sign-in link: %w", err)
		}
		d.logger.Info("workspace: open the sign-in link (single use, 10 minutes; /web in loopx chat sends a new one)",
			"url", base+"/web/", "sign_in_as", sandbox.DefaultDemoUserOpenID, "link", link)
	} else {
		d.logger.Info("workspace served", "url", base+"/web/")
	}
	return []component{{name: "workspace-live", run: srv.Run}}, nil
}

// turnURLs is the workspace page of a turn, for chat's /runs; nil when the workspace is off.
func turnURLs(d *deps) func(goalID string, turnID int64) string {
	if !d.cfg.Web.Enabled {
		return nil
	}
	base := webURL(d.cfg)
	return func(goalID string, turnID int64) string {
		return base + "/web/goals/" + url.PathEscape(goalID) + "/turns/" + strconv.FormatInt(turnID, 10)
	}
}
