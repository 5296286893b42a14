package cards

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"loopx/store"
	"loopx/templates"
)

// TurnCards renders the cards about turns: the live progress card (agent, todo, elapsed
// time, latest progress notes), which ends with the outcome and the evidence; the failure
// card of a turn that failed, timed out or produced nothing, with the log's last lines and
// owner-only [Retry now] [Pause agent]; and the breaker card telling the owners an agent was
// held. Every method runs inside the caller's transaction and reads through db.
type TurnCards struct {
	tpl         *templates.Set
	defaultLang string
}

// Turns is the set's turn card renderer.
func (s *Set) Turns() TurnCards { return TurnCards{tpl: s.tpl, defaultLang: s.Gates.defaultLang} }

// Destination is one chat (or person) a card about a goal goes to.
type Destination struct {
	ReceiveIDType string // chat_id | open_id
	ReceiveID     string
	ReplyTo       string // a thread binding's root
	Lang          string
}

// Destinations are where cards about goal go: each chat it is bound to (a thread binding in
// its thread), else, when toOwners, each owner by direct message.
func Destinations(ctx context.Context, db store.DB, goal store.Goal, defaultLang string, toOwners bool) ([]Destination, error) {
	binds, err := store.ListGoalBindings(ctx, db, goal.ID)
	if err != nil {
		return nil, err
	}
	var out []Destination
	seen := map[string]bool{}
	for _, b := range binds {
		if seen[b.ChatID] {
			continue
		}
		seen[b.ChatID] = true
		lang, err := ChatLang(ctx, db, b.ChatID, goal, defaultLang)
		if err != nil {
			return nil, err
		}
		out = append(out, Destination{ReceiveIDType: "chat_id", ReceiveID: b.ChatID, ReplyTo: b.ThreadRoot, Lang: lang})
	}
	if len(out) > 0 || !toOwners {
		return out, nil
	}
	for _, o := range goal.Owners {
		out = append(out, Destination{ReceiveIDType: "open_id", ReceiveID: o, Lang: GoalLang(goal, defaultLang)})
	}
	return out, nil
}

// TurnView is the data of a turn card.
type TurnView struct {
	GoalID, AgentID string
	TurnID          int64
	Short           string
	TodoID          int64
	TodoText        string
	Live            bool
	Started, Zone   string
	Elapsed         string
	Notes           []string
	State           string
	Empty           bool   // ended ok without evidence or progress
	Failure         bool   // failed, timed out or empty: owners are told, with actions
	Outcome         string // what the turn said, in words; "" when its state says it all
	StateWord       string // the state in the reader's language
	HaltedBy        string // who stopped the turn (a halted turn)
	Evidence        []EvidenceView
	LogTail         string
	LogLabel        string
	Owners          []string
	Held            bool   // the agent is held now
	Actions         bool   // [Retry now] [Pause agent] are offered
	Settled         string // "retry" | "pause" once an owner acted on the card
	SettledBy       string
	SettledAt       string
}

// EvidenceView is one piece of evidence on a turn card.
type EvidenceView struct {
	Summary, Ref string
	Files        []FileView
}

// FileView is a file as cards name it.
type FileView struct{ Name, Size string }

// ShortTurn is how people name a turn: t42.
func ShortTurn(id int64) string { return fmt.Sprintf("t%d", id) }

// IsFailure tells a turn whose end the owners must hear of: it failed, timed out, or ended
// ok without progress (no evidence, nothing moved). Stopped turns are not failures: an
// owner asked for them.
func IsFailure(t store.Turn) bool {
	switch t.State {
	case store.TurnFailed, store.TurnAbandoned:
		return true
	case store.TurnOK:
		return !t.Progress
	}
	return false
}

// Outcome says a turn's outcome for people: who halted it (a stopped turn's "halted by
// <who>[; detail]") and the rest. The rest is "" when the outcome only named the state
// (store.OutcomeSpent, or nothing), so the state's own word stands for it; LoopX's own
// outcomes read in the surface's words: word("killed") for store.OutcomeKilled,
// word("expired") for store.OutcomeExpired.
func Outcome(word func(key string) string, state, outcome string) (haltedBy, text string) {
	text = outcome
	if state == store.TurnStopped {
		if rest, ok := strings.CutPrefix(outcome, store.HaltedBy("")); ok {
			haltedBy, text, _ = strings.Cut(rest, "; ")
		}
	}
	switch text {
	case store.OutcomeSpent:
		text = ""
	case store.OutcomeKilled:
		text = word("killed")
	case store.OutcomeExpired:
		text = word("expired")
	}
	return haltedBy, text
}

// Settlement is what an owner did on a failure card.
type Settlement struct {
	Action string // retry | pause
	By     string
	At     time.Time
}

// View builds the card data of turn t of goal in lang as of now; agent is the turn's agent
// (for its hold), settled what an owner did on the card (nil: nothing yet).
func (tc TurnCards) View(ctx context.Context, db store.DB, lang string, goal store.Goal, agent store.Agent, t store.Turn, settled *Settlement, now time.Time) (TurnView, error) {
	loc, zone := zoneOf(goal.HeartbeatTZ)
	v := TurnView{
		GoalID: t.GoalID, AgentID: t.AgentID, TurnID: t.ID, Short: ShortTurn(t.ID), TodoID: t.TodoID,
		Live: t.State == store.TurnLive, Started: t.StartedAt.In(loc).Format("15:04"), Zone: zone,
		State: t.State, Owners: goal.Owners, Notes: []string{}, Evidence: []EvidenceView{},
		Held: agent.HeldAt != nil && t.State != store.TurnLive, StateWord: tc.tpl.Word(lang, "turn.state."+t.State),
	}
	v.HaltedBy, v.Outcome = Outcome(func(k string) string { return tc.tpl.Word(lang, "turn."+k) }, t.State, t.Outcome)
	end := now
	if t.EndedAt != nil {
		end = *t.EndedAt
	}
	v.Elapsed = Duration(tc.tpl, lang, end.Sub(t.StartedAt))
	if t.TodoID != 0 {
		text, err := store.GetTodoText(ctx, db, t.TodoID)
		if err != nil {
			return v, err
		}
		v.TodoText = text
	}
	notes, err := store.ListTurnNotes(ctx, db, t.ID, 5)
	if err != nil {
		return v, err
	}
	for _, n := range notes {
		v.Notes = append(v.Notes, n.Text)
	}
	if v.Live {
		return v, nil
	}
	v.Failure = IsFailure(t)
	v.Empty = t.State == store.TurnOK && !t.Progress
	es, err := store.TurnEvidence(ctx, db, t.ID, 5)
	if err != nil {
		return v, err
	}
	if es, err = store.WithEvidenceFiles(ctx, db, es); err != nil {
		return v, err
	}
	for _, e := range es {
		ev := EvidenceView{Summary: e.Summary, Ref: e.Ref, Files: []FileView{}}
		for _, f := range e.Files {
			ev.Files = append(ev.Files, FileView{Name: f.Name, Size: store.HumanBytes(f.Size)})
		}
		v.Evidence = append(v.Evidence, ev)
	}
	if v.Failure && !v.Empty {
		v.LogTail, v.LogLabel = lastLines(t.LogTail, 12, 1500), tc.tpl.Word(lang, "turn.log")
		if v.LogTail == "" {
			// No log (a webhook's or a host's turn): the outcome is the error.
			v.LogTail, v.LogLabel = lastLines(t.Outcome, 12, 1500), tc.tpl.Word(lang, "turn.error")
		}
	}
	v.Actions = v.Failure && settled == nil
	if settled != nil {
		v.Settled, v.SettledBy = settled.Action, settled.By
		v.SettledAt = settled.At.UTC().Format("2006-01-02 15:04 UTC")
	}
	return v, nil
}

// Card renders the turn card of v in lang (the card, or its text when it is too large).
func (tc TurnCards) Card(lang string, v TurnView) (templates.Rendered, error) {
	r, err := tc.tpl.Render(lang, "turn", v)
	if err != nil {
		return templates.Rendered{}, fmt.Errorf("render turn card: %w", err)
	}
	return r, nil
}

// lastLines keeps the last n lines of s, at most max characters, trimmed.
func lastLines(s string, n, max int) string {
	s = strings.TrimRight(s, "\n\r\t ")
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	s = strings.Join(lines, "\n")
	if utf8.RuneCountInString(s) > max {
		r := []rune(s)
		s = "…" + string(r[len(r)-max:])
	}
	return s
}

// Duration words d for people in lang: "2 min 10 s", "3 h 5 min", "1 d 2 h".
func Duration(tpl *templates.Set, lang string, d time.Duration) string {
	d = max(d, 0).Round(time.Second)
	days, hours := int(d/(24*time.Hour)), int(d/time.Hour)%24
	mins, secs := int(d/time.Minute)%60, int(d/time.Second)%60
	w := func(key string, n int) string { return tpl.Word(lang, "duration."+key, n) }
	switch {
	case days > 0:
		if hours == 0 {
			return w("days", days)
		}
		return w("days", days) + " " + w("hours", hours)
	case hours > 0:
		if mins == 0 {
			return w("hours", hours)
		}
		return w("hours", hours) + " " + w("minutes", mins)
	case mins > 0:
		if secs == 0 {
			return w("minutes", mins)
		}
		return w("minutes", mins) + " " + w("seconds", secs)
	}
	return w("seconds", secs)
}

func zoneOf(tz string) (*time.Location, string) {
	loc, err := time.LoadLocation(tz)
	if err != nil || tz == "" {
		return time.UTC, "UTC"
	}
	return loc, tz
}

// BreakerView is the data of a breaker card.
type BreakerView struct {
	GoalID, AgentID string
	Failures        int
	LastOutcome     string
	Owners          []string
	Open            bool // held: offers [Resume agent]
	ResumedBy       string
	ResumedAt       string
}

// Breaker renders the cards telling the owners agent a was held after failures (every bound
// chat, else each owner), inside the holding transaction.
func (tc TurnCards) Breaker(ctx context.Context, db store.DB, goal store.Goal, a store.Agent, lastOutcome string) ([]store.OutboxInsert, error) {
	if a.HeldAt == nil {
		return nil, nil
	}
	dests, err := Destinations(ctx, db, goal, tc.defaultLang, true)
	if err != nil {
		return nil, err
	}
	v := BreakerView{GoalID: goal.ID, AgentID: a.ID, Failures: a.HeldFailures, LastOutcome: lastOutcome, Owners: goal.Owners, Open: true}
	var out []store.OutboxInsert
	for _, d := range dests {
		r, err := tc.tpl.Render(d.Lang, "breaker", v)
		if err != nil {
			return nil, fmt.Errorf("render breaker card: %w", err)
		}
		out = append(out, store.OutboxInsert{
			DedupeKey: store.BreakerCardKey(goal.ID, a.ID, a.HeldAt.Unix(), d.ReceiveID),
			Kind:      r.Kind, ReceiveIDType: d.ReceiveIDType, ReceiveID: d.ReceiveID, ReplyTo: d.ReplyTo,
			ReplyInThread: d.ReplyTo != "", Content: r.Content, GoalID: goal.ID, AgentID: a.ID,
		})
	}
	return out, nil
}

// BreakerUpdate is the store.AgentNotice of a resume: every breaker card posted for the hold
// that ended shows who resumed the agent, its button gone.
func (tc TurnCards) BreakerUpdate(ctx context.Context, db store.DB, before, after store.Agent, by string) ([]store.OutboxInsert, error) {
	if before.HeldAt == nil || after.HeldAt != nil || before.HeldReason != store.HeldFailures {
		return nil, nil
	}
	goal, err := store.GetGoal(ctx, db, after.GoalID)
	if err != nil {
		return nil, err
	}
	dests, err := Destinations(ctx, db, goal, tc.defaultLang, true)
	if err != nil {
		return nil, err
	}
	at := time.Now()
	if after.ResumedAt != nil {
		at = *after.ResumedAt
	}
	v := BreakerView{GoalID: goal.ID, AgentID: after.ID, Failures: before.HeldFailures, Owners: goal.Owners,
		ResumedBy: by, ResumedAt: at.UTC().Format("2006-01-02 15:04 UTC")}
	var out []store.OutboxInsert
	for _, d := range dests {
		card, err := store.GetOutboxByKey(ctx, db, store.BreakerCardKey(goal.ID, after.ID, before.HeldAt.Unix(), d.ReceiveID))
		if err != nil || card.ID == 0 || card.Kind != templates.KindCard {
			continue // no card there (bound later, or a text fallback)
		}
		body, err := tc.tpl.Card(d.Lang, "breaker", v)
		if err != nil {
			return nil, fmt.Errorf("render breaker update: %w", err)
		}
		out = append(out, store.OutboxInsert{
			DedupeKey: store.BreakerCardKey(goal.ID, after.ID, before.HeldAt.Unix(), d.ReceiveID) + ":resumed",
			Kind:      "card_update", ReceiveIDType: card.ReceiveIDType, ReceiveID: card.ReceiveID, UpdateOf: card.ID,
			Content: body, GoalID: goal.ID, AgentID: after.ID,
		})
	}
	return out, nil
}
