package router

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"

	"loopx/cards"
	"loopx/change"
	"loopx/quota"
	"loopx/store"
)

// Running the work from chat: /stop, /run, pausing and resuming one agent, the settings
// with a machine default, the overview in a direct chat, and the clicks on turn and breaker
// cards.

// agentOf resolves the agent a command about one agent acts on: the one named, else the
// goal's default or only agent; otherwise the sender is asked which (nil is returned).
func (h *handling) agentOf(ctx context.Context, tg *target) (*target, error) {
	return h.resolveAgent(ctx, tg)
}

// stop asks to end the agent's live turn now.
func (h *handling) stop(ctx context.Context, tg *target) error {
	tg, err := h.agentOf(ctx, tg)
	if err != nil || tg == nil {
		return err
	}
	t, err := h.st.RequestStop(ctx, store.StopParams{GoalID: tg.goal.ID, AgentID: tg.agent, Meta: h.meta()})
	loc, zone := zoneOf(tg.goal.HeartbeatTZ)
	data := map[string]any{"GoalID": tg.goal.ID, "AgentID": tg.agent, "Live": err == nil, "Started": "", "Zone": zone}
	switch {
	case errors.Is(err, store.ErrRefused): // no live turn: said so, audited by the store
	case err != nil:
		return h.kernelError(ctx, err, tg)
	default:
		data["Started"] = t.StartedAt.In(loc).Format("15:04")
	}
	return h.reply(ctx, "stop", data, tg)
}

// runNow asks a scheduler to fire the agent's heartbeat now; it answers in this thread with
// what should-run decided. The message gets the receipt reaction meanwhile.
func (h *handling) runNow(ctx context.Context, tg *target) error {
	tg, err := h.agentOf(ctx, tg)
	if err != nil || tg == nil {
		return err
	}
	lang, err := h.langFor(ctx, &tg.goal)
	if err != nil {
		return err
	}
	if _, err := h.st.RequestRun(ctx, store.RunParams{GoalID: tg.goal.ID, AgentID: tg.agent, ChatID: h.m.ChatID,
		ReplyTo: h.m.MessageID, Lang: lang, Meta: h.meta()}); err != nil {
		return h.kernelError(ctx, err, tg)
	}
	_, _, err = store.InsertOutbox(ctx, h.tx, store.OutboxInsert{
		DedupeKey: store.ReactionKey(h.m.EventID), Kind: "reaction", ReceiveID: h.m.ChatID,
		TargetMessage: h.m.MessageID, Content: ReceiptEmoji, GoalID: tg.goal.ID, AgentID: tg.agent,
	})
	return err
}

// holdResume pauses or resumes one agent (/pause #goal/agent, /resume #goal/agent).
func (h *handling) holdResume(ctx context.Context, cmd command, tg *target) error {
	tg, err := h.agentOf(ctx, tg)
	if err != nil || tg == nil {
		return err
	}
	data := map[string]any{"GoalID": tg.goal.ID, "AgentID": tg.agent}
	if cmd.name == "pause" {
		res, err := h.st.HoldAgent(ctx, store.HoldParams{GoalID: tg.goal.ID, AgentID: tg.agent, Meta: h.meta()})
		if err != nil {
			return h.kernelError(ctx, err, tg)
		}
		data["Change"] = "paused"
		if !res.Changed {
			data["Change"] = "already_paused"
		}
		return h.reply(ctx, "agent_hold", data, tg)
	}
	_, err = h.st.ResumeAgent(ctx, store.ResumeParams{GoalID: tg.goal.ID, AgentID: tg.agent,
		Notice: h.c.cards.Turns().BreakerUpdate, Meta: h.meta()})
	switch {
	case errors.Is(err, store.ErrRefused):
		data["Change"] = "not_held"
	case err != nil:
		return h.kernelError(ctx, err, tg)
	default:
		data["Change"] = "resumed"
	}
	return h.reply(ctx, "agent_hold", data, tg)
}

// setting proposes a change of a goal setting with a machine default (/breaker, /progress,
// /quiet): a preview card, applied on Confirm.
func (h *handling) setting(ctx context.Context, cmd command, tg *target, p Parsed) error {
	v := p.Setting
	var c change.GoalChange
	switch cmd.name {
	case "breaker":
		c.BreakerFailures = &v
	case "progress":
		c.ProgressCard = &v
	case "quiet":
		c.QuietDigests = &v
	}
	return h.propose(ctx, tg, change.Request{GoalID: tg.goal.ID, Kind: store.ProposalGoalSet, Goal: c})
}

// overviewLimit bounds the goals a direct chat's overview lists.
const overviewLimit = 15

// overview answers /status or /gates in a direct chat that names no goal: every goal the
// person owns or belongs to, what needs them first, with a button to open each.
func (h *handling) overview(ctx context.Context, kind string) error {
	visible, err := store.ListGoalsVisibleTo(ctx, h.tx, h.who())
	if err != nil {
		return err
	}
	lang, err := h.langFor(ctx, nil)
	if err != nil {
		return err
	}
	now := h.c.opts.Now()
	type row struct {
		view  map[string]any
		score int
	}
	var rows []row
	openGates := 0 // what /gates counts: gates, not goals
	for _, g := range visible {
		if g.Role == store.RoleStranger {
			continue
		}
		gates, err := store.ListOpenGates(ctx, h.tx, g.ID)
		if err != nil {
			return err
		}
		if kind == "gates" && len(gates) == 0 {
			continue
		}
		openGates += len(gates)
		held, err := store.ListHeldAgents(ctx, h.tx, g.ID)
		if err != nil {
			return err
		}
		agents, err := store.ListAgents(ctx, h.tx, g.ID)
		if err != nil {
			return err
		}
		var working []string
		for _, a := range agents {
			if _, err := store.GetLiveTurn(ctx, h.tx, g.ID, a.ID, now); err == nil {
				working = append(working, a.ID)
			} else if !errors.Is(err, store.ErrNotFound) {
				return err
			}
		}
		var needs []string
		score := 0
		owner := g.Role.AtLeast(store.RoleOwner)
		if len(gates) > 0 {
			key := "overview.needs.gates"
			if len(gates) == 1 {
				key = "overview.needs.gate"
			}
			needs = append(needs, h.c.tpl.Word(lang, key, len(gates)))
			if owner {
				score += 100
			}
		}
		if len(held) > 0 {
			ids := make([]string, len(held))
			for i, a := range held {
				ids[i] = a.ID
			}
			needs = append(needs, h.c.tpl.Word(lang, "overview.needs.held", strings.Join(ids, ", ")))
			if owner {
				score += 50
			}
		}
		switch g.Status {
		case store.GoalStopped:
			needs = append(needs, h.c.tpl.Word(lang, "overview.needs.paused"))
		case store.GoalDone:
			needs = append(needs, h.c.tpl.Word(lang, "overview.needs.done"))
			score -= 10
		}
		if len(working) > 0 {
			needs = append(needs, h.c.tpl.Word(lang, "overview.needs.working", strings.Join(working, ", ")))
		}
		if len(needs) == 0 {
			needs = append(needs, h.c.tpl.Word(lang, "overview.needs.nothing"))
		}
		lines := []map[string]any{}
		if kind == "gates" {
			for _, gt := range gates {
				question, _ := cards.GateWords(h.c.tpl, lang, gt)
				lines = append(lines, map[string]any{"Gate": cards.ShortGate(gt.ID), "Agent": gt.AgentID, "Question": clip(question, 100)})
			}
		}
		rows = append(rows, row{score: score, view: map[string]any{
			"ID": g.ID, "Title": g.Title, "RoleWord": h.c.tpl.Word(lang, "overview.role."+string(g.Role)),
			"Needs": strings.Join(needs, " · "), "GateLines": lines,
		}})
	}
	slices.SortStableFunc(rows, func(a, b row) int { return b.score - a.score })
	goals := []map[string]any{}
	for i, r := range rows {
		if i == overviewLimit {
			break
		}
		goals = append(goals, r.view)
	}
	if err := h.audit(ctx, "chat."+kind, "", "person:"+h.m.SenderID, true, map[string]any{"overview": len(rows)}); err != nil {
		return err
	}
	count := len(rows)
	if kind == "gates" {
		count = openGates
	}
	return h.reply(ctx, "overview", map[string]any{"Kind": kind, "Goals": goals, "Count": count, "More": max(0, len(rows)-overviewLimit)}, nil)
}

// wantsOverview: /status and /gates with no goal, in a direct chat with no binding and not
// in a thread, answer with the overview instead of asking which goal.
func (h *handling) wantsOverview(ctx context.Context, cmd command, p Parsed) (bool, error) {
	if (cmd.name != "status" && cmd.name != "gates") || p.Addr != nil || h.m.ChatType != ChatP2P ||
		h.m.RootID != "" || h.m.ParentID != "" {
		return false, nil
	}
	bound, err := store.ListChatBindings(ctx, h.tx, h.m.ChatID)
	return len(bound) == 0, err
}

// workClick is a decoded button of a turn card ([Retry now], [Pause agent]) or a breaker
// card ([Resume agent]).
type workClick struct {
	Kind, Action    string
	GoalID, AgentID string
	TurnID          int64
}

func parseWorkClick(v map[string]any) (workClick, bool) {
	kind, _ := v["kind"].(string)
	act, _ := v["action"].(string)
	goal, _ := v["goal_id"].(string)
	agent, _ := v["agent_id"].(string)
	c := workClick{Kind: kind, Action: act, GoalID: goal, AgentID: agent}
	switch {
	case kind == "turn" && (act == "retry" || act == "pause"):
		id, ok := number(v["turn_id"])
		if !ok || id <= 0 {
			return c, false
		}
		c.TurnID = id
	case kind == "agent" && act == "resume":
	default:
		return c, false
	}
	return c, store.ValidID(goal) && store.ValidID(agent)
}

// clickWork answers a click on a turn or breaker card: owners only (refusals audited), then
// the same operation the chat command does, and the card in place shows who did what.
func (c *Chat) clickWork(ctx context.Context, tx *store.Tx, a CardAction, w workClick, lang string) (CardResult, error) {
	action := "card." + w.Kind + "." + w.Action
	goal, err := store.GetGoalAs(ctx, tx, w.GoalID, store.Person{OpenID: a.OperatorID, Admin: c.admins[a.OperatorID]})
	if errors.Is(err, store.ErrNotFound) {
		return c.toast(lang, "error", "invalid", "")
	}
	if err != nil {
		return CardResult{}, err
	}
	if l, err := store.GetChatLang(ctx, tx, a.ChatID); err != nil {
		return CardResult{}, err
	} else if l == "" {
		lang = cards.GoalLang(goal.Goal, c.opts.DefaultLang)
	}
	if !allows(goal.Role, needOwner) {
		if err := auditRow(ctx, tx, a.OperatorID, "card", action, goal.ID, store.AgentTarget(goal.ID, w.AgentID), false,
			map[string]any{"reason": "not an owner"}); err != nil {
			return CardResult{}, err
		}
		return c.toast(lang, "error", "owner_only", "")
	}
	meta := store.Meta{Actor: a.OperatorID, Surface: "card", IdempotencyKey: store.EventKey(a.EventID)}
	st := c.st.In(tx)
	now := c.opts.Now()
	switch {
	case w.Kind == "agent":
		_, err := st.ResumeAgent(ctx, store.ResumeParams{GoalID: goal.ID, AgentID: w.AgentID,
			Notice: c.cards.Turns().BreakerUpdate, Meta: meta})
		if errors.Is(err, store.ErrRefused) {
			return c.toast(lang, "info", "not_held", "")
		}
		if err != nil {
			return CardResult{}, err
		}
		return c.toast(lang, "success", "agent_resumed", "")
	case w.Action == "retry":
		if _, err := st.RequestRun(ctx, store.RunParams{GoalID: goal.ID, AgentID: w.AgentID, ChatID: a.ChatID,
			ReplyTo: a.MessageID, Lang: lang, Meta: meta}); err != nil {
			return CardResult{}, err
		}
	default:
		if _, err := st.HoldAgent(ctx, store.HoldParams{GoalID: goal.ID, AgentID: w.AgentID, Meta: meta}); err != nil {
			return CardResult{}, err
		}
	}
	// The failure card shows who acted, its buttons gone.
	res, err := c.toast(lang, "success", map[bool]string{true: "retrying", false: "agent_paused"}[w.Action == "retry"], "")
	if err != nil {
		return CardResult{}, err
	}
	t, err := store.GetTurnByID(ctx, tx, goal.ID, w.TurnID)
	if err != nil {
		return res, nil // the turn is gone (pruned): the toast is the answer
	}
	agent, err := store.GetAgentIn(ctx, tx, goal.ID, w.AgentID)
	if err != nil {
		return CardResult{}, err
	}
	tc := c.cards.Turns()
	v, err := tc.View(ctx, tx, lang, goal.Goal, agent, t, &cards.Settlement{Action: w.Action, By: a.OperatorID, At: now}, now)
	if err != nil {
		return CardResult{}, err
	}
	card, err := c.tpl.Card(lang, "turn", v)
	if err != nil {
		return res, nil // too large to show whole: the toast is the answer
	}
	res.Card = json.RawMessage(card)
	return res, nil
}

// fileText is what an inbox item says when its message brought files and no words: the
// files' names, so the agent (and /runs) read what came.
func fileText(files []File) string {
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = f.Name
		if names[i] == "" {
			names[i] = f.Kind
		}
	}
	return "📎 " + strings.Join(names, ", ")
}

// larkFiles converts a message's files for the store.
func larkFiles(files []File) []store.LarkFile {
	out := make([]store.LarkFile, len(files))
	for i, f := range files {
		out[i] = store.LarkFile{Key: f.Key, Kind: f.Kind, Name: f.Name}
	}
	return out
}

// statusHeld fills an agent row of /status for a held or stopping agent.
func statusHeld(row map[string]any, d quota.Decision, snap store.ShouldRunSnapshot) bool {
	if t := snap.LiveTurn; t != nil && t.StopRequestedAt != nil {
		row["State"] = agentStopping
		return true
	}
	if d.Held == nil || snap.LiveTurn != nil {
		return false
	}
	row["State"] = agentHeld
	row["HeldReason"], row["HeldFailures"], row["HeldBy"] = d.Held.Reason, d.Held.Failures, d.Held.By
	return true
}
