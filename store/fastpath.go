package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// FastMessage is a chat message for the agent of the chat's one whole-chat binding: the
// common case of chat traffic, which EnqueueFast writes without a transaction of its own.
type FastMessage struct {
	EventID   string // Lark's event id: the receipt reaction's outbox key is built from it
	ChatID    string
	MessageID string
	Sender    string // open_id
	Admin     bool   // the sender is a service admin: may message any goal
	Mode      string // inbox or queue; steer needs the live turn and never comes here
	Text      string
}

// FastOptions is what every message of one EnqueueFast call shares.
type FastOptions struct {
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

// EnqueueFast writes the whole effect of each message in one statement: its inbox item, the
// audit row and the receipt reaction's outbox row. Batching several messages into one
// statement (one commit) is what lets the chat keep up with a burst: every client round trip
// and commit costs about as much as the rows themselves.
//
// A message is taken only when its chat has exactly one whole-chat binding, the sender is an
// owner, member or admin of that goal, the agent resolves (the binding's, else the goal's
// default, else its only agent), the agent's inbox is below MaxPending, and the message was
// never handled: no inbox item names it and the general path did not record its message key
// (RecordLarkMessage). The item itself is the fast path's record of the message, under a
// unique index, so nothing else is written to deduplicate it; both paths take the message's
// lock (messageLockSQL) before they look, so a redelivery racing the first delivery on either
// path waits for it and then sees it. taken[i] reports message i; a message not taken had
// nothing written for it, and the caller decides it on the general, transactional path (which
// also answers duplicates). Message ids must be distinct within one call. On any error nothing
// at all was written.
//
// Who may message the goal (loopx_role) and which agent receives the message
// (loopx_message_agent) are the SQL functions the router's general path calls too.
func (s *Store) EnqueueFast(ctx context.Context, opts FastOptions, msgs []FastMessage) (taken []bool, err error) {
	if opts.Receipt == "" {
		return nil, Errorf(ErrInvalid, "receipt", "the receipt reaction is required")
	}
	n := len(msgs)
	keys, chats, messages, senders, modes, texts, uuids, reactions :=
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
		keys[i], chats[i], messages[i], senders[i], admins[i], modes[i], texts[i], uuids[i], reactions[i] =
			MessageEventID(m.MessageID), m.ChatID, m.MessageID, m.Sender, m.Admin, m.Mode, m.Text, newUUID(), ReactionKey(m.EventID)
	}
	// Every CTE sees one snapshot, taken after the messages' locks are held; rows flow msg →
	// ok → item → audit and receipt, so a message written at all is written whole. An item
	// insert that loses a race on its source message aborts the whole statement. The inbox
	// bound is checked against the snapshot, so concurrent writers at the bound may pass it by
	// at most their number (as in InsertInboxItem); within one batch it is exact.
	// The statement is planned once per connection (a generic plan): left to choose, the
	// planner re-plans it for every batch size, which costs four times its execution. The
	// setting is local to this transaction (fastSettingsSQL, read when the next statement is
	// bound), and the batch is one round trip.
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("enqueue bound messages: acquire connection: %w", mapErr(err))
	}
	defer conn.Release()
	taken = make([]bool, n)
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(fastSettingsSQL+strings.TrimPrefix(messageLocksSQL, "SELECT "), keys)
	b.Queue(enqueueFastSQL, chats, messages, senders, admins, modes, texts, uuids, reactions,
		opts.MaxPending, opts.Receipt).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var i int64
			if err := rows.Scan(&i); err != nil {
				return err
			}
			taken[i-1] = true
		}
		return rows.Err()
	})
	b.Queue("COMMIT")
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		// A failed statement leaves the transaction open and aborted: end it before the
		// connection goes back (the pool drops it if this fails too).
		_, _ = conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == abortCode {
			return nil, ErrFastAborted
		}
		return nil, fmt.Errorf("enqueue bound messages: %w", mapErr(err))
	}
	if conn.Conn().PgConn().TxStatus() != 'I' {
		return nil, errors.New("enqueue bound messages: the transaction did not commit")
	}
	return taken, nil
}

// fastSettingsSQL starts the statement that takes the messages' locks, so that it also sets,
// for the batch's transaction only: the generic plan for enqueueFastSQL, and no 'reactions'
// notification for the receipts it queues (migration 00151): the router wakes this
// process's sender itself, and the notification told every replica and PostgreSQL of each
// batch for nothing.
const fastSettingsSQL = `SELECT set_config('plan_cache_mode', 'force_generic_plan', true),
	set_config('loopx.quiet_reactions', 'on', true), `

// enqueueFastSQL is EnqueueFast's statement: $1..$8 are the messages' columns, $9 the inbox
// bound, $10 the receipt reaction.
const enqueueFastSQL = `
		WITH msg AS (
		    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bool[], $5::text[],
		                         $6::text[], $7::text[], $8::text[])
		        WITH ORDINALITY AS m(chat_id, message_id, sender, admin, mode, text, uuid, reaction_key, n)
		), bound AS (
		    SELECT m.n, b.goal_id, b.agent_id, count(*) OVER (PARTITION BY m.n) AS bindings
		    FROM msg m JOIN binding b ON b.chat_id = m.chat_id AND b.thread_root = ''
		), target AS (
		    SELECT m.*, b.goal_id, ma.agent_id
		    FROM msg m JOIN bound b ON b.n = m.n AND b.bindings = 1 JOIN goal g ON g.id = b.goal_id
		    CROSS JOIN LATERAL loopx_message_agent(b.goal_id, b.agent_id) ma
		    WHERE loopx_role(g.owners, g.members, m.sender, m.admin) <> 'stranger'
		), fresh AS (
		    -- Never handled: no item names the message (for any agent: a binding changed
		    -- between two deliveries must not make a second one), and the general path did not
		    -- record it. Scalar subqueries, not NOT EXISTS: the planner would make those anti
		    -- joins and hash the whole table.
		    SELECT t.*, row_number() OVER (PARTITION BY t.goal_id, t.agent_id ORDER BY t.n) AS k
		    FROM target t
		    WHERE t.agent_id IS NOT NULL
		      AND (SELECT i.id FROM inbox_item i WHERE i.source_message = t.message_id
		           AND i.source_message <> '' LIMIT 1) IS NULL
		      AND (SELECT e.event_id FROM lark_event e WHERE e.event_id = 'msg:' || t.message_id) IS NULL
		), waiting AS (
		    -- Counted once per agent, at most up to the bound: a batch of messages to one agent
		    -- must not count its inbox once per message.
		    SELECT a.goal_id, a.agent_id, (SELECT count(*) FROM (SELECT FROM inbox_item i
		           WHERE i.goal_id = a.goal_id AND i.agent_id = a.agent_id
		             AND i.state IN ('pending', 'delivered') LIMIT greatest($9::int, 0)) w) AS n
		    FROM (SELECT DISTINCT goal_id, agent_id FROM fresh) a
		), ok AS (
		    -- The k-th message of the batch for an agent fits when the agent has room for k.
		    SELECT f.* FROM fresh f JOIN waiting w USING (goal_id, agent_id)
		    WHERE $9::int <= 0 OR w.n + f.k <= $9::int
		), item AS (
		    -- A queue item records the live turn it waits out, as InsertInboxItem does.
		    INSERT INTO inbox_item (goal_id, agent_id, mode, text, sender, source_chat, source_message, turn_id)
		    SELECT ok.goal_id, ok.agent_id, ok.mode, ok.text, ok.sender, ok.chat_id, ok.message_id,
		           CASE WHEN ok.mode = 'queue' THEN (SELECT t.id FROM turn t WHERE t.goal_id = ok.goal_id
		                AND t.agent_id = ok.agent_id AND t.state = 'live') END
		    FROM ok ORDER BY ok.n
		    ON CONFLICT (source_message, goal_id, agent_id) WHERE source_message <> '' DO NOTHING
		    RETURNING id, goal_id, agent_id, source_message
		), done AS (
		    SELECT ok.n, ok.sender, ok.chat_id, ok.message_id, ok.mode, ok.uuid, ok.reaction_key,
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
		    SELECT uuid, reaction_key, 'reaction', chat_id, message_id, $10, goal_id, agent_id
		    FROM done ORDER BY n
		)
		SELECT n FROM done
		UNION ALL
		SELECT loopx_abort('an inbox item appeared concurrently for a message of this batch')
		WHERE (SELECT count(*) FROM ok) <> (SELECT count(*) FROM item)`
