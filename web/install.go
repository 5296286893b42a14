package web

import (
	"encoding/json"
	"io/fs"
	"net/http"
)

// The installable app: a web app manifest and a service worker that caches the shell (styles,
// scripts, icons, the offline page) and never the data, so the workspace installs on a
// phone's home screen and opens at once, always showing the state as the server has it.

// manifest serves /web/manifest.webmanifest, named in the server's default language.
func (s *Server) manifest(w http.ResponseWriter, r *http.Request) {
	lang := s.opts.DefaultLang
	m := map[string]any{
		"name":             "LoopX · " + s.pages.Word(lang, "nav"),
		"short_name":       "LoopX",
		"description":      s.pages.Word(lang, "app_description"),
		"lang":             map[string]string{"zh": "zh-CN"}[lang],
		"start_url":        "/web/",
		"scope":            "/web/",
		"id":               "/web/",
		"display":          "standalone",
		"background_color": "#ffffff",
		"theme_color":      "#0b5fcc",
		"icons": []map[string]string{
			{"src": "/web/static/icon-192.png", "sizes": "192x192", "type": "image/png", "purpose": "any"},
			{"src": "/web/static/icon-512.png", "sizes": "512x512", "type": "image/png", "purpose": "any"},
			{"src": "/web/static/icon.svg", "sizes": "any", "type": "image/svg+xml"},
		},
	}
	if m["lang"] == "" {
		m["lang"] = "en"
	}
	w.Header().Set("Content-Type", "application/manifest+json")
	w.Header().Set("Cache-Control", "public, max-age=3600")
	_ = json.NewEncoder(w).Encode(m)
}

// serviceWorker serves /web/sw.js from the embedded assets: at /web/ so its scope is the
// whole workspace, never cached by the browser's HTTP cache, so a new shell reaches people.
func (s *Server) serviceWorker(w http.ResponseWriter, r *http.Request) {
	b, err := fs.ReadFile(static, "static/sw.js")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(b)
}

// offline is the page the service worker shows when the network is gone.
func (s *Server) offline(w http.ResponseWriter, r *http.Request) {
	v := s.baseView(r, nil, s.opts.DefaultLang)
	v.Heading, v.Message = s.pages.Word(v.Lang, "offline_heading"), s.pages.Word(v.Lang, "offline")
	v.Title = v.Heading
	s.render(w, http.StatusOK, "notice", v)
}
