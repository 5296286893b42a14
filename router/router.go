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

	"github.com/jackc/pgx/v5"

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

// ReportFunc builds the report for /report. It runs inside the chat transaction (db is that
// transaction) and returns the outbox rows that carry the report (typically one digest card
// replying to req.ReplyTo); it must not call the network. The scheduler fills it in.
type ReportFunc func(ctx context.Context, db store.DB, req ReportRequest) ([]store.OutboxInsert, error)

// Options configures a Chat.
type Options struct {
	BotOpenID   string   // this bot's open_id: a mention of it addresses the bot in a group
	Admins      []string // open_ids allowed everything (LOOPX_ADMINS)
	DefaultLang string   // en | zh, when neither the chat nor the goal sets one; "" = en
	Receipt     string   // ReceiptReaction (default) or ReceiptReply
	Now         func() time.Time
	Logger      *slog.Logger
	Inbox       inbox.Options
	// Templates renders every reply and card; nil parses the embedded set.
	Templates *templates.Set
	// Report answers /report. Nil: the bot says reports are not configured.
	Report ReportFunc
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
	opts   Options
	admins map[string]bool
	log    *slog.Logger
	bound  *boundBatcher
}

// New checks opts and returns a Chat.
func New(st *store.Store, opts Options) (*Chat, error) {
	if st == nil {
		return nil, errors.New("new chat router: store is nil")
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
	if opts.Inbox.Now == nil {
		opts.Inbox.Now = opts.Now
	}
	if opts.Inbox.Logger == nil {
		opts.Inbox.Logger = opts.Logger
	}
	tpl := opts.Templates
	if tpl == nil {
		var err error
		if tpl, err = templates.New(); err != nil {
			return nil, fmt.Errorf("new chat router: %w", err)
		}
	}
	admins := map[string]bool{}
	for _, a := range opts.Admins {
		if a = strings.TrimSpace(a); a != "" {
			admins[a] = true
		}
	}
	if opts.Inbox.Templates == nil {
		opts.Inbox.Templates = tpl
	}
	if opts.Inbox.DefaultLang == "" {
		opts.Inbox.DefaultLang = opts.DefaultLang
	}
	ib, err := inbox.New(st, opts.Inbox)
	if err != nil {
		return nil, fmt.Errorf("new chat router: %w", err)
	}
	bound := &boundBatcher{st: st, log: opts.Logger.WarnContext, opts: store.BoundOptions{
		EventType: eventMessage, MaxPending: ib.Options().MaxPending, Receipt: ReceiptEmoji}}
	return &Chat{st: st, ib: ib, tpl: tpl, opts: opts, admins: admins, log: opts.Logger, bound: bound}, nil
}

// Inbox returns the inbox the router enqueues into (same options), for the API to share.
func (c *Chat) Inbox() *inbox.Inbox { return c.ib }

// Templates returns the template set the router renders with.
func (c *Chat) Templates() *templates.Set { return c.tpl }

// turn is the state of handling one message inside its transaction.
type turn struct {
	c       *Chat
	tx      pgx.Tx
	m       Message
	lang    string // resolved lazily: chat setting, then goal, then default
	chatSet bool
	replies int
}

// HandleMessage handles one incoming chat message in one transaction: the event id, the
// operation, its audit rows and every outbox row (replies, receipt) commit together. A
// repeated event id does nothing and returns nil. An error means nothing was committed.
func (c *Chat) HandleMessage(ctx context.Context, m Message) error {
	if m.EventID == "" {
		return store.Errorf(store.ErrInvalid, "event_id", "is empty; the bot must pass Lark's event id")
	}
	if m.ChatID == "" || m.MessageID == "" {
		return store.Errorf(store.ErrInvalid, "chat_id", "chat_id and message_id are required")
	}
	if m.SenderIsBot || m.SenderID == "" || m.SenderID == c.opts.BotOpenID {
		return nil // bots, this one included, never drive the router
	}
	if c.enqueueBound(ctx, m) {
		return nil
	}
	var dup bool
	err := c.st.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		fresh, err := store.RecordLarkEvent(ctx, tx, m.EventID, eventMessage)
		dup = err == nil && !fresh
		if err != nil || !fresh {
			return err
		}
		t := &turn{c: c, tx: tx, m: m}
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
		DedupeKey:     fmt.Sprintf("evt:%s:%d", t.m.EventID, t.replies),
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
	return store.Meta{Actor: t.m.SenderID, Surface: "chat", IdempotencyKey: "lark:" + t.m.EventID}
}

// role of a person on a goal.
type role int

const (
	roleStranger role = iota
	roleMember
	roleOwner
	roleAdmin
)

func (c *Chat) roleOn(g store.Goal, openID string) role {
	switch {
	case c.admins[openID]:
		return roleAdmin
	case g.IsOwner(openID):
		return roleOwner
	case g.IsMember(openID):
		return roleMember
	}
	return roleStranger
}

func (r role) String() string {
	return [...]string{"stranger", "member", "owner", "admin"}[r]
}

func (r role) allows(n need) bool {
	switch n {
	case needMember:
		return r >= roleMember
	case needOwner:
		return r >= roleOwner
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
		"reason": "not " + needWord, "role": t.c.roleOn(tg.goal, t.m.SenderID).String(),
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

// visibleGoals lists the goals a person may see (owner, member, admin), by id.
func (c *Chat) visibleGoals(ctx context.Context, db store.DB, openID string) ([]store.Goal, error) {
	all, err := store.LookupGoals(ctx, db)
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, g := range all {
		if c.roleOn(g, openID) != roleStranger {
			out = append(out, g)
		}
	}
	return out, nil
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
