package router

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"loopx/store"
)

// command runs one parsed command: resolve its goal, check the sender's role, act, answer.
func (t *turn) command(ctx context.Context, cmd command, p Parsed) error {
	switch cmd.name {
	case "help":
		return t.help(ctx)
	case "goals":
		return t.goals(ctx)
	case "lang":
		return t.setLang(ctx, cmd, p)
	case "approve", "reject":
		return t.answerGate(ctx, cmd, p)
	case "unbind":
		return t.unbind(ctx, cmd, p)
	}
	tg, err := t.resolve(ctx, p.Addr, false)
	if err != nil || tg == nil {
		return err
	}
	if !allows(tg.role, cmd.need) {
		return t.refuse(ctx, cmd.action, "/"+cmd.name, cmd.need, tg)
	}
	switch cmd.name {
	case "status":
		return t.status(ctx, tg)
	case "gates":
		return t.gates(ctx, tg)
	case "report":
		return t.report(ctx, tg)
	case "bind":
		return t.bind(ctx, cmd, tg)
	case "pause", "resume":
		return t.pauseResume(ctx, cmd, tg)
	case "budget":
		return t.budget(ctx, tg, p)
	case "todo":
		return t.todo(ctx, tg, p)
	}
	return fmt.Errorf("command /%s has no handler", cmd.name)
}

func (t *turn) help(ctx context.Context) error {
	lang, err := t.langFor(ctx, nil)
	if err != nil {
		return err
	}
	var cmds []map[string]any
	for _, c := range commandTable() {
		cmds = append(cmds, map[string]any{"Usage": c.usage, "Summary": c.summary[lang]})
	}
	return t.reply(ctx, "help", map[string]any{"Commands": cmds}, nil)
}

func (t *turn) goals(ctx context.Context) error {
	visible, err := store.GoalsVisibleTo(ctx, t.tx, t.who())
	if err != nil {
		return err
	}
	list := []map[string]any{}
	for _, g := range visible {
		list = append(list, map[string]any{"ID": g.ID, "Title": g.Title, "Status": g.Status, "Role": string(g.Role)})
	}
	return t.reply(ctx, "goals", map[string]any{"Goals": list}, nil)
}

func (t *turn) status(ctx context.Context, tg *target) error {
	agents, err := store.LookupAgents(ctx, t.tx, tg.goal.ID)
	if err != nil {
		return err
	}
	now := t.c.opts.Now()
	rows := []map[string]any{}
	for _, a := range agents {
		_, err := store.LookupLiveTurn(ctx, t.tx, a.GoalID, a.ID, now)
		live := err == nil
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		counts, err := store.CountInbox(ctx, t.tx, a.GoalID, a.ID, now)
		if err != nil {
			return err
		}
		rows = append(rows, map[string]any{
			"ID": a.ID, "Default": a.IsDefault, "Live": live, "Pending": counts.Pending, "Steer": counts.Steer,
		})
	}
	gates, err := store.LookupOpenGates(ctx, t.tx, tg.goal.ID)
	if err != nil {
		return err
	}
	spent, err := store.SpentSlots(ctx, t.tx, tg.goal.ID, time.Duration(tg.goal.WindowHours)*time.Hour, now)
	if err != nil {
		return err
	}
	// Failed sends and missed fires are what an owner must act on (issues 4 and 5): one read.
	problems, err := store.ReadGoalProblems(ctx, t.tx, tg.goal.ID, now.Add(-statusMissedWindow), statusProblemLimit)
	if err != nil {
		return err
	}
	data := problemsView(problems, tg.goal.HeartbeatTZ, t.c.opts.Advice)
	maps.Copy(data, map[string]any{
		"GoalID": tg.goal.ID, "Title": tg.goal.Title, "Status": tg.goal.Status, "SpentSlots": spent,
		"AllowedSlots": tg.goal.AllowedSlots, "WindowHours": tg.goal.WindowHours,
		"Owners": tg.goal.Owners, "OpenGates": len(gates), "Agents": rows,
	})
	return t.reply(ctx, "status", data, tg)
}

func (t *turn) gates(ctx context.Context, tg *target) error {
	open, err := store.LookupOpenGates(ctx, t.tx, tg.goal.ID)
	if err != nil {
		return err
	}
	list := []map[string]any{}
	for _, g := range open {
		text, err := store.LookupTodoText(ctx, t.tx, g.TodoID)
		if err != nil {
			return err
		}
		list = append(list, map[string]any{
			"Short": shortGate(g.ID), "Question": g.Question, "Options": g.Options,
			"TodoID": g.TodoID, "TodoText": text,
		})
	}
	return t.reply(ctx, "gates", map[string]any{"GoalID": tg.goal.ID, "Gates": list}, tg)
}

func (t *turn) report(ctx context.Context, tg *target) error {
	if t.c.opts.Report == nil {
		return t.reply(ctx, "report_unavailable", map[string]any{"GoalID": tg.goal.ID}, tg)
	}
	lang, err := t.langFor(ctx, &tg.goal)
	if err != nil {
		return err
	}
	queued, err := t.c.opts.Report(ctx, t.tx, ReportRequest{
		GoalID: tg.goal.ID, ChatID: t.m.ChatID, ReplyTo: t.m.MessageID,
		ReplyInThread: t.m.ThreadID != "", Lang: lang, RequestedBy: t.m.SenderID,
	})
	if err != nil {
		return t.kernelError(ctx, err, tg)
	}
	if err := t.audit(ctx, "chat.report", tg.goal.ID, "goal:"+tg.goal.ID, true, map[string]any{"queued": queued}); err != nil {
		return err
	}
	if !queued {
		return t.reply(ctx, "report_requested", map[string]any{"GoalID": tg.goal.ID}, tg)
	}
	return nil
}

func (t *turn) bind(ctx context.Context, cmd command, tg *target) error {
	if tg.agent != "" {
		var err error
		if tg, err = t.resolveAgent(ctx, tg); err != nil || tg == nil {
			return err
		}
	}
	b := store.Binding{ChatID: t.m.ChatID, ThreadRoot: t.m.RootID, GoalID: tg.goal.ID, AgentID: tg.agent, CreatedBy: t.m.SenderID}
	if err := store.Bind(ctx, t.tx, b); err != nil {
		return t.kernelError(ctx, err, tg)
	}
	if err := t.audit(ctx, cmd.action, tg.goal.ID, "chat:"+t.m.ChatID, true, map[string]any{
		"thread_root": b.ThreadRoot, "agent_id": b.AgentID,
	}); err != nil {
		return err
	}
	return t.reply(ctx, "bound", map[string]any{"GoalID": tg.goal.ID, "AgentID": tg.agent, "Thread": b.ThreadRoot != ""}, tg)
}

func (t *turn) unbind(ctx context.Context, cmd command, p Parsed) error {
	bound, err := store.ChatBindings(ctx, t.tx, t.m.ChatID)
	if err != nil {
		return err
	}
	var goals []string
	for _, b := range bound {
		if b.ThreadRoot == t.m.RootID && (p.Addr == nil || b.GoalID == p.Addr.Goal) && !slices.Contains(goals, b.GoalID) {
			goals = append(goals, b.GoalID)
		}
	}
	thread := t.m.RootID != ""
	if len(goals) == 0 {
		return t.reply(ctx, "unbound", map[string]any{"Goals": []string{}, "Thread": thread}, nil)
	}
	// Every goal unbound here must be the sender's to unbind; otherwise nothing changes.
	for _, id := range goals {
		g, err := store.LookupGoalAs(ctx, t.tx, id, t.who())
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if !allows(g.Role, needOwner) {
			return t.refuse(ctx, cmd.action, "/unbind", needOwner, &target{goal: g.Goal, role: g.Role})
		}
	}
	goalID := ""
	if p.Addr != nil {
		goalID = p.Addr.Goal
	}
	removed, err := store.Unbind(ctx, t.tx, t.m.ChatID, t.m.RootID, goalID)
	if err != nil {
		return err
	}
	for _, b := range removed {
		if err := t.audit(ctx, cmd.action, b.GoalID, "chat:"+t.m.ChatID, true, map[string]any{"thread_root": b.ThreadRoot}); err != nil {
			return err
		}
	}
	return t.reply(ctx, "unbound", map[string]any{"Goals": goals, "Thread": thread}, nil)
}

func (t *turn) pauseResume(ctx context.Context, cmd command, tg *target) error {
	ref := store.GoalRef{GoalID: tg.goal.ID, Meta: t.meta()}
	var err error
	if cmd.name == "pause" {
		_, err = t.st.StopGoal(ctx, ref)
	} else {
		_, err = t.st.ResumeGoal(ctx, ref)
	}
	if err != nil {
		return t.kernelError(ctx, err, tg)
	}
	name := "paused"
	if cmd.name == "resume" {
		name = "resumed"
	}
	return t.reply(ctx, name, map[string]any{"GoalID": tg.goal.ID}, tg)
}

func (t *turn) budget(ctx context.Context, tg *target, p Parsed) error {
	up := store.UpdateGoalParams{GoalID: tg.goal.ID, AllowedSlots: &p.Slots, Meta: t.meta()}
	if p.Window > 0 {
		up.WindowHours = &p.Window
	}
	g, err := t.st.UpdateGoal(ctx, up)
	if err != nil {
		return t.kernelError(ctx, err, tg)
	}
	return t.reply(ctx, "budget", map[string]any{"GoalID": g.ID, "AllowedSlots": g.AllowedSlots, "WindowHours": g.WindowHours}, tg)
}

func (t *turn) todo(ctx context.Context, tg *target, p Parsed) error {
	td, err := t.st.AddTodo(ctx, store.AddTodoParams{GoalID: tg.goal.ID, Text: p.Text, Meta: t.meta()})
	if err != nil {
		return t.kernelError(ctx, err, tg)
	}
	return t.reply(ctx, "todo_added", map[string]any{"GoalID": tg.goal.ID, "TodoID": td.ID, "Text": td.Text}, tg)
}

// setLang: anyone in a direct chat; in a group, admins and owners of a goal bound to it (or
// anyone while nothing is bound, so a new group can choose before its first /bind).
func (t *turn) setLang(ctx context.Context, cmd command, p Parsed) error {
	allowed := t.m.ChatType == ChatP2P || t.c.admins[t.m.SenderID]
	var owners []string
	goalID := ""
	if !allowed {
		bound, err := store.ChatBindings(ctx, t.tx, t.m.ChatID)
		if err != nil {
			return err
		}
		allowed = len(bound) == 0
		for _, b := range bound {
			g, err := store.LookupGoalAs(ctx, t.tx, b.GoalID, t.who())
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
		if err := t.audit(ctx, cmd.action, goalID, "chat:"+t.m.ChatID, false, map[string]any{"reason": "not an owner of a goal bound here", "lang": p.Lang}); err != nil {
			return err
		}
		return t.reply(ctx, "refused_admin", map[string]any{"Command": "/lang", "Owners": owners}, nil)
	}
	if err := store.SetChatLang(ctx, t.tx, t.m.ChatID, p.Lang, t.m.SenderID); err != nil {
		return t.kernelError(ctx, err, nil)
	}
	t.lang, t.chatSet = p.Lang, true
	if err := t.audit(ctx, cmd.action, "", "chat:"+t.m.ChatID, true, map[string]any{"lang": p.Lang}); err != nil {
		return err
	}
	return t.reply(ctx, "lang_set", map[string]any{}, nil)
}

// deliver puts a message into the target agent's inbox (or its live turn, for /steer).
func (t *turn) deliver(ctx context.Context, p Parsed) error {
	tg, err := t.resolve(ctx, p.Addr, true)
	if err != nil || tg == nil {
		return err
	}
	if !allows(tg.role, needMember) {
		return t.refuse(ctx, "chat.message", "", needMember, tg)
	}
	if err := t.c.ib.CheckText(p.Text); err != nil {
		return t.reply(ctx, "too_long", map[string]any{"Chars": len([]rune(p.Text)), "Max": t.c.ib.Options().MaxChars}, tg)
	}
	var turnID int64
	if p.Mode == store.ModeSteer {
		live, err := store.LookupLiveTurn(ctx, t.tx, tg.goal.ID, tg.agent, t.c.opts.Now())
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if err != nil || (tg.session != "" && live.SessionID != "" && live.SessionID != tg.session) {
			return t.reply(ctx, "steer_no_turn", map[string]any{"GoalID": tg.goal.ID, "AgentID": tg.agent}, tg)
		}
		turnID = live.ID
	}
	it, _, err := t.c.ib.Enqueue(ctx, t.tx, store.InboxInsert{
		GoalID: tg.goal.ID, AgentID: tg.agent, SessionID: tg.session, Mode: p.Mode, Text: p.Text,
		Sender: t.m.SenderID, SourceChat: t.m.ChatID, SourceMessage: t.m.MessageID,
		SourceThread: t.m.RootID, TurnID: turnID,
	})
	if errors.Is(err, store.ErrFull) {
		return t.reply(ctx, "inbox_full", map[string]any{"GoalID": tg.goal.ID, "AgentID": tg.agent, "Max": t.c.ib.Options().MaxPending}, tg)
	}
	if err != nil {
		return t.kernelError(ctx, err, tg)
	}
	if err := t.audit(ctx, "chat.message", tg.goal.ID, fmt.Sprintf("inbox:%d", it.ID), true, map[string]any{
		"agent_id": tg.agent, "mode": p.Mode, "session_id": tg.session,
	}); err != nil {
		return err
	}
	if t.c.opts.Receipt == ReceiptReply {
		return t.reply(ctx, "received", map[string]any{"GoalID": tg.goal.ID, "AgentID": tg.agent, "Mode": p.Mode, "ItemID": it.ID}, tg)
	}
	_, _, err = store.InsertOutbox(ctx, t.tx, store.OutboxInsert{
		DedupeKey: store.ReactionKey(t.m.EventID), Kind: "reaction", ReceiveID: t.m.ChatID,
		TargetMessage: t.m.MessageID, Content: ReceiptEmoji, GoalID: tg.goal.ID, AgentID: tg.agent,
	})
	return err
}
