package router

import (
	"context"
	"strconv"

	"loopx/store"
)

// signInLink answers /web: a one-time link to the web workspace, bound to the sender, sent
// only in a direct chat (a link in a group could be used by anyone who sees it first).
func (h *handling) signInLink(ctx context.Context) error {
	if h.m.ChatType != ChatP2P {
		return h.reply(ctx, "web_dm_only", map[string]any{}, nil)
	}
	url := ""
	if h.c.opts.SignInLink != nil {
		// The link opens the workspace in this chat's /lang, when the chat chose one.
		if _, err := h.langFor(ctx, nil); err != nil {
			return err
		}
		var err error
		if url, err = h.c.opts.SignInLink(ctx, h.tx, store.SignInParams{OpenID: h.m.SenderID, Lang: h.lang}); err != nil {
			return err
		}
	}
	if err := h.audit(ctx, "chat.web", "", "person:"+h.m.SenderID, url != "", map[string]any{}); err != nil {
		return err
	}
	return h.reply(ctx, "web_link", map[string]any{"URL": url}, nil)
}

// clickSignIn answers the "Open in workspace" button of a gate card: the clicker gets a
// one-time sign-in link in a direct message (the card itself is shared, the link is not) that
// lands on the card's gate, in the card's language.
func (c *Chat) clickSignIn(ctx context.Context, tx *store.Tx, a CardAction, lang string) (CardResult, error) {
	if c.opts.SignInLink == nil {
		return c.proposalToast(lang, "error", "invalid", "", "")
	}
	next := ""
	if goalID, _ := a.Value["goal_id"].(string); store.ValidID(goalID) {
		next = "/web/goals/" + goalID
		if turn, ok := number(a.Value["turn_id"]); ok && turn > 0 {
			next += "/turns/" + strconv.FormatInt(turn, 10)
		} else if gate, ok := number(a.Value["gate_id"]); ok && gate > 0 {
			next += "#gate-" + strconv.FormatInt(gate, 10)
		}
	}
	url, err := c.opts.SignInLink(ctx, tx, store.SignInParams{OpenID: a.OperatorID, Lang: lang, Next: next})
	if err != nil {
		return CardResult{}, err
	}
	text, err := c.tpl.Text(lang, "web_link", map[string]any{"URL": url})
	if err != nil {
		return CardResult{}, err
	}
	if _, _, err := store.InsertOutbox(ctx, tx, store.OutboxInsert{
		DedupeKey: store.SignInLinkKey(a.EventID), Kind: "text", ReceiveIDType: "open_id",
		ReceiveID: a.OperatorID, Content: text,
	}); err != nil {
		return CardResult{}, err
	}
	if err := auditRow(ctx, tx, a.OperatorID, "card", "card.web", "", "person:"+a.OperatorID, true, map[string]any{}); err != nil {
		return CardResult{}, err
	}
	return c.proposalToast(lang, "success", "link_sent", "", "")
}
