package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"
)

// ExecSettings are an exec agent's runner_config (the runner in scheduler/runner reads them).
type ExecSettings struct {
	// Argv is the command and its arguments, run without a shell. An argument "{{prompt}}"
	// is replaced by the rendered prompt.
	Argv []string `json:"argv,omitempty"`
	// Shell is a command line for /bin/sh -c; only run when the server allows shells.
	Shell string `json:"shell,omitempty"`
	// Dir is the working directory; "" is the server's.
	Dir string `json:"dir,omitempty"`
	// Env adds variables to the agent's environment. Their values are secrets: stored
	// sealed, never shown.
	Env map[string]string `json:"env,omitempty"`
	// Timeout bounds the turn (Go duration, e.g. "20m"); "" is the runner's default.
	Timeout string `json:"timeout,omitempty"`
	// Stdin is what the agent reads: "packet" (default), "prompt" or "none".
	Stdin string `json:"stdin,omitempty"`
}

// WebhookSettings are a webhook agent's runner_config.
type WebhookSettings struct {
	URL string `json:"url"`
	// Secret signs each request (HMAC-SHA256); at least 16 characters. A secret: stored
	// sealed, never shown.
	Secret string `json:"secret,omitempty"`
	// Timeout bounds the whole turn (Go duration); "" is the runner's default.
	Timeout string `json:"timeout,omitempty"`
	// CancelURL, when set, is POSTed (signed like the turn) when an owner stops the turn.
	CancelURL string `json:"cancel_url,omitempty"`
}

// runnerReservedEnv are the variables an exec runner sets for each turn; an agent's env may
// not set them.
var runnerReservedEnv = []string{"LOOPX_URL", "LOOPX_TOKEN", "LOOPX_GOAL_ID", "LOOPX_AGENT_ID",
	"LOOPX_TURN_ID", "LOOPX_TURN_NUMBER", "LOOPX_PROMPT_FILE", "LOOPX_PACKET_FILE", "LOOPX_DEADLINE",
	"LOOPX_ACTION", "LOOPX_TODO_ID"}

// RunnerReservedEnv lists the variables an exec runner sets for each turn.
func RunnerReservedEnv() []string { return slices.Clone(runnerReservedEnv) }

// isEnvName reports whether k is a portable environment variable name of at most 128
// characters. (A regexp with a {0,127} repetition compiled at every process start, about a
// millisecond of every CLI call.)
func isEnvName(k string) bool {
	if k == "" || len(k) > 128 || (k[0] >= '0' && k[0] <= '9') {
		return false
	}
	for i := range len(k) {
		c := k[i]
		if c != '_' && (c < '0' || c > '9') && (c < 'A' || c > 'Z') && (c < 'a' || c > 'z') {
			return false
		}
	}
	return true
}

// ParseExecSettings decodes an exec runner_config and checks that it can work: a command
// (argv or shell, not both), a known stdin, a positive timeout, env names that are
// variables and not the runner's own. It says nothing about whether this server allows
// shells; the runner decides that.
func ParseExecSettings(raw json.RawMessage) (ExecSettings, error) {
	var s ExecSettings
	if err := decodeSettings(raw, &s); err != nil {
		return s, err
	}
	switch {
	case len(s.Argv) == 0 && s.Shell == "":
		return s, Errorf(ErrInvalid, "runner_config.argv", `empty; give the command as a list, e.g. ["codex", "exec", "{{prompt}}"]`)
	case len(s.Argv) > 0 && s.Shell != "":
		return s, Errorf(ErrInvalid, "runner_config.shell", "set argv or shell, not both")
	case len(s.Argv) > 0 && strings.TrimSpace(s.Argv[0]) == "":
		return s, Errorf(ErrInvalid, "runner_config.argv", "the command (the first element) is empty")
	case s.Stdin != "" && s.Stdin != "packet" && s.Stdin != "prompt" && s.Stdin != "none":
		return s, Errorf(ErrInvalid, "runner_config.stdin", "%q is not packet, prompt or none", s.Stdin)
	}
	if err := checkTimeout(s.Timeout, "20m"); err != nil {
		return s, err
	}
	for _, k := range slices.Sorted(maps.Keys(s.Env)) {
		switch {
		case !isEnvName(k):
			return s, Errorf(ErrInvalid, "runner_config.env", "%q is not a variable name (letters, digits and _, not starting with a digit)", clip(k))
		case slices.Contains(runnerReservedEnv, k):
			return s, Errorf(ErrInvalid, "runner_config.env."+k, "set by the runner for each turn")
		case strings.ContainsRune(s.Env[k], 0):
			return s, Errorf(ErrInvalid, "runner_config.env."+k, "contains a NUL character")
		}
	}
	return s, nil
}

// ParseWebhookSettings decodes a webhook runner_config and checks that it can work: an
// http(s) URL with a host and a signing secret of at least 16 characters.
func ParseWebhookSettings(raw json.RawMessage) (WebhookSettings, error) {
	var s WebhookSettings
	if err := decodeSettings(raw, &s); err != nil {
		return s, err
	}
	u, err := url.Parse(s.URL)
	switch {
	case s.URL == "":
		return s, Errorf(ErrInvalid, "runner_config.url", "is required: the http(s) URL each turn is POSTed to")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return s, Errorf(ErrInvalid, "runner_config.url", "%q is not an http(s) URL with a host", clip(s.URL))
	case len(s.Secret) < 16:
		return s, Errorf(ErrInvalid, "runner_config.secret", "at least 16 characters; requests are signed with it")
	}
	if err := checkTimeout(s.Timeout, "10m"); err != nil {
		return s, err
	}
	if s.CancelURL != "" {
		c, err := url.Parse(s.CancelURL)
		if err != nil || (c.Scheme != "http" && c.Scheme != "https") || c.Host == "" {
			return s, Errorf(ErrInvalid, "runner_config.cancel_url", "%q is not an http(s) URL with a host", clip(s.CancelURL))
		}
	}
	return s, nil
}

// CheckRunnerSettings checks that runner_config (secrets included) can work for runner.
// A poll agent has no settings.
func CheckRunnerSettings(runner string, raw json.RawMessage) error {
	switch runner {
	case RunnerExec:
		_, err := ParseExecSettings(raw)
		return err
	case RunnerWebhook:
		_, err := ParseWebhookSettings(raw)
		return err
	case RunnerPoll, "":
		if err := checkJSONObject("runner_config", raw); err != nil {
			return err
		}
		if len(bytes.TrimSpace(raw)) > 0 && !bytes.Equal(bytes.Join(bytes.Fields(raw), nil), []byte("{}")) {
			return Errorf(ErrInvalid, "runner_config", "a poll agent has no runner settings (the host asks should-run itself); send {} or use runner exec or webhook")
		}
		return nil
	}
	return Errorf(ErrInvalid, "runner", "%q is not exec, webhook or poll", clip(runner))
}

func decodeSettings(raw json.RawMessage, v any) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	if err := checkJSONObject("runner_config", raw); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			return Errorf(ErrInvalid, "runner_config."+ute.Field, "has the wrong type: want %s", ute.Type)
		}
		if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return Errorf(ErrInvalid, "runner_config."+strings.Trim(f, `"`), "unknown setting")
		}
		return Errorf(ErrInvalid, "runner_config", "is not valid JSON: %s", err.Error())
	}
	return nil
}

func checkTimeout(v, example string) error {
	if v == "" {
		return nil
	}
	if d, err := time.ParseDuration(v); err != nil || d <= 0 {
		return Errorf(ErrInvalid, "runner_config.timeout", "%q is not a positive duration such as %s", clip(v), example)
	}
	return nil
}

// splitSecrets takes the secrets out of a runner_config: a webhook's "secret" and the values
// of an exec agent's "env" (names "secret" and "env.NAME"). public is what may be stored and
// shown; the names of the secrets are listed beside it (SecretInfo), never their values.
func splitSecrets(runner string, raw json.RawMessage) (public json.RawMessage, secrets map[string]string, err error) {
	secrets = map[string]string{}
	switch runner {
	case RunnerExec:
		s, err := ParseExecSettings(raw)
		if err != nil {
			return nil, nil, err
		}
		for k, v := range s.Env {
			secrets["env."+k] = v
		}
		s.Env = nil
		public, err = json.Marshal(s)
		return public, secrets, err
	case RunnerWebhook:
		s, err := ParseWebhookSettings(raw)
		if err != nil {
			return nil, nil, err
		}
		secrets["secret"] = s.Secret
		s.Secret = ""
		public, err = json.Marshal(s)
		return public, secrets, err
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage(`{}`)
	}
	return raw, secrets, nil
}

// mergeSecrets puts secrets back into a public runner_config, for the runner only.
func mergeSecrets(runner string, public json.RawMessage, secrets map[string]string) (json.RawMessage, error) {
	switch runner {
	case RunnerExec:
		var s ExecSettings
		if err := json.Unmarshal(public, &s); err != nil {
			return nil, fmt.Errorf("read exec settings: %w", err)
		}
		for name, v := range secrets {
			if k, ok := strings.CutPrefix(name, "env."); ok {
				if s.Env == nil {
					s.Env = map[string]string{}
				}
				s.Env[k] = v
			}
		}
		return json.Marshal(s)
	case RunnerWebhook:
		var s WebhookSettings
		if err := json.Unmarshal(public, &s); err != nil {
			return nil, fmt.Errorf("read webhook settings: %w", err)
		}
		if v, ok := secrets["secret"]; ok {
			s.Secret = v
		}
		return json.Marshal(s)
	}
	return public, nil
}
