package bot

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/sethvargo/go-retry"
)

// OutboxMessage is one claimed outbox row to deliver.
type OutboxMessage struct {
	ID            int64
	UUID          string // Lark's send dedupe key (≤ 50 chars)
	Kind          string // "text", "card", "card_update", "reaction", "file"
	ReceiveIDType string // "chat_id" or "open_id"
	ReceiveID     string
	ReplyTo       string
	ReplyInThread bool
	TargetMessage string // patch / reaction target (resolved for card updates)
	Content       string
	Attempts      int
	CreatedAt     time.Time
	// Reclaimed: an earlier claim of the row lapsed, so an earlier send may have reached Lark.
	Reclaimed bool
}

// Outbox is the sender's view of the outbox table (implemented over the store by cmd/loopx).
type Outbox interface {
	// Claim takes up to limit due rows of the lane for owner until the lease ends. In
	// LaneMessages at most one per chat, each the oldest unsent row of its chat; in
	// LaneReactions the due reactions in due order.
	Claim(ctx context.Context, lane Lane, owner string, limit int, lease time.Duration) ([]OutboxMessage, error)
	// MarkSent records the Lark message id ("" for reactions).
	MarkSent(ctx context.Context, id int64, larkMessageID string) error
	// MarkFailed gives up on the row, keeping Lark's code and a readable reason.
	MarkFailed(ctx context.Context, id int64, owner string, code int, reason string) error
	// Retry releases the row, due again after the delay.
	Retry(ctx context.Context, id int64, owner string, after time.Duration, code int, reason string, countAttempt bool) error
	// Release hands back every row owner holds.
	Release(ctx context.Context, owner string) error
	// NextDue tells how long until the lane's next pending row is due; ok=false when none is.
	NextDue(ctx context.Context, lane Lane) (wait time.Duration, ok bool, err error)
	// Listen calls wake with the lane of every outbox insert notification (for both lanes
	// when it may concern either) until ctx ends or it fails.
	Listen(ctx context.Context, wake func(Lane)) error
	// OpenFile reads a stored file an outbox row of kind file sends.
	OpenFile(ctx context.Context, fileID int64) (OutboxFile, error)
}

// Lane is a class of outbox rows sent independently of the other. Lark limits reactions apart
// from messages, and a reaction targets a message that already exists, so receipts need no
// place in their chat's order: a burst of receipts waiting for Lark's reaction budget never
// holds a reply back.
type Lane int

const (
	LaneMessages  Lane = iota // text, cards and card updates: each chat in commit order
	LaneReactions             // receipt reactions, in due order
)

func (l Lane) String() string {
	if l == LaneReactions {
		return "reactions"
	}
	return "messages"
}

// Budget is one cell-rate limit a send must fit: one send per Interval on average, bursts of
// up to Burst. Scope names what it counts ("app", "chat:<id>", "reaction", ...).
type Budget struct {
	Scope    string
	Interval time.Duration
	Burst    int
}

// Limiter is the send budget shared by every replica.
type Limiter interface {
	// Take books the earliest send that every budget allows. When that is at most maxWait
	// away it is reserved (reserved = true) and the caller sends after waiting wait;
	// otherwise nothing is booked and wait says when it could be.
	Take(ctx context.Context, budgets []Budget, maxWait time.Duration) (wait time.Duration, reserved bool, err error)
}

// RateLimits are Lark's send limits the Limiter enforces. Lark limits each API per app, per
// second and per minute; messages also per chat. Zero fields take the defaults.
type RateLimits struct {
	PerChat         int           // message sends per Window to one chat (Lark: 5/s)
	PerApp          int           // message sends per Window for the app (Lark: 50/s)
	PerAppMinute    int           // message sends per 60 Windows for the app (Lark: 1,000/min)
	Reactions       int           // reactions added per Window by the app (Lark: 50/s)
	ReactionsMinute int           // reactions per 60 Windows (Lark: 1,000/min)
	Window          time.Duration // 1 s in production; tests may shrink it together with the sandbox's
	// Minute is the per-minute budgets' window, 60 Windows when zero. Time-scaled tests
	// shorten it alone: the sandbox counts sends per second, not per minute.
	Minute time.Duration
}

// DefaultRateLimits are Lark's documented limits.
var DefaultRateLimits = RateLimits{PerChat: 5, PerApp: 50, PerAppMinute: 1000, Reactions: 50, ReactionsMinute: 1000, Window: time.Second}

// Budgets converts the limits to the cell-rate budgets one send of kind to chat must fit,
// each with a safety margin. A chat gets one message per Window/(PerChat-1) with no burst (4/s
// for Lark's 5/s, so network jitter cannot make any sliding second see 6). Per second the app
// gets one call per Window/(0.8·limit) with a burst of 5 (at most 45 in any second for 50);
// per minute one per 60·Window/(0.85·limit) with a burst of a tenth (at most 950 in any
// minute for 1,000). Messages and card updates share the message budgets; reactions have
// their own and no chat budget.
func (r RateLimits) Budgets(kind, chat string) []Budget {
	d := DefaultRateLimits
	r.Window = cmp.Or(r.Window, d.Window)
	perSecond := func(scope string, n int) Budget {
		return Budget{Scope: scope, Interval: r.Window / time.Duration(max(n*8/10, 1)), Burst: max(min(5, n/10), 1)}
	}
	minute := cmp.Or(r.Minute, 60*r.Window)
	perMinute := func(scope string, n int) Budget {
		return Budget{Scope: scope, Interval: minute / time.Duration(max(n*85/100, 1)), Burst: max(n/10, 1)}
	}
	if kind == "reaction" {
		return []Budget{
			perSecond("reaction", cmp.Or(r.Reactions, d.Reactions)),
			perMinute("reaction:minute", cmp.Or(r.ReactionsMinute, d.ReactionsMinute)),
		}
	}
	return []Budget{
		{Scope: "chat:" + chat, Interval: r.Window / time.Duration(max(cmp.Or(r.PerChat, d.PerChat)-1, 1)), Burst: 1},
		perSecond("app", cmp.Or(r.PerApp, d.PerApp)),
		perMinute("app:minute", cmp.Or(r.PerAppMinute, d.PerAppMinute)),
	}
}

// Size limits Lark enforces on content.
const (
	maxTextBytes = 150 * 1024
	maxCardBytes = 30 * 1024
)

// SenderOptions tunes a Sender. Zero values take the defaults.
type SenderOptions struct {
	Owner   string // claim owner name, unique per replica (required)
	Logger  *slog.Logger
	Metrics *Metrics
	Now     func() time.Time
	// Limits are the send limits booked with the Limiter. Default DefaultRateLimits.
	Limits RateLimits
	// Concurrency is how many chats are served at once. Default 8.
	Concurrency int
	// ReactionConcurrency is how many reactions are sent at once. Default 8.
	ReactionConcurrency int
	// Lease is how long a claim lasts before another sender may take the row. Default 30 s.
	Lease time.Duration
	// Poll is the fallback wake-up when no notification arrives. Default 2 s.
	Poll time.Duration
	// MaxAttempts before a row failing with transient errors is given up. Default 12.
	MaxAttempts int
	// Grace is how long in-flight sends may finish after shutdown starts. Default 3 s.
	Grace time.Duration
	// RetryBase is the first in-process backoff after a 5xx or timeout. Default 200 ms.
	RetryBase time.Duration
}

// Sender delivers outbox rows to Lark.
type Sender struct {
	cli *Client
	ob  Outbox
	lim Limiter
	opt SenderOptions
	log *slog.Logger
	m   *Metrics
	now func() time.Time
	// wake has one channel per lane, poked by notifications and WakeLane; freed says a send of
	// the lane finished. A lane with every send slot taken waits on freed alone: a wake-up
	// then could claim nothing, and during a burst of receipts (Lark takes 45 a second) there
	// is one for every message received. The wake stays pending for when a slot frees.
	wake, freed [2]chan struct{}

	// unrecorded are rows Lark accepted whose MarkSent failed (the database was away): they
	// are recorded at the next turn of the loop and before Release, so a shutdown never
	// hands back a row that was sent.
	mu         sync.Mutex
	unrecorded []sentRow
}

type sentRow struct {
	id            int64
	larkMessageID string
}

// recordLater keeps a sent row whose recording failed for flushUnrecorded.
func (s *Sender) recordLater(id int64, larkMessageID string) {
	s.mu.Lock()
	s.unrecorded = append(s.unrecorded, sentRow{id: id, larkMessageID: larkMessageID})
	s.mu.Unlock()
}

// flushUnrecorded records the sent rows whose recording failed earlier; those that fail
// again stay for the next call.
func (s *Sender) flushUnrecorded(ctx context.Context) {
	s.mu.Lock()
	rows := s.unrecorded
	s.unrecorded = nil
	s.mu.Unlock()
	var left []sentRow
	for _, r := range rows {
		if err := s.ob.MarkSent(ctx, r.id, r.larkMessageID); err != nil {
			left = append(left, r)
		}
	}
	if len(left) > 0 {
		s.mu.Lock()
		s.unrecorded = append(s.unrecorded, left...)
		s.mu.Unlock()
	}
}

// NewSender builds a sender; Run starts it.
func NewSender(cli *Client, ob Outbox, lim Limiter, opts SenderOptions) (*Sender, error) {
	if cli == nil || ob == nil || lim == nil {
		return nil, errors.New("create sender: client, outbox and limiter are required")
	}
	if opts.Owner == "" {
		return nil, errors.New("create sender: Owner is empty; give each replica a unique name")
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 8
	}
	if opts.ReactionConcurrency <= 0 {
		opts.ReactionConcurrency = 8
	}
	if opts.Limits == (RateLimits{}) {
		opts.Limits = DefaultRateLimits
	}
	if opts.Lease <= 0 {
		opts.Lease = 30 * time.Second
	}
	if opts.Poll <= 0 {
		opts.Poll = 2 * time.Second
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 12
	}
	if opts.Grace <= 0 {
		opts.Grace = 3 * time.Second
	}
	if opts.RetryBase <= 0 {
		opts.RetryBase = 200 * time.Millisecond
	}
	s := &Sender{cli: cli, ob: ob, lim: lim, opt: opts, log: opts.Logger, m: opts.Metrics, now: opts.Now,
		wake:  [2]chan struct{}{make(chan struct{}, 1), make(chan struct{}, 1)},
		freed: [2]chan struct{}{make(chan struct{}, 1), make(chan struct{}, 1)}}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.m == nil {
		s.m = NewMetrics(nil)
	}
	if s.now == nil {
		s.now = time.Now
	}
	return s, nil
}

// WakeLane makes the sender look for due rows of lane l now; call it after committing outbox
// rows of that lane in this process (the outbox notification covers other processes). Only
// the lanes that got rows are woken: waking another costs it a claim that finds nothing.
func (s *Sender) WakeLane(l Lane) { s.pokeLane(l) }

func (s *Sender) pokeLane(l Lane) { signalOnce(s.wake[l]) }

// signalOnce leaves one token in c unless one is pending already.
func signalOnce(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Run delivers until ctx ends, then lets in-flight sends finish within Grace and releases every
// claim this sender still holds. It returns nil after a clean stop.
func (s *Sender) Run(ctx context.Context) error {
	// Sends run on a context that outlives ctx by Grace, so a shutdown does not cut a request
	// Lark may already have accepted (the uuid would cover it, but the row would be re-sent).
	sendCtx, stopSends := context.WithCancel(context.WithoutCancel(ctx))
	defer stopSends()

	var listeners sync.WaitGroup
	listeners.Go(func() { s.listen(ctx) })
	defer listeners.Wait()

	var inflight, lanes sync.WaitGroup
	lanes.Go(func() { s.runLane(ctx, sendCtx, LaneMessages, s.opt.Concurrency, &inflight) })
	lanes.Go(func() { s.runLane(ctx, sendCtx, LaneReactions, s.opt.ReactionConcurrency, &inflight) })
	lanes.Wait()

	done := make(chan struct{})
	go func() { inflight.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(s.opt.Grace):
		s.log.Warn("outbox sends still running at shutdown deadline; cancelling them")
		stopSends()
		<-done
	}
	relCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	s.flushUnrecorded(relCtx)
	s.mu.Lock()
	stuck := len(s.unrecorded)
	s.mu.Unlock()
	if stuck > 0 {
		// Handing these back would have them sent again; their claims lapse instead, and the
		// next sender treats them as possibly sent.
		return fmt.Errorf("record %d sent outbox rows: the database is unreachable; their claims lapse", stuck)
	}
	if err := s.ob.Release(relCtx, s.opt.Owner); err != nil {
		return fmt.Errorf("release outbox claims: %w", err)
	}
	return nil
}

// runLane claims and delivers the lane's rows, at most concurrency at once, until ctx ends.
// The sends it starts join inflight, which Run waits for.
func (s *Sender) runLane(ctx, sendCtx context.Context, lane Lane, concurrency int, inflight *sync.WaitGroup) {
	sem := make(chan struct{}, concurrency)
	var rechecks []time.Time
	var lastClaim time.Time
	for ctx.Err() == nil {
		free := concurrency - len(sem)
		var claims []OutboxMessage
		if free > 0 {
			if !s.pause(ctx, lastClaim.Add(minClaimGap).Sub(s.now())) {
				return
			}
			lastClaim = s.now()
			s.flushUnrecorded(ctx)
			var err error
			claims, err = s.ob.Claim(ctx, lane, s.opt.Owner, free, s.opt.Lease)
			if err != nil && ctx.Err() == nil {
				s.log.ErrorContext(ctx, "claim outbox rows", "lane", lane, "err", err)
			}
		}
		for _, c := range claims {
			sem <- struct{}{}
			inflight.Go(func() {
				defer func() { <-sem; signalOnce(s.freed[lane]) }()
				s.deliver(sendCtx, c)
			})
		}
		if len(claims) > 0 && len(claims) == free {
			continue // there may be more due right now
		}
		rechecks = s.sleep(ctx, lane, free, rechecks)
	}
}

// minClaimGap spaces the claims. Every commit that writes an outbox row wakes the sender, and
// during a burst of chat messages that is hundreds of times a second, while Lark takes at most
// 50 sends a second from the whole app: claiming at every wake-up only took database time from
// the messages being received. 10 ms keeps a reply well within its ~100 ms.
const minClaimGap = 10 * time.Millisecond

// pause waits d (nothing when d <= 0) and reports false when ctx ended first.
func (s *Sender) pause(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// recheckSoon and recheckLater are the extra looks after every wake-up. The outbox notification is coalesced
// (one of the concurrent writers notifies, see migration 00021), so a row that committed just
// after the notifying transaction is found by a recheck instead of the slow poll.
const recheckSoon, recheckLater = 40 * time.Millisecond, 150 * time.Millisecond

// sleep waits for a wake-up, a pending recheck, the next due row, or the fallback poll, and
// returns the rechecks still ahead.
func (s *Sender) sleep(ctx context.Context, lane Lane, free int, rechecks []time.Time) []time.Time {
	now := s.now()
	for len(rechecks) > 0 && !rechecks[0].After(now) {
		rechecks = rechecks[1:]
	}
	wait := s.opt.Poll
	if len(rechecks) > 0 {
		wait = min(wait, rechecks[0].Sub(now))
	}
	if free > 0 {
		if d, ok, err := s.ob.NextDue(ctx, lane); err == nil && ok {
			wait = min(wait, max(d, 5*time.Millisecond))
		}
	}
	wake := s.wake[lane]
	if free == 0 {
		wake = nil // never ready: see Sender.freed
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-wake:
		now = s.now()
		rechecks = append(rechecks[:0], now.Add(recheckSoon), now.Add(recheckLater))
	case <-s.freed[lane]:
	case <-t.C:
	}
	return rechecks
}

func (s *Sender) listen(ctx context.Context) {
	for ctx.Err() == nil {
		err := s.ob.Listen(ctx, s.pokeLane)
		if ctx.Err() != nil {
			return
		}
		s.log.WarnContext(ctx, "outbox listener stopped; the sender polls until it is back", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// sendError is a refusal or failure with Lark's code when there is one.
type sendError struct {
	code   int
	reason string
}

// deliver sends one row and records the outcome. It never returns an error: every path ends in
// MarkSent, MarkFailed or Retry (or, if the database is down, the lease running out).
func (s *Sender) deliver(sendCtx context.Context, c OutboxMessage) {
	log := s.log.With("outbox_id", c.ID, "kind", c.Kind, "chat", c.ReceiveID)
	msgType, content, serr := prepare(c)
	if serr != nil {
		s.fail(sendCtx, log, c, serr.code, serr.reason)
		return
	}
	res, err := s.send(sendCtx, c, msgType, content, c.ReplyTo)
	if err == nil && c.ReplyTo != "" && isRecalledCode(res.Code) {
		// The message we were answering is gone: say it in the chat instead.
		log.InfoContext(sendCtx, "reply target recalled; sending as a new message", "reply_to", c.ReplyTo, "code", res.Code)
		res, err = s.send(sendCtx, c, msgType, content, "")
	}
	// The outcome is recorded even when a shutdown cut the send short: a reaction that may
	// have reached Lark must leave a counted attempt, so whoever sends the row next looks
	// before it adds.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(sendCtx), 5*time.Second)
	defer cancel()
	// A reaction carries no Lark uuid: once a call may have reached Lark, every later try of
	// the row looks before it adds, so the retry counts as an attempt (Attempts > 0).
	mayHaveSent := c.Kind == "reaction" && res.calls > 0
	switch {
	case errors.Is(err, errRateWait):
		s.retry(ctx, log, c, res.retryAfter(time.Second), codeRateLimited, "waiting for the send budget", mayHaveSent)
	case err != nil:
		// Transport errors were counted where they happened; a token refusal keeps its code
		// (10003/10014: wrong app id or secret) so the failure says what to fix.
		code := 0
		var te *errToken
		if errors.As(err, &te) {
			code = te.Code
		}
		s.retryOrFail(ctx, log, c, code, err.Error())
	case res.Code == 0 && res.HTTPStatus < 300: // a 5xx whose body says code 0 is no success
		if err := s.ob.MarkSent(ctx, c.ID, res.MessageID); err != nil {
			log.ErrorContext(ctx, "record sent outbox row; recording it again later", "err", err)
			s.recordLater(c.ID, res.MessageID)
			return
		}
		s.m.sent.WithLabelValues(c.Kind).Inc()
		s.m.lag.Observe(s.now().Sub(c.CreatedAt).Seconds())
	default:
		s.m.sendErrors.WithLabelValues(strconv.Itoa(res.Code)).Inc()
		switch {
		case isRateCode(res.Code) || res.HTTPStatus == 429:
			s.retry(ctx, log, c, res.retryAfter(time.Second), res.Code, "lark rate limit: "+res.Msg, mayHaveSent)
		case isTokenCode(res.Code) || res.HTTPStatus >= 500:
			s.retryOrFail(ctx, log, c, res.Code, res.Msg)
		default:
			s.fail(ctx, log, c, res.Code, permanentReason(res))
		}
	}
}

var errRateWait = errors.New("send budget exhausted for now")

// send takes a slot and calls Lark, retrying 5xx answers and transport errors with backoff.
func (s *Sender) send(ctx context.Context, c OutboxMessage, msgType, content, replyTo string) (apiResult, error) {
	var res apiResult
	calls := 0
	b := retry.WithMaxRetries(3, retry.WithCappedDuration(2*time.Second, retry.WithJitterPercent(20, retry.NewExponential(s.opt.RetryBase))))
	err := retry.Do(ctx, b, func(ctx context.Context) error {
		if err := s.takeSlot(ctx, c); err != nil {
			return err
		}
		var err error
		res, err = s.call(ctx, c, msgType, content, replyTo, calls > 0)
		calls++
		if err != nil {
			s.m.sendErrors.WithLabelValues("transport").Inc()
			var te *errToken
			if errors.As(err, &te) {
				return err
			}
			return retry.RetryableError(err)
		}
		if res.HTTPStatus >= 500 && !isRateCode(res.Code) {
			s.m.sendErrors.WithLabelValues(strconv.Itoa(res.Code)).Inc()
			return retry.RetryableError(fmt.Errorf("lark answered HTTP %d code %d: %s", res.HTTPStatus, res.Code, res.Msg))
		}
		return nil
	})
	res.calls = calls
	if err != nil && res.HTTPStatus >= 500 {
		// Retries used up on 5xx: hand the last answer back so deliver can reschedule it.
		return res, nil
	}
	return res, err
}

// takeSlot books a send in the shared budget and waits for it. A slot further away than a
// quarter of the lease is not booked: the row is handed back (errRateWait) rather than holding
// a claim idle.
func (s *Sender) takeSlot(ctx context.Context, c OutboxMessage) error {
	wait, reserved, err := s.lim.Take(ctx, s.opt.Limits.Budgets(c.Kind, c.ReceiveID), s.opt.Lease/4)
	if err != nil {
		return retry.RetryableError(err) // the store's error already says "take send slot"
	}
	if !reserved {
		return errRateWait
	}
	if wait <= 0 {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err() // the booked slot goes unused: the budget errs on the safe side
	case <-t.C:
		return nil
	}
}

func (s *Sender) call(ctx context.Context, c OutboxMessage, msgType, content, replyTo string, again bool) (apiResult, error) {
	switch c.Kind {
	case "file":
		return s.sendFile(ctx, c)
	case "card_update":
		return s.cli.patchCard(ctx, c.TargetMessage, content)
	case "reaction":
		if again || c.Attempts > 0 || c.Reclaimed {
			// An earlier try may have added it (Lark answered, the answer or its record was
			// lost): look first, so a retry never stacks a second reaction.
			res, found, err := s.cli.findReaction(ctx, c.TargetMessage, c.Content)
			if err != nil || res.Code != 0 || found {
				return res, err
			}
		}
		return s.cli.addReaction(ctx, c.TargetMessage, c.Content)
	}
	if replyTo != "" {
		return s.cli.replyMessage(ctx, replyTo, msgType, content, c.ReplyInThread, c.UUID)
	}
	idType := c.ReceiveIDType
	if idType == "" {
		idType = "chat_id"
	}
	return s.cli.createMessage(ctx, idType, c.ReceiveID, msgType, content, c.UUID)
}

func (s *Sender) retryOrFail(ctx context.Context, log *slog.Logger, c OutboxMessage, code int, reason string) {
	if c.Attempts+1 >= s.opt.MaxAttempts {
		s.fail(ctx, log, c, code, fmt.Sprintf("gave up after %d attempts: %s", c.Attempts+1, reason))
		return
	}
	// Exponential per attempt, capped at 5 minutes: 1 s, 2 s, 4 s, ...
	after := min(time.Second<<min(c.Attempts, 9), 5*time.Minute)
	s.retry(ctx, log, c, after, code, reason, true)
}

func (s *Sender) retry(ctx context.Context, log *slog.Logger, c OutboxMessage, after time.Duration, code int, reason string, count bool) {
	log.DebugContext(ctx, "outbox send rescheduled", "after", after, "code", code, "reason", reason)
	if err := s.ob.Retry(ctx, c.ID, s.opt.Owner, after, code, reason, count); err != nil {
		log.ErrorContext(ctx, "reschedule outbox row", "err", err)
	}
}

func (s *Sender) fail(ctx context.Context, log *slog.Logger, c OutboxMessage, code int, reason string) {
	s.m.sendFailed.WithLabelValues(strconv.Itoa(code)).Inc()
	log.WarnContext(ctx, "outbox row failed for good", "code", code, "reason", reason)
	if err := s.ob.MarkFailed(ctx, c.ID, s.opt.Owner, code, reason); err != nil {
		log.ErrorContext(ctx, "mark outbox row failed", "err", err)
	}
}

func isRateCode(code int) bool {
	return code == codeRateLimited || code == codeChatRateLimited || code == codeServiceRateLimited
}

func isRecalledCode(code int) bool {
	return code == codeReplyRecalled || code == codeReplyGone || code == codeReplyNotInChat
}

func permanentReason(res apiResult) string {
	if hint, advice := Advice(res.Code); hint != "" {
		return fmt.Sprintf("lark code %d: %s: %s", res.Code, res.Msg, advice)
	}
	return fmt.Sprintf("lark code %d (HTTP %d): %s", res.Code, res.HTTPStatus, res.Msg)
}

// prepare checks the row and renders the request content. Refusals name the limit broken.
func prepare(c OutboxMessage) (msgType, content string, _ *sendError) {
	if len(c.UUID) > 50 {
		return "", "", &sendError{reason: fmt.Sprintf("uuid is %d characters; Lark accepts at most 50", len(c.UUID))}
	}
	switch c.Kind {
	case "text":
		if c.Content == "" {
			return "", "", &sendError{reason: "text is empty"}
		}
		b, _ := json.Marshal(map[string]string{"text": c.Content})
		if len(b) > maxTextBytes {
			return "", "", &sendError{reason: fmt.Sprintf("text is %d bytes; Lark accepts at most 150 KB", len(b))}
		}
		return "text", string(b), nil
	case "card", "card_update":
		card, err := withUpdateMulti(c.Content)
		if err != nil {
			return "", "", &sendError{reason: "card is not valid JSON: " + err.Error()}
		}
		if len(card) > maxCardBytes {
			return "", "", &sendError{reason: fmt.Sprintf("card is %d bytes; Lark accepts at most 30 KB", len(card))}
		}
		if c.Kind == "card_update" && c.TargetMessage == "" {
			return "", "", &sendError{reason: "card update has no target: the card it updates was never sent"}
		}
		return "interactive", card, nil
	case "reaction":
		if c.TargetMessage == "" || c.Content == "" {
			return "", "", &sendError{reason: "reaction needs a target message and an emoji type"}
		}
		return "", c.Content, nil
	case "file":
		var fc fileContent
		if err := json.Unmarshal([]byte(c.Content), &fc); err != nil || fc.FileID <= 0 {
			return "", "", &sendError{reason: "file row does not name a stored file"}
		}
		return "file", c.Content, nil
	}
	return "", "", &sendError{reason: fmt.Sprintf("unknown outbox kind %q", c.Kind)}
}

// withUpdateMulti sets config.update_multi so every card we send can later be patched in
// place for everyone in the chat (Lark requires it before and after the update).
func withUpdateMulti(card string) (string, error) {
	var m map[string]any
	if err := json.Unmarshal([]byte(card), &m); err != nil {
		return "", err
	}
	if m == nil {
		return "", errors.New("card is null")
	}
	cfg, _ := m["config"].(map[string]any)
	if cfg == nil {
		cfg = map[string]any{}
	}
	if v, ok := cfg["update_multi"].(bool); ok && v {
		return card, nil
	}
	cfg["update_multi"] = true
	m["config"] = cfg
	b, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	return string(b), nil
}
