package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"loopx/bot/sandbox"
	"loopx/store"
)

// PgBouncerResult is the chat and API traffic again, with the replicas reaching PostgreSQL
// through Debian's pgbouncer in transaction mode (migrations included).
type PgBouncerResult struct {
	Version            string         `json:"pgbouncer"`
	Detected           bool           `json:"transaction_mode_detected"`
	DoctorNamesIt      bool           `json:"doctor_names_it"`
	Events             int            `json:"events"`
	Duplicates         map[string]int `json:"duplicates"`
	NotAcked           int            `json:"not_acked"`
	Lost               int            `json:"lost"`
	DoubledEffects     int            `json:"doubled_effects"`
	DoubledReceipts    int            `json:"doubled_receipts"`
	MissingReceipts    int            `json:"missing_receipts"`
	SameKeyCalls       int            `json:"same_key_calls"`
	TodosFromSameKeys  int            `json:"todos_from_same_keys"`
	SameKeys           int            `json:"same_keys"`
	APIErrors          int            `json:"api_errors"`
	ReceiptDrainSecond float64        `json:"receipt_drain_seconds"`
}

func (s *suite) pgBouncerScenario(ctx context.Context, res *Results) error {
	r := &PgBouncerResult{Duplicates: map[string]int{}}
	res.PgBouncer = r
	if out, err := exec.Command("pgbouncer", "--version").CombinedOutput(); err == nil {
		r.Version = string(bytes.TrimSpace(bytes.SplitN(out, []byte("\n"), 2)[0]))
	} else if out, err := exec.Command("/usr/sbin/pgbouncer", "--version").CombinedOutput(); err == nil {
		r.Version = string(bytes.TrimSpace(bytes.SplitN(out, []byte("\n"), 2)[0]))
	}
	const db = "loopx_pgb"
	if err := createDatabase(ctx, s.pg.URL("postgres"), db); err != nil {
		return err
	}
	bdir := filepath.Join(s.dir, "pgbouncer")
	if err := os.MkdirAll(bdir, 0o755); err != nil {
		return err
	}
	if s.pg.cred != nil {
		_ = os.Chown(bdir, int(s.pg.cred.Uid), int(s.pg.cred.Gid))
	}
	b, err := startPgBouncer(ctx, bdir, s.pg, db)
	if err != nil {
		return err
	}
	defer b.stop()

	// The main replicas step aside; three others start on an empty database through the
	// pooler and migrate it there.
	for _, rep := range s.replicas {
		if rep.alive() {
			if _, err := rep.term(15 * time.Second); err != nil {
				return err
			}
		}
	}
	mainReps, mainSt, mainClose := s.replicas, s.st, s.closeDB
	defer func() { s.replicas, s.st, s.closeDB, s.transport = mainReps, mainSt, mainClose, "" }()
	var reps []*replica
	for i := range replicaCount {
		rep, err := s.newReplica(fmt.Sprintf("b%d", i+1), b.URL(db), nil)
		if err != nil {
			return err
		}
		reps = append(reps, rep)
	}
	pool, err := store.Open(ctx, s.pg.URL(db))
	if err != nil {
		return err
	}
	defer pool.Close()
	s.replicas, s.st, s.closeDB, s.transport = reps, store.New(pool, store.Options{}), pool.Close, ""
	defer func() {
		for _, rep := range reps {
			if rep.alive() {
				_, _ = rep.term(15 * time.Second)
			}
		}
	}()
	if err := s.ensureTransport(ctx, "http"); err != nil {
		return err
	}
	if err := s.seed(ctx); err != nil {
		return fmt.Errorf("seed through pgbouncer: %w", err)
	}

	status, body, err := s.api(ctx, reps[0].url, "GET", "/v1/diagnostics", adminToken, "", nil)
	if err == nil && status == 200 {
		var d struct {
			TransactionPooling bool `json:"transaction_pooling"`
		}
		_ = json.Unmarshal(body, &d)
		r.Detected = d.TransactionPooling
	}
	doc := exec.CommandContext(ctx, s.bin, "doctor", "--format", "json")
	doc.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + s.dir, "LOOPX_URL=" + reps[0].url, "LOOPX_TOKEN=" + adminToken}
	out, _ := doc.CombinedOutput()
	r.DoctorNamesIt = bytes.Contains(out, []byte("PgBouncer"))

	start := time.Now()
	msgs, err := s.say(ctx, 1000, "pgb", "http", r.Duplicates)
	if err != nil {
		return err
	}
	r.Events = len(msgs)
	var ds []*sandbox.Delivery
	for _, m := range msgs {
		ds = append(ds, m.d)
		ds = append(ds, m.extra...)
	}
	_, r.NotAcked = waitDelivered(ctx, ds)

	r.SameKeys = 10
	var wg sync.WaitGroup
	var mu sync.Mutex
	for k := range r.SameKeys {
		for i := range 10 {
			r.SameKeyCalls++
			wg.Go(func() {
				st, _, err := s.api(ctx, reps[(k+i)%len(reps)].url, "POST", "/v1/goals/"+goalID+"/todos", adminToken,
					fmt.Sprintf("pgb-key-%d", k), map[string]any{"text": fmt.Sprintf("pgb todo %d", k)})
				if err != nil || st != 201 {
					mu.Lock()
					r.APIErrors++
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	if _, err := s.waitOutboxDrained(ctx, 4*time.Minute); err != nil {
		res.check(false, "pgbouncer: %v", err)
	}
	r.ReceiptDrainSecond = time.Since(start).Seconds()
	if err := s.checkMessages(ctx, msgs, &r.Lost, &r.DoubledEffects, &r.DoubledReceipts, &r.MissingReceipts); err != nil {
		return err
	}
	r.TodosFromSameKeys, _ = s.count(ctx, `SELECT count(*) FROM todo WHERE text LIKE 'pgb todo %'`)
	res.check(r.Detected, "pgbouncer: the replicas did not detect transaction mode")
	res.check(r.DoctorNamesIt, "pgbouncer: loopx doctor does not name PgBouncer in transaction mode: %s", tail(string(out), 400))
	res.check(r.NotAcked == 0, "pgbouncer: %d pushes never acknowledged", r.NotAcked)
	res.check(r.Lost == 0, "pgbouncer: %d messages lost", r.Lost)
	res.check(r.DoubledEffects == 0, "pgbouncer: %d messages with a doubled effect", r.DoubledEffects)
	res.check(r.DoubledReceipts == 0, "pgbouncer: %d doubled receipts", r.DoubledReceipts)
	res.check(r.MissingReceipts == 0, "pgbouncer: %d missing receipts", r.MissingReceipts)
	res.check(r.APIErrors == 0, "pgbouncer: %d same-key calls not answered 201", r.APIErrors)
	res.check(r.TodosFromSameKeys == r.SameKeys, "pgbouncer: %d todos from %d keys", r.TodosFromSameKeys, r.SameKeys)
	return nil
}
