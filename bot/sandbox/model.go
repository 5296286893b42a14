package sandbox

import (
	"encoding/json"
	"slices"
	"time"
)

// ChatType tells a one-to-one chat with the bot from a group.
type ChatType string

// Chat types, as Lark names them in events.
const (
	ChatP2P   ChatType = "p2p"
	ChatGroup ChatType = "group"
)

// Sender types of a message.
const (
	SenderApp  = "app"
	SenderUser = "user"
)

// Message is a snapshot of one message in the chat model.
type Message struct {
	ID     string
	ChatID string
	// Rev is the sandbox-wide change counter at the last change of this message (creation,
	// patch, recall, reaction, thread opened, card update); Seq is Rev at creation, so it
	// orders messages by creation and tells the control API's cursor which are new.
	Seq int64
	Rev int64
	// SenderType is SenderApp (the bot) or SenderUser; SenderID is the bot's or the user's
	// open_id.
	SenderType string
	SenderID   string
	MsgType    string // "text", "post", "interactive", ...
	Content    string // the JSON content string as sent
	RootID     string
	ParentID   string
	ThreadID   string
	UUID       string // the Lark dedupe uuid the bot sent with it, "" for none
	Mentions   []Mention
	Reactions  []Reaction
	Recalled   bool
	Updated    bool
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// Text is the "text" of a text message's content, "" for other types.
func (m Message) Text() string {
	if m.MsgType != "text" {
		return ""
	}
	var c struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal([]byte(m.Content), &c)
	return c.Text
}

// Mention is one @-mention in a user's message; Key is the placeholder in the text.
type Mention struct {
	Key    string `json:"key"`
	OpenID string `json:"open_id"`
	Name   string `json:"name"`
}

// Reaction is one emoji reaction on a message.
type Reaction struct {
	ID           string
	EmojiType    string
	OperatorType string // "app" or "user"
	OperatorID   string
	At           time.Time
}

func (m *Message) clone() Message {
	c := *m
	c.Mentions = slices.Clone(m.Mentions)
	c.Reactions = slices.Clone(m.Reactions)
	return c
}

type chat struct {
	id       string
	typ      ChatType
	name     string
	botIn    bool
	messages []string
	rate     rateStat
	// updates counts card updates of the chat's messages; maxCombined the most sends and
	// updates accepted within one second.
	updates     rateStat
	maxCombined int
}

type uuidEntry struct {
	messageID string
	at        time.Time
}

// ChatInfo describes one chat of the model.
type ChatInfo struct {
	ID       string   `json:"chat_id"`
	Type     ChatType `json:"type"`
	Name     string   `json:"name"`
	BotIn    bool     `json:"bot_in"`
	Messages int      `json:"messages"`
}

// ChatView reads one chat of the model; see Sandbox.Chat.
type ChatView struct {
	s  *Sandbox
	id string
}

// Chat returns a view of chatID. The chat need not exist yet: its accessors then return
// nothing.
func (s *Sandbox) Chat(chatID string) ChatView { return ChatView{s: s, id: chatID} }

// Messages returns a snapshot of the chat's messages in creation order, recalled ones
// included.
func (v ChatView) Messages() []Message {
	v.s.mu.Lock()
	defer v.s.mu.Unlock()
	c := v.s.chats[v.id]
	if c == nil {
		return nil
	}
	out := make([]Message, 0, len(c.messages))
	for _, id := range c.messages {
		out = append(out, v.s.messages[id].clone())
	}
	return out
}

// BotMessages returns the messages the bot sent to the chat, in creation order.
func (v ChatView) BotMessages() []Message {
	var out []Message
	for _, m := range v.Messages() {
		if m.SenderType == SenderApp {
			out = append(out, m)
		}
	}
	return out
}

// Stats returns the chat's send counters (create + reply to this chat).
func (v ChatView) Stats() ChatStats {
	v.s.mu.Lock()
	defer v.s.mu.Unlock()
	c := v.s.chats[v.id]
	if c == nil {
		return ChatStats{}
	}
	st := c.rate.stats()
	st.Updates, st.MaxWithUpdatesPerSecond = c.updates.total, c.maxCombined
	return st
}

// MaxPerSecond is the highest number of sends the chat accepted within one clock second. It
// counts accepted sends only; compare MaxAttemptsPerSecond for the offered load.
func (s *Sandbox) MaxPerSecond(chatID string) int { return s.Chat(chatID).Stats().MaxPerSecond }

// Message returns a snapshot of one message.
func (s *Sandbox) Message(messageID string) (Message, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.messages[messageID]
	if m == nil {
		return Message{}, false
	}
	return m.clone(), true
}

// Chats lists the chats of the model in creation order.
func (s *Sandbox) Chats() []ChatInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ChatInfo, 0, len(s.chatOrder))
	for _, id := range s.chatOrder {
		c := s.chats[id]
		out = append(out, ChatInfo{ID: c.id, Type: c.typ, Name: c.name, BotIn: c.botIn, Messages: len(c.messages)})
	}
	return out
}

// AddChat creates a chat with the bot in it (or puts the bot back into an existing chat).
func (s *Sandbox) AddChat(chatID string, typ ChatType, name string) error {
	if err := checkChat(chatID, typ); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.chats[chatID]; c != nil && c.typ != typ {
		return &InputError{Field: "typ", Msg: "chat " + chatID + " already exists as " + string(c.typ)}
	}
	s.addChatLocked(chatID, typ, name)
	return nil
}

// RemoveBot takes the bot out of a chat: sends to it then answer 230002.
func (s *Sandbox) RemoveBot(chatID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.chats[chatID]; c != nil {
		c.botIn = false
		s.bumpLocked()
		s.saveChatLocked(c)
	}
}

func (s *Sandbox) addChatLocked(chatID string, typ ChatType, name string) *chat {
	c := s.chats[chatID]
	if c == nil {
		c = &chat{id: chatID, typ: typ, name: name}
		s.chats[chatID] = c
		s.chatOrder = append(s.chatOrder, chatID)
	} else if c.botIn {
		return c
	}
	c.botIn = true
	s.bumpLocked()
	s.saveChatLocked(c)
	return c
}

func checkChat(chatID string, typ ChatType) error {
	if chatID == "" {
		return &InputError{Field: "chatID", Msg: "must not be empty"}
	}
	if typ != ChatP2P && typ != ChatGroup {
		return &InputError{Field: "chatType", Msg: `must be "p2p" or "group", got "` + string(typ) + `"`}
	}
	return nil
}

// InputError reports a bad argument to a sandbox method; nothing was changed.
type InputError struct {
	Field string
	Msg   string
}

func (e *InputError) Error() string { return "sandbox: " + e.Field + ": " + e.Msg }

// storeMessageLocked appends m to its chat and the model.
func (s *Sandbox) storeMessageLocked(c *chat, m *Message) {
	m.Rev = s.bumpLocked()
	m.Seq = m.Rev
	s.messages[m.ID] = m
	c.messages = append(c.messages, m.ID)
	s.saveMessageLocked(m)
}

// touchLocked marks m changed for the control API's cursor (and the state file); callers
// change m first.
func (s *Sandbox) touchLocked(m *Message) {
	m.Rev = s.bumpLocked()
	s.saveMessageLocked(m)
}

// viewLocked renders m as Lark's Message JSON.
func (s *Sandbox) viewLocked(m *Message) map[string]any {
	v := map[string]any{
		"message_id":  m.ID,
		"msg_type":    m.MsgType,
		"create_time": msString(m.CreatedAt),
		"update_time": msString(m.UpdatedAt),
		"deleted":     m.Recalled,
		"updated":     m.Updated,
		"chat_id":     m.ChatID,
		"body":        map[string]any{"content": m.Content},
	}
	if m.Recalled {
		v["body"] = map[string]any{"content": "This message was recalled"}
	}
	for k, id := range map[string]string{"root_id": m.RootID, "parent_id": m.ParentID, "thread_id": m.ThreadID} {
		if id != "" {
			v[k] = id
		}
	}
	if m.SenderType == SenderApp {
		v["sender"] = map[string]any{"id": s.opts.AppID, "id_type": "app_id", "sender_type": "app", "tenant_key": s.opts.TenantKey}
	} else {
		v["sender"] = map[string]any{"id": m.SenderID, "id_type": "open_id", "sender_type": "user", "tenant_key": s.opts.TenantKey}
	}
	if len(m.Mentions) > 0 {
		ms := make([]map[string]any, 0, len(m.Mentions))
		for _, mm := range m.Mentions {
			ms = append(ms, map[string]any{"key": mm.Key, "id": mm.OpenID, "id_type": "open_id", "name": mm.Name, "tenant_key": s.opts.TenantKey})
		}
		v["mentions"] = ms
	}
	return v
}
