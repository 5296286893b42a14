package router

import (
	"encoding/json"
	"time"
)

// ChatType tells a one-to-one chat with the bot from a group.
type ChatType string

const (
	ChatP2P   ChatType = "p2p"
	ChatGroup ChatType = "group"
)

// Message is one incoming chat message, free of any Lark SDK type.
type Message struct {
	EventID     string // transport event id; the exactly-once key
	ChatID      string
	ChatType    ChatType
	MessageID   string
	RootID      string // thread root message id, "" when not in a thread
	ParentID    string // the message this one replies to, "" when none
	ThreadID    string
	SenderID    string // open_id
	SenderIsBot bool   // sent by an app (any bot, this one included)
	Mentions    []Mention
	Text        string // plain text; mention placeholders (@_user_1) left in place
	At          time.Time
	// Files are the images and files the message brought (an image or file message, or a
	// post's images), to be downloaded from Lark and handed to the agent with the message.
	Files []File
}

// File is one image or file of a message, named by its Lark resource key.
type File struct {
	Key  string // image_key or file_key
	Kind string // image | file
	Name string // the file's name ("" for images)
}

// Mention is one @-mention in a message. Key is the placeholder that appears in Text.
type Mention struct {
	Key    string
	OpenID string
	Name   string
}

// CardAction is one click on a card button.
type CardAction struct {
	EventID    string
	OperatorID string // open_id of the person who clicked
	ChatID     string
	MessageID  string // the Lark message id of the card
	Token      string // Lark's delayed-update token
	Value      map[string]any
}

// CardResult answers a card click synchronously: a toast and, when the card changed, the new
// card JSON (Lark card 2.0) to show in place.
type CardResult struct {
	ToastKind string // "success", "info", "warning", "error"
	Toast     string
	Card      json.RawMessage // nil: leave the card as it is
}
