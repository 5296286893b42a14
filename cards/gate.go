package cards

import (
	"context"
	"fmt"

	"loopx/store"
	"loopx/templates"
)

// GateCards renders the cards that announce gates in chat. Its methods are store.NoticeFunc:
// they run inside the kernel operation's transaction and read through the executor it
// passes, so rendering never takes a connection of its own.
type GateCards struct {
	tpl         *templates.Set
	defaultLang string // when neither chat nor goal sets one
}

// Ask renders a new gate's card (question, options as buttons, blocked work, short id like
// g12, owners mentioned), posted to every chat the goal is bound to, or, when it is bound
// nowhere, to each owner in a direct message. It is the Notice of store.AskGateParams and
// store.StallGateParams.
func (gc GateCards) Ask(ctx context.Context, db store.DB, g store.Gate) ([]store.OutboxInsert, error) {
	goal, err := store.GetGoal(ctx, db, g.GoalID)
	if err != nil {
		return nil, fmt.Errorf("render gate notice: %w", err)
	}
	to, err := audience(ctx, db, goal, gc.defaultLang)
	if err != nil {
		return nil, fmt.Errorf("render gate notice: %w", err)
	}
	var out []store.OutboxInsert
	for _, a := range to {
		r, err := renderGate(ctx, db, gc.tpl, a.Lang, goal, g)
		if err != nil {
			return nil, err
		}
		out = append(out, store.OutboxInsert{
			DedupeKey: store.GateCardKey(g.ID, a.ReceiveID, a.Chat()),
			Kind:      r.Kind, ReceiveIDType: a.ReceiveIDType, ReceiveID: a.ReceiveID, ReplyTo: a.ReplyTo, ReplyInThread: a.ReplyTo != "",
			Content: r.Content, GoalID: g.GoalID, AgentID: g.AgentID, GateID: g.ID,
		})
	}
	return out, nil
}

// recipient is where something about a goal is posted: a chat bound to it (in the thread of
// a thread binding), or an owner's direct messages; with the language to say it in.
type recipient struct {
	ReceiveIDType, ReceiveID, ReplyTo, Lang string
}

// Chat tells whether r is a chat (not a person).
func (r recipient) Chat() bool { return r.ReceiveIDType == "chat_id" }

// audience is who hears what LoopX posts about goal g: every chat it is bound to (once each,
// in the chat's language), or, when it is bound nowhere, each owner by direct message (in
// the goal's language).
func audience(ctx context.Context, db store.DB, g store.Goal, defaultLang string) ([]recipient, error) {
	binds, err := store.ListGoalBindings(ctx, db, g.ID)
	if err != nil {
		return nil, err
	}
	var out []recipient
	seen := map[string]bool{}
	for _, b := range binds { // whole-chat bindings sort first: one post per chat
		if seen[b.ChatID] {
			continue
		}
		seen[b.ChatID] = true
		lang, err := ChatLang(ctx, db, b.ChatID, g, defaultLang)
		if err != nil {
			return nil, err
		}
		out = append(out, recipient{ReceiveIDType: "chat_id", ReceiveID: b.ChatID, ReplyTo: b.ThreadRoot, Lang: lang})
	}
	if len(out) > 0 {
		return out, nil
	}
	for _, owner := range g.Owners {
		out = append(out, recipient{ReceiveIDType: "open_id", ReceiveID: owner, Lang: GoalLang(g, defaultLang)})
	}
	return out, nil
}

// Update renders one card_update per card posted for the gate, showing who decided, when,
// and the comment, with the buttons gone. It is the Notice of store.AnswerGateParams and
// store.CancelGateParams.
func (gc GateCards) Update(ctx context.Context, db store.DB, g store.Gate) ([]store.OutboxInsert, error) {
	goal, err := store.GetGoal(ctx, db, g.GoalID)
	if err != nil {
		return nil, fmt.Errorf("render gate update: %w", err)
	}
	cards, err := store.ListGateCards(ctx, db, g.ID)
	if err != nil {
		return nil, fmt.Errorf("render gate update: %w", err)
	}
	var out []store.OutboxInsert
	for _, c := range cards {
		lang := GoalLang(goal, gc.defaultLang)
		if c.ReceiveIDType == "chat_id" {
			if lang, err = ChatLang(ctx, db, c.ReceiveID, goal, gc.defaultLang); err != nil {
				return nil, err
			}
		}
		card, err := gc.Card(ctx, db, lang, goal, g)
		if err != nil {
			return nil, err
		}
		out = append(out, store.OutboxInsert{
			DedupeKey: store.GateUpdateKey(g.ID, g.CardVersion, c.ID),
			Kind:      "card_update", ReceiveIDType: c.ReceiveIDType, ReceiveID: c.ReceiveID,
			UpdateOf: c.ID, Content: card, GoalID: g.GoalID, AgentID: g.AgentID, GateID: g.ID,
		})
	}
	return out, nil
}

// GoalLang is the language of what is said about goal g: its own, else def.
func GoalLang(g store.Goal, def string) string {
	if g.Lang != "" {
		return g.Lang
	}
	return def
}

// ChatLang is the language of what is said in a chat about goal g: the chat's (/lang), else
// the goal's, else def.
func ChatLang(ctx context.Context, db store.DB, chatID string, g store.Goal, def string) (string, error) {
	l, err := store.GetChatLang(ctx, db, chatID)
	if err != nil {
		return "", err
	}
	if l != "" {
		return l, nil
	}
	return GoalLang(g, def), nil
}

func gateData(ctx context.Context, db store.DB, tpl *templates.Set, lang string, goal store.Goal, g store.Gate) (map[string]any, error) {
	text, err := store.GetTodoText(ctx, db, g.TodoID)
	if err != nil {
		return nil, err
	}
	at := ""
	if g.AnsweredAt != nil {
		at = g.AnsweredAt.UTC().Format("2006-01-02 15:04 UTC")
	}
	question, labels := GateWords(tpl, lang, g)
	data := map[string]any{
		"Open": g.Status == store.GateOpen, "GateID": g.ID, "Short": ShortGate(g.ID), "GoalID": g.GoalID,
		"AgentID": g.AgentID, "CardVersion": g.CardVersion, "Owners": goal.Owners, "Question": question,
		"Options": g.Options, "Labels": labels, "Stall": g.Kind == store.GateKindStall, "TodoID": g.TodoID,
		"TodoText": text, "Status": g.Status, "AnsweredBy": g.AnsweredBy, "AnsweredAt": at, "Answer": g.Answer,
		"AnswerLabel": OptionLabel(tpl, lang, g, g.Answer), "Comment": g.Comment,
	}
	if g.Kind == store.GateKindPermission && g.Request != nil {
		// A permission gate's card shows the request itself, and how long it waits.
		until := ""
		if g.ExpiresAt != nil {
			until = g.ExpiresAt.UTC().Format("2006-01-02 15:04 UTC")
		}
		data["Host"], data["Tool"], data["Summary"] = g.Request.Host, g.Request.Tool, g.Request.Summary
		data["Folder"], data["Turn"], data["Until"] = g.Request.Folder, g.Request.Turn, until
		data["Outside"] = g.Request.Outside // paths outside the goal's scope: the card says so
		data["Expired"] = store.PermissionExpired(g)
	}
	return data, nil
}

// gateTemplate is the template of g's card: a permission request has its own.
func gateTemplate(g store.Gate) string {
	if g.Kind == store.GateKindPermission && g.Request != nil {
		return "permission"
	}
	return "gate"
}

func renderGate(ctx context.Context, db store.DB, tpl *templates.Set, lang string, goal store.Goal, g store.Gate) (templates.Rendered, error) {
	data, err := gateData(ctx, db, tpl, lang, goal, g)
	if err != nil {
		return templates.Rendered{}, err
	}
	return tpl.Render(lang, gateTemplate(g), data)
}

// Card renders gate g's card of goal in lang as it stands now (the card a click answers with).
func (gc GateCards) Card(ctx context.Context, db store.DB, lang string, goal store.Goal, g store.Gate) (string, error) {
	data, err := gateData(ctx, db, gc.tpl, lang, goal, g)
	if err != nil {
		return "", err
	}
	return gc.tpl.Card(lang, gateTemplate(g), data)
}

// GateWords is how gate g reads in lang: its question, and the label of each of its options
// in the order of g.Options (the values answers are matched by, which never change). What an
// agent or a host wrote reads as it was written; what LoopX wrote itself reads in lang: the
// stall guard's question (stored in the goal's language when the gate opened) and the options
// LoopX gives its gates (approve and reject, the stall guard's continue and pause, a permission
// request's answers).
func GateWords(tpl *templates.Set, lang string, g store.Gate) (question string, labels []string) {
	question = g.Question
	if g.Kind == store.GateKindStall {
		// The gate keeps the question as LoopX said it; the number in it is read back by the
		// word's own form. A question no word made any more (the word changed) reads as stored.
		question, _ = tpl.Reword(lang, "stall_question", g.Question)
	}
	labels = make([]string, len(g.Options))
	for i, o := range g.Options {
		labels[i] = OptionLabel(tpl, lang, g, o)
	}
	return question, labels
}

// OptionLabel is how option o of gate g reads in lang ("" for "").
func OptionLabel(tpl *templates.Set, lang string, g store.Gate, o string) string {
	switch {
	case g.Kind == store.GateKindPermission && (o == "approve" || o == "reject" || o == store.PermissionAllowTurn):
		return tpl.Word(lang, "gate.option.permission_"+o)
	case g.Kind == store.GateKindStall && (o == store.StallContinue || o == store.StallPause):
		return tpl.Word(lang, "gate.option.stall_"+o)
	case o == "approve" || o == "reject":
		return tpl.Word(lang, "gate.option."+o)
	}
	return o
}

// ShortGate is how people name a gate: g12.
func ShortGate(id int64) string { return fmt.Sprintf("g%d", id) }
