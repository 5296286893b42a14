package store_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"loopx/store"
)

// TestErrorKindsAreTheContract pins the table: each code's sentinel, HTTP status and CLI exit
// code are what docs/api.md promises programs; changing one is a change of the API.
func TestErrorKindsAreTheContract(t *testing.T) {
	t.Parallel()
	type row struct {
		code   string
		err    error
		status int
		exit   int
	}
	want := []row{
		{"bad_request", nil, 400, 2},
		{"unauthenticated", nil, 401, 2},
		{"forbidden", store.ErrForbidden, 403, 1},
		{"not_found", store.ErrNotFound, 404, 2},
		{"conflict", store.ErrConflict, 409, 1},
		{"refused", store.ErrRefused, 409, 1},
		{"full", store.ErrFull, 409, 1},
		{"too_large", nil, 413, 2},
		{"invalid", store.ErrInvalid, 422, 2},
		{"unavailable", nil, 503, 3},
		{"internal", nil, 500, 3},
	}
	var got []row
	for _, k := range store.ErrorKinds() {
		got = append(got, row{k.Code, k.Err, k.Status, k.Exit})
		require.NotEmpty(t, k.Meaning, k.Code)
	}
	require.Equal(t, want, got)
}

func TestKindOf(t *testing.T) {
	t.Parallel()
	for _, k := range store.ErrorKinds() {
		if k.Err == nil {
			continue
		}
		wrapped := fmt.Errorf("op: %w", store.Errorf(k.Err, "f", "m"))
		require.Equal(t, k.Code, store.KindOf(wrapped).Code)
		got, ok := store.KindByCode(k.Code)
		require.True(t, ok)
		require.Equal(t, k.Status, got.Status)
	}
	require.Equal(t, store.CodeInternal, store.KindOf(errors.New("boom")).Code)
	require.Equal(t, store.CodeUnavailable, store.KindOf(fmt.Errorf("x: %w", context.DeadlineExceeded)).Code)
	// A refusal whose audit write lost the database is unavailable (retry), as before.
	joined := errors.Join(store.Errorf(store.ErrRefused, "", "no"), context.DeadlineExceeded)
	require.Equal(t, store.CodeUnavailable, store.KindOf(joined).Code)

	_, ok := store.KindByCode("teapot")
	require.False(t, ok)
	require.Equal(t, store.CodeForbidden, store.KindOfAnswer("forbidden", 403).Code)
	require.Equal(t, store.ExitUnreachable, store.KindOfAnswer("teapot", 502).Exit, "an unknown code is judged by its status")
	require.Equal(t, store.ExitUsage, store.KindOfAnswer("teapot", 418).Exit)
}

// TestDocsListTheTable: docs/api.md's error section lists every kind as the table says it,
// and nothing else; the same for the reasons.
func TestDocsListTheTable(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("..", "docs", "api.md"))
	require.NoError(t, err)
	doc := string(b)
	var kinds []string
	for _, k := range store.ErrorKinds() {
		kinds = append(kinds, fmt.Sprintf("| %d | `%s` | %s | %d |", k.Status, k.Code, k.Meaning, k.Exit))
	}
	require.Equal(t, kinds, tableRows(t, doc, "| status | code | meaning | CLI exit |"))
	var reasons []string
	for _, r := range store.ErrorReasons() {
		_, ok := store.KindByCode(r.Code)
		require.True(t, ok, r.Reason)
		reasons = append(reasons, fmt.Sprintf("| `%s` | `%s` | %s |", r.Reason, r.Code, r.Meaning))
	}
	require.Equal(t, reasons, tableRows(t, doc, "| reason | code | meaning |"))
}

// tableRows returns the rows of the Markdown table under header (after its separator line).
func tableRows(t *testing.T, doc, header string) []string {
	t.Helper()
	_, after, ok := strings.Cut(doc, header+"\n")
	require.True(t, ok, "docs/api.md has a table headed %s", header)
	lines := strings.Split(after, "\n")[1:] // the separator line
	var rows []string
	for _, l := range lines {
		if !strings.HasPrefix(l, "|") {
			break
		}
		rows = append(rows, l)
	}
	return rows
}
