package store

import (
	"regexp"
	"testing"
)

// The id checks are loops; the regular expressions they replaced are the documented rules
// and serve as the oracle.
func FuzzIDRules(f *testing.F) {
	for _, s := range []string{"", "a", "goal-1", "Goal", "-x", "a.b_c-d", "ou_abc", "ou_", "t:1", "x:y.z", "é", "a\x00"} {
		f.Add(s)
	}
	idRe := regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)
	sessionRe := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)
	openIDRe := regexp.MustCompile(`^ou_[A-Za-z0-9_-]{1,125}$`)
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := ValidID(s), idRe.MatchString(s); got != want {
			t.Fatalf("ValidID(%q) = %v, the rule says %v", s, got, want)
		}
		if got, want := ValidSessionID(s), sessionRe.MatchString(s); got != want {
			t.Fatalf("ValidSessionID(%q) = %v, the rule says %v", s, got, want)
		}
		if got, want := validOpenID(s), openIDRe.MatchString(s); got != want {
			t.Fatalf("validOpenID(%q) = %v, the rule says %v", s, got, want)
		}
	})
}
