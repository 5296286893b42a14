package scheduler

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"loopx/cards"
	"loopx/store"
	"loopx/templates"
)

// ReminderConfig configures gate reminders.
type ReminderConfig struct {
	Store     *store.Store
	Templates *templates.Set
	// The waits before each reminder and the reminder from which every owner also gets it
	// by direct message are each goal's reminder ladder (its own or the machine default:
	// store.MachineDefaults.ReminderMinutes, ReminderEscalateAfter).
	// Batch is how many gates one transaction reminds; 0 means 100.
	Batch int
}

// Reminders reminds owners of open gates. Reminders are deduplicated by gate, reminder
// number and recipient (the outbox dedupe key), never by text, so a retried or concurrent
// sweep sends each reminder once. Answered gates are not open and are never reminded; the
// scheduler never expires or answers a gate.
type Reminders struct {
	cfg ReminderConfig
}

// NewReminders checks cfg and returns Reminders.
func NewReminders(cfg ReminderConfig) (*Reminders, error) {
	if cfg.Store == nil || cfg.Templates == nil {
		return nil, errors.New("reminder config: Store and Templates are required")
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 100
	}
	return &Reminders{cfg: cfg}, nil
}

// NextDue returns when the earliest open gate is next due for a reminder.
func (r *Reminders) NextDue(ctx context.Context) (time.Time, bool, error) {
	return r.cfg.Store.NextGateReminder(ctx)
}

// Sweep sends every reminder due at now and returns how many gates it reminded.
func (r *Reminders) Sweep(ctx context.Context, now time.Time) (int, error) {
	total := 0
	for {
		n := 0
		err := r.cfg.Store.WithTx(ctx, func(tx *store.Tx) error {
			due, err := store.LockDueGateReminders(ctx, tx, now, r.cfg.Batch)
			if err != nil {
				return err
			}
			n = len(due)
			for _, g := range due {
				if err := r.remind(ctx, tx, now, g); err != nil {
					return err
				}
			}
			return nil
		})
		total += n
		if err != nil {
			return total, err
		}
		if n < r.cfg.Batch {
			return total, nil
		}
	}
}

type reminderData struct {
	GateID    int64
	GoalID    string
	GoalTitle string
	Question  string   // in the reminder's language (cards.GateWords)
	Labels    []string // the gate's options, as they read in the reminder's language
	Number    int
	Escalated bool
	Waiting   string
	Mentions  []string
}

// remind sends reminder n of gate g: to each bound chat in the chat's language (else the
// goal's), else, and on escalation as well, to each owner directly in the goal's language.
func (r *Reminders) remind(ctx context.Context, tx *store.Tx, now time.Time, g store.GateReminder) error {
	n := g.Gate.Reminders + 1
	data := reminderData{
		GateID: g.Gate.ID, GoalID: g.Gate.GoalID, GoalTitle: g.GoalTitle, Number: n, Escalated: n >= g.EscalateAfter,
		Waiting: now.Sub(g.Gate.CreatedAt).Round(time.Minute).String(),
	}
	render := func(lang string, mentions []string) (templates.Rendered, error) {
		d := data
		d.Question, d.Labels = cards.GateWords(r.cfg.Templates, lang, g.Gate)
		d.Mentions = mentions
		msg, err := r.cfg.Templates.Render(lang, "gate_reminder", d)
		if err != nil {
			return templates.Rendered{}, fmt.Errorf("render gate reminder: %w", err)
		}
		return msg, nil
	}
	var mentions []string
	if data.Escalated {
		mentions = g.Owners
	}
	var rows []store.OutboxInsert
	for _, chat := range g.Chats {
		lang, err := store.GetChatLang(ctx, tx, chat)
		if err != nil {
			return err
		}
		msg, err := render(cmp.Or(lang, g.Lang), mentions)
		if err != nil {
			return err
		}
		rows = append(rows, store.OutboxInsert{
			DedupeKey: store.GateReminderKey(g.Gate.ID, n, chat), Kind: msg.Kind, ReceiveIDType: "chat_id", ReceiveID: chat,
			ReplyTo: g.CardMessages[chat], ReplyInThread: g.CardMessages[chat] != "",
			Content: msg.Content, GoalID: g.Gate.GoalID, AgentID: g.Gate.AgentID, GateID: g.Gate.ID,
		})
	}
	// Unbound goals are reminded by direct message; escalation reaches every owner directly
	// as well, whether or not a chat is bound.
	if len(g.Chats) == 0 || data.Escalated {
		direct, err := render(g.Lang, nil)
		if err != nil {
			return err
		}
		for _, owner := range g.Owners {
			rows = append(rows, store.OutboxInsert{
				DedupeKey: store.GateReminderKey(g.Gate.ID, n, owner), Kind: direct.Kind, ReceiveIDType: "open_id", ReceiveID: owner,
				Content: direct.Content, GoalID: g.Gate.GoalID, AgentID: g.Gate.AgentID, GateID: g.Gate.ID,
			})
		}
	}
	if _, err := store.InsertOutboxAll(ctx, tx, rows); err != nil {
		return fmt.Errorf("queue gate reminder: %w", err)
	}
	return store.SetGateReminder(ctx, tx, g.Gate.ID, n, now.Add(g.Wait(n+1)))
}
