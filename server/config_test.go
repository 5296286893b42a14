package server

import (
	"testing"
	"time"

	"loopx/scheduler"

	"github.com/stretchr/testify/require"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestConfigNamesTheBadVariable(t *testing.T) {
	t.Parallel()
	base := map[string]string{"HOME": "/home/x"}
	cfg, err := LoadConfig(env(base))
	require.NoError(t, err)
	require.Equal(t, DefaultListen, cfg.Listen)
	require.Equal(t, "/home/x/.loopx", cfg.Home)
	require.True(t, cfg.Sandbox, "no Lark app: sandbox")
	require.Equal(t, "en", cfg.Lang)
	require.Equal(t, "reaction", cfg.Receipt)
	require.Zero(t, cfg.Inbox.AckTimeout, "zero: the inbox default")
	for k, v := range map[string]string{"LOG_FORMAT": "xml", "LOG_LEVEL": "loud", "LOOPX_ADMIN_TOKEN": "short", "LARK_TRANSPORT": "pigeon",
		"LOOPX_LANG": "fr", "LOOPX_RECEIPT": "shout", "LOOPX_INBOX_ACK_TIMEOUT": "soon", "LOOPX_INBOX_MAX_PENDING": "-3"} {
		vars := map[string]string{"HOME": "/home/x", k: v}
		_, err := LoadConfig(env(vars))
		require.ErrorContains(t, err, k)
	}
	cfg, err = LoadConfig(env(map[string]string{"HOME": "/h", "LOOPX_ADMINS": "ou_a, ou_b,", "LARK_APP_ID": "cli_x", "LARK_APP_SECRET": "s"}))
	require.NoError(t, err)
	require.Equal(t, []string{"ou_a", "ou_b"}, cfg.Admins)
	require.False(t, cfg.Sandbox)
	_, err = LoadConfig(env(map[string]string{"HOME": "/h", "LARK_APP_ID": "cli_x"}))
	require.ErrorContains(t, err, "LARK_APP_SECRET", "half a Lark app is an error, not the sandbox")
	require.Equal(t, "REDACTED", secret("s3cret").String())
	cfg, err = LoadConfig(env(map[string]string{"HOME": "/h", "LOOPX_LANG": "zh", "LOOPX_RECEIPT": "reply",
		"LOOPX_INBOX_ACK_TIMEOUT": "30m", "LOOPX_INBOX_MAX_PENDING": "50"}))
	require.NoError(t, err)
	require.Equal(t, "zh", cfg.Lang)
	require.Equal(t, "reply", cfg.Receipt)
	require.Equal(t, 30*time.Minute, cfg.Inbox.AckTimeout)
	require.Equal(t, 50, cfg.Inbox.MaxPending)
}

func TestConfigOnOffSettingsAreStrict(t *testing.T) {
	t.Parallel()
	cfg, err := LoadConfig(env(map[string]string{"HOME": "/h"}))
	require.NoError(t, err)
	require.True(t, cfg.Bot)
	require.True(t, cfg.Scheduler.Enabled)
	require.True(t, cfg.Scheduler.Demo)
	require.False(t, cfg.Scheduler.ExecShell)
	for _, off := range []string{"0", "false", "FALSE", "no", "off", " Off "} {
		cfg, err := LoadConfig(env(map[string]string{"HOME": "/h", "LOOPX_SCHEDULER": off, "LOOPX_BOT": off, "LOOPX_DEMO": off}))
		require.NoError(t, err, off)
		require.False(t, cfg.Scheduler.Enabled, off)
		require.False(t, cfg.Bot, off)
		require.False(t, cfg.Scheduler.Demo, off)
	}
	for _, on := range []string{"1", "true", "yes", "on", "ON"} {
		cfg, err := LoadConfig(env(map[string]string{"HOME": "/h", "LOOPX_EXEC_SHELL": on}))
		require.NoError(t, err, on)
		require.True(t, cfg.Scheduler.ExecShell, on)
	}
	for _, name := range []string{"LOOPX_BOT", "LOOPX_SCHEDULER", "LOOPX_DEMO", "LOOPX_EXEC_SHELL"} {
		_, err := LoadConfig(env(map[string]string{"HOME": "/h", name: "flase"}))
		require.ErrorContains(t, err, name+": \"flase\" is not on or off")
	}
	for k, v := range map[string]string{"LOOPX_JITTER_MAX": "soon", "LOOPX_TEST_CLOCK": "now", "LOOPX_TEST_LARK_MINUTE": "2h"} {
		_, err := LoadConfig(env(map[string]string{"HOME": "/h", k: v}))
		require.ErrorContains(t, err, k)
	}
	// Profiles are served on loopback only, and only when asked for.
	require.Empty(t, cfg.TestProfile)
	for _, v := range []string{"0.0.0.0:6060", "example.com:6060", "6060"} {
		_, err := LoadConfig(env(map[string]string{"HOME": "/h", "LOOPX_TEST_PPROF": v}))
		require.ErrorContains(t, err, "LOOPX_TEST_PPROF", v)
	}
	cfg, err = LoadConfig(env(map[string]string{"HOME": "/h", "LOOPX_TEST_PPROF": "127.0.0.1:6060"}))
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:6060", cfg.TestProfile)
	cfg, err = LoadConfig(env(map[string]string{"HOME": "/h", "LOOPX_JITTER_MAX": "interval"}))
	require.NoError(t, err)
	require.Equal(t, scheduler.SpreadInterval, cfg.Scheduler.MaxJitter)
	cfg, err = LoadConfig(env(map[string]string{"HOME": "/h", "LOOPX_JITTER_MAX": "0", "LOOPX_REPLICA": "r1"}))
	require.NoError(t, err)
	require.Negative(t, cfg.Scheduler.MaxJitter, "0 means no jitter at all")
	require.Equal(t, "r1", cfg.Replica)
	// Retention windows: days or Go durations, forever, and floors that keep what a window
	// needs (Lark's 7-hour redelivery, the longest quota window).
	cfg, err = LoadConfig(env(map[string]string{"HOME": "/h", "LOOPX_RETAIN_AUDIT": "730d", "LOOPX_RETAIN_INBOX": "forever",
		"LOOPX_RETAIN_DECISIONS": "36h"}))
	require.NoError(t, err)
	require.Equal(t, 730*24*time.Hour, cfg.Retention.Audit)
	require.Zero(t, cfg.Retention.Inbox)
	require.Equal(t, 36*time.Hour, cfg.Retention.Decisions)
	require.Equal(t, 7*24*time.Hour, cfg.Retention.LarkEvents, "the default")
	for k, v := range map[string]string{"LOOPX_RETAIN_LARK_EVENTS": "1h", "LOOPX_RETAIN_RUNS": "7d", "LOOPX_RETAIN_AUDIT": "soon"} {
		_, err := LoadConfig(env(map[string]string{"HOME": "/h", k: v}))
		require.ErrorContains(t, err, k)
	}
	// Several bad settings are all named at once.
	_, err = LoadConfig(env(map[string]string{"HOME": "/h", "LOOPX_BOT": "x", "LOOPX_LANG": "fr"}))
	require.ErrorContains(t, err, "LOOPX_BOT")
	require.ErrorContains(t, err, "LOOPX_LANG")
}

func TestConfigChecksAddressesBeforeStarting(t *testing.T) {
	t.Parallel()
	cfg, err := LoadConfig(env(map[string]string{"HOME": "/h", "LOOPX_LISTEN": "0.0.0.0:8080",
		"LOOPX_SANDBOX_ADDR": "127.0.0.1:0", "LOOPX_AGENT_URL": "https://loopx.example:8443"}))
	require.NoError(t, err)
	require.Equal(t, "0.0.0.0:8080", cfg.Listen)
	for name, v := range map[string]string{
		"LOOPX_LISTEN": "localhost", "LOOPX_SANDBOX_ADDR": "127.0.0.1:port", "LOOPX_AGENT_URL": "loopx.example:7377",
	} {
		_, err := LoadConfig(env(map[string]string{"HOME": "/h", name: v}))
		require.ErrorContains(t, err, name+": ", v)
	}
	_, err = LoadConfig(env(map[string]string{"HOME": "/h", "LOOPX_LISTEN": ":99999"}))
	require.ErrorContains(t, err, "LOOPX_LISTEN")

}

func TestWithPoolSize(t *testing.T) {
	t.Parallel()
	require.Equal(t, "postgres://u@h:5432/db?pool_max_conns=20&sslmode=disable",
		withPoolSize("postgres://u@h:5432/db?sslmode=disable", 20))
	require.Equal(t, "postgres://u@h/db?pool_max_conns=5", withPoolSize("postgres://u@h/db?pool_max_conns=5", 20))
	require.Equal(t, "host=h dbname=db", withPoolSize("host=h dbname=db", 20))
}
