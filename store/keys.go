package store

import (
	"strconv"
	"unicode/utf8"
)

// Every key LoopX derives from an event, a row or a caller's token is built here, so one
// spelling holds across packages and across the rows already stored under it. Three kinds:
//
//   - receipt keys (table receipt): an operation's replay key;
//   - Lark event ids (table lark_event): what makes a redelivered event a no-op;
//   - outbox dedupe keys (outbox.dedupe_key): what makes a second insert of the same
//     message return the first row.

// MaxEventIDLen bounds a Lark event id (Lark's are 32 hex characters; the column allows more
// for ids derived from message ids).
const MaxEventIDLen = 200

// CheckEventID refuses an event id that is empty, too long or not UTF-8 text.
func CheckEventID(id string) error {
	switch {
	case id == "":
		return Errorf(ErrInvalid, "event_id", "is empty; every Lark event carries one")
	case len(id) > MaxEventIDLen:
		return Errorf(ErrInvalid, "event_id", "is %d characters; at most %d", len(id), MaxEventIDLen)
	case !utf8.ValidString(id):
		return Errorf(ErrInvalid, "event_id", "is not valid UTF-8 text")
	}
	return nil
}

// MaxLarkIDLen bounds every other id Lark sends (chat, message, thread, open_id, card token):
// Lark's are under 100 characters, and an unbounded one would fail at an index.
const MaxLarkIDLen = 200

// CheckLarkIDs refuses an id (named by its field) that is longer than MaxLarkIDLen or not
// UTF-8 text; empty ids pass (the caller says which are required).
func CheckLarkIDs(ids map[string]string) error {
	for field, id := range ids {
		if err := CheckLarkID(field, id); err != nil {
			return err
		}
	}
	return nil
}

// CheckLarkID is CheckLarkIDs for one id, field naming it.
func CheckLarkID(field, id string) error {
	switch {
	case len(id) > MaxLarkIDLen:
		return Errorf(ErrInvalid, field, "is %d characters; at most %d", len(id), MaxLarkIDLen)
	case !utf8.ValidString(id):
		return Errorf(ErrInvalid, field, "is not valid UTF-8 text")
	}
	return nil
}

// MessageEventID is the event id of a message event that came without one: Lark names the
// message id as the stable key of a message.
func MessageEventID(messageID string) string { return "msg:" + messageID }

// ReceiptKey is the receipt key of an operation its caller keyed: scoped by the actor, so
// two callers cannot collide on a key they chose.
func ReceiptKey(actor, idempotencyKey string) string { return actor + "|" + idempotencyKey }

// EventKey is the idempotency key of a kernel operation done on behalf of a Lark event (a
// chat command, a card click): a redelivery after a lost commit cannot apply it twice.
func EventKey(eventID string) string { return "lark:" + eventID }

// HeartbeatKey is the receipt key of should-run's answer for one turn instance: any call
// naming the instance replays it.
func HeartbeatKey(goalID, agentID, instance string) string {
	return "heartbeat|" + goalID + "|" + agentID + "|" + instance
}

// ReplyKey is the outbox key of the n-th reply (1-based) to a chat event.
func ReplyKey(eventID string, n int) string { return "evt:" + eventID + ":" + strconv.Itoa(n) }

// ReactionKey is the outbox key of the receipt reaction on an accepted message.
func ReactionKey(eventID string) string { return "evt:" + eventID + ":receipt" }

// ReportKey is the outbox key of the n-th message (0-based) of a /report answer.
func ReportKey(eventID string, n int) string {
	return "evt:" + eventID + ":report:" + strconv.Itoa(n)
}

// GateCardKey is the outbox key of a gate's card posted to one chat (toChat) or one person.
func GateCardKey(gateID int64, receiveID string, toChat bool) string {
	dest := ":ask:dm:"
	if toChat {
		dest = ":ask:chat:"
	}
	return "gate:" + strconv.FormatInt(gateID, 10) + dest + receiveID
}

// GateUpdateKey is the outbox key of the update of one gate card to a card version.
func GateUpdateKey(gateID int64, cardVersion int, cardOutboxID int64) string {
	return "gate:" + strconv.FormatInt(gateID, 10) + ":update:v" + strconv.Itoa(cardVersion) + ":" +
		strconv.FormatInt(cardOutboxID, 10)
}

// GateReminderKey is the outbox key of reminder n of a gate to one chat or person:
// reminders are deduplicated by gate, number and recipient, never by text.
func GateReminderKey(gateID int64, n int, receiveID string) string {
	return "gate-reminder:" + strconv.FormatInt(gateID, 10) + ":" + strconv.Itoa(n) + ":" + receiveID
}

// DigestKey is the outbox key of a digest sent to one chat or person.
func DigestKey(digestID int64, receiveID string) string {
	return "digest:" + strconv.FormatInt(digestID, 10) + ":" + receiveID
}

// InboxReplyKey is the outbox key of an agent's reply to an inbox item under the agent's
// reply key.
func InboxReplyKey(itemID int64, replyKey string) string {
	return "inbox-reply:" + strconv.FormatInt(itemID, 10) + ":" + replyKey
}

// SteerExpiredKey is the outbox key of the notice that a steer expired unread.
func SteerExpiredKey(itemID int64) string {
	return "inbox-steer-expired:" + strconv.FormatInt(itemID, 10)
}

// ProposalCardKey is the outbox key of a proposal's preview card posted to one chat or
// person.
func ProposalCardKey(proposalID int64, receiveID string) string {
	return "proposal:" + strconv.FormatInt(proposalID, 10) + ":card:" + receiveID
}

// ProposalUpdateKey is the outbox key of the update of one proposal card to a state.
func ProposalUpdateKey(proposalID int64, state string, cardOutboxID int64) string {
	return "proposal:" + strconv.FormatInt(proposalID, 10) + ":update:" + state + ":" +
		strconv.FormatInt(cardOutboxID, 10)
}

// SignInLinkKey is the outbox key of the sign-in link sent for one chat event.
func SignInLinkKey(eventID string) string { return "evt:" + eventID + ":signin" }

// Audit targets and actors: what an audit row names (Audit.Target) and who acted (Meta.Actor),
// one spelling each. A target is "<kind>:<id>"; "turn:<n>" always names a turn row's id, and a
// turn instance id a caller chose (for a turn that may not exist) is "turn-instance:<id>".
const (
	ActorAdmin     = "admin"     // the admin token
	ActorSystem    = "system"    // LoopX itself (sweeps, the demo seed)
	ActorScheduler = "scheduler" // a heartbeat or report fire
)

// AgentActor is how an agent acting with its token is named in the audit.
func AgentActor(goalID, agentID string) string { return "agent:" + goalID + "/" + agentID }

// AgentTarget names an agent as an audit target (spelled as the actor).
func AgentTarget(goalID, agentID string) string { return AgentActor(goalID, agentID) }

// GoalTarget names a goal as an audit target.
func GoalTarget(goalID string) string { return "goal:" + goalID }

// TodoTarget names a todo as an audit target.
func TodoTarget(id int64) string { return "todo:" + strconv.FormatInt(id, 10) }

// GateTarget names a gate as an audit target.
func GateTarget(id int64) string { return "gate:" + strconv.FormatInt(id, 10) }

// TurnTarget names a turn row as an audit target.
func TurnTarget(id int64) string { return "turn:" + strconv.FormatInt(id, 10) }

// TurnInstanceTarget names a turn by the instance id its caller chose, when no row may exist.
func TurnInstanceTarget(instance string) string { return "turn-instance:" + instance }

// EvidenceTarget names an evidence row as an audit target.
func EvidenceTarget(id int64) string { return "evidence:" + strconv.FormatInt(id, 10) }

// InboxTarget names an inbox item as an audit target.
func InboxTarget(id int64) string { return "inbox:" + strconv.FormatInt(id, 10) }

// ProposalTarget names a change proposal as an audit target.
func ProposalTarget(id int64) string { return "proposal:" + strconv.FormatInt(id, 10) }

// Keys of running the work from chat (turn cards, the breaker, heartbeats fired now, files).

// TurnCardKey is the outbox key of a turn's card (its live progress card, or its failure
// card when no progress card was shown) in one chat or to one person.
func TurnCardKey(turnID int64, receiveID string) string {
	return "turn:" + strconv.FormatInt(turnID, 10) + ":card:" + receiveID
}

// TurnCardUpdateKey is the outbox key of update rev of a turn's card; rev -1 is the final
// update showing the outcome.
func TurnCardUpdateKey(turnID int64, receiveID string, rev int) string {
	r := "final"
	if rev >= 0 {
		r = "r" + strconv.Itoa(rev)
	}
	return "turn:" + strconv.FormatInt(turnID, 10) + ":card:" + receiveID + ":" + r
}

// BreakerCardKey is the outbox key of the card telling the owners an agent was held, once
// per hold (held at unix seconds) and recipient.
func BreakerCardKey(goalID, agentID string, heldAt int64, receiveID string) string {
	return "breaker:" + goalID + "/" + agentID + ":" + strconv.FormatInt(heldAt, 10) + ":" + receiveID
}

// RunReplyKey is the outbox key of the answer to a heartbeat fired now.
func RunReplyKey(runRequestID int64) string { return "run:" + strconv.FormatInt(runRequestID, 10) }

// RunInstanceID is the turn instance id a heartbeat fired now opens: a replica that takes
// over a lapsed claim replays should-run under it instead of opening a second turn.
func RunInstanceID(runRequestID int64) string { return "run-" + strconv.FormatInt(runRequestID, 10) }

// FileRefusedKey is the outbox key of the answer telling a sender their file was not taken.
func FileRefusedKey(attachmentID int64) string {
	return "file-refused:" + strconv.FormatInt(attachmentID, 10)
}

// FileReplyKey is the outbox key of a file an agent sends back in reply to an inbox item.
func FileReplyKey(itemID int64, replyKey string) string {
	return "inbox-reply-file:" + strconv.FormatInt(itemID, 10) + ":" + replyKey
}

// AttachmentTarget names a stored file as an audit target.
func AttachmentTarget(id int64) string { return "file:" + strconv.FormatInt(id, 10) }
