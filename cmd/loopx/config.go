package main

import (
	"cmp"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"loopx/inbox"
)

// DefaultListen is where `loopx serve` listens and the CLI connects when nothing is set.
const DefaultListen = "127.0.0.1:7377"

// secret is a string that never appears in logs.
type secret string

// LogValue keeps the secret out of structured logs.
func (secret) LogValue() slog.Value { return slog.StringValue("REDACTED") }

// String keeps the secret out of fmt output.
func (secret) String() string { return "REDACTED" }

// LarkConfig holds the Lark app settings; the bot wiring reads them.
type LarkConfig struct {
	AppID             string
	AppSecret         secret
	VerificationToken secret
	EncryptKey        secret
	Transport         string // ws (default) | http
	BaseURL           string // Lark OpenAPI base; "" = the SDK default (Feishu)
}

// Config is everything `loopx serve` reads from the environment.
type Config struct {
	Listen      string // LOOPX_LISTEN
	DatabaseURL secret // DATABASE_URL; "" = a private cluster under Home
	Home        string // LOOPX_HOME, default ~/.loopx
	AdminToken  secret // LOOPX_ADMIN_TOKEN; "" = generated once under Home
	Admins      []string
	LogFormat   string // text | json
	LogLevel    slog.Level
	Lark        LarkConfig
	// Sandbox runs the built-in Lark emulator instead of Lark (--sandbox, or no LARK_APP_ID).
	Sandbox bool
	// Lang answers chats whose chat and goal set no language (LOOPX_LANG: en | zh).
	Lang string
	// Receipt acknowledges a message taken into an inbox (LOOPX_RECEIPT: reaction | reply).
	Receipt string
	// Inbox bounds: LOOPX_INBOX_ACK_TIMEOUT (a drained, unacked item returns to pending after
	// it) and LOOPX_INBOX_MAX_PENDING (unacknowledged items per agent). Zero = the defaults.
	Inbox inbox.Options
}

// loadConfig reads and validates the environment.
func loadConfig(getenv func(string) string) (Config, error) {
	home := getenv("LOOPX_HOME")
	if home == "" {
		h := getenv("HOME")
		if h == "" {
			return Config{}, fmt.Errorf("LOOPX_HOME: not set and HOME is empty; set LOOPX_HOME to a directory for LoopX's data")
		}
		home = filepath.Join(h, ".loopx")
	}
	cfg := Config{
		Listen:      cmp.Or(getenv("LOOPX_LISTEN"), DefaultListen),
		DatabaseURL: secret(getenv("DATABASE_URL")),
		Home:        home,
		AdminToken:  secret(getenv("LOOPX_ADMIN_TOKEN")),
		LogFormat:   cmp.Or(strings.ToLower(getenv("LOG_FORMAT")), "text"),
		Lark: LarkConfig{
			AppID:             getenv("LARK_APP_ID"),
			AppSecret:         secret(getenv("LARK_APP_SECRET")),
			VerificationToken: secret(getenv("LARK_VERIFICATION_TOKEN")),
			EncryptKey:        secret(getenv("LARK_ENCRYPT_KEY")),
			Transport:         cmp.Or(strings.ToLower(getenv("LARK_TRANSPORT")), "ws"),
			BaseURL:           getenv("LARK_BASE_URL"),
		},
	}
	for _, a := range strings.Split(getenv("LOOPX_ADMINS"), ",") {
		if a = strings.TrimSpace(a); a != "" {
			cfg.Admins = append(cfg.Admins, a)
		}
	}
	if cfg.LogFormat != "text" && cfg.LogFormat != "json" {
		return Config{}, fmt.Errorf("LOG_FORMAT: %q is not text or json", cfg.LogFormat)
	}
	if err := cfg.LogLevel.UnmarshalText([]byte(cmp.Or(getenv("LOG_LEVEL"), "info"))); err != nil {
		return Config{}, fmt.Errorf("LOG_LEVEL: %q is not debug, info, warn or error", getenv("LOG_LEVEL"))
	}
	if cfg.Lark.Transport != "ws" && cfg.Lark.Transport != "http" {
		return Config{}, fmt.Errorf("LARK_TRANSPORT: %q is not ws or http", cfg.Lark.Transport)
	}
	if t := string(cfg.AdminToken); t != "" && len(t) < 16 {
		return Config{}, fmt.Errorf("LOOPX_ADMIN_TOKEN: is %d characters; use at least 16 (e.g. openssl rand -hex 32)", len(t))
	}
	cfg.Lang = cmp.Or(strings.ToLower(getenv("LOOPX_LANG")), "en")
	if cfg.Lang != "en" && cfg.Lang != "zh" {
		return Config{}, fmt.Errorf("LOOPX_LANG: %q is not en or zh", cfg.Lang)
	}
	cfg.Receipt = cmp.Or(strings.ToLower(getenv("LOOPX_RECEIPT")), "reaction")
	if cfg.Receipt != "reaction" && cfg.Receipt != "reply" {
		return Config{}, fmt.Errorf("LOOPX_RECEIPT: %q is not reaction or reply", cfg.Receipt)
	}
	if v := getenv("LOOPX_INBOX_ACK_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Minute || d > 7*24*time.Hour {
			return Config{}, fmt.Errorf("LOOPX_INBOX_ACK_TIMEOUT: %q is not a duration between 1m and 168h (e.g. 15m)", v)
		}
		cfg.Inbox.AckTimeout = d
	}
	if v := getenv("LOOPX_INBOX_MAX_PENDING"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100000 {
			return Config{}, fmt.Errorf("LOOPX_INBOX_MAX_PENDING: %q is not a whole number from 1 to 100000", v)
		}
		cfg.Inbox.MaxPending = n
	}
	cfg.Sandbox = cfg.Lark.AppID == ""
	return cfg, nil
}

// newLogger builds the process's one slog handler.
func newLogger(w interface{ Write([]byte) (int, error) }, format string, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
