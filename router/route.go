package router

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

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
func (h *handling) resolve(ctx context.Context, addr *Address, wantAgent bool) (*target, error) {
	bound, err := store.ListChatBindings(ctx, h.tx, h.m.ChatID)
	if err != nil {
		return nil, err
	}
	if addr != nil {
		g, err := store.GetGoalAs(ctx, h.tx, addr.Goal, h.who())
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		exists := err == nil
		if !exists || !mayKnow(g, bound) {
			if exists {
				// Probing for someone else's goal: audited, answered as unknown.
				if err := h.audit(ctx, "chat.route", g.ID, store.GoalTarget(g.ID), false, map[string]any{"reason": "goal not visible to sender"}); err != nil {
					return nil, err
				}
			}
			return nil, h.unknownGoal(ctx, addr.Goal, bound)
		}
		tg := &target{goal: g.Goal, role: g.Role, agent: addr.Agent, session: addr.Session}
		if wantAgent {
			return h.resolveAgent(ctx, tg)
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
	for _, id := range []string{h.m.RootID, h.m.ParentID} {
		if id == "" {
			continue
		}
		row, err := store.GetOutboxByLarkMessage(ctx, h.tx, id)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		add(candidate{row.GoalID, row.AgentID, row.SessionID})
	}
	if h.m.RootID != "" {
		for _, b := range bound {
			if b.ThreadRoot == h.m.RootID {
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
		visible, err := store.ListGoalsVisibleTo(ctx, h.tx, h.who())
		if err != nil {
			return nil, err
		}
		ids := goalIDs(visible)
		example := "" // the template's placeholder, in the chat's language
		if len(ids) > 0 {
			example = "#" + ids[0]
		}
		return nil, h.clarify(ctx, "no_match", "", ids, example)
	case 1:
	default:
		names := make([]string, len(cands))
		for i, c := range cands {
			names[i] = c.String()
		}
		return nil, h.clarify(ctx, "ambiguous", "", names, "#"+names[0])
	}
	c := cands[0]
	g, err := store.GetGoalAs(ctx, h.tx, c.goal, h.who())
	if errors.Is(err, store.ErrNotFound) {
		return nil, h.clarify(ctx, "no_match", "", nil, "")
	}
	if err != nil {
		return nil, err
	}
	tg := &target{goal: g.Goal, role: g.Role, agent: c.agent, session: c.session}
	if wantAgent {
		return h.resolveAgent(ctx, tg)
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
func (h *handling) resolveAgent(ctx context.Context, tg *target) (*target, error) {
	id, ok, err := store.MessageAgent(ctx, h.tx, tg.goal.ID, tg.agent)
	if err != nil {
		return nil, err
	}
	if ok {
		tg.agent = id
		return tg, nil
	}
	agents, err := store.ListAgents(ctx, h.tx, tg.goal.ID)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(agents))
	for i, a := range agents {
		ids[i] = a.ID
	}
	if tg.agent != "" {
		// No close name: the sender is told which agents the goal has, never "no agents yet"
		// when it has some.
		sugg := closest(tg.agent, ids)
		cands := sugg
		if len(sugg) == 0 {
			cands = ids
		}
		if err := h.unrouted(ctx, "unknown_agent", prefixAll(tg.goal.ID+"/", cands)); err != nil {
			return nil, err
		}
		return nil, h.reply(ctx, "unknown_agent", map[string]any{"GoalID": tg.goal.ID, "Name": tg.agent, "Suggestions": sugg, "Agents": ids}, nil)
	}
	if len(agents) == 0 {
		if err := h.unrouted(ctx, "no_agents", nil); err != nil {
			return nil, err
		}
		return nil, h.reply(ctx, "unknown_agent", map[string]any{"GoalID": tg.goal.ID, "Name": "", "Suggestions": []string{}, "Agents": []string{}}, nil)
	}
	names := prefixAll(tg.goal.ID+"/", ids)
	return nil, h.clarify(ctx, "need_agent", tg.goal.ID, names, "#"+names[0])
}

func (h *handling) unknownGoal(ctx context.Context, name string, bound []store.Binding) error {
	visible, err := store.ListGoalsVisibleTo(ctx, h.tx, h.who())
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
	if err := h.unrouted(ctx, "unknown_goal", sugg); err != nil {
		return err
	}
	return h.reply(ctx, "unknown_goal", map[string]any{"Name": name, "Suggestions": sugg}, nil)
}

func (h *handling) clarify(ctx context.Context, reason, goalID string, cands []string, example string) error {
	if err := h.unrouted(ctx, reason, cands); err != nil {
		return err
	}
	if cands == nil {
		cands = []string{}
	}
	if len(cands) > 10 {
		cands = cands[:10]
	}
	return h.reply(ctx, "clarify", map[string]any{"Reason": reason, "GoalID": goalID, "Candidates": cands, "Example": example}, nil)
}

func (h *handling) unrouted(ctx context.Context, reason string, cands []string) error {
	_, err := store.RecordUnrouted(ctx, h.tx, store.Unrouted{
		ChatID: h.m.ChatID, MessageID: h.m.MessageID, Sender: h.m.SenderID,
		Text: clip(h.m.Text, 2000), Reason: reason, Candidates: cands,
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

// closest returns up to three names close to want (prefix, containment or a small edit
// distance), best first.
func closest(want string, names []string) []string {
	type cand struct {
		name string
		d    int
	}
	var cs []cand
	for _, n := range names {
		d := editDistance(want, n)
		limit := max(2, len(want)/3)
		if strings.HasPrefix(n, want) || strings.HasPrefix(want, n) || strings.Contains(n, want) {
			d = min(d, 1)
		}
		if d <= limit {
			cs = append(cs, cand{n, d})
		}
	}
	slices.SortStableFunc(cs, func(a, b cand) int { return a.d - b.d })
	out := []string{}
	for i := 0; i < len(cs) && i < 3; i++ {
		out = append(out, cs[i].name)
	}
	return out
}

func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
