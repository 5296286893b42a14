package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
)

// FastMessage is a chat message for the agent of the chat's one whole-chat binding: the
// common case of chat traffic, which EnqueueFast writes without a transaction of its own.
type FastMessage struct {
	EventID   string // Lark's event id, recorded in lark_event
	ChatID    string
	MessageID string
	Sender    string // open_id
	Admin     bool   // the sender is a service admin: may message any goal
	Mode      string // inbox or queue; steer needs the live turn and never comes here
	Text      string
}

// FastOptions is what every message of one EnqueueFast call shares.
type FastOptions struct {
	EventType string
	// MaxPending bounds each agent's unacknowledged items, as for InsertInboxItem.
	MaxPending int
	// Receipt is the reaction (emoji type) put on a message once it is accepted.
	Receipt string
}

// abortCode is the SQLSTATE loopx_abort raises (migration 00012).
const abortCode = "LX001"

// ErrFastAborted reports that EnqueueFast's statement undid itself: nothing was written, and
// every message must take the general path.
var ErrFastAborted = errors.New("enqueue bound messages: aborted, nothing written")

// EnqueueFast writes the whole effect of each message in one statement: its event id, its
// inbox item, the audit row and the receipt reaction's outbox row. Batching several messages
// into one statement (one commit) is what lets the chat keep up with a burst: every client
// round trip and commit costs about as much as the rows themselves.
//
// A message is taken only when its chat has exactly one whole-chat binding, the sender is an
// owner, member or admin of that goal, the agent resolves (the binding's, else the goal's
// default, else its only agent), the agent's inbox is below MaxPending, the message is not
// already an item and its event and its message are new (lark_event holds both the event id
// and the message key, MessageEventID). taken[i] reports message i; a message not taken had
// nothing written for it (but for its event id, when another path was recording the same
// message at the same moment: it is a duplicate then), and the caller decides it on the
// general, transactional path (which also answers duplicates). Event and message ids must be distinct within one call. On any
// error nothing at all was written.
//
// Who may message the goal (loopx_role) and which agent receives the message
// (loopx_message_agent) are the SQL functions the router's general path calls too.
func (s *Store) EnqueueFast(ctx context.Context, opts FastOptions, msgs []FastMessage) (taken []bool, err error) {
	if opts.EventType == "" || opts.Receipt == "" {
		return nil, Errorf(ErrInvalid, "event_type", "event type and receipt are required")
	}
	n := len(msgs)
	events, chats, messages, senders, modes, texts, uuids, reactions :=
		make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n),
		make([]string, n), make([]string, n), make([]string, n)
	admins := make([]bool, n)
	for i, m := range msgs {
		if err := CheckEventID(m.EventID); err != nil {
			return nil, err
		}
		switch {
		case m.ChatID == "" || m.MessageID == "" || m.Sender == "":
			return nil, Errorf(ErrInvalid, "chat_id", "chat, message and sender are required")
		case m.Mode != ModeInbox && m.Mode != ModeQueue:
			return nil, Errorf(ErrInvalid, "mode", "%q is not inbox or queue", m.Mode)
		case m.Text == "":
			return nil, Errorf(ErrInvalid, "text", "is empty; there is nothing to deliver")
		}
		events[i], chats[i], messages[i], senders[i], admins[i], modes[i], texts[i], uuids[i], reactions[i] =
			m.EventID, m.ChatID, m.MessageID, m.Sender, m.Admin, m.Mode, m.Text, newUUID(), ReactionKey(m.EventID)
	}
	// Every CTE sees one snapshot; rows flow msg → ok → ev → item → audit and receipt, so a
	// message written at all is written whole. ev skips redelivered events. An item insert
	// that loses a race on its source message after ev wrote aborts the whole statement. The
	// inbox bound is checked against the snapshot, so concurrent writers at the bound may pass
	// it by at most their number (as in InsertInboxItem); within one batch it is exact.
	rows, err := s.DB().Query(ctx, `
		WITH msg AS (
		    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bool[],
		                         $6::text[], $7::text[], $8::text[], $12::text[])
		        WITH ORDINALITY AS m(event_id, chat_id, message_id, sender, admin, mode, text, uuid, reaction_key, n)
		), bound AS (
		    SELECT m.n, b.goal_id, b.agent_id, count(*) OVER (PARTITION BY m.n) AS bindings
		    FROM msg m JOIN binding b ON b.chat_id = m.chat_id AND b.thread_root = ''
		), target AS (
		    SELECT m.*, b.goal_id, loopx_message_agent(b.goal_id, b.agent_id) AS agent_id
		    FROM msg m JOIN bound b ON b.n = m.n AND b.bindings = 1 JOIN goal g ON g.id = b.goal_id
		    WHERE loopx_role(g.owners, g.members, m.sender, m.admin) <> 'stranger'
		), fresh AS (
		    -- A scalar subquery, not NOT EXISTS: the planner would make that an anti join
		    -- and hash the whole table.
		    SELECT t.*, row_number() OVER (PARTITION BY t.goal_id, t.agent_id ORDER BY t.n) AS k
		    FROM target t
		    WHERE t.agent_id IS NOT NULL
		      AND (SELECT i.id FROM inbox_item i WHERE i.source_message = t.message_id
		           AND i.source_message <> '' AND i.goal_id = t.goal_id AND i.agent_id = t.agent_id LIMIT 1) IS NULL
		), waiting AS (
		    -- Counted once per agent, at most up to the bound: a batch of messages to one agent
		    -- must not count its inbox once per message.
		    SELECT a.goal_id, a.agent_id, (SELECT count(*) FROM (SELECT FROM inbox_item i
		           WHERE i.goal_id = a.goal_id AND i.agent_id = a.agent_id
		             AND i.state IN ('pending', 'delivered') LIMIT greatest($9::int, 0)) w) AS n
		    FROM (SELECT DISTINCT goal_id, agent_id FROM fresh) a
		), ok AS (
		    -- The k-th message of the batch for an agent fits when the agent has room for k.
		    -- A message already handled under another event id (its message key is in
		    -- lark_event) is a redelivery: not taken here, answered as a duplicate there.
		    SELECT f.* FROM fresh f JOIN waiting w USING (goal_id, agent_id)
		    WHERE ($9::int <= 0 OR w.n + f.k <= $9::int)
		      AND (SELECT e.event_id FROM lark_event e WHERE e.event_id = 'msg:' || f.message_id) IS NULL
		), ev AS (
		    -- Both keys of a message: Lark's event id and the message id Lark names as the
		    -- stable key (a redelivery may come under a new event id).
		    INSERT INTO lark_event (event_id, event_type)
		    SELECT k.key, $10 FROM ok, LATERAL (VALUES (ok.event_id, 1), ('msg:' || ok.message_id, 2)) AS k(key, o)
		    WHERE k.o = 1 OR ok.event_id <> 'msg:' || ok.message_id
		    ORDER BY ok.n, k.o
		    ON CONFLICT (event_id) DO NOTHING
		    RETURNING event_id
		), new_msg AS (
		    SELECT ok.* FROM ok
		    WHERE ok.event_id IN (SELECT event_id FROM ev) AND 'msg:' || ok.message_id IN (SELECT event_id FROM ev)
		), item AS (
		    -- A queue item records the live turn it waits out, as InsertInboxItem does.
		    INSERT INTO inbox_item (goal_id, agent_id, mode, text, sender, source_chat, source_message, turn_id)
		    SELECT ok.goal_id, ok.agent_id, ok.mode, ok.text, ok.sender, ok.chat_id, ok.message_id,
		           CASE WHEN ok.mode = 'queue' THEN (SELECT t.id FROM turn t WHERE t.goal_id = ok.goal_id
		                AND t.agent_id = ok.agent_id AND t.state = 'live') END
		    FROM new_msg ok ORDER BY ok.n
		    ON CONFLICT (source_message, goal_id, agent_id) WHERE source_message <> '' DO NOTHING
		    RETURNING id, goal_id, agent_id, source_message
		), done AS (
		    SELECT ok.n, ok.event_id, ok.sender, ok.chat_id, ok.message_id, ok.mode, ok.uuid, ok.reaction_key,
		           item.id, item.goal_id, item.agent_id
		    FROM item JOIN ok ON ok.message_id = item.source_message
		                     AND ok.goal_id = item.goal_id AND ok.agent_id = item.agent_id
		), audited AS (
		    INSERT INTO audit (actor, surface, action, goal_id, target, allowed, detail)
		    SELECT sender, 'chat', 'chat.message', goal_id, 'inbox:' || id, true,
		           jsonb_build_object('agent_id', agent_id, 'mode', mode, 'session_id', '')
		    FROM done ORDER BY n
		), receipt AS (
		    INSERT INTO outbox (uuid, dedupe_key, kind, receive_id, target_message, content, goal_id, agent_id)
		    SELECT uuid, reaction_key, 'reaction', chat_id, message_id, $11,
		           goal_id, agent_id
		    FROM done ORDER BY n
		)
		SELECT n FROM done
		UNION ALL
		SELECT loopx_abort('an inbox item appeared concurrently for a message of this batch')
		WHERE (SELECT count(*) FROM new_msg) <> (SELECT count(*) FROM item)`,
		events, chats, messages, senders, admins, modes, texts, uuids,
		opts.MaxPending, opts.EventType, opts.Receipt, reactions)
	if err != nil {
		return nil, fmt.Errorf("enqueue bound messages: %w", mapErr(err))
	}
	defer rows.Close()
	taken = make([]bool, n)
	for rows.Next() {
		var i int64
		if err := rows.Scan(&i); err != nil {
			return nil, fmt.Errorf("enqueue bound messages: %w", mapErr(err))
		}
		taken[i-1] = true
	}
	if err := rows.Err(); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == abortCode {
			return nil, ErrFastAborted
		}
		return nil, fmt.Errorf("enqueue bound messages: %w", mapErr(err))
	}
	return taken, nil
}
