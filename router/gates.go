package router

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"

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

// NewGateCards returns the gate card renderer of tpl; defaultLang ("" = en) applies when
// neither the chat nor the goal sets a language.
func NewGateCards(tpl *templates.Set, defaultLang string) GateCards {
	return GateCards{tpl: tpl, defaultLang: cmp.Or(defaultLang, "en")}
}

// Ask renders a new gate's card (question, options as buttons, blocked work, short id like
// g12, owners mentioned), posted to every chat the goal is bound to, or, when it is bound
// nowhere, to each owner in a direct message. It is the Notice of store.AskGateParams and
// store.StallGateParams.
func (gc GateCards) Ask(ctx context.Context, db store.DB, g store.Gate) ([]store.OutboxInsert, error) {
	goal, err := store.LookupGoal(ctx, db, g.GoalID)
	if err != nil {
		return nil, fmt.Errorf("render gate notice: %w", err)
	}
	binds, err := store.GoalBindings(ctx, db, g.GoalID)
	if err != nil {
		return nil, fmt.Errorf("render gate notice: %w", err)
	}
	var out []store.OutboxInsert
	seen := map[string]bool{}
	for _, b := range binds { // whole-chat bindings sort first: one card per chat
		if seen[b.ChatID] {
			continue
		}
		seen[b.ChatID] = true
		lang, err := chatLang(ctx, db, b.ChatID, goal, gc.defaultLang)
		if err != nil {
			return nil, err
		}
		r, err := renderGate(ctx, db, gc.tpl, lang, goal, g)
		if err != nil {
			return nil, err
		}
		out = append(out, store.OutboxInsert{
			DedupeKey: store.GateCardKey(g.ID, b.ChatID, true),
			Kind:      r.Kind, ReceiveID: b.ChatID, ReplyTo: b.ThreadRoot, ReplyInThread: b.ThreadRoot != "",
			Content: r.Content, GoalID: g.GoalID, AgentID: g.AgentID, GateID: g.ID,
		})
	}
	if len(out) > 0 {
		return out, nil
	}
	lang := goalLang(goal, gc.defaultLang)
	r, err := renderGate(ctx, db, gc.tpl, lang, goal, g)
	if err != nil {
		return nil, err
	}
	for _, owner := range goal.Owners {
		out = append(out, store.OutboxInsert{
			DedupeKey: store.GateCardKey(g.ID, owner, false),
			Kind:      r.Kind, ReceiveIDType: "open_id", ReceiveID: owner,
			Content: r.Content, GoalID: g.GoalID, AgentID: g.AgentID, GateID: g.ID,
		})
	}
	return out, nil
}

// Update renders one card_update per card posted for the gate, showing who decided, when,
// and the comment, with the buttons gone. It is the Notice of store.AnswerGateParams and
// store.CancelGateParams.
func (gc GateCards) Update(ctx context.Context, db store.DB, g store.Gate) ([]store.OutboxInsert, error) {
	goal, err := store.LookupGoal(ctx, db, g.GoalID)
	if err != nil {
		return nil, fmt.Errorf("render gate update: %w", err)
	}
	cards, err := store.OutboxGateCards(ctx, db, g.ID)
	if err != nil {
		return nil, fmt.Errorf("render gate update: %w", err)
	}
	var out []store.OutboxInsert
	for _, c := range cards {
		lang := goalLang(goal, gc.defaultLang)
		if c.ReceiveIDType == "chat_id" {
			if lang, err = chatLang(ctx, db, c.ReceiveID, goal, gc.defaultLang); err != nil {
				return nil, err
			}
		}
		card, err := gateCard(ctx, db, gc.tpl, lang, goal, g)
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

func goalLang(g store.Goal, def string) string {
	if g.Lang != "" {
		return g.Lang
	}
	return def
}

func chatLang(ctx context.Context, db store.DB, chatID string, g store.Goal, def string) (string, error) {
	l, err := store.ChatLang(ctx, db, chatID)
	if err != nil {
		return "", err
	}
	if l != "" {
		return l, nil
	}
	return goalLang(g, def), nil
}

func gateData(ctx context.Context, db store.DB, goal store.Goal, g store.Gate) (map[string]any, error) {
	text, err := store.LookupTodoText(ctx, db, g.TodoID)
	if err != nil {
		return nil, err
	}
	at := ""
	if g.AnsweredAt != nil {
		at = g.AnsweredAt.UTC().Format("2006-01-02 15:04 UTC")
	}
	return map[string]any{
		"Open": g.Status == store.GateOpen, "GateID": g.ID, "Short": shortGate(g.ID), "GoalID": g.GoalID,
		"AgentID": g.AgentID, "CardVersion": g.CardVersion, "Owners": goal.Owners, "Question": g.Question,
		"Options": g.Options, "TodoID": g.TodoID, "TodoText": text, "Status": g.Status,
		"AnsweredBy": g.AnsweredBy, "AnsweredAt": at, "Answer": g.Answer, "Comment": g.Comment,
	}, nil
}

func renderGate(ctx context.Context, db store.DB, tpl *templates.Set, lang string, goal store.Goal, g store.Gate) (templates.Rendered, error) {
	data, err := gateData(ctx, db, goal, g)
	if err != nil {
		return templates.Rendered{}, err
	}
	return tpl.Render(lang, "gate", data)
}

func gateCard(ctx context.Context, db store.DB, tpl *templates.Set, lang string, goal store.Goal, g store.Gate) (string, error) {
	data, err := gateData(ctx, db, goal, g)
	if err != nil {
		return "", err
	}
	return tpl.Card(lang, "gate", data)
}

// answerGate handles /approve and /reject.
func (t *turn) answerGate(ctx context.Context, cmd command, p Parsed) error {
	g, err := store.LookupGate(ctx, t.tx, p.GateID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	var goal store.GoalAs
	if err == nil {
		if goal, err = store.LookupGoalAs(ctx, t.tx, g.GoalID, t.who()); err != nil {
			return err
		}
	}
	bound, berr := store.ChatBindings(ctx, t.tx, t.m.ChatID)
	if berr != nil {
		return berr
	}
	if err != nil || !mayKnow(goal, bound) {
		if err == nil {
			if aerr := t.audit(ctx, cmd.action, goal.ID, "gate:"+strconv.FormatInt(g.ID, 10), false, map[string]any{"reason": "gate not visible to sender"}); aerr != nil {
				return aerr
			}
		}
		return t.reply(ctx, "failed", map[string]any{"Problem": fmt.Sprintf("there is no gate %s you can answer; /gates lists the open ones", shortGate(p.GateID))}, nil)
	}
	tg := &target{goal: goal.Goal, role: goal.Role, agent: g.AgentID}
	if !allows(goal.Role, needOwner) {
		return t.refuse(ctx, cmd.action, "/"+cmd.name, needOwner, tg)
	}
	out, err := t.st.AnswerGate(ctx, store.AnswerGateParams{
		GoalID: goal.ID, GateID: g.ID, Answer: cmd.name, AnsweredBy: t.m.SenderID, Comment: p.Text,
		ByAdmin: t.c.admins[t.m.SenderID], Notice: t.c.cards.Update, Meta: t.meta(),
	})
	if err != nil {
		return t.kernelError(ctx, err, tg)
	}
	return t.reply(ctx, "gate_answered", map[string]any{"Short": shortGate(out.ID), "Status": out.Status, "Answer": ""}, tg)
}

// gateClick is a decoded gate button value.
type gateClick struct {
	GateID      int64
	CardVersion int
	Option      string
}

func parseGateClick(v map[string]any) (gateClick, bool) {
	if v["kind"] != "gate" {
		return gateClick{}, false
	}
	id, ok1 := number(v["gate_id"])
	ver, ok2 := number(v["card_version"])
	opt, ok3 := v["option"].(string)
	if !ok1 || !ok2 || !ok3 || id <= 0 || ver <= 0 || opt == "" || ver > math.MaxInt32 {
		return gateClick{}, false
	}
	return gateClick{GateID: id, CardVersion: int(ver), Option: opt}, true
}

func number(v any) (int64, bool) {
	switch n := v.(type) {
	case float64:
		if n != math.Trunc(n) || n > math.MaxInt64 || n < math.MinInt64 {
			return 0, false
		}
		return int64(n), true
	case int:
		return int64(n), true
	case int64:
		return n, true
	case json.Number:
		i, err := n.Int64()
		return i, err == nil
	case string:
		i, err := strconv.ParseInt(n, 10, 64)
		return i, err == nil
	}
	return 0, false
}

// HandleCardAction handles one card click in one transaction. The clicker must be an owner
// (or admin), the gate still open and the card current; otherwise nothing changes and the
// toast says why (refusals audited). A repeated event id answers "already handled". An error
// means nothing was committed.
func (c *Chat) HandleCardAction(ctx context.Context, a CardAction) (CardResult, error) {
	if a.EventID == "" {
		return CardResult{}, store.Errorf(store.ErrInvalid, "event_id", "is empty; the bot must pass the callback's event id")
	}
	if a.OperatorID == "" {
		return CardResult{}, store.Errorf(store.ErrInvalid, "operator_id", "is empty; a click needs the clicker's open_id")
	}
	var res CardResult
	var dup bool
	err := c.st.WithTx(ctx, func(tx *store.Tx) error {
		fresh, err := store.RecordLarkEvent(ctx, tx, a.EventID, eventCardAction)
		if err != nil {
			return err
		}
		dup = !fresh
		lang := c.opts.DefaultLang
		if l, err := store.ChatLang(ctx, tx, a.ChatID); err != nil {
			return err
		} else if l != "" {
			lang = l
		}
		if !fresh {
			res, err = c.toast(lang, "info", "duplicate", "")
			return err
		}
		res, err = c.click(ctx, tx, a, lang)
		return err
	})
	if err != nil {
		c.log.WarnContext(ctx, "card action not handled; nothing committed", "event_id", a.EventID, "err", err)
		return CardResult{}, fmt.Errorf("handle card action: %w", err)
	}
	if dup {
		c.duplicate(ctx, eventCardAction)
	}
	return res, nil
}

func (c *Chat) click(ctx context.Context, tx *store.Tx, a CardAction, lang string) (CardResult, error) {
	click, ok := parseGateClick(a.Value)
	if !ok {
		if err := auditRow(ctx, tx, a.OperatorID, "card", "card.click", "", "message:"+a.MessageID, false, map[string]any{"reason": "unknown button value"}); err != nil {
			return CardResult{}, err
		}
		return c.toast(lang, "error", "invalid", "")
	}
	target := "gate:" + strconv.FormatInt(click.GateID, 10)
	refuse := func(goalID, reason, kind, code, status string) (CardResult, error) {
		if err := auditRow(ctx, tx, a.OperatorID, "card", "card.gate.answer", goalID, target, false, map[string]any{
			"reason": reason, "option": click.Option, "card_version": click.CardVersion,
		}); err != nil {
			return CardResult{}, err
		}
		return c.toast(lang, kind, code, status)
	}
	g, err := store.LookupGate(ctx, tx, click.GateID)
	if errors.Is(err, store.ErrNotFound) {
		return refuse("", "gate not found", "error", "unknown", "")
	}
	if err != nil {
		return CardResult{}, err
	}
	goal, err := store.LookupGoalAs(ctx, tx, g.GoalID, store.Person{OpenID: a.OperatorID, Admin: c.admins[a.OperatorID]})
	if err != nil {
		return CardResult{}, err
	}
	if l, err := store.ChatLang(ctx, tx, a.ChatID); err != nil {
		return CardResult{}, err
	} else if l == "" {
		lang = goalLang(goal.Goal, c.opts.DefaultLang)
	}
	switch {
	case !allows(goal.Role, needOwner):
		return refuse(goal.ID, "not an owner", "error", "not_owner", "")
	case g.Status != store.GateOpen:
		return refuse(goal.ID, "gate already "+g.Status, "warning", "answered", g.Status)
	case click.CardVersion != g.CardVersion:
		return refuse(goal.ID, "outdated card", "warning", "outdated", "")
	}
	answer := click.Option
	out, err := c.st.In(tx).AnswerGate(ctx, store.AnswerGateParams{
		GoalID: goal.ID, GateID: g.ID, Answer: answer, AnsweredBy: a.OperatorID,
		CardVersion: click.CardVersion, ByAdmin: c.admins[a.OperatorID], Notice: c.cards.Update,
		Meta: store.Meta{Actor: a.OperatorID, Surface: "card", IdempotencyKey: store.EventKey(a.EventID)},
	})
	if err != nil {
		// The kernel re-checks under its row lock; a race lost there lands here.
		switch {
		case errors.Is(err, store.ErrConflict):
			return c.toast(lang, "warning", "outdated", "")
		case errors.Is(err, store.ErrRefused):
			fresh, lerr := store.LookupGate(ctx, tx, g.ID)
			if lerr == nil && fresh.Status != store.GateOpen {
				return c.toast(lang, "warning", "answered", fresh.Status)
			}
			return c.toast(lang, "error", "not_owner", "")
		}
		var se *store.Error
		if errors.As(err, &se) {
			return c.toast(lang, "error", "invalid", "")
		}
		return CardResult{}, err
	}
	card, err := gateCard(ctx, tx, c.tpl, lang, goal.Goal, out)
	if err != nil {
		return CardResult{}, err
	}
	res, err := c.toast(lang, "success", "done", out.Status)
	res.Card = json.RawMessage(card)
	return res, err
}

func (c *Chat) toast(lang, kind, code, status string) (CardResult, error) {
	text, err := c.tpl.Text(lang, "toast", map[string]any{"Code": code, "Status": status})
	if err != nil {
		return CardResult{}, err
	}
	return CardResult{ToastKind: kind, Toast: text}, nil
}
