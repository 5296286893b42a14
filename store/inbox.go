package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// Inbox delivery modes.
const (
	ModeInbox = "inbox" // kept until the agent drains it
	ModeQueue = "queue" // handed to the agent's next turn, never to the turn live when it was queued
	ModeSteer = "steer" // for the agent's live turn only
)

// Inbox item states.
const (
	InboxFetching  = "fetching" // its files are being downloaded from Lark; not handed out yet
	InboxPending   = "pending"
	InboxDelivered = "delivered"
	InboxAcked     = "acked"
	InboxExpired   = "expired"
)

// InboxItem is one message addressed to an agent.
type InboxItem struct {
	ID            int64      `json:"item_id"`
	GoalID        string     `json:"goal_id"`
	AgentID       string     `json:"agent_id"`
	SessionID     string     `json:"session_id,omitempty"`
	Mode          string     `json:"mode"`
	Text          string     `json:"text"`
	Sender        string     `json:"sender"`
	SourceChat    string     `json:"source_chat,omitempty"`
	SourceMessage string     `json:"source_message,omitempty"`
	SourceThread  string     `json:"source_thread,omitempty"`
	State         string     `json:"state"`
	TurnID        int64      `json:"turn_id,omitempty"`
	Deliveries    int        `json:"deliveries"`
	DeliveredAt   *time.Time `json:"delivered_at,omitempty"`
	RedeliverAt   *time.Time `json:"redeliver_at,omitempty"`
	AckedAt       *time.Time `json:"acked_at,omitempty"`
	ExpiresAt     *time.Time `json:"expires_at,omitempty"`
	CreatedAt     time.Time  `json:"created_at"`
	// Files are the images and files the message brought (WithItemFiles fills them in).
	Files []Attachment `json:"files,omitempty"`
}

// InboxInsert is a new inbox item.
type InboxInsert struct {
	GoalID        string
	AgentID       string
	SessionID     string
	Mode          string // inbox | queue | steer; "" = inbox
	Text          string
	Sender        string
	SourceChat    string
	SourceMessage string // with goal and agent, unique: a redelivered message is one item
	SourceThread  string
	TurnID        int64 // steer: the live turn it is for (queue items record the live turn themselves)
	ExpiresAt     time.Time
	// Files the message brought: the item waits (state fetching) until the bot downloaded
	// them from Lark, then goes to its agent with them.
	Files []LarkFile
}

// InboxCounts counts an agent's waiting items.
type InboxCounts struct {
	Pending   int `json:"pending"`   // pending, plus delivered items whose ack time has passed
	Steer     int `json:"steer"`     // of which steer
	Delivered int `json:"delivered"` // drained, not yet acked, ack time not passed
}

const inboxColumns = `id, goal_id, agent_id, session_id, mode, text, sender, source_chat, source_message,
	source_thread, state, coalesce(turn_id, 0), deliveries, delivered_at, redeliver_at, acked_at,
	expires_at, created_at`

func scanInbox(row pgx.Row) (InboxItem, error) {
	var it InboxItem
	err := row.Scan(&it.ID, &it.GoalID, &it.AgentID, &it.SessionID, &it.Mode, &it.Text, &it.Sender,
		&it.SourceChat, &it.SourceMessage, &it.SourceThread, &it.State, &it.TurnID, &it.Deliveries,
		&it.DeliveredAt, &it.RedeliverAt, &it.AckedAt, &it.ExpiresAt, &it.CreatedAt)
	return it, err
}

func collectInbox(rows pgx.Rows, what string) ([]InboxItem, error) {
	return collect(rows, what, scanInbox)
}

// lockAgentInbox serialises drains of one agent's inbox for the rest of the transaction, so
// two drains never hand out the same items.
func lockAgentInbox(ctx context.Context, db DB, goalID, agentID string) error {
	_, err := db.Exec(ctx, `SELECT pg_advisory_xact_lock(727274101, hashtext($1 || '/' || $2))`, goalID, agentID)
	if err != nil {
		return fmt.Errorf("lock inbox: %w", mapErr(err))
	}
	return nil
}

// InsertInboxItem adds an item in the caller's transaction. The same source message for the
// same agent is one item: a repeat returns the first with created=false. A queue item records
// the agent's live turn, if any, as its turn: DrainInbox holds it back while that turn lives,
// so it reaches the next turn, never the live one. maxPending (> 0)
// bounds the agent's unacked items: at the bound it fails with ErrFull and writes nothing
// (concurrent enqueues racing at the bound may pass it by at most their number).
func InsertInboxItem(ctx context.Context, db DB, in InboxInsert, maxPending int) (item InboxItem, created bool, err error) {
	if in.Mode == "" {
		in.Mode = ModeInbox
	}
	switch {
	case in.GoalID == "":
		return InboxItem{}, false, Errorf(ErrInvalid, "goal_id", "is empty")
	case in.AgentID == "":
		return InboxItem{}, false, Errorf(ErrInvalid, "agent_id", "is empty")
	case in.Mode != ModeInbox && in.Mode != ModeQueue && in.Mode != ModeSteer:
		return InboxItem{}, false, Errorf(ErrInvalid, "mode", "%q is not inbox, queue or steer", in.Mode)
	case in.Text == "":
		return InboxItem{}, false, Errorf(ErrInvalid, "text", "is empty; there is nothing to deliver")
	case in.Sender == "":
		return InboxItem{}, false, Errorf(ErrInvalid, "sender", "is empty")
	}
	var turn any
	if in.TurnID != 0 {
		turn = in.TurnID
	}
	var expires any
	if !in.ExpiresAt.IsZero() {
		expires = in.ExpiresAt
	}
	// One statement and no per-agent lock: a burst of messages to one agent would otherwise
	// queue every chat transaction behind a lock held across client round trips, and most of
	// the burst would outlast Lark's retries. The limit is checked inside the insert, so
	// writers racing at it may pass it by at most their number.
	item, err = scanInbox(db.QueryRow(ctx, `
		INSERT INTO inbox_item (goal_id, agent_id, session_id, mode, text, sender, source_chat,
		                        source_message, source_thread, turn_id, expires_at, state)
		SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9,
		       CASE WHEN $4 = 'queue' THEN `+queueTurnSQL+` ELSE $10::bigint END, $11::timestamptz,
		       CASE WHEN $13::bool THEN 'fetching' ELSE 'pending' END
		WHERE $12::int <= 0 OR (SELECT count(*) FROM inbox_item
		      WHERE goal_id = $1 AND agent_id = $2 AND state IN ('pending', 'delivered')) < $12::int
		ON CONFLICT (source_message, goal_id, agent_id) WHERE source_message <> '' DO NOTHING
		RETURNING `+inboxColumns,
		in.GoalID, in.AgentID, in.SessionID, in.Mode, in.Text, in.Sender, in.SourceChat,
		in.SourceMessage, in.SourceThread, turn, expires, maxPending, len(in.Files) > 0))
	if err == nil {
		if len(in.Files) > 0 {
			if err := AddFetchesTx(ctx, db, in.GoalID, item.ID, in.SourceMessage, in.Files, item.CreatedAt); err != nil {
				return InboxItem{}, false, err
			}
		}
		return item, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return InboxItem{}, false, fmt.Errorf("insert inbox item: %w", mapErr(err))
	}
	// Nothing inserted: the source message is already an item, or the inbox is full.
	if in.SourceMessage != "" {
		it, err := scanInbox(db.QueryRow(ctx, `SELECT `+inboxColumns+` FROM inbox_item
			WHERE source_message = $1 AND goal_id = $2 AND agent_id = $3`, in.SourceMessage, in.GoalID, in.AgentID))
		if err == nil {
			return it, false, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return InboxItem{}, false, fmt.Errorf("find inbox item by source: %w", mapErr(err))
		}
	}
	var n int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM inbox_item
		WHERE goal_id = $1 AND agent_id = $2 AND state IN ('pending', 'delivered')`,
		in.GoalID, in.AgentID).Scan(&n); err != nil {
		return InboxItem{}, false, fmt.Errorf("count inbox items: %w", mapErr(err))
	}
	return InboxItem{}, false, Errorf(ErrFull, "inbox",
		"%s/%s already has %d unacknowledged items (limit %d); wait until the agent drains them",
		in.GoalID, in.AgentID, n, maxPending)
}

// queueTurnSQL is the turn a queue item for goal $1, agent $2 waits out: the agent's live turn
// when it is queued. (A live turn whose lease has passed holds nothing: see queueHeldSQL.)
const queueTurnSQL = `(SELECT t.id FROM turn t WHERE t.goal_id = $1 AND t.agent_id = $2 AND t.state = 'live')`

// queueHeldSQL is true for an inbox_item row that must not be handed out yet at $5 (now): a
// queue item whose turn (the one live when it was queued) is still live.
const queueHeldSQL = `(inbox_item.mode = 'queue' AND inbox_item.turn_id IS NOT NULL AND EXISTS (
	SELECT 1 FROM turn qt WHERE qt.id = inbox_item.turn_id AND qt.state = 'live' AND qt.lease_expires_at > $5))`

// DrainParams selects what DrainInbox hands out.
type DrainParams struct {
	GoalID    string
	AgentID   string
	SessionID string // "" = every item of the agent; else that session's items and session-less ones
	Limit     int    // 0 = 50; at most 200
	Now       time.Time
	// AckTimeout: a drained item not acked by Now+AckTimeout returns to pending.
	AckTimeout time.Duration
}

// DrainInbox returns the agent's pending items, steer items first and then oldest first, and
// marks them delivered. A queue item queued during a turn that is still live is not among
// them: it waits for the next turn. Before choosing, it returns timed-out deliveries to
// pending and expires items past their expiry.
func DrainInbox(ctx context.Context, db DB, p DrainParams) ([]InboxItem, error) {
	if p.GoalID == "" || p.AgentID == "" {
		return nil, Errorf(ErrInvalid, "agent", "goal_id and agent_id are required")
	}
	if p.Limit <= 0 {
		p.Limit = 50
	}
	p.Limit = min(p.Limit, 200)
	if p.AckTimeout <= 0 {
		return nil, Errorf(ErrInvalid, "ack_timeout", "must be positive")
	}
	if err := lockAgentInbox(ctx, db, p.GoalID, p.AgentID); err != nil {
		return nil, err
	}
	if err := requeue(ctx, db, p.GoalID, p.AgentID, p.Now); err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, `
		UPDATE inbox_item SET state = 'delivered', deliveries = deliveries + 1,
		       delivered_at = $5, redeliver_at = $6
		WHERE id IN (
			SELECT id FROM inbox_item
			WHERE goal_id = $1 AND agent_id = $2 AND state = 'pending'
			  AND ($3 = '' OR session_id IN ($3, ''))
			  AND NOT `+queueHeldSQL+`
			ORDER BY (mode = 'steer') DESC, id
			LIMIT $4
			FOR UPDATE)
		RETURNING `+inboxColumns,
		p.GoalID, p.AgentID, p.SessionID, p.Limit, p.Now, p.Now.Add(p.AckTimeout))
	if err != nil {
		return nil, fmt.Errorf("drain inbox: %w", mapErr(err))
	}
	items, err := collectInbox(rows, "drain inbox")
	if err != nil {
		return nil, err
	}
	// UPDATE … RETURNING does not keep the subquery's order.
	slices.SortFunc(items, func(a, b InboxItem) int {
		as, bs := a.Mode == ModeSteer, b.Mode == ModeSteer
		if as != bs {
			if as {
				return -1
			}
			return 1
		}
		return int(a.ID - b.ID)
	})
	return items, nil
}

func requeue(ctx context.Context, db DB, goalID, agentID string, now time.Time) error {
	_, err := db.Exec(ctx, `
		UPDATE inbox_item SET state = CASE
		         WHEN expires_at IS NOT NULL AND expires_at <= $3 THEN 'expired'
		         WHEN state = 'delivered' AND redeliver_at <= $3 THEN 'pending'
		         ELSE state END
		WHERE ($1 = '' OR (goal_id = $1 AND agent_id = $2))
		  AND ((state = 'delivered' AND redeliver_at <= $3)
		    OR (state IN ('pending', 'delivered') AND expires_at IS NOT NULL AND expires_at <= $3))`,
		goalID, agentID, now)
	if err != nil {
		return fmt.Errorf("requeue inbox items: %w", mapErr(err))
	}
	return nil
}

// RequeueInbox returns every timed-out delivery to pending and expires items past their
// expiry, for all agents. Drain does the same for its agent; this keeps counts honest for
// agents that stopped draining.
func RequeueInbox(ctx context.Context, db DB, now time.Time) error {
	return requeue(ctx, db, "", "", now)
}

// AckInbox marks drained items acked. Acking an acked item again is a no-op; an id that is not
// in this agent's inbox is ErrNotFound and an expired item is ErrRefused, and then nothing is
// acked. It returns the items as they are after the ack.
func AckInbox(ctx context.Context, db DB, goalID, agentID string, ids []int64, now time.Time) ([]InboxItem, error) {
	if len(ids) == 0 {
		return nil, Errorf(ErrInvalid, "item", "no item ids given")
	}
	rows, err := db.Query(ctx, `SELECT `+inboxColumns+` FROM inbox_item
		WHERE id = ANY($1) AND goal_id = $2 AND agent_id = $3 ORDER BY id FOR UPDATE`, ids, goalID, agentID)
	if err != nil {
		return nil, fmt.Errorf("read inbox items: %w", mapErr(err))
	}
	found, err := collectInbox(rows, "read inbox items")
	if err != nil {
		return nil, err
	}
	have := map[int64]InboxItem{}
	for _, it := range found {
		have[it.ID] = it
	}
	for _, id := range ids {
		it, ok := have[id]
		if !ok {
			return nil, Errorf(ErrNotFound, "item", "%d is not in the inbox of %s/%s", id, goalID, agentID)
		}
		if it.State == InboxExpired {
			return nil, Errorf(ErrRefused, "item", "%d expired before it was acknowledged", id)
		}
	}
	rows, err = db.Query(ctx, `
		UPDATE inbox_item SET state = 'acked', acked_at = $4, redeliver_at = NULL
		WHERE id = ANY($1) AND goal_id = $2 AND agent_id = $3 AND state IN ('pending', 'delivered')
		RETURNING `+inboxColumns, ids, goalID, agentID, now)
	if err != nil {
		return nil, fmt.Errorf("ack inbox items: %w", mapErr(err))
	}
	changed, err := collectInbox(rows, "ack inbox items")
	if err != nil {
		return nil, err
	}
	for _, it := range changed {
		have[it.ID] = it
	}
	out := make([]InboxItem, 0, len(ids))
	for _, id := range ids {
		out = append(out, have[id])
	}
	return out, nil
}

// GetInboxItem reads one item; ErrNotFound when it does not exist.
func GetInboxItem(ctx context.Context, db DB, id int64) (InboxItem, error) {
	it, err := scanInbox(db.QueryRow(ctx, `SELECT `+inboxColumns+` FROM inbox_item WHERE id = $1`, id))
	if err != nil {
		return InboxItem{}, fmt.Errorf("read inbox item %d: %w", id, mapErr(err))
	}
	return it, nil
}

// ListInbox lists an agent's items in the given states (none = all), oldest first.
func ListInbox(ctx context.Context, db DB, goalID, agentID string, states ...string) ([]InboxItem, error) {
	if states == nil {
		states = []string{}
	}
	rows, err := db.Query(ctx, `SELECT `+inboxColumns+` FROM inbox_item
		WHERE goal_id = $1 AND agent_id = $2 AND (cardinality($3::text[]) = 0 OR state = ANY($3))
		ORDER BY id LIMIT 1000`, goalID, agentID, states)
	if err != nil {
		return nil, fmt.Errorf("list inbox: %w", mapErr(err))
	}
	return collectInbox(rows, "list inbox")
}

// CountInbox counts an agent's waiting items at now.
func CountInbox(ctx context.Context, db DB, goalID, agentID string, now time.Time) (InboxCounts, error) {
	var c InboxCounts
	err := db.QueryRow(ctx, `
		SELECT count(*) FILTER (WHERE waiting),
		       count(*) FILTER (WHERE waiting AND mode = 'steer'),
		       count(*) FILTER (WHERE NOT waiting)
		FROM (
			SELECT mode, (state = 'pending' OR redeliver_at <= $3) AS waiting
			FROM inbox_item
			WHERE goal_id = $1 AND agent_id = $2 AND state IN ('pending', 'delivered')
			  AND (expires_at IS NULL OR expires_at > $3)
		) w`, goalID, agentID, now).Scan(&c.Pending, &c.Steer, &c.Delivered)
	if err != nil {
		return InboxCounts{}, fmt.Errorf("count inbox: %w", mapErr(err))
	}
	return c, nil
}

// ExpireStaleSteer expires steer items never handed out whose turn is no longer live: a steer
// is for one live turn and is never handed to a later one. (A steer the turn did take and did
// not ack is redelivered like any item: a crash must not lose it.) goalID "" covers every
// agent. It returns the expired items so the caller can tell their senders.
func ExpireStaleSteer(ctx context.Context, db DB, goalID, agentID string) ([]InboxItem, error) {
	rows, err := db.Query(ctx, `
		UPDATE inbox_item i SET state = 'expired', redeliver_at = NULL
		WHERE ($1 = '' OR (i.goal_id = $1 AND i.agent_id = $2))
		  AND i.mode = 'steer' AND i.state = 'pending' AND i.deliveries = 0 AND i.turn_id IS NOT NULL
		  AND NOT EXISTS (SELECT 1 FROM turn t WHERE t.id = i.turn_id AND t.state = 'live')
		RETURNING `+inboxColumns, goalID, agentID)
	if err != nil {
		return nil, fmt.Errorf("expire stale steer items: %w", mapErr(err))
	}
	return collectInbox(rows, "expire stale steer items")
}

// CountPendingInbox counts inbox items not yet acknowledged (the inbox depth gauge).
func (s *Store) CountPendingInbox(ctx context.Context) (int64, error) {
	var n int64
	if err := s.DB().QueryRow(ctx, `SELECT count(*) FROM inbox_item WHERE state IN ('pending', 'delivered')`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count pending inbox items: %w", mapErr(err))
	}
	return n, nil
}
