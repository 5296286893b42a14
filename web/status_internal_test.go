package web

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"loopx/store"
)

// TestPageStatusReadsTheTable walks the table of error kinds: a page answering an error of
// each kind has that kind's status, the API's; a database out of reach is 503, anything else
// 500.
func TestPageStatusReadsTheTable(t *testing.T) {
	t.Parallel()
	for _, k := range store.ErrorKinds() {
		if k.Err == nil {
			continue
		}
		require.Equal(t, k.Status, pageStatus(fmt.Errorf("op: %w", store.Errorf(k.Err, "f", "m"))), k.Code)
	}
	unavailable, _ := store.KindByCode(store.CodeUnavailable)
	require.Equal(t, unavailable.Status, pageStatus(fmt.Errorf("read: %w", context.DeadlineExceeded)))
	internal, _ := store.KindByCode(store.CodeInternal)
	require.Equal(t, internal.Status, pageStatus(errors.New("boom")))
}
