package router

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"loopx/cards"
	"loopx/change"
	"loopx/inbox"
	"loopx/store"
	"loopx/templates"
)

// Receipt styles for a message accepted into an inbox.
const (
	ReceiptReaction = "reaction" // an OK reaction on the sender's message (default)
	ReceiptReply    = "reply"    // a short reply naming the item
)

// ReceiptEmoji is the reaction put on a message that was accepted into an inbox.
const ReceiptEmoji = "OK"

// ReportRequest asks for a progress report of one goal, answered in a chat.
type ReportRequest struct {
	GoalID        string
	ChatID        string // where to post it
	ReplyTo       string // the /report message, to answer in its thread
	ReplyInThread bool
	Lang          string // the chat's language
	RequestedBy   string // open_id
}

// ReportFunc builds the report for /report and queues the outbox rows that carry it
// (typically one digest card replying to req.ReplyTo), inside the chat transaction (db is
// that transaction's executor); it must not call the network. queued is false when there was
// nothing to report (the last report already covers everything up to now). The router writes
// no acknowledgement after the rows it queued: when queued, the report is the whole answer;
// when not, the router says that nothing new was sent. cmd/loopx fills it in with the
// scheduler's digests.
type ReportFunc func(ctx context.Context, db store.DB, req ReportRequest) (queued bool, err error)

// Options configures a Chat.
type Options struct {
	BotOpenID   string   // this bot's open_id: a mention of it addresses the bot in a group
	Admins      []string // open_ids allowed everything (LOOPX_ADMINS)
	DefaultLang string   // en | zh, when neither the chat nor the goal sets one; "" = en
	Receipt     string   // ReceiptReaction (default) or ReceiptReply
	Now         func() time.Time
	Logger      *slog.Logger
	// Inbox is the process's one inbox (its bounds apply to chat messages too). Required.
	Inbox *inbox.Inbox
	// Templates renders every reply and card. Required.
	Templates *templates.Set
	// Report answers /report. Nil: the bot says reports are not configured.
	Report ReportFunc
	// Advice names, for the Lark code a send failed with, the hint word /status phrases
	// ("" = Lark's own message says it best). Nil: no hints. The bot owns the advice.
	Advice func(code int) string
	// OnDuplicate, when set, is told of each event the entry points recognised as already
	// handled (its id was in lark_event), once per call, after the call's transaction ended.
	// eventType is Lark's ("im.message.receive_v1", "card.action.trigger"); ctx is the
	// call's. The entry points still return nil for a duplicate; this is for metrics.
	OnDuplicate func(ctx context.Context, eventType string)
	// OnCommit, when set, is told after an entry point committed an effect which kinds of
	// outbox rows it may have queued, so that the sender of this process looks at once where
	// something can have changed (the fast path queues the receipt reaction alone). Nothing is
	// told for what commits nothing: a duplicate, a message not for the bot, a failure.
	OnCommit func(ctx context.Context, q Queued)
	// Changes is the change kernel protected commands propose through (/budget, /pause, ...).
	// Required: the process's one kernel.
	Changes *change.Kernel
	// Cards renders gate and proposal cards. Required: the process's one set.
	Cards *cards.Set
	// SignInLink issues a one-time workspace sign-in link for a person (in the chat's
	// language, landing on a page), inside the chat transaction (db). Nil: /web says the
	// workspace is not served.
	SignInLink func(ctx context.Context, db store.DB, p store.SignInParams) (string, error)
	// TurnURL is the workspace page of a turn, which /runs links; nil: no links.
	TurnURL func(goalID string, turnID int64) string
}

// Queued says which kinds of outbox rows a committed event may have queued (Options.OnCommit).
type Queued struct {
	Messages  bool // replies, cards or card updates
	Reactions bool // the receipt reaction
}

// committed tells Options.OnCommit.
func (c *Chat) committed(ctx context.Context, q Queued) {
	if c.opts.OnCommit != nil {
		c.opts.OnCommit(ctx, q)
	}
}

// Chat turns chat messages and card clicks into authorized operations. It is safe for
// concurrent use; all state is in PostgreSQL.
type Chat struct {
	st     *store.Store
	ib     *inbox.Inbox
	tpl    *templates.Set
	cards  *cards.Set
	opts   Options
	admins map[string]bool
	log    *slog.Logger
	fast   *fastBatcher
	// changes proposes and confirms protected changes.
	changes *change.Kernel
}

// New checks opts and returns a Chat.
func New(st *store.Store, opts Options) (*Chat, error) {
	if st == nil || opts.Inbox == nil || opts.Templates == nil || opts.Changes == nil || opts.Cards == nil {
		return nil, errors.New("new chat router: store, inbox, templates, change kernel and cards are required")
	}
	if opts.BotOpenID == "" {
		return nil, store.Errorf(store.ErrInvalid, "bot_open_id", "is empty; the router needs the bot's open_id to tell mentions of it in groups")
	}
	opts.DefaultLang = cmp.Or(opts.DefaultLang, templates.DefaultLang)
	if !templates.IsLang(opts.DefaultLang) {
		return nil, store.Errorf(store.ErrInvalid, "default_lang", "%q is not %s", opts.DefaultLang, strings.Join(templates.Languages(), " or "))
	}
	switch opts.Receipt {
	case "":
		opts.Receipt = ReceiptReaction
	case ReceiptReaction, ReceiptReply:
	default:
		return nil, store.Errorf(store.ErrInvalid, "receipt", "%q is not reaction or reply", opts.Receipt)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Advice == nil {
		opts.Advice = func(int) string { return "" }
	}
	tpl, ib := opts.Templates, opts.Inbox
	admins := map[string]bool{}
	for _, a := range opts.Admins {
		if a = strings.TrimSpace(a); a != "" {
			admins[a] = true
		}
	}
	fast := &fastBatcher{st: st, log: opts.Logger.WarnContext, opts: store.FastOptions{
		MaxPending: ib.Options().MaxPending, Receipt: ReceiptEmoji}}
	return &Chat{st: st, ib: ib, tpl: tpl, cards: opts.Cards, opts: opts,
		admins: admins, log: opts.Logger, fast: fast, changes: opts.Changes}, nil
}

// handling is the state of handling one message inside its transaction.
type handling struct {
	c       *Chat
	tx      *store.Tx
	st      *store.Store // the kernel, joined to tx
	m       Message
	p       Parsed // what the text means, once parsed (refusals word what it named)
	lang    string // resolved lazily: chat setting, then goal, then default
	chatSet bool
	replies int
}

// HandleMessage handles one incoming chat message in one transaction: the message's record
// (its inbox item, else its key in lark_event), the operation, its audit rows and every outbox
// row (replies, receipt) commit together. A message handled before, under any event id, does
// nothing and returns nil. An error means nothing was committed.
func (c *Chat) HandleMessage(ctx context.Context, m Message) error {
	if m.ChatID == "" || m.MessageID == "" {
		return fmt.Errorf("%w: chat_id and message_id are required", ErrUnusable)
	}
	if m.EventID == "" {
		m.EventID = store.MessageEventID(m.MessageID)
	}
	if err := store.CheckEventID(m.EventID); err != nil {
		return fmt.Errorf("%w: %w", ErrUnusable, err)
	}
	if err := store.CheckEventID(store.MessageEventID(m.MessageID)); err != nil {
		return fmt.Errorf("%w: message_id is too long or not UTF-8 text", ErrUnusable)
	}
	if err := checkMessageIDs(m); err != nil {
		return fmt.Errorf("%w: %w", ErrUnusable, err)
	}
	// PostgreSQL text cannot hold NUL; a person cannot type one, so it stands for nothing.
	m.Text = strings.ReplaceAll(m.Text, "\x00", "\uFFFD")
	if m.SenderIsBot || m.SenderID == "" || m.SenderID == c.opts.BotOpenID {
		return nil // bots, this one included, never drive the router
	}
	if c.enqueueFast(ctx, m) {
		c.committed(ctx, Queued{Reactions: true})
		return nil
	}
	var dup, handled bool
	err := c.st.WithTx(ctx, func(tx *store.Tx) error {
		handled = false
		fresh, err := store.LockLarkMessage(ctx, tx, m.MessageID)
		dup = err == nil && !fresh
		if err != nil || !fresh {
			return err
		}
		h := &handling{c: c, tx: tx, st: c.st.In(tx), m: m}
		addressed, err := h.addressed(ctx)
		if err != nil || !addressed {
			return err // a message not for the bot has no effect to repeat: nothing to record
		}
		if err := h.handle(ctx); err != nil {
			return err
		}
		handled = true
		return store.RecordLarkMessage(ctx, tx, m.MessageID, eventMessage)
	})
	if err != nil {
		if errors.Is(err, store.ErrInvalid) {
			// Input the database refuses now refuses it on every redelivery too.
			return fmt.Errorf("handle message %s: %w: %w", m.MessageID, ErrUnusable, err)
		}
		c.log.WarnContext(ctx, "chat message not handled; nothing committed, Lark will redeliver",
			"event_id", m.EventID, "message_id", m.MessageID, "chat_id", m.ChatID, "err", err)
		return fmt.Errorf("handle message %s: %w", m.MessageID, err)
	}
	if dup {
		c.duplicate(ctx, eventMessage)
	}
	if handled {
		c.committed(ctx, Queued{Messages: true, Reactions: true})
	}
	return nil
}

// checkMessageIDs checks every Lark id of m the database stores (store.CheckLarkID), naming
// the first that does not fit; the names are built only then.
func checkMessageIDs(m Message) error {
	for _, id := range [...]struct{ field, v string }{{"chat_id", m.ChatID}, {"root_id", m.RootID},
		{"parent_id", m.ParentID}, {"thread_id", m.ThreadID}, {"sender_id", m.SenderID}} {
		if err := store.CheckLarkID(id.field, id.v); err != nil {
			return err
		}
	}
	for i, mn := range m.Mentions {
		if store.CheckLarkID("", mn.OpenID) != nil {
			return store.CheckLarkID(fmt.Sprintf("mentions[%d].open_id", i), mn.OpenID)
		}
		if store.CheckLarkID("", mn.Key) != nil {
			return store.CheckLarkID(fmt.Sprintf("mentions[%d].key", i), mn.Key)
		}
	}
	return nil
}

// ErrUnusable marks a chat event that can never be handled, however often it is delivered
// (no chat or message id, ids the database cannot hold): nothing was committed, and the
// transport should acknowledge it, count and log it, rather than have Lark redeliver it for
// hours.
var ErrUnusable = errors.New("chat event cannot be handled")

// Lark event types the entry points record in lark_event.
const (
	eventMessage    = "im.message.receive_v1"
	eventCardAction = "card.action.trigger"
)

// duplicate reports an event seen before to Options.OnDuplicate.
func (c *Chat) duplicate(ctx context.Context, eventType string) {
	c.log.DebugContext(ctx, "lark event already handled", "event_type", eventType)
	if c.opts.OnDuplicate != nil {
		c.opts.OnDuplicate(ctx, eventType)
	}
}

// addressed: in a group only a mention of the bot (by id) or a reply to one of its messages
// counts; in a direct chat everything does.
func (h *handling) addressed(ctx context.Context) (bool, error) {
	if h.m.ChatType == ChatP2P || h.mentionsBot() {
		return true, nil
	}
	for _, id := range []string{h.m.ParentID, h.m.RootID} {
		if id == "" {
			continue
		}
		_, err := store.GetOutboxByLarkMessage(ctx, h.tx, id)
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return false, err
		}
	}
	return false, nil
}

func (h *handling) mentionsBot() bool {
	return slices.ContainsFunc(h.m.Mentions, func(mn Mention) bool { return mn.OpenID == h.c.opts.BotOpenID })
}

// text returns the message text with the bot's mention removed and other mentions shown by
// name, so "@LoopX #docs hi @Ann" reads "#docs hi @Ann".
func (h *handling) text() string {
	s := h.m.Text
	for _, mn := range h.m.Mentions {
		if mn.Key == "" {
			continue
		}
		if mn.OpenID == h.c.opts.BotOpenID {
			s = strings.ReplaceAll(s, mn.Key, "")
		} else {
			s = strings.ReplaceAll(s, mn.Key, "@"+mn.Name)
		}
	}
	return s
}

func (h *handling) handle(ctx context.Context) error {
	text := h.text()
	if len(h.m.Files) > 0 && strings.TrimSpace(normalize(text)) == "" {
		// Files and no words: a message for an agent, named by its files.
		text = fileText(h.m.Files)
	}
	p, err := Parse(text)
	if err != nil {
		var pe *ParseError
		if !errors.As(err, &pe) {
			return err
		}
		return h.usage(ctx, nil, pe.Form, "parse."+pe.Code, pe.Args...)
	}
	h.p = p
	if p.Command == "" {
		return h.deliver(ctx, p)
	}
	cmd, _ := lookupCommand(p.Command)
	return h.command(ctx, cmd, p)
}

// usage answers with the problem the word key says (formatted with args) and, when form is
// set, the form the text should take (the word usage.<form>), both in the reply's language.
func (h *handling) usage(ctx context.Context, about *target, form, key string, args ...any) error {
	var goal *store.Goal
	if about != nil {
		goal = &about.goal
	}
	lang, err := h.langFor(ctx, goal)
	if err != nil {
		return err
	}
	data := map[string]any{"Problem": h.c.tpl.Word(lang, key, args...)}
	if form == "" {
		return h.reply(ctx, "failed", data, about)
	}
	data["Usage"] = h.c.tpl.Word(lang, "usage."+form)
	return h.reply(ctx, "usage", data, about)
}

// lang resolves the reply language: the chat's /lang, then the goal's, then the default.
func (h *handling) langFor(ctx context.Context, goal *store.Goal) (string, error) {
	if !h.chatSet {
		l, err := store.GetChatLang(ctx, h.tx, h.m.ChatID)
		if err != nil {
			return "", err
		}
		h.lang, h.chatSet = l, true
	}
	if h.lang != "" {
		return h.lang, nil
	}
	if goal != nil && goal.Lang != "" {
		return goal.Lang, nil
	}
	return h.c.opts.DefaultLang, nil
}

// reply answers the message with template name, in the thread when the message is in one.
// about, when set, tags the reply with its goal/agent so replies to it route there.
func (h *handling) reply(ctx context.Context, name string, data any, about *target) error {
	var goal *store.Goal
	if about != nil {
		goal = &about.goal
	}
	lang, err := h.langFor(ctx, goal)
	if err != nil {
		return err
	}
	r, err := h.c.tpl.Render(lang, name, data)
	if err != nil {
		return err
	}
	h.replies++
	in := store.OutboxInsert{
		DedupeKey:     store.ReplyKey(h.m.EventID, h.replies),
		Kind:          r.Kind,
		ReceiveID:     h.m.ChatID,
		ReplyTo:       h.m.MessageID,
		ReplyInThread: h.m.ThreadID != "", // a plain reply chain (root without thread) is answered plainly
		Content:       r.Content,
	}
	if about != nil {
		in.GoalID, in.AgentID, in.SessionID = about.goal.ID, about.agent, about.session
	}
	_, _, err = store.InsertOutbox(ctx, h.tx, in)
	return err
}

// audit records a decision of the router (refusals above all).
func (h *handling) audit(ctx context.Context, action, goalID, target string, allowed bool, detail map[string]any) error {
	return auditRow(ctx, h.tx, h.m.SenderID, "chat", action, goalID, target, allowed, detail)
}

func auditRow(ctx context.Context, db store.DB, actor, surface, action, goalID, target string, allowed bool, detail map[string]any) error {
	b, err := json.Marshal(detail)
	if err != nil {
		return fmt.Errorf("encode audit detail: %w", err)
	}
	return store.InsertAudit(ctx, db, store.Audit{
		Actor: actor, Surface: surface, Action: action, GoalID: goalID, Target: target, Allowed: allowed, Detail: b,
	})
}

// meta is the kernel operation metadata for this message: the sender acts from chat, and the
// event id keys the operation so a replay after a lost commit cannot apply it twice.
func (h *handling) meta() store.Meta {
	return store.Meta{Actor: h.m.SenderID, Surface: "chat", IdempotencyKey: store.EventKey(h.m.EventID)}
}

// kernelError answers a refusal of a kernel operation (a *store.Error) in words and returns
// nil; any other error is returned so the transaction rolls back and Lark redelivers. The
// words say what the refusal is (its reason, else its field, else its kind) with the ids
// and values the router knows; never the kernel's message, which is English for the API,
// and never a field's internal name.
func (h *handling) kernelError(ctx context.Context, err error, about *target) error {
	var se *store.Error
	if !errors.As(err, &se) {
		return err
	}
	data := map[string]any{"Kind": store.KindOf(err).Code, "Reason": se.Reason, "Field": se.Field, "FieldName": "",
		"Command": h.p.Command, "GoalID": "", "AgentID": "", "Gate": "", "GateStatus": "", "Value": "", "Chars": 0}
	var goal *store.Goal
	if about != nil {
		goal = &about.goal
		data["GoalID"], data["AgentID"] = about.goal.ID, about.agent
	}
	lang, lerr := h.langFor(ctx, goal)
	if lerr != nil {
		return lerr
	}
	if name := change.FieldName(h.c.tpl, lang, se.Field); se.Field != "" && name != se.Field {
		data["FieldName"] = name
	}
	if h.p.GateID != 0 {
		data["Gate"] = cards.ShortGate(h.p.GateID)
		if se.Reason == store.ReasonGateClosed {
			g, gerr := store.GetGateByID(ctx, h.tx, h.p.GateID)
			if gerr != nil {
				return gerr
			}
			data["GateStatus"] = g.Status
		}
	}
	invalid := errors.Is(err, store.ErrInvalid)
	switch se.Field {
	case "heartbeat_spec", "report_spec":
		data["Value"] = clip(h.p.Spec, 80)
	case "heartbeat_tz", "report_tz":
		data["Value"] = clip(h.p.Zone, 80)
	case "text", "comment", "next", "note", "reason":
		// The text was parsed, so it is valid UTF-8 and not empty: refused as invalid, it is
		// too long.
		if text := h.p.Text; invalid {
			if se.Field == "reason" {
				text = h.p.Reason
			}
			data["Chars"] = utf8.RuneCountInString(text)
		}
	case "objective":
		// A replan's objective is refused when it is too long or when it is the goal's already.
		if n := utf8.RuneCountInString(h.p.Text); invalid && n > store.MaxText {
			data["Chars"] = n
		} else if invalid {
			data["Field"] = "goal"
		}
	}
	return h.reply(ctx, "kernel_refused", data, about)
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
	if err := store.CheckEventID(a.EventID); err != nil {
		return CardResult{}, err
	}
	if err := store.CheckLarkIDs(map[string]string{"operator_id": a.OperatorID, "chat_id": a.ChatID,
		"message_id": a.MessageID, "token": a.Token}); err != nil {
		return CardResult{}, err
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
		if l, err := store.GetChatLang(ctx, tx, a.ChatID); err != nil {
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
	} else {
		c.committed(ctx, Queued{Messages: true, Reactions: true})
	}
	return res, nil
}

func (c *Chat) click(ctx context.Context, tx *store.Tx, a CardAction, lang string) (CardResult, error) {
	if pc, ok := parseProposalClick(a.Value); ok {
		return c.clickProposal(ctx, tx, a, pc, lang)
	}
	if w, ok := parseWorkClick(a.Value); ok {
		return c.clickWork(ctx, tx, a, w, lang)
	}
	if a.Value["kind"] == "web" {
		return c.clickSignIn(ctx, tx, a, lang)
	}
	click, ok := parseGateClick(a.Value)
	if !ok {
		if err := auditRow(ctx, tx, a.OperatorID, "card", "card.click", "", "message:"+a.MessageID, false, map[string]any{"reason": "unknown button value"}); err != nil {
			return CardResult{}, err
		}
		return c.toast(lang, "error", "invalid", "")
	}
	target := store.GateTarget(click.GateID)
	refuse := func(goalID, reason, kind, code, status string) (CardResult, error) {
		if err := auditRow(ctx, tx, a.OperatorID, "card", "card.gate.answer", goalID, target, false, map[string]any{
			"reason": reason, "option": click.Option, "card_version": click.CardVersion,
		}); err != nil {
			return CardResult{}, err
		}
		return c.toast(lang, kind, code, status)
	}
	g, err := store.GetGateByID(ctx, tx, click.GateID)
	if errors.Is(err, store.ErrNotFound) {
		return refuse("", "gate not found", "error", "unknown", "")
	}
	if err != nil {
		return CardResult{}, err
	}
	goal, err := store.GetGoalAs(ctx, tx, g.GoalID, store.Person{OpenID: a.OperatorID, Admin: c.admins[a.OperatorID]})
	if err != nil {
		return CardResult{}, err
	}
	if l, err := store.GetChatLang(ctx, tx, a.ChatID); err != nil {
		return CardResult{}, err
	} else if l == "" {
		lang = cards.GoalLang(goal.Goal, c.opts.DefaultLang)
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
		CardVersion: click.CardVersion, ByAdmin: c.admins[a.OperatorID], Notice: c.cards.Gates.Update,
		Meta: store.Meta{Actor: a.OperatorID, Surface: "card", IdempotencyKey: store.EventKey(a.EventID)},
	})
	if err != nil {
		// The kernel re-checks under its row lock; a race lost there lands here.
		switch {
		case errors.Is(err, store.ErrConflict):
			return c.toast(lang, "warning", "outdated", "")
		case errors.Is(err, store.ErrForbidden):
			return c.toast(lang, "error", "not_owner", "")
		case errors.Is(err, store.ErrRefused):
			fresh, lerr := store.GetGateByID(ctx, tx, g.ID)
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
	card, err := c.cards.Gates.Card(ctx, tx, lang, goal.Goal, out)
	if err != nil {
		return CardResult{}, err
	}
	res, err := c.toastAnswer(lang, "success", "done", out.Status, out.Answer)
	res.Card = json.RawMessage(card)
	return res, err
}

func (c *Chat) toast(lang, kind, code, status string) (CardResult, error) {
	return c.toastAnswer(lang, kind, code, status, "")
}

// toastAnswer is a toast that names the option chosen (a gate answered with one of its own
// options says which).
func (c *Chat) toastAnswer(lang, kind, code, status, answer string) (CardResult, error) {
	text, err := c.tpl.Text(lang, "toast", map[string]any{"Code": code, "Status": status, "Answer": answer})
	if err != nil {
		return CardResult{}, err
	}
	return CardResult{ToastKind: kind, Toast: text}, nil
}

// ClickFailures are the toasts the bot answers a card click with when the router could not
// answer it: the click could not be read (Unreadable), or handling it failed and nothing was
// committed (NotRecorded). The bot cannot tell the clicker's chat then, so each is said in
// every language (keyed by templates.Languages); Lang is the one to show a clicker whose
// language is none of them.
type ClickFailures struct {
	Lang        string
	Unreadable  map[string]string
	NotRecorded map[string]string
}

// ClickFailureToasts words the ClickFailures from tpl (the words click.unreadable and
// click.not_recorded); lang ("" = en) is the one shown by default.
func ClickFailureToasts(tpl *templates.Set, lang string) ClickFailures {
	f := ClickFailures{Lang: templates.Lang(lang), Unreadable: map[string]string{}, NotRecorded: map[string]string{}}
	for _, l := range templates.Languages() {
		f.Unreadable[l] = tpl.Word(l, "click.unreadable")
		f.NotRecorded[l] = tpl.Word(l, "click.not_recorded")
	}
	return f
}
