package router

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"loopx/store"
)

// target is where a message or command goes once routing has decided.
type target struct {
	goal    store.Goal
	role    store.Role // the sender's role on the goal
	agent   string     // "" until resolved (commands about the goal do not need one)
	session string
}

// candidate is one place a message could go, before the goal is read.
type candidate struct{ goal, agent, session string }

func (c candidate) String() string { return Address{c.goal, c.agent, c.session}.String() }

// resolve decides the goal: the explicit token beats the thread (a bot message about a goal
// at the thread root or as the parent, or a thread binding), which beats the chat binding.
// Nothing or several: the sender is asked which, the message is recorded as unrouted, and
// resolve returns nil. A goal the sender may not see (not owner, member or admin, and not
// bound to this chat) is answered exactly like a goal that does not exist.
func (t *turn) resolve(ctx context.Context, addr *Address, wantAgent bool) (*target, error) {
	bound, err := store.ChatBindings(ctx, t.tx, t.m.ChatID)
	if err != nil {
		return nil, err
	}
	if addr != nil {
		g, err := store.LookupGoalAs(ctx, t.tx, addr.Goal, t.who())
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		exists := err == nil
		if !exists || !mayKnow(g, bound) {
			if exists {
				// Probing for someone else's goal: audited, answered as unknown.
				if err := t.audit(ctx, "chat.route", g.ID, "goal:"+g.ID, false, map[string]any{"reason": "goal not visible to sender"}); err != nil {
					return nil, err
				}
			}
			return nil, t.unknownGoal(ctx, addr.Goal, bound)
		}
		tg := &target{goal: g.Goal, role: g.Role, agent: addr.Agent, session: addr.Session}
		if wantAgent {
			return t.resolveAgent(ctx, tg)
		}
		return tg, nil
	}

	var cands []candidate
	add := func(c candidate) {
		if c.goal != "" && !slices.Contains(cands, c) {
			cands = append(cands, c)
		}
	}
	// The thread: bot messages the sender answers, then bindings of this thread.
	for _, id := range []string{t.m.RootID, t.m.ParentID} {
		if id == "" {
			continue
		}
		row, err := store.OutboxByLarkMessage(ctx, t.tx, id)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		add(candidate{row.GoalID, row.AgentID, row.SessionID})
	}
	if t.m.RootID != "" {
		for _, b := range bound {
			if b.ThreadRoot == t.m.RootID {
				add(candidate{b.GoalID, b.AgentID, ""})
			}
		}
	}
	if len(cands) == 0 {
		for _, b := range bound {
			if b.ThreadRoot == "" {
				add(candidate{b.GoalID, b.AgentID, ""})
			}
		}
	}
	switch len(cands) {
	case 0:
		visible, err := store.GoalsVisibleTo(ctx, t.tx, t.who())
		if err != nil {
			return nil, err
		}
		return nil, t.clarify(ctx, "no_match", "", goalIDs(visible), "#goal")
	case 1:
	default:
		names := make([]string, len(cands))
		for i, c := range cands {
			names[i] = c.String()
		}
		return nil, t.clarify(ctx, "ambiguous", "", names, "#"+names[0])
	}
	c := cands[0]
	g, err := store.LookupGoalAs(ctx, t.tx, c.goal, t.who())
	if errors.Is(err, store.ErrNotFound) {
		return nil, t.clarify(ctx, "no_match", "", nil, "#goal")
	}
	if err != nil {
		return nil, err
	}
	tg := &target{goal: g.Goal, role: g.Role, agent: c.agent, session: c.session}
	if wantAgent {
		return t.resolveAgent(ctx, tg)
	}
	return tg, nil
}

// mayKnow: a person may learn a goal exists when they own it, are a member or an admin, or
// the goal is bound to the chat they are in.
func mayKnow(g store.GoalAs, bound []store.Binding) bool {
	if g.Role != store.RoleStranger {
		return true
	}
	return slices.ContainsFunc(bound, func(b store.Binding) bool { return b.GoalID == g.ID })
}

// resolveAgent fills in the agent: the one named, else the binding's, else the goal's
// default, else its only agent (store.MessageAgent, the rule the chat fast path applies
// too). None applies: the sender is told which agents exist, or asked which.
func (t *turn) resolveAgent(ctx context.Context, tg *target) (*target, error) {
	id, ok, err := store.MessageAgent(ctx, t.tx, tg.goal.ID, tg.agent)
	if err != nil {
		return nil, err
	}
	if ok {
		tg.agent = id
		return tg, nil
	}
	agents, err := store.LookupAgents(ctx, t.tx, tg.goal.ID)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(agents))
	for i, a := range agents {
		ids[i] = a.ID
	}
	if tg.agent != "" {
		sugg := closest(tg.agent, ids)
		if err := t.unrouted(ctx, "unknown_agent", prefixAll(tg.goal.ID+"/", sugg)); err != nil {
			return nil, err
		}
		return nil, t.reply(ctx, "unknown_agent", map[string]any{"GoalID": tg.goal.ID, "Name": tg.agent, "Suggestions": sugg}, nil)
	}
	if len(agents) == 0 {
		if err := t.unrouted(ctx, "no_agents", nil); err != nil {
			return nil, err
		}
		return nil, t.reply(ctx, "unknown_agent", map[string]any{"GoalID": tg.goal.ID, "Name": "", "Suggestions": []string{}}, nil)
	}
	names := prefixAll(tg.goal.ID+"/", ids)
	return nil, t.clarify(ctx, "need_agent", tg.goal.ID, names, "#"+names[0])
}

func (t *turn) unknownGoal(ctx context.Context, name string, bound []store.Binding) error {
	visible, err := store.GoalsVisibleTo(ctx, t.tx, t.who())
	if err != nil {
		return err
	}
	ids := goalIDs(visible)
	for _, b := range bound {
		if !slices.Contains(ids, b.GoalID) {
			ids = append(ids, b.GoalID)
		}
	}
	sugg := closest(name, ids)
	if err := t.unrouted(ctx, "unknown_goal", sugg); err != nil {
		return err
	}
	return t.reply(ctx, "unknown_goal", map[string]any{"Name": name, "Suggestions": sugg}, nil)
}

func (t *turn) clarify(ctx context.Context, reason, goalID string, cands []string, example string) error {
	if err := t.unrouted(ctx, reason, cands); err != nil {
		return err
	}
	if cands == nil {
		cands = []string{}
	}
	if len(cands) > 10 {
		cands = cands[:10]
	}
	return t.reply(ctx, "clarify", map[string]any{"Reason": reason, "GoalID": goalID, "Candidates": cands, "Example": example}, nil)
}

func (t *turn) unrouted(ctx context.Context, reason string, cands []string) error {
	_, err := store.RecordUnrouted(ctx, t.tx, store.Unrouted{
		ChatID: t.m.ChatID, MessageID: t.m.MessageID, Sender: t.m.SenderID,
		Text: clip(t.m.Text, 2000), Reason: reason, Candidates: cands,
	})
	if err != nil {
		return fmt.Errorf("record unrouted: %w", err)
	}
	return nil
}

func goalIDs(gs []store.GoalAs) []string {
	out := make([]string, len(gs))
	for i, g := range gs {
		out[i] = g.ID
	}
	return out
}

func prefixAll(prefix string, list []string) []string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = prefix + s
	}
	return out
}
