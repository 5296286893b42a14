package store_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"loopx/store"
)

// Exec env names: letters, digits and _, not starting with a digit, at most 128 characters.
func TestExecEnvNames(t *testing.T) {
	t.Parallel()
	for name, ok := range map[string]bool{
		"OPENAI_API_KEY": true, "_x": true, "a1": true, strings.Repeat("A", 128): true,
		"": false, "1A": false, "A-B": false, "A B": false, "Ä": false, strings.Repeat("A", 129): false,
	} {
		raw, err := json.Marshal(map[string]any{"argv": []string{"true"}, "env": map[string]string{name: "v"}})
		require.NoError(t, err)
		_, err = store.ParseExecSettings(raw)
		if ok {
			require.NoError(t, err, "%q", name)
		} else {
			require.ErrorIs(t, err, store.ErrInvalid, "%q", name)
		}
	}
}
