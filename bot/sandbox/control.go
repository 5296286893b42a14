package sandbox

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// MessageView is a message as the control API returns it.
type MessageView struct {
	Seq        int64     `json:"seq"`
	Rev        int64     `json:"rev"`
	MessageID  string    `json:"message_id"`
	ChatID     string    `json:"chat_id"`
	SenderType string    `json:"sender_type"`
	SenderID   string    `json:"sender_id"`
	MsgType    string    `json:"msg_type"`
	Content    string    `json:"content"`
	Text       string    `json:"text,omitempty"`
	Card       *CardView `json:"card,omitempty"`
	RootID     string    `json:"root_id,omitempty"`
	ParentID   string    `json:"parent_id,omitempty"`
	ThreadID   string    `json:"thread_id,omitempty"`
	Mentions   []Mention `json:"mentions,omitempty"`
	Reactions  []string  `json:"reactions,omitempty"`
	File       *FileInfo `json:"file,omitempty"` // the image or file of an image or file message
	Recalled   bool      `json:"recalled,omitempty"`
	Updated    bool      `json:"updated,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
}

// ViewOf renders a message for the control API.
func ViewOf(m Message) MessageView {
	v := MessageView{
		Seq: m.Seq, Rev: m.Rev, MessageID: m.ID, ChatID: m.ChatID, SenderType: m.SenderType, SenderID: m.SenderID,
		MsgType: m.MsgType, Content: m.Content, Text: m.Text(), RootID: m.RootID, ParentID: m.ParentID,
		ThreadID: m.ThreadID, Mentions: m.Mentions, Recalled: m.Recalled, Updated: m.Updated, CreatedAt: m.CreatedAt,
	}
	if m.MsgType == "interactive" {
		c := RenderCard(m.Content)
		v.Card = &c
	}
	for _, r := range m.Reactions {
		v.Reactions = append(v.Reactions, r.EmojiType)
	}
	return v
}

// Info is what GET /sandbox/v1/info returns.
type Info struct {
	AppID          string `json:"app_id"`
	BotOpenID      string `json:"bot_open_id"`
	BotName        string `json:"bot_name"`
	DemoUserOpenID string `json:"demo_user_open_id"`
	DefaultChatID  string `json:"default_chat_id"`
}

// MessagesPage is what GET /sandbox/v1/messages returns: messages changed after the cursor
// asked for, and the cursor to ask with next.
type MessagesPage struct {
	Cursor   int64         `json:"cursor"`
	Messages []MessageView `json:"messages"`
}

// PostRequest is the body of POST /sandbox/v1/messages.
type PostRequest struct {
	ChatID     string   `json:"chat_id"`
	ChatType   ChatType `json:"chat_type,omitempty"` // needed only for a new chat; default group
	OpenID     string   `json:"open_id"`
	Text       string   `json:"text"`
	MentionBot bool     `json:"mention_bot,omitempty"`
	ReplyTo    string   `json:"reply_to,omitempty"`
	InThread   bool     `json:"in_thread,omitempty"`
}

// PostAnswer is the answer to POST /sandbox/v1/messages.
type PostAnswer struct {
	MessageID string `json:"message_id"`
	EventID   string `json:"event_id,omitempty"`
	Delivered bool   `json:"delivered"` // false when the bot will not see it (group without mention)
}

// FileRequest is the body of POST /sandbox/v1/files: a user sends a file (an image when its
// content is one), with an optional caption.
type FileRequest struct {
	ChatID     string   `json:"chat_id"`
	ChatType   ChatType `json:"chat_type,omitempty"`
	OpenID     string   `json:"open_id"`
	Name       string   `json:"name"`
	Data       []byte   `json:"data"` // base64 in JSON
	Caption    string   `json:"caption,omitempty"`
	MentionBot bool     `json:"mention_bot,omitempty"`
	ReplyTo    string   `json:"reply_to,omitempty"`
	InThread   bool     `json:"in_thread,omitempty"`
}

// Stats is what GET /sandbox/v1/stats?chat_id= returns: the chat's and the app's send
// counters, and how many card updates the per-message limit refused.
type Stats struct {
	Chat           ChatStats `json:"chat"`
	App            ChatStats `json:"app"`
	PatchesRefused int       `json:"patches_refused"`
}

func (s *Sandbox) statsOf(chatID string) Stats {
	st := Stats{Chat: s.Chat(chatID).Stats(), App: s.AppStats()}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.patches {
		st.PatchesRefused += p.limited
	}
	return st
}

// ClickRequest is the body of POST /sandbox/v1/click.
type ClickRequest struct {
	MessageID string `json:"message_id"`
	Button    int    `json:"button"` // 1-based
	OpenID    string `json:"open_id"`
}

// ClickAnswer is the answer to POST /sandbox/v1/click.
type ClickAnswer struct {
	Toast       Toast  `json:"toast"`
	CardUpdated bool   `json:"card_updated"`
	Error       string `json:"error,omitempty"`
}

type controlError struct {
	Error string `json:"error"`
	Field string `json:"field,omitempty"`
}

func (s *Sandbox) controlRoutes(mux *http.ServeMux) {
	h := func(pattern string, f func(http.ResponseWriter, *http.Request)) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			if s.opts.ControlToken != "" {
				want := "Bearer " + s.opts.ControlToken
				if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte(want)) != 1 {
					s.log.Warn("sandbox: control call refused: bad or missing bearer token", "path", r.URL.Path)
					writeJSON(w, http.StatusUnauthorized, nil, controlError{Error: "the sandbox control API needs Authorization: Bearer <control token>"})
					return
				}
			}
			f(w, r)
		})
	}
	h("GET /sandbox/v1/info", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, nil, Info{AppID: s.opts.AppID, BotOpenID: s.opts.BotOpenID, BotName: s.opts.BotName,
			DemoUserOpenID: s.opts.DemoUserOpenID, DefaultChatID: s.opts.DefaultChatID})
	})
	h("GET /sandbox/v1/chats", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, nil, map[string]any{"chats": s.Chats()})
	})
	h("GET /sandbox/v1/messages", s.controlMessages)
	h("POST /sandbox/v1/messages", s.controlPost)
	h("POST /sandbox/v1/click", s.controlClick)
	h("POST /sandbox/v1/files", s.controlFile)
	h("GET /sandbox/v1/stats", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, nil, s.statsOf(r.URL.Query().Get("chat_id")))
	})
}

func controlFail(w http.ResponseWriter, err error) {
	var ie *InputError
	if errors.As(err, &ie) {
		writeJSON(w, http.StatusBadRequest, nil, controlError{Error: ie.Error(), Field: ie.Field})
		return
	}
	writeJSON(w, http.StatusInternalServerError, nil, controlError{Error: err.Error()})
}

// MaxLongPoll bounds the wait parameter of GET /sandbox/v1/messages.
const MaxLongPoll = 60 * time.Second

// controlMessages lists messages changed after the cursor ("after", a rev), optionally of one
// chat, oldest first; "limit" keeps the newest N; "wait" long-polls until something changes.
func (s *Sandbox) controlMessages(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	chatID := q.Get("chat_id")
	var after int64
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			controlFail(w, &InputError{Field: "after", Msg: "must be a cursor this API returned"})
			return
		}
		after = n
	}
	limit := 0
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			controlFail(w, &InputError{Field: "limit", Msg: "must be a positive number"})
			return
		}
		limit = n
	}
	var wait time.Duration
	if v := q.Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > MaxLongPoll {
			controlFail(w, &InputError{Field: "wait", Msg: "must be a duration from 0s to 60s, like 25s"})
			return
		}
		wait = d
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		page, changed := s.messagesAfter(chatID, after, limit)
		if len(page.Messages) > 0 || wait == 0 {
			writeJSON(w, http.StatusOK, nil, page)
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			wait = 0
		case <-r.Context().Done():
			return
		case <-s.bg.Done():
			wait = 0
		}
	}
}

func (s *Sandbox) messagesAfter(chatID string, after int64, limit int) (MessagesPage, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	page := MessagesPage{Cursor: s.rev, Messages: []MessageView{}}
	var ms []Message
	for _, m := range s.messages {
		if m.Rev > after && (chatID == "" || m.ChatID == chatID) {
			ms = append(ms, m.clone())
		}
	}
	slices.SortFunc(ms, func(a, b Message) int { return int(a.Seq - b.Seq) })
	if limit > 0 && len(ms) > limit {
		ms = ms[len(ms)-limit:]
	}
	for _, m := range ms {
		v := ViewOf(m)
		v.File = s.fileInfoLocked(&m)
		page.Messages = append(page.Messages, v)
	}
	return page, s.changed
}

func (s *Sandbox) controlPost(w http.ResponseWriter, r *http.Request) {
	var req PostRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil {
		controlFail(w, &InputError{Field: "body", Msg: "must be JSON {chat_id, open_id, text, ...}: " + err.Error()})
		return
	}
	if req.ChatType == "" {
		req.ChatType = ChatGroup
		s.mu.Lock()
		if c := s.chats[req.ChatID]; c != nil {
			req.ChatType = c.typ
		}
		s.mu.Unlock()
	}
	var opts []SayOption
	if req.MentionBot {
		opts = append(opts, MentionBot())
	}
	if req.ReplyTo != "" {
		if req.InThread {
			opts = append(opts, ReplyInThread(req.ReplyTo))
		} else {
			opts = append(opts, ReplyTo(req.ReplyTo))
		}
	}
	d, err := s.UserSays(req.ChatID, req.ChatType, req.OpenID, req.Text, opts...)
	if err != nil {
		controlFail(w, err)
		return
	}
	skipped := false
	select {
	case <-d.Done():
		skipped = d.res.Skipped
	default:
	}
	writeJSON(w, http.StatusOK, nil, PostAnswer{MessageID: d.MessageID, EventID: d.EventID, Delivered: !skipped})
}

func (s *Sandbox) controlFile(w http.ResponseWriter, r *http.Request) {
	var req FileRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 2*MaxFileBytes)).Decode(&req); err != nil {
		controlFail(w, &InputError{Field: "body", Msg: "must be JSON {chat_id, open_id, name, data, ...}: " + err.Error()})
		return
	}
	if req.ChatType == "" {
		req.ChatType = ChatGroup
		s.mu.Lock()
		if c := s.chats[req.ChatID]; c != nil {
			req.ChatType = c.typ
		}
		s.mu.Unlock()
	}
	var opts []SayOption
	if req.MentionBot {
		opts = append(opts, MentionBot())
	}
	if req.ReplyTo != "" {
		if req.InThread {
			opts = append(opts, ReplyInThread(req.ReplyTo))
		} else {
			opts = append(opts, ReplyTo(req.ReplyTo))
		}
	}
	d, err := s.UserSendsFile(req.ChatID, req.ChatType, req.OpenID, req.Name, req.Data, req.Caption, opts...)
	if err != nil {
		controlFail(w, err)
		return
	}
	skipped := false
	select {
	case <-d.Done():
		skipped = d.res.Skipped
	default:
	}
	writeJSON(w, http.StatusOK, nil, PostAnswer{MessageID: d.MessageID, EventID: d.EventID, Delivered: !skipped})
}

func (s *Sandbox) controlClick(w http.ResponseWriter, r *http.Request) {
	var req ClickRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil {
		controlFail(w, &InputError{Field: "body", Msg: "must be JSON {message_id, button, open_id}: " + err.Error()})
		return
	}
	res, err := s.ClickButtonN(r.Context(), req.MessageID, req.OpenID, req.Button)
	if err != nil {
		var ie *InputError
		if errors.As(err, &ie) {
			controlFail(w, err)
			return
		}
		// The click happened; the bot answered badly. Lark shows the user an error toast.
		writeJSON(w, http.StatusOK, nil, ClickAnswer{Toast: Toast{Type: "error", Content: "the bot did not answer the click"}, Error: err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, nil, ClickAnswer{Toast: res.Toast, CardUpdated: res.CardUpdated})
}
