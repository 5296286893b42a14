package router

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

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
// nothing to report. cmd/loopx fills it in with the scheduler's digests.
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
}

// Chat turns chat messages and card clicks into authorized operations. It is safe for
// concurrent use; all state is in PostgreSQL.
type Chat struct {
	st     *store.Store
	ib     *inbox.Inbox
	tpl    *templates.Set
	cards  GateCards
	opts   Options
	admins map[string]bool
	log    *slog.Logger
	bound  *boundBatcher
}

// New checks opts and returns a Chat.
func New(st *store.Store, opts Options) (*Chat, error) {
	if st == nil || opts.Inbox == nil || opts.Templates == nil {
		return nil, errors.New("new chat router: store, inbox and templates are required")
	}
	if opts.BotOpenID == "" {
		return nil, store.Errorf(store.ErrInvalid, "bot_open_id", "is empty; the router needs the bot's open_id to tell mentions of it in groups")
	}
	switch opts.DefaultLang {
	case "":
		opts.DefaultLang = "en"
	case "en", "zh":
	default:
		return nil, store.Errorf(store.ErrInvalid, "default_lang", "%q is not en or zh", opts.DefaultLang)
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
	bound := &boundBatcher{st: st, log: opts.Logger.WarnContext, opts: store.BoundOptions{
		EventType: eventMessage, MaxPending: ib.Options().MaxPending, Receipt: ReceiptEmoji}}
	return &Chat{st: st, ib: ib, tpl: tpl, cards: NewGateCards(tpl, opts.DefaultLang), opts: opts,
		admins: admins, log: opts.Logger, bound: bound}, nil
}

// turn is the state of handling one message inside its transaction.
type turn struct {
	c       *Chat
	tx      *store.Tx
	st      *store.Store // the kernel, joined to tx
	m       Message
	lang    string // resolved lazily: chat setting, then goal, then default
	chatSet bool
	replies int
}

// HandleMessage handles one incoming chat message in one transaction: the event id, the
// operation, its audit rows and every outbox row (replies, receipt) commit together. A
// repeated event id does nothing and returns nil. An error means nothing was committed.
func (c *Chat) HandleMessage(ctx context.Context, m Message) error {
	if m.ChatID == "" || m.MessageID == "" {
		return store.Errorf(store.ErrInvalid, "chat_id", "chat_id and message_id are required")
	}
	if m.EventID == "" {
		m.EventID = store.MessageEventID(m.MessageID)
	}
	if err := store.CheckEventID(m.EventID); err != nil {
		return err
	}
	if m.SenderIsBot || m.SenderID == "" || m.SenderID == c.opts.BotOpenID {
		return nil // bots, this one included, never drive the router
	}
	if c.enqueueBound(ctx, m) {
		return nil
	}
	var dup bool
	err := c.st.WithTx(ctx, func(tx *store.Tx) error {
		fresh, err := store.RecordLarkEvent(ctx, tx, m.EventID, eventMessage)
		dup = err == nil && !fresh
		if err != nil || !fresh {
			return err
		}
		t := &turn{c: c, tx: tx, st: c.st.In(tx), m: m}
		addressed, err := t.addressed(ctx)
		if err != nil || !addressed {
			return err
		}
		return t.handle(ctx)
	})
	if err != nil {
		c.log.WarnContext(ctx, "chat message not handled; nothing committed, Lark will redeliver",
			"event_id", m.EventID, "message_id", m.MessageID, "chat_id", m.ChatID, "err", err)
		return fmt.Errorf("handle message %s: %w", m.MessageID, err)
	}
	if dup {
		c.duplicate(ctx, eventMessage)
	}
	return nil
}

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
func (t *turn) addressed(ctx context.Context) (bool, error) {
	if t.m.ChatType == ChatP2P || t.mentionsBot() {
		return true, nil
	}
	for _, id := range []string{t.m.ParentID, t.m.RootID} {
		if id == "" {
			continue
		}
		_, err := store.OutboxByLarkMessage(ctx, t.tx, id)
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return false, err
		}
	}
	return false, nil
}

func (t *turn) mentionsBot() bool {
	return slices.ContainsFunc(t.m.Mentions, func(mn Mention) bool { return mn.OpenID == t.c.opts.BotOpenID })
}

// text returns the message text with the bot's mention removed and other mentions shown by
// name, so "@LoopX #docs hi @Ann" reads "#docs hi @Ann".
func (t *turn) text() string {
	s := t.m.Text
	for _, mn := range t.m.Mentions {
		if mn.Key == "" {
			continue
		}
		if mn.OpenID == t.c.opts.BotOpenID {
			s = strings.ReplaceAll(s, mn.Key, "")
		} else {
			s = strings.ReplaceAll(s, mn.Key, "@"+mn.Name)
		}
	}
	return s
}

func (t *turn) handle(ctx context.Context) error {
	p, err := Parse(t.text())
	if err != nil {
		var pe *ParseError
		if errors.As(err, &pe) {
			if pe.Usage == "" {
				return t.reply(ctx, "failed", map[string]any{"Problem": pe.Problem}, nil)
			}
			return t.reply(ctx, "usage", map[string]any{"Problem": pe.Problem, "Usage": pe.Usage}, nil)
		}
		return err
	}
	if p.Command == "" {
		return t.deliver(ctx, p)
	}
	cmd, _ := lookupCommand(p.Command)
	return t.command(ctx, cmd, p)
}

// lang resolves the reply language: the chat's /lang, then the goal's, then the default.
func (t *turn) langFor(ctx context.Context, goal *store.Goal) (string, error) {
	if !t.chatSet {
		l, err := store.ChatLang(ctx, t.tx, t.m.ChatID)
		if err != nil {
			return "", err
		}
		t.lang, t.chatSet = l, true
	}
	if t.lang != "" {
		return t.lang, nil
	}
	if goal != nil && goal.Lang != "" {
		return goal.Lang, nil
	}
	return t.c.opts.DefaultLang, nil
}

// reply answers the message with template name, in the thread when the message is in one.
// about, when set, tags the reply with its goal/agent so replies to it route there.
func (t *turn) reply(ctx context.Context, name string, data any, about *target) error {
	var goal *store.Goal
	if about != nil {
		goal = &about.goal
	}
	lang, err := t.langFor(ctx, goal)
	if err != nil {
		return err
	}
	r, err := t.c.tpl.Render(lang, name, data)
	if err != nil {
		return err
	}
	t.replies++
	in := store.OutboxInsert{
		DedupeKey:     store.ReplyKey(t.m.EventID, t.replies),
		Kind:          r.Kind,
		ReceiveID:     t.m.ChatID,
		ReplyTo:       t.m.MessageID,
		ReplyInThread: t.m.ThreadID != "", // a plain reply chain (root without thread) is answered plainly
		Content:       r.Content,
	}
	if about != nil {
		in.GoalID, in.AgentID, in.SessionID = about.goal.ID, about.agent, about.session
	}
	_, _, err = store.InsertOutbox(ctx, t.tx, in)
	return err
}

// audit records a decision of the router (refusals above all).
func (t *turn) audit(ctx context.Context, action, goalID, target string, allowed bool, detail map[string]any) error {
	return auditRow(ctx, t.tx, t.m.SenderID, "chat", action, goalID, target, allowed, detail)
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
func (t *turn) meta() store.Meta {
	return store.Meta{Actor: t.m.SenderID, Surface: "chat", IdempotencyKey: store.EventKey(t.m.EventID)}
}

// who is the sender, as the kernel's role rule sees them.
func (t *turn) who() store.Person {
	return store.Person{OpenID: t.m.SenderID, Admin: t.c.admins[t.m.SenderID]}
}

// allows reports whether a role meets a command's need.
func allows(r store.Role, n need) bool {
	switch n {
	case needMember:
		return r.AtLeast(store.RoleMember)
	case needOwner:
		return r.AtLeast(store.RoleOwner)
	}
	return true
}

// refuse tells the sender who may do it instead, and audits the refusal. command is the
// slash command refused, "" for a message to an agent.
func (t *turn) refuse(ctx context.Context, action, command string, n need, tg *target) error {
	needWord := "owner"
	if n == needMember {
		needWord = "member"
	}
	if err := t.audit(ctx, action, tg.goal.ID, "goal:"+tg.goal.ID, false, map[string]any{
		"reason": "not " + needWord, "role": string(tg.role),
	}); err != nil {
		return err
	}
	t.c.log.InfoContext(ctx, "chat refused", "actor", t.m.SenderID, "action", action, "goal_id", tg.goal.ID, "needs", needWord)
	return t.reply(ctx, "refused", map[string]any{
		"GoalID": tg.goal.ID, "Command": command, "Need": needWord, "Owners": tg.goal.Owners,
	}, nil)
}

// kernelError answers a refusal of a kernel operation (a *store.Error) with its message and
// returns nil; any other error is returned so the transaction rolls back and Lark redelivers.
func (t *turn) kernelError(ctx context.Context, err error, about *target) error {
	var se *store.Error
	if errors.As(err, &se) {
		return t.reply(ctx, "failed", map[string]any{"Problem": se.Error()}, about)
	}
	return err
}

func shortGate(id int64) string { return fmt.Sprintf("g%d", id) }

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
