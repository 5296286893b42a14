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
// such tools print it in (base64, also inside a longer base64 text such as a Basic
// Authorization header, URL, hex, JSON string escaping, with or without escaped slashes), and
// a tail that begins in the middle of one loses that piece too.
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
		forms = append(forms, embeddedBase64(s)...)
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

// embeddedBase64 are the forms s takes inside a longer base64 text (an HTTP Basic
// Authorization header is base64 of "user:secret"): for each of the three offsets s can start
// at in the encoded bytes, the characters that depend on s alone, in both alphabets. The one or
// two characters at each end that mix in the bytes around it stay, and reveal at most a byte.
func embeddedBase64(s string) []string {
	var out []string
	for k := range 3 {
		b := append(make([]byte, k), s...)
		lead := []int{0, 2, 3}[k] // characters that hold bits of the k bytes before s
		for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
			e := enc.EncodeToString(b)[lead:]
			if len(b)%3 != 0 {
				e = e[:len(e)-1] // the last character holds bits of the byte after s
			}
			if len(e) >= 2*minSecret {
				out = append(out, e)
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
