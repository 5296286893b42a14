package store

import (
	"encoding/json"
	"strings"
	"time"
	"unicode/utf8"

	"loopx/templates"

	"github.com/robfig/cron/v3"
)

// MaxText is the longest free text (objective, todo text, question, summary) accepted.
const MaxText = 12000

// The id rules are loops rather than regular expressions: a bounded repetition such as
// {0,62} compiles into a large program, which every process (the CLI included) paid for at
// start.

// ValidID reports whether s is a valid goal or agent id: 1 to 63 characters of a-z, 0-9,
// '.', '_', '-', starting with a letter or digit.
func ValidID(s string) bool {
	return validChars(s, 63, func(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' },
		func(c byte) bool { return c == '.' || c == '_' || c == '-' })
}

// ValidSessionID reports whether s is a valid turn instance or session id: 1 to 128
// characters of A-Z, a-z, 0-9, '.', '_', ':', '-', starting with a letter or digit.
func ValidSessionID(s string) bool {
	return validChars(s, 128, isAlnum, func(c byte) bool { return c == '.' || c == '_' || c == ':' || c == '-' })
}

// validOpenID reports whether s looks like a Lark open_id: "ou_" and 1 to 125 characters of
// A-Z, a-z, 0-9, '_', '-'.
func validOpenID(s string) bool {
	rest, ok := strings.CutPrefix(s, "ou_")
	return ok && validChars(rest, 125, func(c byte) bool { return isAlnum(c) || c == '_' || c == '-' },
		func(c byte) bool { return isAlnum(c) || c == '_' || c == '-' })
}

// validChars: 1 to max bytes, the first one first(c), the others first(c) or more(c).
func validChars(s string, max int, first, more func(byte) bool) bool {
	if s == "" || len(s) > max || !first(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !first(s[i]) && !more(s[i]) {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func checkID(field, v string) error {
	if v == "" {
		return Errorf(ErrInvalid, field, "is required")
	}
	if !ValidID(v) {
		return Errorf(ErrInvalid, field,
			"%q is not a valid id: use 1-63 characters of a-z, 0-9, '.', '_', '-', starting with a letter or digit", clip(v))
	}
	return nil
}

func checkInstanceID(field, v string) error {
	if v != "" && !ValidSessionID(v) {
		return Errorf(ErrInvalid, field,
			"%q is not a valid turn instance id: use 1-128 characters of A-Z, a-z, 0-9, '.', '_', ':', '-'", clip(v))
	}
	return nil
}

func checkText(field, v string, max int, required bool) error {
	if required && strings.TrimSpace(v) == "" {
		return Errorf(ErrInvalid, field, "is required")
	}
	if n := utf8.RuneCountInString(v); n > max {
		return Errorf(ErrInvalid, field, "is %d characters; at most %d", n, max)
	}
	if !utf8.ValidString(v) || strings.ContainsRune(v, 0) {
		return Errorf(ErrInvalid, field, "is not valid UTF-8 text")
	}
	return nil
}

func checkOpenIDs(field string, ids []string) error {
	if len(ids) > 100 {
		return Errorf(ErrInvalid, field, "lists %d people; at most 100", len(ids))
	}
	for _, id := range ids {
		if !validOpenID(id) {
			return Errorf(ErrInvalid, field, "%q is not a Lark open_id (they start with \"ou_\")", clip(id))
		}
	}
	return nil
}

// checkCron accepts "" (no schedule) or a standard five-field spec (or a descriptor such as
// @daily). The zone is its own field, so CRON_TZ= / TZ= prefixes are refused.
func checkCron(field, spec string) error {
	if spec == "" {
		return nil
	}
	if strings.HasPrefix(spec, "CRON_TZ=") || strings.HasPrefix(spec, "TZ=") {
		return Errorf(ErrInvalid, field, "do not put the time zone in the spec; set the zone field instead")
	}
	if len(spec) > 200 {
		return Errorf(ErrInvalid, field, "is %d characters; at most 200", len(spec))
	}
	if _, err := cron.ParseStandard(spec); err != nil {
		return Errorf(ErrInvalid, field, "%q is not a valid cron spec (minute hour day-of-month month day-of-week): %v", clip(spec), err)
	}
	return nil
}

func checkZone(field, tz string) error {
	if tz == "" || tz == "Local" {
		return Errorf(ErrInvalid, field, "name an IANA time zone such as UTC or Asia/Shanghai")
	}
	if _, err := time.LoadLocation(tz); err != nil {
		return Errorf(ErrInvalid, field, "%q is not an IANA time zone (for example UTC, Asia/Shanghai)", clip(tz))
	}
	return nil
}

func checkRange(field string, v, lo, hi int) error {
	if v < lo || v > hi {
		if lo == 0 && v < 0 {
			return Errorf(ErrInvalid, field, "is %d; it must not be negative (at most %d)", v, hi)
		}
		return Errorf(ErrInvalid, field, "is %d; it must be between %d and %d", v, lo, hi)
	}
	return nil
}

// checkLang accepts a supported language (templates.Languages, the one list), or "" when
// empty means "none chosen".
func checkLang(field, v string, emptyOK bool) error {
	if v == "" && emptyOK || templates.IsLang(v) {
		return nil
	}
	return Errorf(ErrInvalid, field, "%q is not one of %s", clip(v), strings.Join(templates.Languages(), ", "))
}

func checkOneOf(field, v string, allowed ...string) error {
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return Errorf(ErrInvalid, field, "%q is not one of %s", clip(v), strings.Join(allowed, ", "))
}

func checkJSONObject(field string, raw json.RawMessage) error {
	if len(raw) == 0 {
		return nil
	}
	if len(raw) > 16384 {
		return Errorf(ErrInvalid, field, "is %d bytes; at most 16384", len(raw))
	}
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return Errorf(ErrInvalid, field, "must be a JSON object")
	}
	return nil
}

// clip shortens echoed input so an error message stays readable.
func clip(s string) string {
	if utf8.RuneCountInString(s) <= 80 {
		return s
	}
	r := []rune(s)
	return string(r[:80]) + "…"
}

// ValidInstanceID reports whether s is "" or a valid turn instance id.
func ValidInstanceID(s string) bool { return s == "" || ValidSessionID(s) }
