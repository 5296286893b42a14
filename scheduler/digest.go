package scheduler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"loopx/cards"
	"loopx/store"
	"loopx/templates"
)

// DigestConfig configures report digests.
type DigestConfig struct {
	Store *store.Store
	Cards *cards.Set // renders the report card
}

// Digests builds report digests: what happened on a goal in the finished window since its
// last digest, as a card in the goal's language, written to the outbox with the digest row
// in one transaction. The row is unique per (goal, window end), so replicas and restarts
// send each window once.
type Digests struct {
	cfg DigestConfig
}

// NewDigests checks cfg and returns Digests.
func NewDigests(cfg DigestConfig) (*Digests, error) {
	if cfg.Store == nil || cfg.Cards == nil {
		return nil, errors.New("digest config: Store and Cards are required")
	}
	return &Digests{cfg: cfg}, nil
}

// DigestResult is what building one digest did.
type DigestResult struct {
	Created  bool // false: a digest for this window exists already; nothing was sent
	DigestID int64
	Reason   string // for the tick row: "" when sent, "already_sent" when deduplicated
	Facts    store.DigestFacts
	Message  templates.Rendered
	Outbox   []store.OutboxInsert
}

// Scheduled builds the digest a report tick at fire asks for and queues it to the goal's
// bound chats (the owners by direct message when no chat is bound). It runs inside tx.
func (d *Digests) Scheduled(ctx context.Context, tx store.DB, goalID string, fire time.Time) (DigestResult, error) {
	return d.build(ctx, tx, ReportParams{GoalID: goalID, Now: fire}, "schedule")
}

// ReportParams asks for a digest now (the /report command).
type ReportParams struct {
	GoalID      string
	RequestedBy string // open_id
	// ChatID, when set, is where the digest goes (a reply to ReplyTo when set); otherwise
	// the goal's bound chats or owners.
	ChatID  string
	ReplyTo string
	Lang    string // "" = the goal's language
	Now     time.Time
}

// Report builds a digest for the window from the last digest to p.Now, inside tx (the
// router's transaction for the /report message), and queues it. The window ends at p.Now, so
// the next scheduled digest starts where this one ended.
func (d *Digests) Report(ctx context.Context, tx store.DB, p ReportParams) (DigestResult, error) {
	if p.GoalID == "" {
		return DigestResult{}, store.Errorf(store.ErrInvalid, "goal_id", "is empty; name the goal to report on")
	}
	if p.Now.IsZero() {
		p.Now = d.cfg.Store.Now()
	}
	return d.build(ctx, tx, p, "manual")
}

func (d *Digests) build(ctx context.Context, tx store.DB, p ReportParams, trigger string) (DigestResult, error) {
	var res DigestResult
	from, err := store.LastDigestEnd(ctx, tx, p.GoalID)
	if err != nil {
		return res, err
	}
	if from.IsZero() {
		if from, err = store.GoalCreatedAt(ctx, tx, p.GoalID); err != nil {
			return res, err
		}
	}
	if !from.Before(p.Now) {
		res.Reason = "already_sent"
		return res, nil
	}
	sched, err := store.ReportSchedule(ctx, tx, p.GoalID)
	if err != nil {
		return res, err
	}
	loc, err := time.LoadLocation(sched.TZ)
	if err != nil {
		loc = time.UTC
	}
	facts, err := store.ReadDigestFacts(ctx, tx, p.GoalID, from, p.Now, loc)
	if err != nil {
		return res, err
	}
	goal, err := store.GetGoal(ctx, tx, p.GoalID)
	if err != nil {
		return res, err
	}
	defaults, err := store.GetMachineDefaults(ctx, tx)
	if err != nil {
		return res, err
	}
	trail, err := decisionsIn(ctx, tx, p.GoalID, from, p.Now)
	if err != nil {
		return res, err
	}
	if trigger == "schedule" && facts.Nothing() && len(trail) == 0 && goal.Quiet(defaults) {
		// Nothing new: record the quiet window (the next digest starts after it and says how
		// long it was quiet) and send nothing.
		id, created, err := store.InsertDigest(ctx, tx, store.DigestInsert{
			GoalID: p.GoalID, WindowStart: from, WindowEnd: p.Now, Trigger: trigger, Lang: templates.Lang(facts.Lang),
			Facts: facts, Quiet: true,
		})
		if err != nil {
			return res, err
		}
		res.Facts, res.DigestID, res.Created, res.Reason = facts, id, created, "quiet"
		if !created {
			res.Reason = "already_sent"
		}
		return res, nil
	}
	if facts.QuietSince, err = store.QuietSince(ctx, tx, p.GoalID, from); err != nil {
		return res, err
	}
	lang := p.Lang
	if lang == "" {
		lang = facts.Lang
	}
	lang = templates.Lang(lang)
	id, created, err := store.InsertDigest(ctx, tx, store.DigestInsert{
		GoalID: p.GoalID, WindowStart: from, WindowEnd: p.Now, Trigger: trigger,
		RequestedBy: p.RequestedBy, Lang: lang, Facts: facts,
	})
	if err != nil {
		return res, err
	}
	res.Facts, res.DigestID, res.Created = facts, id, created
	if !created {
		res.Reason = "already_sent"
		return res, nil
	}
	if res.Message, err = d.cfg.Cards.Report(lang, facts, trail, loc, sched.HeartbeatNext); err != nil {
		return res, err
	}
	base := store.OutboxInsert{Kind: res.Message.Kind, Content: res.Message.Content, GoalID: p.GoalID}
	switch {
	case p.ChatID != "":
		o := base
		o.DedupeKey, o.ReceiveID, o.ReplyTo = store.DigestKey(id, p.ChatID), p.ChatID, p.ReplyTo
		res.Outbox = append(res.Outbox, o)
	case len(sched.Chats) > 0:
		for _, chat := range sched.Chats {
			o := base
			o.DedupeKey, o.ReceiveID = store.DigestKey(id, chat), chat
			res.Outbox = append(res.Outbox, o)
		}
	default:
		for _, owner := range sched.Owners {
			o := base
			o.DedupeKey, o.ReceiveIDType, o.ReceiveID = store.DigestKey(id, owner), "open_id", owner
			res.Outbox = append(res.Outbox, o)
		}
	}
	if _, err := store.InsertOutboxAll(ctx, tx, res.Outbox); err != nil {
		return res, fmt.Errorf("queue digest: %w", err)
	}
	return res, nil
}

// digestDecisions bounds the decisions one report lists.
const digestDecisions = 20

// decisionsIn lists the goal's decisions (finished, reopened, replanned) made in [from, to),
// newest first: the report says what was decided in its window.
func decisionsIn(ctx context.Context, db store.DB, goalID string, from, to time.Time) ([]store.GoalDecision, error) {
	trail, err := store.ListTrail(ctx, db, goalID, digestDecisions)
	if err != nil {
		return nil, err
	}
	var out []store.GoalDecision
	for _, d := range trail {
		if !d.CreatedAt.Before(from) && d.CreatedAt.Before(to) {
			out = append(out, d)
		}
	}
	return out, nil
}
