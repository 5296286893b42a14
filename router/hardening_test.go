package router_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"loopx/router"
)

// A /steer with no live turn is refused (never downgraded) and the refusal is audited.
func TestRefusedSteerIsAudited(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *config) { c.Router.Receipt = router.ReceiptReply })
	before := len(e.refusals())
	s := e.say(member, "/steer #docs/codex stop and rebase")
	require.Contains(t, e.oneReply(s).Content, "no live turn")
	refusals := e.refusals()
	require.Len(t, refusals, before+1, "one audit row for the refused steer")
	a := refusals[len(refusals)-1]
	require.Equal(t, "chat.steer", a.Action)
	require.Equal(t, member, a.Actor)
	require.Equal(t, "docs", a.GoalID)
	require.Equal(t, "agent:docs/codex", a.Target)
	require.Equal(t, "refused", a.Outcome)
}

// A message event that can never be handled (no chat id) is ErrUnusable, so the bot
// acknowledges it instead of having Lark redeliver it for hours.
func TestUnusableMessageIsMarked(t *testing.T) {
	t.Parallel()
	e := setup(t)
	err := e.chat.HandleMessage(t.Context(), router.Message{EventID: "ev_x", MessageID: "om_x", SenderID: member, Text: "hi"})
	require.ErrorIs(t, err, router.ErrUnusable)
}
