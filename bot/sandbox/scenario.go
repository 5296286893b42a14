package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Event types the scenario helpers deliver.
const (
	EventMessageReceive    = "im.message.receive_v1"
	EventCardActionTrigger = "card.action.trigger"
)

// ErrBadCallbackAnswer is returned by ClickButton when the bot's answer to a card callback is
// not what Lark accepts (non-200, empty, null or not JSON): Lark shows the user an error.
var ErrBadCallbackAnswer = errors.New("bad card callback answer")

type sayConfig struct {
	mentionBot bool
	mentions   []Mention
	replyTo    string
	inThread   bool
}

// SayOption changes what UserSays sends.
type SayOption func(*sayConfig)

// MentionBot makes the message @-mention the bot: the placeholder "@_user_1" is put in front
// of the text and a mention of the bot added. Group messages reach the bot only with it
// (unless Options.GroupMessages).
func MentionBot() SayOption { return func(c *sayConfig) { c.mentionBot = true } }

// MentionUser adds an @-mention of another user; its placeholder @_user_N is put in front of
// the text.
func MentionUser(openID, name string) SayOption {
	return func(c *sayConfig) { c.mentions = append(c.mentions, Mention{OpenID: openID, Name: name}) }
}

// ReplyTo makes the message a reply to messageID (parent), in its thread if it has one.
func ReplyTo(messageID string) SayOption { return func(c *sayConfig) { c.replyTo = messageID } }

// ReplyInThread makes the message a reply to messageID in a thread, opening the thread on
// the root message if there is none yet.
func ReplyInThread(messageID string) SayOption {
	return func(c *sayConfig) { c.replyTo, c.inThread = messageID, true }
}

// UserSays stores a text message from senderOpenID in chatID (created with the bot in it if
// new) and delivers im.message.receive_v1 over the active transport with Lark's redelivery.
// The returned Delivery carries the message id. A group message that does not mention the
// bot is stored but not delivered (its Delivery is done at once with Skipped set).
func (s *Sandbox) UserSays(chatID string, chatType ChatType, senderOpenID, text string, opts ...SayOption) (*Delivery, error) {
	if err := checkChat(chatID, chatType); err != nil {
		return nil, err
	}
	if senderOpenID == "" {
		return nil, &InputError{Field: "senderOpenID", Msg: "must not be empty"}
	}
	if strings.TrimSpace(text) == "" {
		return nil, &InputError{Field: "text", Msg: "must not be empty"}
	}
	var cfg sayConfig
	for _, o := range opts {
		o(&cfg)
	}
	var mentions []Mention
	prefix := ""
	add := func(openID, name string) {
		key := "@_user_" + strconv.Itoa(len(mentions)+1)
		mentions = append(mentions, Mention{Key: key, OpenID: openID, Name: name})
		prefix += key + " "
	}
	if cfg.mentionBot {
		add(s.opts.BotOpenID, s.opts.BotName)
	}
	for _, m := range cfg.mentions {
		if m.OpenID == "" {
			return nil, &InputError{Field: "MentionUser.openID", Msg: "must not be empty"}
		}
		add(m.OpenID, m.Name)
	}
	text = prefix + text
	content, _ := json.Marshal(map[string]string{"text": text})
	if len(content) > MaxTextBytes {
		return nil, &InputError{Field: "text", Msg: fmt.Sprintf("is %d bytes, Lark's limit is %d", len(content), MaxTextBytes)}
	}
	return s.userMessage(chatID, chatType, senderOpenID, "text", string(content), mentions, cfg, nil)
}

// userMessage stores a user's message (and the resource it carries, bound to it) and
// delivers im.message.receive_v1 when the bot sees it: in a direct chat always, in a group
// when it mentions the bot or Options.GroupMessages is set.
func (s *Sandbox) userMessage(chatID string, chatType ChatType, senderOpenID, msgType, content string, mentions []Mention, cfg sayConfig, res *Resource) (*Delivery, error) {
	if err := checkChat(chatID, chatType); err != nil {
		return nil, err
	}
	if senderOpenID == "" {
		return nil, &InputError{Field: "senderOpenID", Msg: "must not be empty"}
	}
	s.mu.Lock()
	c := s.chats[chatID]
	if c != nil && c.typ != chatType {
		s.mu.Unlock()
		return nil, &InputError{Field: "chatType", Msg: "chat " + chatID + " is a " + string(c.typ) + " chat"}
	}
	var root, parent, thread string
	if cfg.replyTo != "" {
		target := s.messages[cfg.replyTo]
		if target == nil || target.Recalled || target.ChatID != chatID {
			s.mu.Unlock()
			return nil, &InputError{Field: "ReplyTo", Msg: "message " + cfg.replyTo + " is not a live message of chat " + chatID}
		}
		root, parent, thread = target.RootID, target.ID, target.ThreadID
		if root == "" {
			root = target.ID
		}
		if thread == "" && cfg.inThread {
			thread = s.nextIDLocked("omt_")
			if rm := s.messages[root]; rm != nil {
				rm.ThreadID = thread
				s.touchLocked(rm)
			}
		}
	}
	if c == nil {
		c = s.addChatLocked(chatID, chatType, chatID)
	}
	now := s.now()
	m := &Message{
		ID: s.nextIDLocked("om_"), ChatID: chatID, SenderType: SenderUser, SenderID: senderOpenID,
		MsgType: msgType, Content: content, RootID: root, ParentID: parent, ThreadID: thread,
		Mentions: mentions, CreatedAt: now, UpdatedAt: now,
	}
	s.storeMessageLocked(c, m)
	if res != nil {
		res.MessageID = m.ID
		s.putResourceLocked(res)
	}
	deliver := c.botIn && (chatType == ChatP2P || cfg.mentionBot || s.opts.GroupMessages)
	event := s.messageEvent(m, chatType) // under the lock: m is shared with the model
	s.mu.Unlock()

	if !deliver {
		d := &Delivery{EventType: EventMessageReceive, MessageID: m.ID, done: make(chan struct{})}
		d.res = DeliveryResult{Skipped: true, Err: "not delivered: the bot is not in the chat or the group message does not mention it"}
		close(d.done)
		return d, nil
	}
	d, err := s.deliver(EventMessageReceive, event, m.ID)
	if err != nil {
		return nil, fmt.Errorf("user says: %w", err)
	}
	return d, nil
}

func userIDs(openID string) map[string]any {
	base := strings.TrimPrefix(openID, "ou_")
	return map[string]any{"open_id": openID, "user_id": "u_" + base, "union_id": "on_" + base}
}

func (s *Sandbox) messageEvent(m *Message, chatType ChatType) map[string]any {
	msg := map[string]any{
		"message_id": m.ID, "create_time": msString(m.CreatedAt), "update_time": msString(m.UpdatedAt),
		"chat_id": m.ChatID, "chat_type": string(chatType), "message_type": m.MsgType, "content": m.Content,
		"user_agent": "Lark-Sandbox",
	}
	for k, v := range map[string]string{"root_id": m.RootID, "parent_id": m.ParentID, "thread_id": m.ThreadID} {
		if v != "" {
			msg[k] = v
		}
	}
	if len(m.Mentions) > 0 {
		ms := make([]map[string]any, 0, len(m.Mentions))
		for _, mm := range m.Mentions {
			ms = append(ms, map[string]any{"key": mm.Key, "id": userIDs(mm.OpenID), "name": mm.Name, "tenant_key": s.opts.TenantKey})
		}
		msg["mentions"] = ms
	}
	return map[string]any{
		"sender":  map[string]any{"sender_id": userIDs(m.SenderID), "sender_type": "user", "tenant_key": s.opts.TenantKey},
		"message": msg,
	}
}

type clickToken struct {
	messageID string
	expires   time.Time
	uses      int
	answered  bool
	early     bool
	before    string // content when clicked, restored if an early update is reverted
}

// Toast is the toast a card callback answered with.
type Toast struct {
	Type    string // "info", "success", "warning", "error"
	Content string
	// I18n is the toast in each language the answer gave (Lark's i18n: "zh_cn", "en_us"):
	// Lark shows the one of the clicker's client, else Content.
	I18n map[string]string `json:"i18n,omitempty"`
}

// ClickResult is the outcome of ClickButton.
type ClickResult struct {
	EventID     string
	Token       string // the delayed-update token (c-…), valid 30 min for two updates
	Transport   string
	Toast       Toast
	CardUpdated bool   // the answer carried a card, now stored on the message
	Answer      []byte // the raw answer JSON
}

// ClickButton delivers card.action.trigger for a click by operatorOpenID on the card
// message messageID with the button's callback value, over the active transport (one push:
// Lark does not redeliver callbacks), and applies the answer as Lark does: a returned card
// replaces the message's card. Over WS the operator carries no user_id, as in Lark.
func (s *Sandbox) ClickButton(ctx context.Context, messageID, operatorOpenID string, value map[string]any) (ClickResult, error) {
	if operatorOpenID == "" {
		return ClickResult{}, &InputError{Field: "operatorOpenID", Msg: "must not be empty"}
	}
	s.mu.Lock()
	m := s.messages[messageID]
	if m == nil || m.Recalled || m.MsgType != "interactive" {
		s.mu.Unlock()
		return ClickResult{}, &InputError{Field: "messageID", Msg: messageID + " is not a live card message"}
	}
	token := s.nextIDLocked("c-")
	if len(s.clicks) >= sweepAt {
		for k, ct := range s.clicks {
			if !s.now().Before(ct.expires) {
				delete(s.clicks, k)
			}
		}
	}
	s.clicks[token] = &clickToken{messageID: messageID, expires: s.now().Add(ClickTokenTTL), before: m.Content}
	eventID := s.nextIDLocked("ev_")
	chatID := m.ChatID
	overHTTP := s.eventURL != "" || s.cardURL != ""
	s.mu.Unlock()

	operator := map[string]any{"open_id": operatorOpenID, "tenant_key": s.opts.TenantKey}
	if overHTTP {
		operator["user_id"] = userIDs(operatorOpenID)["user_id"]
	}
	if value == nil {
		value = map[string]any{}
	}
	payload, err := s.envelope(eventID, EventCardActionTrigger, map[string]any{
		"operator": operator, "token": token, "host": "im_message", "delivery_type": "",
		"action":  map[string]any{"value": value, "tag": "button"},
		"context": map[string]any{"open_message_id": messageID, "open_chat_id": chatID},
	})
	if err != nil {
		return ClickResult{}, fmt.Errorf("click button: %w", err)
	}
	d := &Delivery{EventID: eventID, EventType: EventCardActionTrigger, Payload: payload, card: true}
	res := s.pushOnce(ctx, d)
	out := ClickResult{EventID: eventID, Token: token, Transport: res.Transport, Answer: res.Body}
	if !res.Acked {
		s.finishClick(token, "")
		return out, fmt.Errorf("click button on %s: %w: %s", messageID, ErrBadCallbackAnswer, res.Err)
	}
	toast, card, err := parseCallbackAnswer(res.Body)
	if err != nil {
		s.finishClick(token, "")
		return out, fmt.Errorf("click button on %s: %w", messageID, err)
	}
	out.Toast, out.CardUpdated = toast, card != ""
	s.finishClick(token, card)
	return out, nil
}

// finishClick records that the callback was answered: a returned card replaces the message's
// card; an update sent through the token before the answer is reverted, as in Lark.
func (s *Sandbox) finishClick(token, card string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ct := s.clicks[token]
	if ct == nil {
		return // swept: the clock moved past its expiry meanwhile
	}
	ct.answered = true
	m := s.messages[ct.messageID]
	if m == nil {
		return
	}
	switch {
	case card != "":
		s.replaceContentLocked(m, "interactive", card)
	case ct.early:
		s.replaceContentLocked(m, "interactive", ct.before)
	}
}

// parseCallbackAnswer reads {toast, card{type, data}} and returns the card content to store,
// "" when the answer has no card.
func parseCallbackAnswer(body []byte) (Toast, string, error) {
	trimmed := strings.TrimSpace(string(body))
	if trimmed == "" || trimmed == "null" {
		return Toast{}, "", fmt.Errorf("%w: %q (answer at least {} or a toast)", ErrBadCallbackAnswer, trimmed)
	}
	var ans struct {
		Toast *Toast `json:"toast"`
		Card  *struct {
			Type string          `json:"type"`
			Data json.RawMessage `json:"data"`
		} `json:"card"`
	}
	if err := json.Unmarshal(body, &ans); err != nil {
		return Toast{}, "", fmt.Errorf("%w: not JSON: %v", ErrBadCallbackAnswer, err)
	}
	var toast Toast
	if ans.Toast != nil {
		toast = *ans.Toast
	}
	if ans.Card == nil || len(ans.Card.Data) == 0 || string(ans.Card.Data) == "null" {
		return toast, "", nil
	}
	var card string
	switch ans.Card.Type {
	case "raw", "":
		card = string(ans.Card.Data)
		var inner string
		if json.Unmarshal(ans.Card.Data, &inner) == nil {
			card = inner // data given as a JSON string
		}
	case "template":
		b, err := json.Marshal(map[string]any{"type": "template", "data": ans.Card.Data})
		if err != nil {
			return toast, "", fmt.Errorf("%w: card: %v", ErrBadCallbackAnswer, err)
		}
		card = string(b)
	default:
		return toast, "", fmt.Errorf("%w: card.type %q is not raw or template", ErrBadCallbackAnswer, ans.Card.Type)
	}
	if a, good := checkContent("interactive", card); !good {
		return toast, "", fmt.Errorf("%w: card: %v", ErrBadCallbackAnswer, a.body.(map[string]any)["msg"])
	}
	return toast, card, nil
}

// ClickButtonN clicks the n-th button (1-based, in card order) of a card message.
func (s *Sandbox) ClickButtonN(ctx context.Context, messageID, operatorOpenID string, n int) (ClickResult, error) {
	m, found := s.Message(messageID)
	if !found {
		return ClickResult{}, &InputError{Field: "messageID", Msg: messageID + " does not exist"}
	}
	buttons := RenderCard(m.Content).Buttons
	if n < 1 || n > len(buttons) {
		return ClickResult{}, &InputError{Field: "button", Msg: fmt.Sprintf("message %s has %d buttons, there is no button %d", messageID, len(buttons), n)}
	}
	return s.ClickButton(ctx, messageID, operatorOpenID, buttons[n-1].Value)
}

// EventBotAdded is the event Lark sends when the bot is added to a chat.
const EventBotAdded = "im.chat.member.bot.added_v1"

// AddBotToChat puts the bot into chatID (creating the chat) as operatorOpenID did in Lark,
// and delivers im.chat.member.bot.added_v1.
func (s *Sandbox) AddBotToChat(chatID string, typ ChatType, name, operatorOpenID string) (*Delivery, error) {
	if operatorOpenID == "" {
		return nil, &InputError{Field: "operatorOpenID", Msg: "must not be empty"}
	}
	if err := s.AddChat(chatID, typ, name); err != nil {
		return nil, err
	}
	d, err := s.Deliver(EventBotAdded, map[string]any{
		"chat_id": chatID, "name": name, "external": false,
		"operator_id": userIDs(operatorOpenID), "operator_tenant_key": s.opts.TenantKey,
	})
	if err != nil {
		return nil, fmt.Errorf("add bot to chat: %w", err)
	}
	return d, nil
}
