package quota

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
)

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// newInstanceID names a turn begun without a host-supplied id.
func newInstanceID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return "t-" + hex.EncodeToString(b)
}
