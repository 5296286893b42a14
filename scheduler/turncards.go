package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"loopx/cards"
	"loopx/store"
)

// Turn cards: the sweep that keeps each turn's card in chat and the breaker.
const (
	// CardRefresh is the least time between two updates of turn cards in one chat: a
	// progress card changes in place at most this often, well inside Lark's 5 messages a
	// second per chat and 5 updates a second per message.
	CardRefresh = 5 * time.Second
	// cardElapsed refreshes a live card's elapsed time even when no note came.
	cardElapsed = time.Minute
	// cardBatch is how many turns one sweep transaction works on.
	cardBatch = 50
	// cardNotes is how many of the latest progress notes a card shows.
	cardNotes = 5
)

// TurnCards runs the turn-card sweep until nothing is left to do now: every turn with card
// work (store.LockTurnWork; another replica's are skipped) moves on in one transaction per
// batch, so each outbox row is written once whatever the replicas:
//
//   - a turn that opened gets its live progress card in the goal's bound chats when the
//     goal's progress_card setting (or the machine default, for exec and MCP turns) says so;
//   - a live card is updated in place when notes came (or every minute for the elapsed
//     time), at most once per CardRefresh per chat;
//   - an ended turn's card shows its outcome and evidence; a failed, timed-out or empty turn
//     that had no card gets a failure card (bound chats, else each owner), with owner-only
//     [Retry now] [Pause agent];
//   - after a failed or empty turn the breaker counts the agent's failures in a row; at the
//     goal's breaker_failures (or the machine default) it holds the agent, audits it and
//     posts one breaker card.
//
// It returns how many turns it moved on.
func (s *Scheduler) TurnCards(ctx context.Context) (int, error) {
	total := 0
	var after int64
	for {
		n, last, full, err := s.turnCardBatch(ctx, after)
		total += n
		if err != nil || !full {
			return total, err
		}
		after = last // the next page: turns waiting on their chats' spacing stay behind
	}
}

// turnCardBatch works on one page of turns after turn `after`; last is the page's last turn
// and full whether the page was full (more may follow).
func (s *Scheduler) turnCardBatch(ctx context.Context, after int64) (worked int, last int64, full bool, err error) {
	err = s.st.WithTx(ctx, func(tx *store.Tx) error {
		worked, last, full = 0, after, false
		now := s.now()
		turns, err := store.LockTurnWork(ctx, tx, after, now.Add(-cardElapsed), cardBatch)
		if err != nil {
			return err
		}
		for _, t := range turns {
			changed, err := s.turnCard(ctx, tx, t, now)
			if err != nil {
				return fmt.Errorf("turn card of turn %d: %w", t.ID, err)
			}
			if changed {
				worked++
			}
			last = t.ID
		}
		full = len(turns) == cardBatch
		return nil
	})
	return worked, last, full, err
}

// turnCard does what turn t's card needs now; changed reports whether anything moved on.
func (s *Scheduler) turnCard(ctx context.Context, tx *store.Tx, t store.Turn, now time.Time) (bool, error) {
	goal, err := store.GetGoal(ctx, tx, t.GoalID)
	if err != nil {
		return false, err
	}
	agent, err := store.GetAgentIn(ctx, tx, t.GoalID, t.AgentID)
	if err != nil {
		return false, err
	}
	defaults, err := store.GetMachineDefaults(ctx, tx)
	if err != nil {
		return false, err
	}
	live := t.State == store.TurnLive
	switch {
	case t.CardState == store.CardNew && live:
		state := store.CardQuiet
		if s.cfg.Cards != nil && goal.ProgressCardFor(defaults, t.Via) {
			posted, err := s.postTurnCard(ctx, tx, goal, agent, t, false, now)
			if err != nil {
				return false, err
			}
			if posted {
				state = store.CardLive
			}
		}
		return true, store.SetTurnCardState(ctx, tx, t.ID, state)
	case live && t.CardState == store.CardLive:
		return s.refreshTurnCard(ctx, tx, goal, agent, t, now, false)
	case live:
		return false, nil // quiet: nothing to show until it ends
	}
	// The turn ended.
	if cards.IsFailure(t) {
		if agent, err = s.breaker(ctx, tx, goal, agent, t, now); err != nil {
			return false, err
		}
	}
	if t.CardState == store.CardLive {
		done, err := s.refreshTurnCard(ctx, tx, goal, agent, t, now, true)
		if err != nil || !done {
			return false, err
		}
	} else if cards.IsFailure(t) && s.cfg.Cards != nil {
		if _, err := s.postTurnCard(ctx, tx, goal, agent, t, true, now); err != nil {
			return false, err
		}
	}
	return true, store.SetTurnCardState(ctx, tx, t.ID, store.CardDone)
}

// postTurnCard posts turn t's card: its progress card to the bound chats, or (failure) its
// failure card to the bound chats, else each owner. It reports whether a card went anywhere.
func (s *Scheduler) postTurnCard(ctx context.Context, tx *store.Tx, goal store.Goal, agent store.Agent, t store.Turn, failure bool, now time.Time) (bool, error) {
	tc := s.cfg.Cards.Turns()
	dests, err := cards.Destinations(ctx, tx, goal, s.cfg.Cards.DefaultLang(), failure)
	if err != nil {
		return false, err
	}
	for _, d := range dests {
		v, err := tc.View(ctx, tx, d.Lang, goal, agent, t, nil, now)
		if err != nil {
			return false, err
		}
		r, err := tc.Card(d.Lang, v)
		if err != nil {
			return false, err
		}
		id, _, err := store.InsertOutbox(ctx, tx, store.OutboxInsert{
			DedupeKey: store.TurnCardKey(t.ID, d.ReceiveID), Kind: r.Kind, ReceiveIDType: d.ReceiveIDType,
			ReceiveID: d.ReceiveID, ReplyTo: d.ReplyTo, ReplyInThread: d.ReplyTo != "", Content: r.Content,
			GoalID: goal.ID, AgentID: t.AgentID,
		})
		if err != nil {
			return false, err
		}
		if err := store.PutTurnCard(ctx, tx, store.TurnCard{TurnID: t.ID, ReceiveIDType: d.ReceiveIDType,
			ReceiveID: d.ReceiveID, OutboxID: id, Rev: t.NoteRev, ShownAt: now}); err != nil {
			return false, err
		}
	}
	return len(dests) > 0, nil
}

// refreshTurnCard updates turn t's cards that show less than it has now (final: its
// outcome), each chat at most once per CardRefresh. done reports whether every card is now
// up to date.
func (s *Scheduler) refreshTurnCard(ctx context.Context, tx *store.Tx, goal store.Goal, agent store.Agent, t store.Turn, now time.Time, final bool) (bool, error) {
	if s.cfg.Cards == nil {
		return true, nil
	}
	tc := s.cfg.Cards.Turns()
	list, err := store.ListTurnCards(ctx, tx, t.ID)
	if err != nil {
		return false, err
	}
	done, moved := true, false
	for _, c := range list {
		if !final && c.Rev >= t.NoteRev && now.Sub(c.ShownAt) < cardElapsed {
			continue // shows what there is to show
		}
		last, err := store.ChatCardShownAt(ctx, tx, c.ReceiveID)
		if err != nil {
			return false, err
		}
		if now.Sub(last) < CardRefresh {
			done = false // this chat saw a card change moments ago
			continue
		}
		card, err := store.GetOutbox(ctx, tx, c.OutboxID)
		if err != nil {
			return false, err
		}
		lang := cards.GoalLang(goal, s.cfg.Cards.DefaultLang())
		if c.ReceiveIDType == "chat_id" {
			if lang, err = cards.ChatLang(ctx, tx, c.ReceiveID, goal, s.cfg.Cards.DefaultLang()); err != nil {
				return false, err
			}
		}
		v, err := tc.View(ctx, tx, lang, goal, agent, t, nil, now)
		if err != nil {
			return false, err
		}
		r, err := tc.Card(lang, v)
		if err != nil {
			return false, err
		}
		rev := t.NoteRev
		key := store.TurnCardUpdateKey(t.ID, c.ReceiveID, rev)
		if final {
			key = store.TurnCardUpdateKey(t.ID, c.ReceiveID, -1)
		} else if c.Rev >= t.NoteRev {
			// Only the elapsed time changed: key the refresh by time, not by note.
			key += ":" + now.UTC().Format("150405")
		}
		in := store.OutboxInsert{DedupeKey: key, Kind: "card_update", ReceiveIDType: card.ReceiveIDType,
			ReceiveID: card.ReceiveID, UpdateOf: card.ID, Content: r.Content, GoalID: goal.ID, AgentID: t.AgentID}
		if r.Kind != "card" || card.Kind != "card" {
			// A card too large fell back to text: say it again as a message.
			in.Kind, in.UpdateOf = r.Kind, 0
		}
		if _, _, err := store.InsertOutbox(ctx, tx, in); err != nil {
			return false, err
		}
		if err := store.PutTurnCard(ctx, tx, store.TurnCard{TurnID: t.ID, ReceiveIDType: c.ReceiveIDType,
			ReceiveID: c.ReceiveID, OutboxID: c.OutboxID, Rev: rev, ShownAt: now}); err != nil {
			return false, err
		}
		moved = true
	}
	if final {
		return done, nil
	}
	return moved, nil
}

// breaker counts the agent's failures in a row after failed turn t and holds the agent at
// the goal's threshold: audited, and one card tells the owners. It returns the agent as it
// is now.
func (s *Scheduler) breaker(ctx context.Context, tx *store.Tx, goal store.Goal, agent store.Agent, t store.Turn, now time.Time) (store.Agent, error) {
	defaults, err := store.GetMachineDefaults(ctx, tx)
	if err != nil {
		return agent, err
	}
	limit := goal.Breaker(defaults)
	if limit <= 0 || agent.HeldAt != nil {
		return agent, nil
	}
	if agent.ResumedAt != nil && !t.StartedAt.After(*agent.ResumedAt) {
		return agent, nil // it failed before the owner's resume: it no longer counts
	}
	n, err := store.FailuresInRow(ctx, tx, goal.ID, agent.ID)
	if err != nil || n < limit {
		return agent, err
	}
	held, ok, err := store.HoldAgentTx(ctx, tx, goal.ID, agent.ID, store.HeldFailures, "", n, now)
	if err != nil || !ok {
		return held, err
	}
	if err := store.InsertAudit(ctx, tx, store.Audit{At: now, Actor: store.ActorScheduler, Surface: "scheduler",
		Action: "agent.hold", GoalID: goal.ID, Target: store.AgentTarget(goal.ID, agent.ID), Allowed: true,
		Detail: mustJSON(map[string]any{"reason": store.HeldFailures, "failures": n, "limit": limit, "turn_id": t.ID})}); err != nil {
		return held, err
	}
	s.log.Warn("agent held by the breaker", "goal_id", goal.ID, "agent_id", agent.ID, "failures", n)
	if s.cfg.Cards == nil {
		return held, nil
	}
	rows, err := s.cfg.Cards.Turns().Breaker(ctx, tx, goal, held, t.Outcome)
	if err != nil {
		return held, err
	}
	_, err = store.InsertOutboxAll(ctx, tx, rows)
	return held, err
}

// nextCardDue is when a progress card waits to be refreshed (zero, false: none waits).
func (s *Scheduler) nextCardDue(ctx context.Context) (time.Time, bool) {
	at, ok, err := s.st.NextTurnCardDue(ctx)
	if err != nil || !ok {
		return time.Time{}, false
	}
	return at.Add(CardRefresh), true
}

// mustJSON encodes an audit detail (maps of plain values: encoding cannot fail).
func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}
