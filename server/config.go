package server

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"loopx/bot"
	"loopx/inbox"
	"loopx/scheduler"
	"loopx/store"
	"loopx/templates"
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
	BotOpenID         string // LARK_BOT_OPEN_ID: skips asking Lark who the bot is
	// CallbackMaxAge is the window of an HTTP callback's timestamp (LARK_CALLBACK_MAX_AGE;
	// default 1h, off = no check).
	CallbackMaxAge time.Duration
	// TestMinute, process-level tests only (LOOPX_TEST_LARK_MINUTE): the window of Lark's
	// per-minute send budgets, time-scaled like the sandbox's redelivery ladder; 0 = a minute.
	TestMinute time.Duration
}

// BotConfig is the Lark app as package bot takes it, defaults filled in.
func (l LarkConfig) BotConfig() bot.Config {
	return bot.Config{
		AppID: l.AppID, AppSecret: string(l.AppSecret), VerificationToken: string(l.VerificationToken),
		EncryptKey: string(l.EncryptKey), BaseURL: l.BaseURL, Transport: l.Transport,
	}.WithDefaults()
}

// SchedulerConfig is what the scheduler wiring reads.
type SchedulerConfig struct {
	Enabled bool // LOOPX_SCHEDULER (default on)
	Demo    bool // LOOPX_DEMO: seed the demo goal in sandbox mode (default on)
	// MaxJitter (LOOPX_JITTER_MAX) bounds each goal's stable phase past its cron time;
	// negative = none (LOOPX_JITTER_MAX=0), 0 = the default, scheduler.SpreadInterval =
	// "interval" (spread over the schedule's whole interval).
	MaxJitter time.Duration
	ExecShell bool   // LOOPX_EXEC_SHELL: exec agents may use a shell command line
	AgentURL  string // LOOPX_AGENT_URL: the URL agents call back on; "" = from Listen
	// TestClock, process-level tests only (LOOPX_TEST_CLOCK): an accelerated clock that every
	// replica computes alike. Zero Scale = the real clock.
	TestClock testClock
}

// testClock reads Epoch + (real now - Anchor) × Scale.
type testClock struct {
	Epoch  time.Time
	Anchor time.Time
	Scale  float64
}

// Config is everything `loopx serve` reads from the environment. LoadConfig reads and checks
// every variable before anything starts (the private database included), so a typo stops the
// process with the variable named instead of surfacing minutes later.
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
	// SandboxAddr is where the emulator listens (LOOPX_SANDBOX_ADDR); "" = 127.0.0.1:7378, or
	// any free port when that one is taken.
	SandboxAddr string
	// SandboxToken guards the emulator's control API (LOOPX_SANDBOX_TOKEN); "" = none.
	SandboxToken secret
	// SandboxState is where the emulator keeps its chats and cards across restarts
	// (LOOPX_SANDBOX_STATE: a directory, or off); "" = nothing is kept. By default it is
	// LOOPX_HOME/sandbox when the database is the private one under LOOPX_HOME, whose outbox
	// rows name the sandbox's message ids; with a DATABASE_URL nothing is kept unless asked
	// (that database is not the home's, and replicas may share one home).
	SandboxState string
	// Bot runs the Lark side (LOOPX_BOT, default on).
	Bot bool
	// Lang answers chats whose chat and goal set no language (LOOPX_LANG: en | zh).
	Lang string
	// Receipt acknowledges a message taken into an inbox (LOOPX_RECEIPT: reaction | reply).
	Receipt string
	// Inbox bounds: LOOPX_INBOX_ACK_TIMEOUT (a drained, unacked item returns to pending after
	// it) and LOOPX_INBOX_MAX_PENDING (unacknowledged items per agent). Zero = the defaults.
	Inbox inbox.Options
	// Replica names this process in tick rows and in its claims (LOOPX_REPLICA); default
	// host:pid.
	Replica   string
	Scheduler SchedulerConfig
	// Retention: how long each kind of record is kept (LOOPX_RETAIN_*; zero keeps it for
	// ever). Schedule fires follow Retention.Decisions.
	Retention store.Retention
	// SecretKey seals runner secrets at rest (LOOPX_SECRET_KEY, base64 of 32 bytes); "" =
	// the key kept in LOOPX_HOME/secret-key, created at the first start. SecretKeyPrevious
	// (LOOPX_SECRET_KEY_PREVIOUS, comma-separated) still opens secrets during a rotation.
	SecretKey         []byte
	SecretKeyPrevious [][]byte
	// PgBouncer says whether DATABASE_URL goes through a pooler in transaction mode
	// (LOOPX_PGBOUNCER: auto, the default, detects it; transaction; off).
	PgBouncer string
	// TestProfile, benchmarks only (LOOPX_TEST_PPROF): a loopback host:port where a second
	// listener serves Go's profiles (net/http/pprof), apart from LOOPX_LISTEN and its
	// authentication; "" = none, the default. Nothing of it runs unless it is set.
	TestProfile string
	// Web is the workspace served on the listener under /web/.
	Web WebConfig
	// Build is which binary this is (NewBuild): logged at start, answered by /healthz, told to
	// MCP clients and recorded in the database; not read from the environment.
	Build Build
	// DefaultsSeed seeds three machine defaults from the environment until an admin changes
	// the machine defaults through the change kernel (then the database's values win):
	// LOOPX_BREAKER_FAILURES (failed or empty turns in a row before an agent is held, 0-100
	// or off), LOOPX_PROGRESS_CARD (on: live progress cards for exec and MCP turns) and
	// LOOPX_QUIET_DIGESTS (on: a scheduled report with nothing new is not sent). Unset: the
	// database's values.
	DefaultsSeed store.DefaultsSeed
	// Files is where file contents live and how large one may be.
	Files FilesConfig
	// Logger is where Run logs; not read from the environment. Nil: NewLogger on stderr with
	// LogFormat and LogLevel.
	Logger *slog.Logger
}

// FilesConfig is the file storage: LOOPX_FILE_MAX_BYTES caps one file (default 20 MiB, at
// most 1 GiB); LOOPX_FILE_STORE is pg (the default: PostgreSQL) or s3, which then needs
// LOOPX_S3_ENDPOINT, LOOPX_S3_BUCKET, LOOPX_S3_ACCESS_KEY, LOOPX_S3_SECRET_KEY and optionally
// LOOPX_S3_REGION, LOOPX_S3_PREFIX.
type FilesConfig struct {
	MaxBytes int64
	Store    string // pg | s3
	S3       S3Config
}

// S3Config names an S3-compatible bucket.
type S3Config struct {
	Endpoint, Region, Bucket, Prefix string
	AccessKey                        string
	SecretKey                        secret
}

// WebConfig is what the workspace wiring reads.
type WebConfig struct {
	Enabled bool   // LOOPX_WEB (default on)
	URL     string // LOOPX_WEB_URL: the address people open, for sign-in links; "" = http://LOOPX_LISTEN
}

// HomeDir is LOOPX_HOME, default ~/.loopx: where serve keeps its local state and records
// where it listens, and where clients on the same machine look for them. "" when neither
// LOOPX_HOME nor HOME is set.
func HomeDir(getenv func(string) string) string {
	if home := getenv("LOOPX_HOME"); home != "" {
		return home
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".loopx")
	}
	return ""
}

// parseBytes reads a size: a number of bytes, or with a unit (KiB, MiB, GiB, KB, MB, GB).
func parseBytes(v string) (int64, error) {
	v = strings.TrimSpace(v)
	units := []struct {
		suffix string
		n      int64
	}{{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"kb", 1000}, {"mb", 1000 * 1000}, {"gb", 1000 * 1000 * 1000}, {"b", 1}}
	lower := strings.ToLower(v)
	for _, u := range units {
		if num, ok := strings.CutSuffix(lower, u.suffix); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
			if err != nil {
				return 0, err
			}
			return n * u.n, nil
		}
	}
	return strconv.ParseInt(v, 10, 64)
}

// LoadConfig reads and validates the environment.
func LoadConfig(getenv func(string) string) (Config, error) {
	var errs []error
	bad := func(name, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{name}, args...)...))
	}
	flag := func(name string, def bool) bool {
		v, err := parseBool(getenv(name), def)
		if err != nil {
			bad(name, "%v", err)
		}
		return v
	}
	home := HomeDir(getenv)
	if home == "" {
		bad("LOOPX_HOME", "not set and HOME is empty; set LOOPX_HOME to a directory for LoopX's data")
	}
	cfg := Config{
		Listen:       cmp.Or(getenv("LOOPX_LISTEN"), DefaultListen),
		DatabaseURL:  secret(getenv("DATABASE_URL")),
		Home:         home,
		AdminToken:   secret(getenv("LOOPX_ADMIN_TOKEN")),
		LogFormat:    cmp.Or(strings.ToLower(getenv("LOG_FORMAT")), "text"),
		SandboxAddr:  getenv("LOOPX_SANDBOX_ADDR"),
		SandboxToken: secret(getenv("LOOPX_SANDBOX_TOKEN")),
		Bot:          flag("LOOPX_BOT", true),
		Scheduler: SchedulerConfig{
			Enabled:   flag("LOOPX_SCHEDULER", true),
			Demo:      flag("LOOPX_DEMO", true),
			ExecShell: flag("LOOPX_EXEC_SHELL", false),
			AgentURL:  getenv("LOOPX_AGENT_URL"),
		},
		Replica: getenv("LOOPX_REPLICA"),
	}
	for _, a := range strings.Split(getenv("LOOPX_ADMINS"), ",") {
		if a = strings.TrimSpace(a); a != "" {
			cfg.Admins = append(cfg.Admins, a)
		}
	}
	// Addresses and URLs are checked here, not when they are first used: by then the private
	// database would have started.
	checkAddr := func(name, v string) {
		host, port, err := net.SplitHostPort(v)
		if n, perr := strconv.Atoi(port); err != nil || perr != nil || n < 0 || n > 65535 || strings.ContainsAny(host, " /") {
			bad(name, "%q is not a host:port address such as %s", v, DefaultListen)
		}
	}
	checkAddr("LOOPX_LISTEN", cfg.Listen)
	if cfg.SandboxAddr != "" {
		checkAddr("LOOPX_SANDBOX_ADDR", cfg.SandboxAddr)
	}
	if v := cfg.Scheduler.AgentURL; v != "" {
		if u, err := url.Parse(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("LOOPX_AGENT_URL", "%q is not an http(s) URL such as http://%s", v, DefaultListen)
		}
	}
	if cfg.LogFormat != "text" && cfg.LogFormat != "json" {
		bad("LOG_FORMAT", "%q is not text or json", cfg.LogFormat)
	}
	if err := cfg.LogLevel.UnmarshalText([]byte(cmp.Or(getenv("LOG_LEVEL"), "info"))); err != nil {
		bad("LOG_LEVEL", "%q is not debug, info, warn or error", getenv("LOG_LEVEL"))
	}
	if t := string(cfg.AdminToken); t != "" && len(t) < 16 {
		bad("LOOPX_ADMIN_TOKEN", "is %d characters; use at least 16 (e.g. openssl rand -hex 32)", len(t))
	}
	cfg.Lang = cmp.Or(strings.ToLower(getenv("LOOPX_LANG")), templates.DefaultLang)
	if !templates.IsLang(cfg.Lang) {
		bad("LOOPX_LANG", "%q is not %s", cfg.Lang, strings.Join(templates.Languages(), " or "))
	}
	cfg.Receipt = cmp.Or(strings.ToLower(getenv("LOOPX_RECEIPT")), "reaction")
	if cfg.Receipt != "reaction" && cfg.Receipt != "reply" {
		bad("LOOPX_RECEIPT", "%q is not reaction or reply", cfg.Receipt)
	}
	if v := getenv("LOOPX_INBOX_ACK_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Minute || d > 7*24*time.Hour {
			bad("LOOPX_INBOX_ACK_TIMEOUT", "%q is not a duration between 1m and 168h (e.g. 15m)", v)
		}
		cfg.Inbox.AckTimeout = d
	}
	if v := getenv("LOOPX_INBOX_MAX_PENDING"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100000 {
			bad("LOOPX_INBOX_MAX_PENDING", "%q is not a whole number from 1 to 100000", v)
		}
		cfg.Inbox.MaxPending = n
	}
	if v := getenv("LOOPX_JITTER_MAX"); strings.EqualFold(v, "interval") {
		cfg.Scheduler.MaxJitter = scheduler.SpreadInterval
	} else if v != "" {
		j, err := time.ParseDuration(v)
		switch {
		case err != nil || j < 0 || j > 24*time.Hour:
			bad("LOOPX_JITTER_MAX", "%q is not interval or a duration between 0 and 24h such as 60s", v)
		case j == 0:
			cfg.Scheduler.MaxJitter = -1 // none
		default:
			cfg.Scheduler.MaxJitter = j
		}
	}
	if v := getenv("LOOPX_TEST_CLOCK"); v != "" {
		c, err := parseTestClock(v)
		if err != nil {
			bad("LOOPX_TEST_CLOCK", "%v", err)
		}
		cfg.Scheduler.TestClock = c
	}
	switch v := getenv("LOOPX_SANDBOX_STATE"); {
	case strings.EqualFold(v, "off"):
	case v != "":
		cfg.SandboxState = v
	case cfg.DatabaseURL == "":
		cfg.SandboxState = filepath.Join(cfg.Home, "sandbox")
	}
	cfg.Retention = store.DefaultRetention()
	for _, r := range []struct {
		name     string
		min, max time.Duration
		into     *time.Duration
	}{
		{"LOOPX_RETAIN_DECISIONS", time.Hour, 0, &cfg.Retention.Decisions},
		{"LOOPX_RETAIN_LARK_EVENTS", 8 * time.Hour, 0, &cfg.Retention.LarkEvents},
		{"LOOPX_RETAIN_RECEIPTS", time.Hour, 0, &cfg.Retention.Receipts},
		{"LOOPX_RETAIN_OUTBOX", time.Hour, 0, &cfg.Retention.Outbox},
		{"LOOPX_RETAIN_INBOX", time.Hour, 0, &cfg.Retention.Inbox},
		{"LOOPX_RETAIN_AUDIT", 24 * time.Hour, 0, &cfg.Retention.Audit},
		// Runs hold the spends a quota window sums: never shorter than the longest window.
		{"LOOPX_RETAIN_RUNS", 31 * 24 * time.Hour, 0, &cfg.Retention.Runs},
		{"LOOPX_RETAIN_FILES", 24 * time.Hour, 0, &cfg.Retention.Files},
	} {
		v := getenv(r.name)
		if v == "" {
			continue
		}
		if strings.EqualFold(v, "forever") {
			*r.into = 0
			continue
		}
		d, err := parseDays(v)
		if err != nil || d < r.min {
			bad(r.name, "%q is not forever or a duration of at least %s (such as 14d or 36h)", v, formatDays(r.min))
			continue
		}
		*r.into = d
	}
	if v := getenv("LOOPX_SECRET_KEY"); v != "" {
		k, err := store.ParseSecretKey(v)
		if err != nil {
			bad("LOOPX_SECRET_KEY", "%v", err)
		}
		cfg.SecretKey = k
	}
	for i, v := range strings.Split(getenv("LOOPX_SECRET_KEY_PREVIOUS"), ",") {
		if v = strings.TrimSpace(v); v == "" {
			continue
		}
		k, err := store.ParseSecretKey(v)
		if err != nil {
			bad("LOOPX_SECRET_KEY_PREVIOUS", "key %d %v", i+1, err)
		}
		cfg.SecretKeyPrevious = append(cfg.SecretKeyPrevious, k)
	}
	cfg.PgBouncer = cmp.Or(strings.ToLower(strings.TrimSpace(getenv("LOOPX_PGBOUNCER"))), store.PoolerAuto)
	if cfg.PgBouncer != store.PoolerAuto && cfg.PgBouncer != store.PoolerTransaction && cfg.PgBouncer != store.PoolerOff {
		bad("LOOPX_PGBOUNCER", "%q is not auto, transaction or off", cfg.PgBouncer)
	}
	if v := getenv("LOOPX_TEST_PPROF"); v != "" {
		checkAddr("LOOPX_TEST_PPROF", v)
		if host, _, err := net.SplitHostPort(v); err == nil {
			if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
				bad("LOOPX_TEST_PPROF", "%q is not a loopback address such as 127.0.0.1:6060; profiles are never served beyond this machine", v)
			}
		}
		cfg.TestProfile = v
	}
	cfg.Web = WebConfig{Enabled: flag("LOOPX_WEB", true), URL: strings.TrimRight(getenv("LOOPX_WEB_URL"), "/")}
	if v := cfg.Web.URL; v != "" {
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Path != "" {
			bad("LOOPX_WEB_URL", "%q is not an http(s) address such as https://loopx.example.com (no path)", v)
		}
	}
	if v := getenv("LOOPX_BREAKER_FAILURES"); v != "" {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if strings.EqualFold(strings.TrimSpace(v), "off") {
			n, err = 0, nil
		}
		if err != nil || n < 0 || n > 100 {
			bad("LOOPX_BREAKER_FAILURES", "%q is not a number of failures from 0 (off) to 100", v)
		}
		cfg.DefaultsSeed.BreakerFailures = &n
	}
	for name, dst := range map[string]**bool{"LOOPX_PROGRESS_CARD": &cfg.DefaultsSeed.ProgressCard, "LOOPX_QUIET_DIGESTS": &cfg.DefaultsSeed.QuietDigests} {
		if getenv(name) != "" {
			v := flag(name, true)
			*dst = &v
		}
	}
	cfg.Files = FilesConfig{MaxBytes: store.DefaultMaxFileBytes, Store: cmp.Or(strings.ToLower(strings.TrimSpace(getenv("LOOPX_FILE_STORE"))), "pg")}
	if v := getenv("LOOPX_FILE_MAX_BYTES"); v != "" {
		n, err := parseBytes(v)
		if err != nil || n < 1024 || n > 1<<30 {
			bad("LOOPX_FILE_MAX_BYTES", "%q is not a size from 1KiB to 1GiB (such as 20MiB or 5000000)", v)
		}
		cfg.Files.MaxBytes = n
	}
	switch cfg.Files.Store {
	case "pg":
	case "s3":
		cfg.Files.S3 = S3Config{Endpoint: getenv("LOOPX_S3_ENDPOINT"), Region: getenv("LOOPX_S3_REGION"),
			Bucket: getenv("LOOPX_S3_BUCKET"), Prefix: getenv("LOOPX_S3_PREFIX"),
			AccessKey: getenv("LOOPX_S3_ACCESS_KEY"), SecretKey: secret(getenv("LOOPX_S3_SECRET_KEY"))}
		for name, v := range map[string]string{"LOOPX_S3_ENDPOINT": cfg.Files.S3.Endpoint, "LOOPX_S3_BUCKET": cfg.Files.S3.Bucket,
			"LOOPX_S3_ACCESS_KEY": cfg.Files.S3.AccessKey, "LOOPX_S3_SECRET_KEY": string(cfg.Files.S3.SecretKey)} {
			if v == "" {
				bad(name, "is required with LOOPX_FILE_STORE=s3")
			}
		}
	default:
		bad("LOOPX_FILE_STORE", "%q is not pg or s3", cfg.Files.Store)
	}
	if cfg.Replica == "" {
		host, _ := os.Hostname()
		cfg.Replica = cmp.Or(host, "loopx") + ":" + strconv.Itoa(os.Getpid())
	}
	var err error
	if cfg.Lark, cfg.Sandbox, err = LoadLarkConfig(getenv); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// LoadLarkConfig reads the Lark app settings. With neither LARK_APP_ID nor LARK_APP_SECRET
// the server runs the sandbox (sandbox true); otherwise the app must be complete.
func LoadLarkConfig(getenv func(string) string) (LarkConfig, bool, error) {
	l := LarkConfig{
		AppID:             strings.TrimSpace(getenv("LARK_APP_ID")),
		AppSecret:         secret(strings.TrimSpace(getenv("LARK_APP_SECRET"))),
		VerificationToken: secret(strings.TrimSpace(getenv("LARK_VERIFICATION_TOKEN"))),
		EncryptKey:        secret(strings.TrimSpace(getenv("LARK_ENCRYPT_KEY"))),
		Transport:         cmp.Or(strings.ToLower(strings.TrimSpace(getenv("LARK_TRANSPORT"))), "ws"),
		BaseURL:           strings.TrimSpace(getenv("LARK_BASE_URL")),
		BotOpenID:         strings.TrimSpace(getenv("LARK_BOT_OPEN_ID")),
	}
	switch v := strings.TrimSpace(getenv("LARK_CALLBACK_MAX_AGE")); {
	case strings.EqualFold(v, "off"):
		l.CallbackMaxAge = -1
	case v != "":
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Minute || d > 24*time.Hour {
			return l, false, fmt.Errorf("LARK_CALLBACK_MAX_AGE: %q is not a duration between 1m and 24h (or off)", v)
		}
		l.CallbackMaxAge = d
	}
	if v := strings.TrimSpace(getenv("LOOPX_TEST_LARK_MINUTE")); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second || d > time.Minute {
			return l, false, fmt.Errorf("LOOPX_TEST_LARK_MINUTE: %q is not a duration between 1s and 1m", v)
		}
		l.TestMinute = d
	}
	if l.AppID == "" && l.AppSecret == "" {
		if l.Transport != bot.TransportWS && l.Transport != bot.TransportHTTP {
			return l, true, fmt.Errorf("LARK_TRANSPORT: %q is not ws or http", l.Transport)
		}
		return l, true, nil
	}
	return l, false, l.BotConfig().Validate()
}

// parseDays reads a duration that may be given in days (14d), or as Go writes one (36h).
func parseDays(v string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(strings.TrimSpace(v), "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil || days < 0 || days > 36500 {
			return 0, fmt.Errorf("%q is not a number of days", v)
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	return time.ParseDuration(v)
}

func formatDays(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		return strconv.Itoa(int(d/(24*time.Hour))) + "d"
	}
	return d.String()
}

// parseBool reads an on/off setting: 1, true, yes, on or 0, false, no, off (any case); ""
// is def. Anything else is an error, so LOOPX_SCHEDULER=flase does not silently mean "on".
func parseBool(v string, def bool) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "":
		return def, nil
	case "1", "true", "yes", "on":
		return true, nil
	case "0", "false", "no", "off":
		return false, nil
	}
	return def, fmt.Errorf("%q is not on or off (use 1, true, yes, on or 0, false, no, off)", v)
}

// parseTestClock reads "<epoch RFC 3339>,<anchor unix ns>,<scale>".
func parseTestClock(v string) (testClock, error) {
	bad := fmt.Errorf("%q is not <epoch RFC 3339>,<anchor unix ns>,<scale>", v)
	parts := strings.Split(v, ",")
	if len(parts) != 3 {
		return testClock{}, bad
	}
	epoch, err1 := time.Parse(time.RFC3339, parts[0])
	anchorNS, err2 := strconv.ParseInt(parts[1], 10, 64)
	scale, err3 := strconv.ParseFloat(parts[2], 64)
	if err1 != nil || err2 != nil || err3 != nil || scale <= 0 {
		return testClock{}, bad
	}
	return testClock{Epoch: epoch, Anchor: time.Unix(0, anchorNS), Scale: scale}, nil
}

// NewLogger builds the process's one slog handler.
func NewLogger(w interface{ Write([]byte) (int, error) }, format string, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
