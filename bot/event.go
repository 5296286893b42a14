package bot

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	jsonv1 "github.com/go-json-experiment/json/v1"

	"loopx/router"
)

// frame is a Lark callback's JSON as LoopX reads it, in one decode: the v1 envelope (the URL
// challenge and its token), the v2 header, and a message event's fields. A message is then
// converted to the router's Message without another pass over the event (the SDK's typed
// event is many pointers and a second full decode); card callbacks, which need the SDK's
// answer types, are decoded again into them.
type frame struct {
	Type      string       `json:"type"`
	Challenge string       `json:"challenge"`
	Token     string       `json:"token"`
	Header    *frameHeader `json:"header"`
	Event     *messageBody `json:"event"`
}

type frameHeader struct {
	EventID   string `json:"event_id"`
	EventType string `json:"event_type"`
	Token     string `json:"token"`
}

// messageBody is the part of im.message.receive_v1's event LoopX reads. Other events' bodies
// share the member name "event"; their fields are not these and are ignored here.
// Members read only for their strings are values, not pointers: an absent one reads as empty
// either way, and a value costs no allocation.
type messageBody struct {
	Sender struct {
		SenderID struct {
			OpenID string `json:"open_id"`
		} `json:"sender_id"`
		SenderType string `json:"sender_type"`
	} `json:"sender"`
	Message *struct {
		MessageID   string `json:"message_id"`
		RootID      string `json:"root_id"`
		ParentID    string `json:"parent_id"`
		ThreadID    string `json:"thread_id"`
		ChatID      string `json:"chat_id"`
		ChatType    string `json:"chat_type"`
		MessageType string `json:"message_type"`
		Content     string `json:"content"`
		CreateTime  string `json:"create_time"`
		Mentions    []*struct {
			Key string `json:"key"`
			ID  struct {
				OpenID string `json:"open_id"`
			} `json:"id"`
			Name string `json:"name"`
		} `json:"mentions"`
	} `json:"message"`
}

// eventType is the callback's type: the v2 header's, else the v1 envelope's.
func (f *frame) eventType() string {
	if f.Header != nil {
		return f.Header.EventType
	}
	return f.Type
}

// token is the verification token the callback carries.
func (f *frame) token() string {
	if f.Header != nil {
		return f.Header.Token
	}
	return f.Token
}

// decodeFrame decodes plain, the callback's JSON, in one pass.
func decodeFrame(plain []byte) (*frame, error) {
	f := new(frame)
	if err := unmarshalJSON(plain, f); err != nil {
		return nil, err
	}
	return f, nil
}

// unmarshalJSON decodes what Lark sends with the JSON v2 decoder set to encoding/json's
// semantics (names matched without regard to case, duplicate names and invalid UTF-8
// accepted as v1 accepts them): the same answers as json.Unmarshal, from one pass over
// the input and fewer allocations instead of a validating scan followed by a reflective
// decode (the intake's largest cost per event).
func unmarshalJSON(data []byte, v any) error {
	return jsonv2.Unmarshal(data, v, jsonv1.DefaultOptionsV1())
}

// message turns a message event into the router's message: plain text for text and post
// messages (post flattened to its text runs), mentions as placeholders plus a list, the files
// it brings, and bot senders marked.
func (f *frame) message() (router.Message, error) {
	if f.Event == nil || f.Event.Message == nil {
		return router.Message{}, errors.New("event has no message")
	}
	var m router.Message
	if f.Header != nil {
		m.EventID = f.Header.EventID
	}
	msg := f.Event.Message
	m.MessageID = msg.MessageID
	if m.MessageID == "" {
		return router.Message{}, errors.New("message_id is empty")
	}
	if m.EventID == "" {
		// Lark's docs name message_id as the stable key when event ids differ between pushes.
		m.EventID = "msg:" + m.MessageID
	}
	m.ChatID, m.ChatType = msg.ChatID, router.ChatType(msg.ChatType)
	m.RootID, m.ParentID, m.ThreadID = msg.RootID, msg.ParentID, msg.ThreadID
	if ms, err := strconv.ParseInt(msg.CreateTime, 10, 64); err == nil {
		m.At = time.UnixMilli(ms).UTC()
	}
	m.SenderID = f.Event.Sender.SenderID.OpenID
	m.SenderIsBot = f.Event.Sender.SenderType == "app" || f.Event.Sender.SenderType == "bot"
	if len(msg.Mentions) > 0 {
		m.Mentions = make([]router.Mention, 0, len(msg.Mentions))
	}
	for _, mn := range msg.Mentions {
		if mn == nil {
			continue
		}
		m.Mentions = append(m.Mentions, router.Mention{Key: mn.Key, Name: mn.Name, OpenID: mn.ID.OpenID})
	}
	text, err := contentText(msg.MessageType, msg.Content)
	if err != nil {
		return router.Message{}, fmt.Errorf("read content of %s: %w", m.MessageID, err)
	}
	m.Text = text
	files, err := messageFiles(msg.MessageType, msg.Content)
	if err != nil {
		return router.Message{}, fmt.Errorf("read files of %s: %w", m.MessageID, err)
	}
	for _, fr := range files {
		m.Files = append(m.Files, router.File{Key: fr.Key, Kind: fr.Kind, Name: fr.Name})
	}
	return m, nil
}
