package api

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"loopx/store"
)

// TestFromErrReadsTheTable walks the table of error kinds: an operation's error of each kind
// is answered with that kind's code and status, its field, reason and message kept; kinds the
// API decides itself are built with the table's status. A mapping of its own in fromErr or
// newError that disagrees with the table fails here.
func TestFromErrReadsTheTable(t *testing.T) {
	t.Parallel()
	for _, k := range store.ErrorKinds() {
		e := newError(k.Code, "f", "m")
		require.Equal(t, k.Status, e.Status, k.Code)
		require.Equal(t, k.Code, e.Code)
		if k.Err == nil {
			continue
		}
		err := fmt.Errorf("op: %w", &store.Error{Kind: k.Err, Field: "field", Reason: "why", Msg: "what to do"})
		got := fromErr(err)
		require.Equal(t, &Error{Status: k.Status, Code: k.Code, Field: "field", Reason: "why", Message: "what to do"}, got, k.Code)
		bare := fromErr(k.Err)
		require.Equal(t, k.Status, bare.Status, k.Code)
		require.Equal(t, k.Code, bare.Code)
	}
	unavailable, _ := store.KindByCode(CodeUnavailable)
	got := fromErr(fmt.Errorf("read goal: %w", context.DeadlineExceeded))
	require.Equal(t, unavailable.Status, got.Status)
	require.Equal(t, CodeUnavailable, got.Code)
	internal, _ := store.KindByCode(CodeInternal)
	got = fromErr(errors.New("a driver said something private"))
	require.Equal(t, internal.Status, got.Status)
	require.Equal(t, CodeInternal, got.Code)
	require.NotContains(t, got.Message, "private", "an internal error's text is logged, not shown")
}
