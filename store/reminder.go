package store

import (
	"context"
	"fmt"
	"time"
)

// GateReminder is an open gate whose next reminder is due, with where to send it.
type GateReminder struct {
	Gate      Gate
	GoalTitle string
	Lang      string
	Owners    []string
	// Chats are the chats bound to the goal (whole-chat bindings first). Empty: remind the
	// owners by direct message.
	Chats []string
	// CardMessages maps a chat id to the Lark message id of the gate card sent there, so the
	// reminder can reply in its thread.
	CardMessages map[string]string
	// Ladder is the goal's reminder ladder (its own, or the machine default): the wait before
	// each reminder, the last repeating; from reminder EscalateAfter on, owners get it by
	// direct message too.
	Ladder        []time.Duration
	EscalateAfter int
}

// Wait is the delay before reminder n (1-based) of the ladder.
func (r GateReminder) Wait(n int) time.Duration {
	if len(r.Ladder) == 0 {
		return 30 * time.Minute
	}
	return r.Ladder[min(n-1, len(r.Ladder)-1)]
}

// reminderDue is when an open gate's next reminder is due: its recorded time, or, before
// its first, the first wait of its goal's ladder after it was asked.
const reminderDue = `g.status = 'open' AND coalesce(g.next_reminder_at,
	g.created_at + (coalesce(o.reminder_minutes, d.reminder_minutes))[1] * interval '1 minute')`

// LockDueGateReminders locks, in the caller's transaction, up to limit open gates whose
// reminder is due at now (a gate with no reminder yet is due first after `first`), FOR UPDATE
// SKIP LOCKED so replicas share them. The caller writes each reminder's outbox rows and
// SetGateReminder in the same transaction, so they commit together. An answered gate is no
// longer open, so it is never reminded.
func LockDueGateReminders(ctx context.Context, tx *Tx, now time.Time, limit int) ([]GateReminder, error) {
	rows, err := tx.Query(ctx, `SELECT g.id, g.goal_id, g.agent_id, g.kind, g.question, g.options,
			coalesce(g.todo_id, 0), g.status, g.card_version, g.reminders, g.created_at,
			o.title, o.lang, o.owners,
			coalesce((SELECT array_agg(b.chat_id ORDER BY b.thread_root, b.created_at)
			            FROM binding b WHERE b.goal_id = g.goal_id), '{}'),
			coalesce(o.reminder_minutes, d.reminder_minutes), coalesce(o.reminder_escalate_after, d.reminder_escalate_after)
		FROM gate g JOIN goal o ON o.id = g.goal_id CROSS JOIN machine_defaults d
		WHERE `+reminderDue+` <= $1
		ORDER BY g.id LIMIT $2 FOR UPDATE OF g SKIP LOCKED`, now, limit)
	if err != nil {
		return nil, fmt.Errorf("claim due gate reminders: %w", mapErr(err))
	}
	var due []GateReminder
	for rows.Next() {
		var r GateReminder
		g := &r.Gate
		var minutes []int
		if err := rows.Scan(&g.ID, &g.GoalID, &g.AgentID, &g.Kind, &g.Question, &g.Options, &g.TodoID,
			&g.Status, &g.CardVersion, &g.Reminders, &g.CreatedAt, &r.GoalTitle, &r.Lang, &r.Owners, &r.Chats,
			&minutes, &r.EscalateAfter); err != nil {
			rows.Close()
			return nil, fmt.Errorf("scan gate reminder: %w", mapErr(err))
		}
		for _, m := range minutes {
			r.Ladder = append(r.Ladder, time.Duration(m)*time.Minute)
		}
		r.Chats = uniq(r.Chats)
		due = append(due, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read gate reminders: %w", mapErr(err))
	}
	for i := range due {
		cards, err := tx.Query(ctx, `SELECT receive_id, lark_message_id FROM outbox
			WHERE gate_id = $1 AND kind = 'card' AND receive_id_type = 'chat_id' AND lark_message_id <> ''
			ORDER BY id`, due[i].Gate.ID)
		if err != nil {
			return nil, fmt.Errorf("read gate cards: %w", mapErr(err))
		}
		due[i].CardMessages = map[string]string{}
		for cards.Next() {
			var chat, msg string
			if err := cards.Scan(&chat, &msg); err != nil {
				cards.Close()
				return nil, fmt.Errorf("scan gate card: %w", mapErr(err))
			}
			if _, ok := due[i].CardMessages[chat]; !ok {
				due[i].CardMessages[chat] = msg
			}
		}
		cards.Close()
	}
	return due, nil
}

func uniq(list []string) []string {
	seen := map[string]bool{}
	out := list[:0]
	for _, s := range list {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// SetGateReminder records that reminder number n of a gate was sent and when the next is due.
func SetGateReminder(ctx context.Context, db DB, gateID int64, n int, next time.Time) error {
	if _, err := db.Exec(ctx, `UPDATE gate SET reminders = $2, next_reminder_at = $3 WHERE id = $1`,
		gateID, n, next); err != nil {
		return fmt.Errorf("record gate reminder: %w", mapErr(err))
	}
	return nil
}

// NextGateReminder returns when the earliest open gate is next due for a reminder.
func (s *Store) NextGateReminder(ctx context.Context) (time.Time, bool, error) {
	var at *time.Time
	if err := s.DB().QueryRow(ctx, `SELECT min(coalesce(g.next_reminder_at,
			g.created_at + (coalesce(o.reminder_minutes, d.reminder_minutes))[1] * interval '1 minute'))
		FROM gate g JOIN goal o ON o.id = g.goal_id CROSS JOIN machine_defaults d WHERE g.status = 'open'`).Scan(&at); err != nil {
		return time.Time{}, false, fmt.Errorf("read next gate reminder: %w", mapErr(err))
	}
	if at == nil {
		return time.Time{}, false, nil
	}
	return *at, true, nil
}
