package store

import (
	"encoding/json"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/robfig/cron/v3"
)

// MaxText is the longest free text (objective, todo text, question, summary) accepted.
const MaxText = 12000

var (
	idPattern       = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)
	openIDPattern   = regexp.MustCompile(`^ou_[A-Za-z0-9_-]{1,125}$`)
	instancePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)
)

// ValidID reports whether s is a valid goal or agent id.
func ValidID(s string) bool { return idPattern.MatchString(s) }

func checkID(field, v string) error {
	if v == "" {
		return Errorf(ErrInvalid, field, "is required")
	}
	if !idPattern.MatchString(v) {
		return Errorf(ErrInvalid, field,
			"%q is not a valid id: use 1-63 characters of a-z, 0-9, '.', '_', '-', starting with a letter or digit", clip(v))
	}
	return nil
}

func checkInstanceID(field, v string) error {
	if v != "" && !instancePattern.MatchString(v) {
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
		if !openIDPattern.MatchString(id) {
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
func ValidInstanceID(s string) bool { return s == "" || instancePattern.MatchString(s) }
