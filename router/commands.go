package router

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"loopx/cards"
	"loopx/change"
	"loopx/store"
)

// command runs one parsed command: resolve its goal, check the sender's role, act, answer.
func (h *handling) command(ctx context.Context, cmd command, p Parsed) error {
	switch cmd.name {
	case "help":
		return h.help(ctx)
	case "goals":
		return h.goals(ctx)
	case "lang":
		return h.setLang(ctx, cmd, p)
	case "approve", "reject":
		return h.answerGate(ctx, cmd, p)
	case "unbind":
		return h.unbind(ctx, cmd, p)
	case "web":
		return h.signInLink(ctx)
	}
	if ok, err := h.wantsOverview(ctx, cmd, p); err != nil || ok {
		if err != nil {
			return err
		}
		return h.overview(ctx, cmd.name)
	}
	tg, err := h.resolve(ctx, p.Addr, false)
	if err != nil || tg == nil {
		return err
	}
	if !allows(tg.role, cmd.need) {
		return h.refuse(ctx, cmd.action, "/"+cmd.name, cmd.need, tg)
	}
	switch cmd.name {
	case "stop":
		return h.stop(ctx, tg)
	case "run":
		return h.runNow(ctx, tg)
	case "breaker", "progress", "quiet":
		return h.setting(ctx, cmd, tg, p)
	case "status":
		return h.status(ctx, tg)
	case "gates":
		return h.gates(ctx, tg)
	case "report":
		return h.report(ctx, tg)
	case "runs":
		return h.runs(ctx, tg, p)
	case "bind":
		return h.bind(ctx, cmd, tg)
	case "pause", "resume":
		if p.Addr != nil && p.Addr.Agent != "" {
			return h.holdResume(ctx, cmd, tg)
		}
		return h.pauseResume(ctx, cmd, tg)
	case "budget":
		return h.budget(ctx, tg, p)
	case "todo":
		return h.todo(ctx, tg, p)
	case "schedule", "owners", "members", "stall":
		return h.changeGoal(ctx, cmd, tg, p)
	case "contract":
		return h.contractView(ctx, tg)
	case "scope":
		return h.scope(ctx, tg, p)
	case "capability":
		return h.capability(ctx, tg, p)
	case "criteria":
		return h.criteria(ctx, tg, p)
	case "done", "reopen":
		return h.finish(ctx, cmd, tg, p)
	case "replan":
		return h.replan(ctx, tg, p)
	case "waive":
		return h.waive(ctx, tg, p)
	case "handoff":
		return h.handoff(ctx, tg, p)
	}
	return fmt.Errorf("command /%s has no handler", cmd.name)
}

func (h *handling) help(ctx context.Context) error {
	lang, err := h.langFor(ctx, nil)
	if err != nil {
		return err
	}
	var cmds []map[string]any
	for _, c := range commandTable() {
		cmds = append(cmds, map[string]any{"Usage": h.c.tpl.Word(lang, "usage."+c.name), "Summary": h.c.tpl.Word(lang, "help."+c.name),
			"Who": h.c.tpl.Word(lang, "help.who."+needName(c.need))})
	}
	return h.reply(ctx, "help", map[string]any{"Commands": cmds}, nil)
}

func (h *handling) goals(ctx context.Context) error {
	visible, err := store.ListGoalsVisibleTo(ctx, h.tx, h.who())
	if err != nil {
		return err
	}
	list := []map[string]any{}
	for _, g := range visible {
		list = append(list, map[string]any{"ID": g.ID, "Title": g.Title, "Status": g.Status, "Role": string(g.Role)})
	}
	return h.reply(ctx, "goals", map[string]any{"Goals": list}, nil)
}

func (h *handling) status(ctx context.Context, tg *target) error {
	now := h.c.opts.Now()
	scheds, err := h.st.ListSchedules(ctx, tg.goal.ID)
	if err != nil {
		return err
	}
	// What each agent is really doing: its should-run state, live turn, inbox and heartbeat.
	rows, err := h.agentStates(ctx, tg.goal, scheds, now)
	if err != nil {
		return err
	}
	gates, err := store.ListOpenGates(ctx, h.tx, tg.goal.ID)
	if err != nil {
		return err
	}
	shorts := make([]string, len(gates))
	for i, g := range gates {
		shorts[i] = cards.ShortGate(g.ID)
	}
	report, reportZone := nextReport(scheds)
	spent, err := store.SpentSlots(ctx, h.tx, tg.goal.ID, time.Duration(tg.goal.WindowHours)*time.Hour, now)
	if err != nil {
		return err
	}
	// Failed sends and missed fires are what an owner must act on: one read.
	problems, err := store.ReadGoalProblems(ctx, h.tx, tg.goal.ID, now.Add(-statusMissedWindow), statusProblemLimit)
	if err != nil {
		return err
	}
	data := problemsView(problems, tg.goal.HeartbeatTZ, h.c.opts.Advice)
	contract, err := h.contractBrief(ctx, tg.goal)
	if err != nil {
		return err
	}
	maps.Copy(data, contract)
	maps.Copy(data, map[string]any{
		"GoalID": tg.goal.ID, "Title": tg.goal.Title, "Status": tg.goal.Status, "SpentSlots": spent,
		"AllowedSlots": tg.goal.AllowedSlots, "WindowHours": tg.goal.WindowHours,
		"LeftSlots": max(0, tg.goal.AllowedSlots-spent), "Owners": tg.goal.Owners,
		"OpenGates": len(gates), "Gates": shorts, "Agents": rows, "NextReport": report, "ReportZone": reportZone,
	})
	return h.reply(ctx, "status", data, tg)
}

func (h *handling) gates(ctx context.Context, tg *target) error {
	open, err := store.ListOpenGates(ctx, h.tx, tg.goal.ID)
	if err != nil {
		return err
	}
	lang, err := h.langFor(ctx, &tg.goal)
	if err != nil {
		return err
	}
	list := []map[string]any{}
	for _, g := range open {
		text, err := store.GetTodoText(ctx, h.tx, g.TodoID)
		if err != nil {
			return err
		}
		question, labels := cards.GateWords(h.c.tpl, lang, g)
		list = append(list, map[string]any{
			"Short": cards.ShortGate(g.ID), "Question": question, "Options": g.Options, "Labels": labels,
			"TodoID": g.TodoID, "TodoText": text,
		})
	}
	return h.reply(ctx, "gates", map[string]any{"GoalID": tg.goal.ID, "Gates": list}, tg)
}

func (h *handling) report(ctx context.Context, tg *target) error {
	if h.c.opts.Report == nil {
		return h.reply(ctx, "report_unavailable", map[string]any{"GoalID": tg.goal.ID}, tg)
	}
	lang, err := h.langFor(ctx, &tg.goal)
	if err != nil {
		return err
	}
	queued, err := h.c.opts.Report(ctx, h.tx, ReportRequest{
		GoalID: tg.goal.ID, ChatID: h.m.ChatID, ReplyTo: h.m.MessageID,
		ReplyInThread: h.m.ThreadID != "", Lang: lang, RequestedBy: h.m.SenderID,
	})
	if err != nil {
		return h.kernelError(ctx, err, tg)
	}
	if err := h.audit(ctx, "chat.report", tg.goal.ID, store.GoalTarget(tg.goal.ID), true, map[string]any{"queued": queued}); err != nil {
		return err
	}
	if queued {
		// The report card is the answer: no acknowledgement follows it.
		return nil
	}
	// Nothing was queued: the last report already covers everything up to now. Say so,
	// rather than promise a report that is not coming.
	last, err := store.LastDigestEnd(ctx, h.tx, tg.goal.ID)
	if err != nil {
		return err
	}
	loc, zone := zoneOf(tg.goal.ReportTZ)
	since := ""
	if !last.IsZero() {
		since = last.In(loc).Format(statusTimeLayout)
	}
	return h.reply(ctx, "report_none", map[string]any{"GoalID": tg.goal.ID, "Since": since, "Zone": zone}, tg)
}

func (h *handling) bind(ctx context.Context, cmd command, tg *target) error {
	if tg.agent != "" {
		var err error
		if tg, err = h.resolveAgent(ctx, tg); err != nil || tg == nil {
			return err
		}
	}
	b := store.Binding{ChatID: h.m.ChatID, ThreadRoot: h.m.RootID, GoalID: tg.goal.ID, AgentID: tg.agent, CreatedBy: h.m.SenderID}
	if err := store.Bind(ctx, h.tx, b); err != nil {
		return h.kernelError(ctx, err, tg)
	}
	if err := h.audit(ctx, cmd.action, tg.goal.ID, "chat:"+h.m.ChatID, true, map[string]any{
		"thread_root": b.ThreadRoot, "agent_id": b.AgentID,
	}); err != nil {
		return err
	}
	return h.reply(ctx, "bound", map[string]any{"GoalID": tg.goal.ID, "AgentID": tg.agent, "Thread": b.ThreadRoot != ""}, tg)
}

func (h *handling) unbind(ctx context.Context, cmd command, p Parsed) error {
	bound, err := store.ListChatBindings(ctx, h.tx, h.m.ChatID)
	if err != nil {
		return err
	}
	var goals []string
	for _, b := range bound {
		if b.ThreadRoot == h.m.RootID && (p.Addr == nil || b.GoalID == p.Addr.Goal) && !slices.Contains(goals, b.GoalID) {
			goals = append(goals, b.GoalID)
		}
	}
	thread := h.m.RootID != ""
	if len(goals) == 0 {
		return h.reply(ctx, "unbound", map[string]any{"Goals": []string{}, "Thread": thread}, nil)
	}
	// Every goal unbound here must be the sender's to unbind; otherwise nothing changes.
	for _, id := range goals {
		g, err := store.GetGoalAs(ctx, h.tx, id, h.who())
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if !allows(g.Role, needOwner) {
			return h.refuse(ctx, cmd.action, "/unbind", needOwner, &target{goal: g.Goal, role: g.Role})
		}
	}
	goalID := ""
	if p.Addr != nil {
		goalID = p.Addr.Goal
	}
	removed, err := store.Unbind(ctx, h.tx, h.m.ChatID, h.m.RootID, goalID)
	if err != nil {
		return err
	}
	for _, b := range removed {
		if err := h.audit(ctx, cmd.action, b.GoalID, "chat:"+h.m.ChatID, true, map[string]any{"thread_root": b.ThreadRoot}); err != nil {
			return err
		}
	}
	return h.reply(ctx, "unbound", map[string]any{"Goals": goals, "Thread": thread}, nil)
}

// pauseResume proposes to pause or resume the goal: a preview card, applied on Confirm.
func (h *handling) pauseResume(ctx context.Context, cmd command, tg *target) error {
	kind := store.ProposalGoalPause
	if cmd.name == "resume" {
		kind = store.ProposalGoalResume
	}
	return h.propose(ctx, tg, change.Request{GoalID: tg.goal.ID, Kind: kind})
}

// budget proposes a new budget (and window): a preview card, applied on Confirm.
func (h *handling) budget(ctx context.Context, tg *target, p Parsed) error {
	c := change.GoalChange{AllowedSlots: &p.Slots}
	if p.Window > 0 {
		c.WindowHours = &p.Window
	}
	return h.propose(ctx, tg, change.Request{GoalID: tg.goal.ID, Kind: store.ProposalGoalSet, Goal: c})
}

// changeGoal proposes /schedule, /owners, /members and /stall changes.
func (h *handling) changeGoal(ctx context.Context, cmd command, tg *target, p Parsed) error {
	var c change.GoalChange
	switch cmd.name {
	case "schedule":
		spec := p.Spec
		if p.Which == "heartbeat" {
			c.HeartbeatSpec = &spec
			if p.Zone != "" {
				c.HeartbeatTZ = &p.Zone
			}
		} else {
			c.ReportSpec = &spec
			if p.Zone != "" {
				c.ReportTZ = &p.Zone
			}
		}
	case "owners", "members":
		ids, bad := h.people(p.People)
		if bad != "" {
			return h.usage(ctx, tg, cmd.name, "parse.person", clip(bad, 40))
		}
		add, remove, set := &c.AddOwners, &c.RemoveOwners, &c.Owners
		if cmd.name == "members" {
			add, remove, set = &c.AddMembers, &c.RemoveMembers, &c.Members
		}
		switch p.Op {
		case "add":
			*add = ids
		case "remove":
			*remove = ids
		default:
			*set = &ids
		}
	case "stall":
		c.StallTurns = &p.Stall
	}
	return h.propose(ctx, tg, change.Request{GoalID: tg.goal.ID, Kind: store.ProposalGoalSet, Goal: c})
}

func (h *handling) todo(ctx context.Context, tg *target, p Parsed) error {
	td, err := h.st.AddTodo(ctx, store.AddTodoParams{GoalID: tg.goal.ID, Text: p.Text, Meta: h.meta()})
	if err != nil {
		return h.kernelError(ctx, err, tg)
	}
	return h.reply(ctx, "todo_added", map[string]any{"GoalID": tg.goal.ID, "TodoID": td.ID, "Text": td.Text}, tg)
}

// setLang: anyone in a direct chat; in a group, admins and owners of a goal bound to it (or
// anyone while nothing is bound, so a new group can choose before its first /bind).
func (h *handling) setLang(ctx context.Context, cmd command, p Parsed) error {
	allowed := h.m.ChatType == ChatP2P || h.c.admins[h.m.SenderID]
	var owners []string
	goalID := ""
	if !allowed {
		bound, err := store.ListChatBindings(ctx, h.tx, h.m.ChatID)
		if err != nil {
			return err
		}
		allowed = len(bound) == 0
		for _, b := range bound {
			g, err := store.GetGoalAs(ctx, h.tx, b.GoalID, h.who())
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			if goalID == "" {
				goalID = g.ID
			}
			owners = append(owners, g.Owners...)
			if g.Role.AtLeast(store.RoleOwner) {
				allowed = true
			}
		}
	}
	if !allowed {
		if err := h.audit(ctx, cmd.action, goalID, "chat:"+h.m.ChatID, false, map[string]any{"reason": "not an owner of a goal bound here", "lang": p.Lang}); err != nil {
			return err
		}
		return h.reply(ctx, "refused_admin", map[string]any{"Command": "/lang", "Owners": owners}, nil)
	}
	if err := store.SetChatLang(ctx, h.tx, h.m.ChatID, p.Lang, h.m.SenderID); err != nil {
		return h.kernelError(ctx, err, nil)
	}
	h.lang, h.chatSet = p.Lang, true
	if err := h.audit(ctx, cmd.action, "", "chat:"+h.m.ChatID, true, map[string]any{"lang": p.Lang}); err != nil {
		return err
	}
	return h.reply(ctx, "lang_set", map[string]any{}, nil)
}

// deliver puts a message into the target agent's inbox (or its live turn, for /steer).
func (h *handling) deliver(ctx context.Context, p Parsed) error {
	tg, err := h.resolve(ctx, p.Addr, true)
	if err != nil || tg == nil {
		return err
	}
	if !allows(tg.role, needMember) {
		return h.refuse(ctx, "chat.message", "", needMember, tg)
	}
	if err := h.c.ib.CheckText(p.Text); err != nil {
		return h.reply(ctx, "too_long", map[string]any{"Chars": len([]rune(p.Text)), "Max": h.c.ib.Options().MaxChars}, tg)
	}
	var turnID int64
	if p.Mode == store.ModeSteer {
		live, err := store.GetLiveTurn(ctx, h.tx, tg.goal.ID, tg.agent, h.c.opts.Now())
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if err != nil || (tg.session != "" && live.SessionID != "" && live.SessionID != tg.session) {
			// Refused, never downgraded to the inbox: audited like any refusal.
			if aerr := h.audit(ctx, "chat.steer", tg.goal.ID, store.AgentTarget(tg.goal.ID, tg.agent), false,
				map[string]any{"refused": "no live turn to steer", "session_id": tg.session}); aerr != nil {
				return aerr
			}
			return h.reply(ctx, "steer_no_turn", map[string]any{"GoalID": tg.goal.ID, "AgentID": tg.agent}, tg)
		}
		turnID = live.ID
	}
	it, _, err := h.c.ib.Enqueue(ctx, h.tx, store.InboxInsert{
		GoalID: tg.goal.ID, AgentID: tg.agent, SessionID: tg.session, Mode: p.Mode, Text: p.Text,
		Sender: h.m.SenderID, SourceChat: h.m.ChatID, SourceMessage: h.m.MessageID,
		SourceThread: h.m.RootID, TurnID: turnID, Files: larkFiles(h.m.Files),
	})
	if errors.Is(err, store.ErrFull) {
		return h.reply(ctx, "inbox_full", map[string]any{"GoalID": tg.goal.ID, "AgentID": tg.agent, "Max": h.c.ib.Options().MaxPending}, tg)
	}
	if err != nil {
		return h.kernelError(ctx, err, tg)
	}
	detail := map[string]any{"agent_id": tg.agent, "mode": p.Mode, "session_id": tg.session}
	if len(h.m.Files) > 0 {
		detail["files"] = len(h.m.Files) // (the fast path, which takes no files, writes the same row)
	}
	if err := h.audit(ctx, "chat.message", tg.goal.ID, store.InboxTarget(it.ID), true, detail); err != nil {
		return err
	}
	if h.c.opts.Receipt == ReceiptReply {
		return h.reply(ctx, "received", map[string]any{"GoalID": tg.goal.ID, "AgentID": tg.agent, "Mode": p.Mode, "ItemID": it.ID}, tg)
	}
	_, _, err = store.InsertOutbox(ctx, h.tx, store.OutboxInsert{
		DedupeKey: store.ReactionKey(h.m.EventID), Kind: "reaction", ReceiveID: h.m.ChatID,
		TargetMessage: h.m.MessageID, Content: ReceiptEmoji, GoalID: tg.goal.ID, AgentID: tg.agent,
	})
	return err
}

// answerGate handles /approve and /reject.
func (h *handling) answerGate(ctx context.Context, cmd command, p Parsed) error {
	g, err := store.GetGateByID(ctx, h.tx, p.GateID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	var goal store.GoalAs
	if err == nil {
		if goal, err = store.GetGoalAs(ctx, h.tx, g.GoalID, h.who()); err != nil {
			return err
		}
	}
	bound, berr := store.ListChatBindings(ctx, h.tx, h.m.ChatID)
	if berr != nil {
		return berr
	}
	if err != nil || !mayKnow(goal, bound) {
		if err == nil {
			if aerr := h.audit(ctx, cmd.action, goal.ID, store.GateTarget(g.ID), false, map[string]any{"reason": "gate not visible to sender"}); aerr != nil {
				return aerr
			}
		}
		return h.usage(ctx, nil, "", "gate.none", cards.ShortGate(p.GateID))
	}
	tg := &target{goal: goal.Goal, role: goal.Role, agent: g.AgentID}
	if !allows(goal.Role, needOwner) {
		return h.refuse(ctx, cmd.action, "/"+cmd.name, needOwner, tg)
	}
	out, err := h.st.AnswerGate(ctx, store.AnswerGateParams{
		GoalID: goal.ID, GateID: g.ID, Answer: cmd.name, AnsweredBy: h.m.SenderID, Comment: p.Text,
		ByAdmin: h.c.admins[h.m.SenderID], Notice: h.c.cards.Gates.Update, Meta: h.meta(),
	})
	if err != nil {
		return h.kernelError(ctx, err, tg)
	}
	return h.reply(ctx, "gate_answered", map[string]any{"Short": cards.ShortGate(out.ID), "Status": out.Status, "Answer": ""}, tg)
}
