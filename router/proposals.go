package router

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"strings"

	"loopx/cards"
	"loopx/change"
	"loopx/store"
	"loopx/templates"
)

// propose answers a protected command with a preview card: the change is proposed, nothing is
// applied until someone allowed confirms it.
func (h *handling) propose(ctx context.Context, tg *target, req change.Request) error {
	p, err := h.c.changes.In(h.tx).Propose(ctx, h.who(), h.meta(), req)
	if err != nil {
		return h.kernelError(ctx, err, tg)
	}
	lang, err := h.langFor(ctx, &tg.goal)
	if err != nil {
		return err
	}
	return h.c.cards.Proposals.Post(ctx, h.tx, lang, p, h.m.ChatID, h.m.MessageID, h.m.ThreadID != "", h.c.opts.Now())
}

// proposalClick is a decoded Confirm / Cancel button value.
type proposalClick struct {
	ID     int64
	Action string
}

func parseProposalClick(v map[string]any) (proposalClick, bool) {
	if v["kind"] != "proposal" {
		return proposalClick{}, false
	}
	id, ok := number(v["proposal_id"])
	act, _ := v["action"].(string)
	if !ok || id <= 0 || (act != "confirm" && act != "cancel") {
		return proposalClick{}, false
	}
	return proposalClick{ID: id, Action: act}, true
}

// clickProposal confirms or cancels a proposal from its card. The clicker must be allowed to
// make the change; otherwise the toast says so and the proposal stays as it was (the kernel
// audits the refusal). A proposal already settled answers with its state and changes nothing.
func (c *Chat) clickProposal(ctx context.Context, tx *store.Tx, a CardAction, click proposalClick, lang string) (CardResult, error) {
	p, err := store.GetProposal(ctx, tx, click.ID)
	if errors.Is(err, store.ErrNotFound) {
		return c.proposalToast(lang, "error", "invalid", "", "")
	}
	if err != nil {
		return CardResult{}, err
	}
	goal, err := store.GetGoal(ctx, tx, p.GoalID)
	if err != nil {
		return CardResult{}, err
	}
	if l, err := store.GetChatLang(ctx, tx, a.ChatID); err != nil {
		return CardResult{}, err
	} else if l == "" {
		lang = cards.GoalLang(goal, c.opts.DefaultLang)
	}
	who := store.Person{OpenID: a.OperatorID, Admin: c.admins[a.OperatorID]}
	meta := store.Meta{Actor: a.OperatorID, Surface: "card", IdempotencyKey: store.EventKey(a.EventID)}
	k := c.changes.In(tx)
	var res change.Result
	if click.Action == "confirm" {
		res, err = k.Confirm(ctx, who, meta, p.ID)
	} else {
		res, err = k.Cancel(ctx, who, meta, p.ID)
	}
	if errors.Is(err, store.ErrForbidden) {
		return c.proposalToast(lang, "error", "not_allowed", c.cards.Proposals.WhoMay(lang, p.Need), "")
	}
	if err != nil {
		var se *store.Error
		if errors.As(err, &se) {
			return c.proposalToast(lang, "error", "invalid", "", "")
		}
		return CardResult{}, err
	}
	if res.Unchanged {
		return c.proposalToast(lang, "info", "settled", "", res.Proposal.State)
	}
	now := c.opts.Now()
	if res.Fresh != nil {
		if err := c.cards.Proposals.Post(ctx, tx, lang, *res.Fresh, a.ChatID, a.MessageID, false, now); err != nil {
			return CardResult{}, err
		}
	}
	card, err := c.cards.Proposals.Card(lang, res.Proposal, now)
	if err != nil {
		return CardResult{}, err
	}
	kind := map[string]string{store.ProposalApplied: "success", store.ProposalCancelled: "info"}[res.Proposal.State]
	out, err := c.proposalToast(lang, cmp.Or(kind, "warning"), res.Proposal.State, "", res.Proposal.State)
	if card.Kind == templates.KindCard {
		out.Card = json.RawMessage(card.Content)
	}
	return out, err
}

func (c *Chat) proposalToast(lang, kind, code, need, state string) (CardResult, error) {
	text, err := c.tpl.Text(lang, "proposal_toast", map[string]any{"Code": code, "Need": need, "State": state})
	if err != nil {
		return CardResult{}, err
	}
	return CardResult{ToastKind: kind, Toast: text}, nil
}

// people turns the tokens of /owners and /members into open_ids: an @-mention of a person in
// the message, or an open_id typed out. ok is false with the token that names nobody.
func (h *handling) people(tokens []string) (ids []string, bad string) {
	for _, t := range tokens {
		if strings.HasPrefix(t, "ou_") {
			ids = append(ids, t)
			continue
		}
		name := strings.TrimPrefix(t, "@")
		found := ""
		for _, mn := range h.m.Mentions {
			if mn.OpenID != h.c.opts.BotOpenID && (mn.Name == name || mn.Key == t) {
				found = mn.OpenID
			}
		}
		if found == "" {
			return nil, t
		}
		ids = append(ids, found)
	}
	return ids, ""
}
