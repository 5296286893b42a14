package runner

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
)

// Redacted replaces a secret in what a turn printed.
const Redacted = "[REDACTED]"

// minSecret is the shortest value redacted: shorter ones would blank out ordinary words.
const minSecret = 6

// redact removes from out every secret the runner handed the turn (its env values, its
// signing secret, its turn token) before the output is stored: verbose CLIs, `set -x` and
// HTTP clients echoing headers print them. Each secret is also looked for in the encodings
// such tools print it in (base64, URL, hex, JSON string escaping, with or without escaped slashes), and a tail that begins in
// the middle of one loses that piece too.
func redact(out string, secrets ...string) string {
	var forms []string
	for _, s := range secrets {
		if len(s) < minSecret {
			continue
		}
		js, _ := json.Marshal(s)
		forms = append(forms, s,
			base64.StdEncoding.EncodeToString([]byte(s)), base64.RawStdEncoding.EncodeToString([]byte(s)),
			base64.URLEncoding.EncodeToString([]byte(s)), base64.RawURLEncoding.EncodeToString([]byte(s)),
			url.QueryEscape(s), url.PathEscape(s), hex.EncodeToString([]byte(s)),
			string(js[1:len(js)-1]), strings.ReplaceAll(string(js[1:len(js)-1]), "/", `\/`))
	}
	// Longest first, so a form that contains another is replaced whole.
	slices.SortFunc(forms, func(a, b string) int { return len(b) - len(a) })
	forms = slices.Compact(forms)
	for _, f := range forms {
		out = strings.ReplaceAll(out, f, Redacted)
	}
	// The kept tail may start inside a secret: drop that piece.
	for _, f := range forms {
		for n := len(f) - 1; n >= minSecret; n-- {
			if strings.HasPrefix(out, f[len(f)-n:]) {
				out = Redacted + out[n:]
				break
			}
		}
	}
	return out
}

// envSecrets are the values of an exec agent's env: every one is a secret (store keeps them
// sealed).
func envSecrets(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for _, v := range env {
		out = append(out, v)
	}
	return out
}
