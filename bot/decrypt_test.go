package bot

import (
	"encoding/base64"
	"testing"

	"github.com/stretchr/testify/require"

	"loopx/bot/sandbox"
)

// An envelope that decrypts to something with "}" before "{" made the SDK's EventDecrypt
// panic (slice bounds out of range); decryptEvent answers an error.
func TestDecryptEventRejectsWhatIsNotAnObject(t *testing.T) {
	for _, plain := range []string{"} {", "}", "no braces at all", ""} {
		enc, err := sandbox.Encrypt([]byte(plain), "k")
		require.NoError(t, err)
		_, err = decryptEvent(enc, "k")
		require.Error(t, err, "%q", plain)
	}
	enc, err := sandbox.Encrypt([]byte(`{"a":{"b":1}}`), "k")
	require.NoError(t, err)
	got, err := decryptEvent(enc, "k")
	require.NoError(t, err)
	require.JSONEq(t, `{"a":{"b":1}}`, string(got))
	for _, bad := range []string{"%%%", base64.StdEncoding.EncodeToString(make([]byte, 16)), base64.StdEncoding.EncodeToString(make([]byte, 40))} {
		_, err := decryptEvent(bad, "k")
		require.Error(t, err, "%q", bad)
	}
}

// Whatever an unsigned request carries, decryptEvent returns an error or a JSON-looking slice
// of its plaintext, and never panics.
func FuzzDecryptEvent(f *testing.F) {
	for _, p := range []string{`{"type":"url_verification"}`, "} {", "{", ""} {
		enc, err := sandbox.Encrypt([]byte(p), "k")
		require.NoError(f, err)
		f.Add(enc, "k")
		f.Add(enc, "other")
	}
	f.Add("", "k")
	f.Add("AAAA", "")
	f.Fuzz(func(t *testing.T, encrypted, key string) {
		out, err := decryptEvent(encrypted, key)
		if err == nil && (len(out) < 2 || out[0] != '{' || out[len(out)-1] != '}') {
			t.Fatalf("decrypted %q is not brace-delimited", out)
		}
	})
}

// What a wrong key decrypts to is garbage, not JSON: the decode says so as a syntax error
// (the intake refuses it as bad_encryption), and JSON of the wrong shape is not one.
func TestDecodeTellsGarbageFromTheWrongShape(t *testing.T) {
	for _, garbage := range []string{"{\x8f\x01\x02}", `{"a": 1,, }`, `{"a":"b"}}x{`, "{\xff\xfe"} {
		_, err := decodeFrame([]byte(garbage))
		require.Error(t, err, "%q", garbage)
		require.True(t, isSyntaxError(err), "%q: %T %v", garbage, err, err)
	}
	_, err := decodeFrame([]byte(`{"header": 5}`))
	require.Error(t, err)
	require.False(t, isSyntaxError(err), "%T %v", err, err)
}
