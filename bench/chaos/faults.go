package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"loopx/bot/sandbox"
)

// FaultResult is the scenario of process and database faults under load.
type FaultResult struct {
	Faults          []FaultFigure  `json:"faults"`
	APIWrites       int            `json:"api_writes_acknowledged"`
	APIWritesLost   int            `json:"api_writes_lost"`
	APIWritesDouble int            `json:"api_writes_doubled"`
	APIStatuses     map[string]int `json:"api_statuses"`
	API500s         int            `json:"api_500s"`
	Events          int            `json:"events"`
	EventsNotAcked  int            `json:"events_not_acked"`
	EventsLost      int            `json:"events_lost"`
	EventsDoubled   int            `json:"events_doubled"`
	ReceiptsDoubled int            `json:"receipts_doubled"`
	ReceiptsMissing int            `json:"receipts_missing"`
	ReadyzDuringPG  int            `json:"readyz_status_while_postgres_down"`
	APIDuringPG     int            `json:"api_status_while_postgres_down"`
	RetryAfter      string         `json:"retry_after_while_postgres_down"`
}

// FaultFigure is one injected fault and how long until every replica's /readyz was 200.
type FaultFigure struct {
	Name            string  `json:"name"`
	RecoverySeconds float64 `json:"readyz_recovery_seconds"`
	Detail          string  `json:"detail,omitempty"`
}

// load is the traffic a fault scenario runs under: chat messages through the balancer and
// API writes, each retried under its Idempotency-Key until acknowledged.
type load struct {
	s    *suite
	stop chan struct{}
	wg   sync.WaitGroup

	mu       sync.Mutex
	msgs     []sent
	acked    []string // texts of todos whose creation was acknowledged
	statuses map[string]int
	n        atomic.Int64
}

// loadTarget is what a load runs against: a goal, the chats bound to it, and the replicas
// whose API it writes through (asked at each write: a rolling upgrade swaps them).
type loadTarget struct {
	goal     string
	chats    []string
	replicas func() []*replica
}

func (s *suite) startLoad(ctx context.Context, prefix string) *load {
	chats := make([]string, chatCount)
	for i := range chats {
		chats[i] = chatID(i)
	}
	return s.startLoadOn(ctx, prefix, loadTarget{goal: goalID, chats: chats, replicas: func() []*replica { return s.replicas }})
}

// startLoadOn runs chat and API traffic against t until halt.
func (s *suite) startLoadOn(ctx context.Context, prefix string, target loadTarget) *load {
	l := &load{s: s, stop: make(chan struct{}), statuses: map[string]int{}}
	l.wg.Go(func() { // chat: about 40 messages a second
		t := time.NewTicker(25 * time.Millisecond)
		defer t.Stop()
		for i := 0; ; i++ {
			select {
			case <-l.stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			chat := target.chats[i%len(target.chats)]
			d, err := s.sb.UserSays(chat, sandbox.ChatGroup, ownerID, fmt.Sprintf("%s message %d", prefix, i), sandbox.MentionBot())
			if err != nil {
				continue
			}
			l.mu.Lock()
			l.msgs = append(l.msgs, sent{chat: chat, messageID: d.MessageID, d: d})
			l.mu.Unlock()
		}
	})
	for w := range 4 { // API: four writers, each retrying one todo until it is acknowledged
		l.wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-l.stop:
					return
				case <-ctx.Done():
					return
				default:
				}
				text := fmt.Sprintf("%s todo %d-%d", prefix, w, i)
				key := "chaos-" + text
				deadline := time.Now().Add(90 * time.Second)
				for attempt := 0; time.Now().Before(deadline) && ctx.Err() == nil; attempt++ {
					reps := target.replicas()
					r := reps[(w+attempt)%len(reps)]
					status, body, err := s.api(ctx, r.url, "POST", "/v1/goals/"+target.goal+"/todos", adminToken, key, map[string]any{"text": text})
					label := "transport error"
					if err == nil {
						label = strconv.Itoa(status)
					}
					l.mu.Lock()
					l.statuses[label]++
					l.mu.Unlock()
					if err == nil && status == http.StatusCreated {
						l.mu.Lock()
						l.acked = append(l.acked, text)
						l.mu.Unlock()
						break
					}
					if err == nil && status != http.StatusServiceUnavailable && status < 500 {
						s.log.Warn("api write refused", "status", status, "body", string(body))
						break
					}
					time.Sleep(100 * time.Millisecond)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	return l
}

func (l *load) halt() {
	close(l.stop)
	l.wg.Wait()
}

// allReady waits until every live replica answers /readyz 200 and returns how long it took.
func (s *suite) allReady(ctx context.Context, limit time.Duration) (time.Duration, error) {
	start := time.Now()
	for _, r := range s.replicas {
		if _, err := r.waitReady(ctx, limit-time.Since(start)); err != nil {
			return time.Since(start), err
		}
	}
	return time.Since(start), nil
}

func (s *suite) faultScenario(ctx context.Context, res *Results) error {
	if err := s.ensureTransport(ctx, "http"); err != nil {
		return err
	}
	r := &FaultResult{}
	res.Faults = r
	l := s.startLoad(ctx, "fault")
	pause := func() { time.Sleep(3 * time.Second) }
	pause()

	// kill -9 of a replica under load; it comes back.
	victim := s.replicas[1]
	victim.kill()
	pause()
	if err := victim.start(); err != nil {
		return err
	}
	d, err := victim.waitReady(ctx, 60*time.Second)
	r.Faults = append(r.Faults, FaultFigure{Name: "kill -9 of a replica", RecoverySeconds: d.Seconds(), Detail: "from its restart"})
	res.check(err == nil, "faults: replica after kill -9: %v", err)
	pause()

	// PostgreSQL restart, fast.
	if err := s.pg.stop(); err != nil {
		return err
	}
	if err := s.pg.start(ctx); err != nil {
		return err
	}
	d, err = s.allReady(ctx, 60*time.Second)
	r.Faults = append(r.Faults, FaultFigure{Name: "postgres fast restart", RecoverySeconds: d.Seconds(), Detail: "from postgres accepting connections"})
	res.check(err == nil, "faults: after postgres restart: %v", err)
	pause()

	// PostgreSQL down for 10 s: readiness and the API say 503 meanwhile.
	if err := s.pg.stop(); err != nil {
		return err
	}
	time.Sleep(2 * time.Second)
	r.ReadyzDuringPG = s.status(ctx, s.replicas[2].url+"/readyz")
	status, _, hdr := s.apiProbe(ctx, s.replicas[2].url)
	r.APIDuringPG, r.RetryAfter = status, hdr
	time.Sleep(8 * time.Second)
	if err := s.pg.start(ctx); err != nil {
		return err
	}
	d, err = s.allReady(ctx, 60*time.Second)
	r.Faults = append(r.Faults, FaultFigure{Name: "postgres stopped for 10 s", RecoverySeconds: d.Seconds(), Detail: "from postgres accepting connections"})
	res.check(err == nil, "faults: after postgres 10 s stop: %v", err)
	res.check(r.ReadyzDuringPG == http.StatusServiceUnavailable, "faults: /readyz answered %d while postgres was down, want 503", r.ReadyzDuringPG)
	res.check(r.APIDuringPG == http.StatusServiceUnavailable && r.RetryAfter != "", "faults: the API answered %d (Retry-After %q) while postgres was down, want 503 with Retry-After", r.APIDuringPG, r.RetryAfter)
	pause()

	// SIGTERM with sends in flight: Lark answers slowly, the replica stops within its grace
	// and what it held is sent once, by someone.
	s.sb.FailNext(sandbox.RouteReactionCreate, 30, sandbox.Fail{Delay: 1500 * time.Millisecond})
	time.Sleep(500 * time.Millisecond)
	took, err := s.replicas[0].term(15 * time.Second)
	r.Faults = append(r.Faults, FaultFigure{Name: "SIGTERM with sends in flight", RecoverySeconds: took.Seconds(), Detail: "time to a clean exit"})
	res.check(err == nil, "faults: SIGTERM: %v", err)
	if err := s.replicas[0].start(); err != nil {
		return err
	}
	if _, err := s.replicas[0].waitReady(ctx, 60*time.Second); err != nil {
		return err
	}
	pause()
	l.halt()

	l.mu.Lock()
	msgs, acked, statuses := l.msgs, l.acked, l.statuses
	l.mu.Unlock()
	r.APIStatuses = statuses
	r.API500s = statuses["500"]
	r.APIWrites = len(acked)
	var ds []*sandbox.Delivery
	for _, m := range msgs {
		ds = append(ds, m.d)
	}
	_, r.EventsNotAcked = waitDelivered(ctx, ds)
	r.Events = len(msgs)
	if _, err := s.waitOutboxDrained(ctx, 3*time.Minute); err != nil {
		res.check(false, "faults: %v", err)
	}
	for _, text := range acked {
		n, err := s.count(ctx, `SELECT count(*) FROM todo WHERE goal_id = $1 AND text = $2`, goalID, text)
		if err != nil {
			return err
		}
		switch {
		case n == 0:
			r.APIWritesLost++
		case n > 1:
			r.APIWritesDouble++
		}
	}
	if dup, err := s.count(ctx, `SELECT count(*) FROM (SELECT text FROM todo WHERE goal_id = $1 AND text LIKE 'fault todo %' GROUP BY text HAVING count(*) > 1) d`, goalID); err == nil {
		r.APIWritesDouble += dup
	}
	if err := s.checkMessages(ctx, msgs, &r.EventsLost, &r.EventsDoubled, &r.ReceiptsDoubled, &r.ReceiptsMissing); err != nil {
		return err
	}
	res.check(r.APIWritesLost == 0, "faults: %d acknowledged API writes lost", r.APIWritesLost)
	res.check(r.APIWritesDouble == 0, "faults: %d API writes doubled", r.APIWritesDouble)
	res.check(r.API500s == 0, "faults: %d API answers were 500", r.API500s)
	res.check(r.EventsNotAcked == 0, "faults: %d chat events never acknowledged (Lark gave up)", r.EventsNotAcked)
	res.check(r.EventsLost == 0, "faults: %d chat messages lost", r.EventsLost)
	res.check(r.EventsDoubled == 0, "faults: %d chat messages doubled", r.EventsDoubled)
	res.check(r.ReceiptsDoubled == 0, "faults: %d receipts doubled", r.ReceiptsDoubled)
	res.check(r.ReceiptsMissing == 0, "faults: %d receipts missing", r.ReceiptsMissing)
	return nil
}

func (s *suite) status(ctx context.Context, url string) int {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := s.hc.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// apiProbe makes one API write and returns its status, body and Retry-After.
func (s *suite) apiProbe(ctx context.Context, base string) (int, string, string) {
	b, _ := json.Marshal(map[string]any{"text": "probe while postgres is down"})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/goals/"+goalID+"/todos", bytesReader(b))
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "probe-"+strconv.FormatInt(time.Now().UnixNano(), 10))
	resp, err := s.hc.Do(req)
	if err != nil {
		return 0, err.Error(), ""
	}
	defer resp.Body.Close()
	return resp.StatusCode, "", resp.Header.Get("Retry-After")
}
