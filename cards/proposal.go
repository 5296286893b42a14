package cards

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"loopx/change"
	"loopx/store"
	"loopx/templates"
)

// ProposalCards renders the preview cards of change proposals: the diff, the effects in
// words, who may confirm, and Confirm / Cancel buttons while the proposal is ready; the
// receipt, or why nothing was applied, once it settled. Update is the change kernel's
// change.CardsFunc: every card of a proposal is updated in place whichever surface settled it.
type ProposalCards struct {
	tpl         *templates.Set
	defaultLang string
}

// ShortProposal is how people name a proposal: p12.
func ShortProposal(id int64) string { return fmt.Sprintf("p%d", id) }

// ProposalView is a proposal as every surface shows it: field names and effects worded in
// one language. The web workspace renders the same view.
type ProposalView struct {
	ProposalID     int64
	Short          string
	GoalID         string
	AgentID        string
	What           string
	State          string // as of now: a ready proposal past its expiry reads expired
	Open           bool
	Diff           []DiffRow
	Effects        []string
	ProposedBy     string
	DecidedBy      string
	DecidedAt      string
	ExpiresAt      string
	Who            string // who may confirm, in words
	Reason         string
	Fresh          string // the short id of the fresh proposal that replaced a stale one
	FreshID        int64
	AppliedVersion int64
	GoalVersion    int64
	Need           string
	// Why is the reason the proposer gave (a replan's, a finish's), "" when none.
	Why string
	// ByLoopX: LoopX proposed it itself (store.ActorSystem), such as finishing a goal whose
	// work is complete; the card names LoopX, not a person.
	ByLoopX bool
	// SuggestCancel and SuggestReopen are the todos a replan's preview suggests cancelling or
	// reopening; the chat card says how to name them.
	SuggestCancel []string
	SuggestReopen []string
}

// DiffRow is one field of a diff, named in the view's language.
type DiffRow struct {
	Field  string
	Name   string
	Before string
	After  string
}

// View words p in lang as of now.
func (pc ProposalCards) View(lang string, p store.Proposal, now time.Time) (ProposalView, error) {
	lang = templates.Lang(lang)
	effects, err := change.Words(pc.tpl, lang, p.Effects)
	if err != nil {
		return ProposalView{}, err
	}
	v := ProposalView{
		ProposalID: p.ID, Short: ShortProposal(p.ID), GoalID: p.GoalID, AgentID: p.AgentID,
		State: p.StateAt(now), Effects: effects, ProposedBy: p.ProposedBy, DecidedBy: p.DecidedBy,
		ExpiresAt: p.ExpiresAt.UTC().Format("15:04 UTC"), Reason: p.Reason, FreshID: p.SuccessorID,
		AppliedVersion: p.AppliedVersion, GoalVersion: p.GoalVersion, Need: string(p.Need),
	}
	v.Open = v.State == store.ProposalReady
	v.ByLoopX = p.ProposedBy == store.ActorSystem
	for _, e := range p.Effects {
		switch e.Code {
		case "replan_suggest_cancel":
			v.SuggestCancel = append(v.SuggestCancel, e.Args["id"])
		case "replan_suggest_reopen":
			v.SuggestReopen = append(v.SuggestReopen, e.Args["id"])
		}
	}
	if v.State == store.ProposalExpired && v.Reason == "" {
		v.Reason = pc.tpl.Word(lang, "proposal.expired")
	}
	if p.SuccessorID != 0 {
		v.Fresh = ShortProposal(p.SuccessorID)
	}
	if p.DecidedAt != nil {
		v.DecidedAt = p.DecidedAt.UTC().Format("2006-01-02 15:04 UTC")
	}
	v.Who = pc.WhoMay(lang, p.Need)
	var asked struct {
		Reason string `json:"reason"`
	}
	if json.Unmarshal(p.Params, &asked) == nil {
		v.Why = asked.Reason
	}
	v.What = pc.what(lang, p)
	for _, d := range p.Diff {
		v.Diff = append(v.Diff, DiffRow{Field: d.Field, Name: change.FieldName(pc.tpl, lang, d.Field), Before: change.ValueName(pc.tpl, lang, d.Field, d.Before), After: change.ValueName(pc.tpl, lang, d.Field, d.After)})
	}
	return v, nil
}

// WhoMay names, in lang, who may confirm a proposal that needs role need.
func (pc ProposalCards) WhoMay(lang string, need store.Role) string {
	if need == store.RoleAdmin {
		return pc.tpl.Word(lang, "who_may.admin")
	}
	return pc.tpl.Word(lang, "who_may.owner")
}

// what says in lang what proposal p changes.
func (pc ProposalCards) what(lang string, p store.Proposal) string {
	switch p.Kind {
	case store.ProposalGoalPause:
		return pc.tpl.Word(lang, "proposal.goal_pause")
	case store.ProposalGoalResume:
		return pc.tpl.Word(lang, "proposal.goal_resume")
	case store.ProposalAgentSet:
		return pc.tpl.Word(lang, "proposal.agent_set", p.AgentID)
	case store.ProposalGoalDone:
		if p.ProposedBy == store.ActorSystem {
			return pc.tpl.Word(lang, "proposal.goal_done_complete")
		}
		return pc.tpl.Word(lang, "proposal.goal_done")
	case store.ProposalGoalReopen:
		return pc.tpl.Word(lang, "proposal.goal_reopen")
	case store.ProposalGoalReplan:
		return pc.tpl.Word(lang, "proposal.goal_replan")
	case store.ProposalDefaultsSet:
		return pc.tpl.Word(lang, "proposal.defaults_set")
	}
	return pc.tpl.Word(lang, "proposal.goal_set")
}

// Card renders p's card in lang as of now.
func (pc ProposalCards) Card(lang string, p store.Proposal, now time.Time) (templates.Rendered, error) {
	v, err := pc.View(lang, p, now)
	if err != nil {
		return templates.Rendered{}, err
	}
	return pc.tpl.Render(lang, "proposal", v)
}

// Update renders one card_update per card posted for the settled proposal p, inside the
// transaction that settled it.
func (pc ProposalCards) Update(ctx context.Context, db store.DB, p store.Proposal) ([]store.OutboxInsert, error) {
	cards, err := store.ListProposalCards(ctx, db, p.ID)
	if err != nil || len(cards) == 0 {
		return nil, err
	}
	goal, err := store.GetGoal(ctx, db, p.GoalID)
	if err != nil {
		return nil, fmt.Errorf("render proposal update: %w", err)
	}
	now := p.CreatedAt
	if p.DecidedAt != nil {
		now = *p.DecidedAt
	}
	var out []store.OutboxInsert
	for _, c := range cards {
		lang := GoalLang(goal, pc.defaultLang)
		if c.ReceiveIDType == "chat_id" {
			if lang, err = ChatLang(ctx, db, c.ReceiveID, goal, pc.defaultLang); err != nil {
				return nil, err
			}
		}
		v, err := pc.View(lang, p, now)
		if err != nil {
			return nil, err
		}
		card, err := pc.tpl.Card(lang, "proposal", v)
		if err != nil {
			return nil, err
		}
		out = append(out, store.OutboxInsert{
			DedupeKey: store.ProposalUpdateKey(p.ID, p.State, c.ID),
			Kind:      "card_update", ReceiveIDType: c.ReceiveIDType, ReceiveID: c.ReceiveID,
			UpdateOf: c.ID, Content: card, GoalID: p.GoalID, AgentID: p.AgentID,
		})
	}
	return out, nil
}

// Post queues p's preview card as the answer to a chat message and records it as the
// proposal's card.
func (pc ProposalCards) Post(ctx context.Context, db store.DB, lang string, p store.Proposal, chatID, replyTo string, inThread bool, now time.Time) error {
	r, err := pc.Card(lang, p, now)
	if err != nil {
		return err
	}
	id, _, err := store.InsertOutbox(ctx, db, store.OutboxInsert{
		DedupeKey: store.ProposalCardKey(p.ID, chatID), Kind: r.Kind, ReceiveID: chatID,
		ReplyTo: replyTo, ReplyInThread: inThread, Content: r.Content, GoalID: p.GoalID, AgentID: p.AgentID,
	})
	if err != nil {
		return err
	}
	if r.Kind != templates.KindCard {
		return nil
	}
	return store.AddProposalCard(ctx, db, p.ID, id)
}

// Announce posts p's preview card to every chat its goal is bound to (in each chat's
// language), or, when it is bound nowhere, to each owner in a direct message, and records
// them as the proposal's cards: how a proposal LoopX makes itself reaches the people who
// confirm it. It is the change kernel's change.AnnounceFunc.
func (pc ProposalCards) Announce(ctx context.Context, db store.DB, p store.Proposal) error {
	goal, err := store.GetGoal(ctx, db, p.GoalID)
	if err != nil {
		return fmt.Errorf("announce proposal: %w", err)
	}
	to, err := audience(ctx, db, goal, pc.defaultLang)
	if err != nil {
		return fmt.Errorf("announce proposal: %w", err)
	}
	for _, a := range to {
		r, err := pc.Card(a.Lang, p, p.CreatedAt)
		if err != nil {
			return err
		}
		id, _, err := store.InsertOutbox(ctx, db, store.OutboxInsert{
			DedupeKey: store.ProposalCardKey(p.ID, a.ReceiveID), Kind: r.Kind, ReceiveIDType: a.ReceiveIDType,
			ReceiveID: a.ReceiveID, ReplyTo: a.ReplyTo, ReplyInThread: a.ReplyTo != "", Content: r.Content, GoalID: p.GoalID,
		})
		if err != nil {
			return err
		}
		if r.Kind == templates.KindCard {
			if err := store.AddProposalCard(ctx, db, p.ID, id); err != nil {
				return err
			}
		}
	}
	return nil
}
