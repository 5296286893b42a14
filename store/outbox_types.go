package store

// OutboxInsert is one message for the bot sender to deliver, written in the transaction of the
// state change it reports. See the outbox table in migrations/00010_chat.sql.
type OutboxInsert struct {
	// DedupeKey makes the insert idempotent: a second insert with the same key is a no-op that
	// returns the first row. Empty means no dedupe beyond the row itself.
	DedupeKey     string
	Kind          string // "text", "card", "card_update", "reaction"
	ReceiveIDType string // "chat_id" (default) or "open_id" for a direct message to a person
	ReceiveID     string
	ReplyTo       string // Lark message id to reply to; "" sends a new message
	ReplyInThread bool
	UpdateOf      int64  // card_update: the outbox id of the card whose Lark message is patched
	TargetMessage string // reaction / patch target Lark message id, when already known
	Content       string // text, card JSON (2.0), or an emoji type for a reaction
	GoalID        string // what the message is about; replies in its thread route there
	AgentID       string
	SessionID     string
	GateID        int64
}
