package router

import (
	"context"

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
		var err error
		if url, err = h.c.opts.SignInLink(ctx, h.tx, h.m.SenderID); err != nil {
			return err
		}
	}
	if err := h.audit(ctx, "chat.web", "", "person:"+h.m.SenderID, url != "", map[string]any{}); err != nil {
		return err
	}
	return h.reply(ctx, "web_link", map[string]any{"URL": url}, nil)
}

// clickSignIn answers the "Open in workspace" button of a gate card: the clicker gets a
// one-time sign-in link in a direct message (the card itself is shared, the link is not).
func (c *Chat) clickSignIn(ctx context.Context, tx *store.Tx, a CardAction, lang string) (CardResult, error) {
	if c.opts.SignInLink == nil {
		return c.proposalToast(lang, "error", "invalid", "", "")
	}
	url, err := c.opts.SignInLink(ctx, tx, a.OperatorID)
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
