package bot

import (
	"context"
	"crypto/cipher"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	larkevent "github.com/larksuite/oapi-sdk-go/v3/event"
	"github.com/larksuite/oapi-sdk-go/v3/event/dispatcher"
	"github.com/larksuite/oapi-sdk-go/v3/event/dispatcher/callback"

	"loopx/router"
)

// EventHandler is what intake feeds: the router's two chat entry points. Both must record the
// event id in the transaction of their effect, return nil for a duplicate without effect, and
// return an error only when nothing was committed.
type EventHandler interface {
	HandleMessage(ctx context.Context, m router.Message) error
	HandleCardAction(ctx context.Context, a router.CardAction) (router.CardResult, error)
}

// IntakeOptions tunes an Intake. Zero values take the defaults.
type IntakeOptions struct {
	Logger  *slog.Logger
	Metrics *Metrics
	Now     func() time.Time
	// HandlerTimeout bounds one event's handling; it must end inside Lark's 3 s. Default 2.5 s.
	HandlerTimeout time.Duration
	// WS tunes the long connection (watchdog); see WSOptions.
	WS WSOptions
	// MaxCallbackAge is the window an HTTP callback's X-Lark-Request-Timestamp must fall in
	// (either side of now); older or newer ones are refused as replays. 0 means 1 h; a
	// negative value turns the check off.
	MaxCallbackAge time.Duration
	// ClickFailures are the toasts of a click the router could not answer, in every
	// language (router.ClickFailureToasts). Required.
	ClickFailures router.ClickFailures
}

// Intake receives Lark events and card callbacks and hands them to the EventHandler.
type Intake struct {
	cfg     Config
	h       EventHandler
	log     *slog.Logger
	m       *Metrics
	now     func() time.Time
	timeout time.Duration
	maxAge  time.Duration
	wsOpts  WSOptions
	disp    *dispatcher.EventDispatcher
	block   cipher.Block // the encrypt key's AES block; nil without an encrypt key
	bufs    bufferPool   // callback bodies and plaintexts, reused

	// unreadable and notRecorded are the toasts of a click the router could not answer.
	unreadable, notRecorded *callback.Toast

	connected    atomic.Bool
	lastActivity atomic.Int64 // unix nanos of the last WS event or (re)connect
}

// ignoredEvents are event types an app commonly subscribes to besides messages. Over WS the SDK
// acks an unregistered type with code 500, which makes Lark redeliver it for hours; registering
// them acknowledges and drops them.
func ignoredEvents() []string {
	return []string{
		"im.message.message_read_v1",
		"im.message.reaction.created_v1",
		"im.message.reaction.deleted_v1",
		"im.message.recalled_v1",
		"im.chat.member.bot.added_v1",
		"im.chat.member.bot.deleted_v1",
		"im.chat.member.user.added_v1",
		"im.chat.member.user.deleted_v1",
		"im.chat.disbanded_v1",
		"im.chat.updated_v1",
		"p2p_chat_create",
		"application.bot.menu_v6",
	}
}

// NewIntake checks cfg and builds the intake. It starts nothing: mount EventsHandler and
// CardsHandler for HTTP callbacks, or run RunWS for the long connection.
func NewIntake(cfg Config, h EventHandler, opts IntakeOptions) (*Intake, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("check lark settings: %w", err)
	}
	if h == nil {
		return nil, errors.New("create intake: event handler is nil")
	}
	unreadable, err := failureToast(opts.ClickFailures.Lang, opts.ClickFailures.Unreadable)
	if err != nil {
		return nil, fmt.Errorf("create intake: the toast of an unreadable click: %w", err)
	}
	notRecorded, err := failureToast(opts.ClickFailures.Lang, opts.ClickFailures.NotRecorded)
	if err != nil {
		return nil, fmt.Errorf("create intake: the toast of a click not recorded: %w", err)
	}
	in := &Intake{cfg: cfg, h: h, log: opts.Logger, m: opts.Metrics, now: opts.Now,
		timeout: opts.HandlerTimeout, maxAge: opts.MaxCallbackAge, wsOpts: opts.WS.withDefaults(),
		unreadable: unreadable, notRecorded: notRecorded}
	if in.maxAge == 0 {
		in.maxAge = DefaultMaxCallbackAge
	}
	if in.log == nil {
		in.log = slog.New(slog.DiscardHandler)
	}
	if in.m == nil {
		in.m = NewMetrics(nil)
	}
	if in.now == nil {
		in.now = time.Now
	}
	if in.timeout <= 0 {
		in.timeout = 2500 * time.Millisecond
	}
	if cfg.EncryptKey != "" {
		b, err := eventCipher(cfg.EncryptKey)
		if err != nil {
			return nil, fmt.Errorf("create intake: %w", err)
		}
		in.block = b
	}
	// The dispatcher only routes: HTTP authentication is done by our own handler (the SDK skips
	// the token check without an encrypt key), and the WS path carries neither.
	d := dispatcher.NewEventDispatcher("", "")
	d.InitConfig(larkevent.WithLogger(sdkLogger{in.log}))
	d.OnCustomizedEvent(eventMessage, in.onWSMessage)
	d.OnP2CardActionTrigger(in.onCardAction)
	for _, t := range ignoredEvents() {
		d.OnCustomizedEvent(t, in.onIgnored(t))
	}
	in.disp = d
	return in, nil
}

// The Lark events LoopX handles; the others are acknowledged and ignored.
const (
	eventMessage    = "im.message.receive_v1"
	eventCardAction = "card.action.trigger"
)

// larkLocales are Lark's names of LoopX's languages, the keys of a toast's i18n content.
var larkLocales = map[string]string{"en": "en_us", "zh": "zh_cn"}

// failureToast is an error toast saying text (by LoopX language) in each language Lark
// knows, and in lang to a client whose language is none of them.
func failureToast(lang string, text map[string]string) (*callback.Toast, error) {
	t := &callback.Toast{Type: "error", Content: text[lang], I18nContent: map[string]string{}}
	if t.Content == "" {
		return nil, fmt.Errorf("no words in %q (router.ClickFailureToasts words them)", lang)
	}
	for l, words := range text {
		if locale, ok := larkLocales[l]; ok && words != "" {
			t.I18nContent[locale] = words
		}
	}
	return t, nil
}

// DefaultMaxCallbackAge is the default window of an HTTP callback's timestamp.
const DefaultMaxCallbackAge = time.Hour

type transportKey struct{}

func withTransport(ctx context.Context, t string) context.Context {
	return context.WithValue(ctx, transportKey{}, t)
}

func transportOf(ctx context.Context) string {
	if t, ok := ctx.Value(transportKey{}).(string); ok {
		return t
	}
	return TransportWS
}

func (in *Intake) onIgnored(eventType string) func(context.Context, *larkevent.EventReq) error {
	return func(ctx context.Context, _ *larkevent.EventReq) error {
		in.m.eventsReceived.WithLabelValues(transportOf(ctx), "ignored").Inc()
		in.log.DebugContext(ctx, "lark event ignored", "event_type", eventType)
		return nil
	}
}

// onWSMessage handles a message event of the long connection: its raw payload is decoded
// once, like an HTTP callback's.
func (in *Intake) onWSMessage(ctx context.Context, req *larkevent.EventReq) error {
	f, err := decodeFrame(req.Body)
	if err != nil {
		in.m.eventsReceived.WithLabelValues(transportOf(ctx), "message").Inc()
		in.m.eventsRejected.WithLabelValues(transportOf(ctx), "malformed").Inc()
		in.log.WarnContext(ctx, "lark event dropped: its fields do not have the types Lark sends", "kind", "message", "err", err)
		return nil
	}
	return in.onMessage(ctx, f)
}

// onMessage hands a decoded message event to the router. A payload it cannot read, or one
// the router says can never be handled, is acknowledged and counted (redelivery would not
// help); a failure to handle it is returned, so Lark redelivers.
func (in *Intake) onMessage(ctx context.Context, f *frame) error {
	tr := transportOf(ctx)
	in.touch()
	in.m.eventsReceived.WithLabelValues(tr, "message").Inc()
	msg, err := f.message()
	if err != nil {
		// A payload we cannot read will not improve on redelivery: acknowledge and drop it.
		in.m.eventsRejected.WithLabelValues(tr, "malformed").Inc()
		in.log.WarnContext(ctx, "lark message event dropped", "err", err)
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, in.timeout)
	defer cancel()
	start := in.now()
	if err := in.h.HandleMessage(ctx, msg); err != nil {
		if errors.Is(err, router.ErrUnusable) {
			// Redelivering it would fail the same way for hours: acknowledge and drop it.
			in.m.eventsRejected.WithLabelValues(tr, "unusable").Inc()
			in.log.WarnContext(ctx, "lark message event dropped: it can never be handled",
				"event_id", msg.EventID, "message_id", msg.MessageID, "chat_id", msg.ChatID, "err", err)
			return nil
		}
		in.m.eventsFailed.WithLabelValues(tr, "message").Inc()
		in.log.ErrorContext(ctx, "lark message not handled; lark will redeliver",
			"event_id", msg.EventID, "message_id", msg.MessageID, "err", err)
		return fmt.Errorf("handle message %s: %w", msg.MessageID, err)
	}
	in.m.handleSeconds.WithLabelValues("message").Observe(in.now().Sub(start).Seconds())
	return nil
}

func (in *Intake) onCardAction(ctx context.Context, ev *callback.CardActionTriggerEvent) (*callback.CardActionTriggerResponse, error) {
	tr := transportOf(ctx)
	in.touch()
	in.m.eventsReceived.WithLabelValues(tr, "card").Inc()
	act, err := convertCardAction(ev)
	if err != nil {
		in.m.eventsRejected.WithLabelValues(tr, "malformed").Inc()
		in.log.WarnContext(ctx, "lark card action dropped", "err", err)
		return &callback.CardActionTriggerResponse{Toast: in.unreadable}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, in.timeout)
	defer cancel()
	start := in.now()
	res, err := in.h.HandleCardAction(ctx, act)
	if err != nil {
		in.m.eventsFailed.WithLabelValues(tr, "card").Inc()
		in.log.ErrorContext(ctx, "lark card action not handled", "event_id", act.EventID, "err", err)
		// Lark never re-pushes card callbacks, so an error would only show the user a generic
		// failure; say what happened instead. Nothing was committed.
		return &callback.CardActionTriggerResponse{Toast: in.notRecorded}, nil
	}
	in.m.handleSeconds.WithLabelValues("card").Observe(in.now().Sub(start).Seconds())
	return cardResponse(res), nil
}

// cardResponse turns the router's answer into Lark's: never nil, a raw card only when the
// router returned valid JSON.
func cardResponse(res router.CardResult) *callback.CardActionTriggerResponse {
	out := &callback.CardActionTriggerResponse{}
	if res.Toast != "" {
		kind := res.ToastKind
		switch kind {
		case "success", "info", "warning", "error":
		default:
			kind = "info"
		}
		out.Toast = &callback.Toast{Type: kind, Content: res.Toast}
	}
	if len(res.Card) > 0 && json.Valid(res.Card) {
		out.Card = &callback.Card{Type: "raw", Data: json.RawMessage(res.Card)}
	}
	return out
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// contentText extracts the text a person typed. Other message types (images, files, stickers)
// carry no text; they become "" (messageFiles reads the files they bring).
func contentText(msgType, content string) (string, error) {
	switch msgType {
	case "text":
		var c struct {
			Text string `json:"text"`
		}
		if err := unmarshalJSON([]byte(content), &c); err != nil {
			return "", fmt.Errorf("text content is not JSON: %w", err)
		}
		return c.Text, nil
	case "post":
		return postText(content)
	default:
		return "", nil
	}
}

// postText flattens a rich-text post: the title, then each paragraph's text, link and mention
// runs joined, paragraphs on separate lines. Received posts are either {"title","content"} or
// keyed by language ({"zh_cn":{...}}).
func postText(content string) (string, error) {
	type run struct {
		Tag      string `json:"tag"`
		Text     string `json:"text"`
		Href     string `json:"href"`
		UserID   string `json:"user_id"`
		UserName string `json:"user_name"`
	}
	type post struct {
		Title   string  `json:"title"`
		Content [][]run `json:"content"`
	}
	var p post
	if err := json.Unmarshal([]byte(content), &p); err != nil {
		return "", fmt.Errorf("post content is not JSON: %w", err)
	}
	if p.Title == "" && p.Content == nil {
		var byLang map[string]post
		if err := json.Unmarshal([]byte(content), &byLang); err == nil {
			for _, lang := range []string{"zh_cn", "en_us", "ja_jp"} {
				if q, ok := byLang[lang]; ok {
					p = q
					break
				}
			}
			if p.Content == nil {
				for _, q := range byLang {
					p = q
					break
				}
			}
		}
	}
	var lines []string
	if p.Title != "" {
		lines = append(lines, p.Title)
	}
	for _, para := range p.Content {
		var b strings.Builder
		for _, r := range para {
			switch r.Tag {
			case "text", "a", "md":
				b.WriteString(r.Text)
			case "at":
				// Received posts carry the placeholder in user_id (e.g. @_user_1), like text.
				if r.UserID != "" {
					b.WriteString(r.UserID)
				} else {
					b.WriteString("@" + r.UserName)
				}
			case "code_block":
				b.WriteString(r.Text)
			}
		}
		lines = append(lines, b.String())
	}
	return strings.TrimSpace(strings.Join(lines, "\n")), nil
}

// convertCardAction reads a card.action.trigger callback. Over WS operator.user_id may be
// missing, so only open ids are used; the chat comes from context.open_chat_id.
func convertCardAction(ev *callback.CardActionTriggerEvent) (router.CardAction, error) {
	if ev == nil || ev.Event == nil {
		return router.CardAction{}, errors.New("callback has no event")
	}
	var a router.CardAction
	if ev.EventV2Base != nil && ev.EventV2Base.Header != nil {
		a.EventID = ev.EventV2Base.Header.EventID
	}
	if ev.Event.Operator != nil {
		a.OperatorID = ev.Event.Operator.OpenID
	}
	if a.OperatorID == "" {
		return router.CardAction{}, errors.New("card action has no operator open_id")
	}
	a.Token = ev.Event.Token
	if c := ev.Event.Context; c != nil {
		a.ChatID = c.OpenChatID
		a.MessageID = c.OpenMessageID
	}
	if ev.Event.Action != nil {
		a.Value = ev.Event.Action.Value
	}
	if a.EventID == "" {
		a.EventID = "card:" + a.Token
	}
	return a, nil
}
