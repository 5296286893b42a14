package router_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"loopx/router"
)

// BenchmarkHandleMessage measures one routed chat message end to end on a real database:
// event dedupe, routing through the chat binding, authorization, inbox insert, audit and the
// receipt row, in one transaction. Run: go test ./router -run X -bench HandleMessage
func BenchmarkHandleMessage(b *testing.B) {
	e := setup(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m := router.Message{EventID: fmt.Sprintf("bev_%d", i), MessageID: fmt.Sprintf("bom_%d", i), ChatID: room,
			ChatType: router.ChatGroup, SenderID: member, Text: "@_user_1 hello " + fmt.Sprint(i),
			Mentions: []router.Mention{{Key: "@_user_1", OpenID: bot}}}
		if i%150 == 149 { // stay under the pending bound
			e.drainAll(b)
		}
		require.NoError(b, e.chat.HandleMessage(b.Context(), m))
	}
}
