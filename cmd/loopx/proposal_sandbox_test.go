package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loopx/bot/sandbox"
	"loopx/store/storetest"
)

// TestBudgetPreviewCardInSandbox runs the protected-change flow through the Lark emulator
// and a real `loopx serve --sandbox`: /budget answers with a preview card, a stranger's click
// is refused with a toast, the owner's Confirm applies it and the card shows the receipt in
// place, and a second click does nothing.
func TestBudgetPreviewCardInSandbox(t *testing.T) {
	t.Parallel()
	sandboxURL := "http://" + freeAddr(t)
	s := startServe(t, map[string]string{
		"DATABASE_URL": storetest.NewDatabase(t), "LOOPX_ADMIN_TOKEN": e2eAdminToken, "LOOPX_HOME": t.TempDir(),
		"LOOPX_SANDBOX_ADDR": strings.TrimPrefix(sandboxURL, "http://"), "LOOPX_DEMO": "off", "LOOPX_SCHEDULER": "off",
		"LOOPX_SANDBOX_STATE": "off",
	})
	admin := e2eAdminToken
	s.ok(t, admin, "goal", "create", "--goal-id", "g", "--owner", "ou_owner", "--member", "ou_member", "--allowed-slots", "12")
	ctl, err := sandbox.NewClient(sandboxURL, "")
	require.NoError(t, err)
	const room = "oc_team"
	ctx := t.Context()
	_, err = ctl.Post(ctx, sandbox.PostRequest{ChatID: room, ChatType: sandbox.ChatGroup, OpenID: "ou_owner", Text: "/bind #g", MentionBot: true})
	require.NoError(t, err)

	cursor := int64(0)
	// next waits for the bot's next message in the room that satisfies ok.
	next := func(what string, ok func(sandbox.MessageView) bool) sandbox.MessageView {
		t.Helper()
		var found sandbox.MessageView
		require.Eventually(t, func() bool {
			page, err := ctl.Messages(ctx, room, cursor, 0, 500*time.Millisecond)
			if err != nil {
				return false
			}
			for _, m := range page.Messages {
				if m.SenderType == "app" && ok(m) {
					found = m
				}
			}
			return found.MessageID != ""
		}, 2*time.Minute, 50*time.Millisecond, what)
		return found
	}
	next("the bind is answered", func(m sandbox.MessageView) bool { return strings.Contains(m.Text, "#g") })
	page, err := ctl.Messages(ctx, room, 0, 0, 0)
	require.NoError(t, err)
	cursor = page.Cursor

	_, err = ctl.Post(ctx, sandbox.PostRequest{ChatID: room, OpenID: "ou_owner", Text: "/budget #g 50", MentionBot: true})
	require.NoError(t, err)
	card := next("a preview card", func(m sandbox.MessageView) bool {
		return m.Card != nil && strings.Contains(m.Card.Title, "Change preview")
	})
	require.Equal(t, "Change preview · p1 · #g", card.Card.Title)
	lines := ""
	for _, l := range card.Card.Lines {
		lines += l.Text + "\n"
	}
	require.Contains(t, lines, "turns per window: 12 → 50")
	require.Contains(t, lines, "quota 12 of 12 left in 24 h → 50 of 50 in 24 h")
	require.Contains(t, lines, "owners may confirm")
	require.Len(t, card.Card.Buttons, 2)
	require.Equal(t, float64(12), s.ok(t, admin, "goal", "show", "--goal-id", "g")["allowed_slots"])

	// A stranger's click is refused with a toast; nothing changes.
	res, err := ctl.Click(ctx, sandbox.ClickRequest{MessageID: card.MessageID, Button: 1, OpenID: "ou_stranger"})
	require.NoError(t, err)
	require.Equal(t, "error", res.Toast.Type)
	require.Equal(t, "Only owners of the goal can confirm this", res.Toast.Content)
	require.False(t, res.CardUpdated)
	require.Equal(t, float64(12), s.ok(t, admin, "goal", "show", "--goal-id", "g")["allowed_slots"])

	// The owner confirms: applied, and the card shows the receipt in place.
	res, err = ctl.Click(ctx, sandbox.ClickRequest{MessageID: card.MessageID, Button: 1, OpenID: "ou_owner"})
	require.NoError(t, err)
	require.Equal(t, "success", res.Toast.Type)
	require.Equal(t, "Applied", res.Toast.Content)
	require.True(t, res.CardUpdated)
	require.Equal(t, float64(50), s.ok(t, admin, "goal", "show", "--goal-id", "g")["allowed_slots"])
	last := ""
	require.Eventually(t, func() bool {
		page, err := ctl.Messages(ctx, room, 0, 0, 0)
		if err != nil {
			return false
		}
		for _, m := range page.Messages {
			if m.MessageID == card.MessageID && m.Card != nil {
				text := ""
				for _, l := range m.Card.Lines {
					text += l.Text + "\n"
				}
				last = m.Card.Title + "\n" + text
				return m.Card.Title == "Change applied · p1 · #g" && len(m.Card.Buttons) == 0 &&
					strings.Contains(text, "**Receipt** · proposed by <at id=ou_owner></at> · confirmed by <at id=ou_owner></at>")
			}
		}
		return false
	}, 30*time.Second, 50*time.Millisecond, "the card shows the receipt")
	t.Log("the card now reads:\n" + last)

	// A second click does nothing.
	res, err = ctl.Click(ctx, sandbox.ClickRequest{MessageID: card.MessageID, Button: 1, OpenID: "ou_owner"})
	if err == nil {
		require.NotEqual(t, "success", res.Toast.Type)
		require.False(t, res.CardUpdated)
	}
	g := s.ok(t, admin, "goal", "show", "--goal-id", "g")
	require.Equal(t, float64(50), g["allowed_slots"])
	require.Equal(t, float64(2), g["version"], "applied once")
}
