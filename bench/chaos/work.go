package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"loopx/bot/sandbox"
)

// WorkResult is what the work scenario saw: a failing exec agent and a file sent in chat,
// each under three replicas whose schedulers sweep the same turns, with the run requests
// retried and the chat event redelivered.
type WorkResult struct {
	Turns         int  `json:"failing_agent_turns"`
	FailureCards  int  `json:"failure_cards"`
	BreakerCards  int  `json:"breaker_cards"`
	Holds         int  `json:"hold_audits"`
	RunRequests   int  `json:"run_requests"`
	FileItems     int  `json:"file_inbox_items"`
	FileRows      int  `json:"file_attachments"`
	FileBlobs     int  `json:"file_blobs"`
	FileDownloads int  `json:"file_downloads"`
	Redeliveries  int  `json:"file_event_redeliveries"`
	SHA256Matches bool `json:"sha256_matches"`
	// A deliverable uploaded with evidence, the request sent again to every replica at once
	// under its Idempotency-Key (a client retrying a lost answer).
	UploadTries     int  `json:"upload_tries"`
	UploadEvidence  int  `json:"upload_evidence"`
	UploadFiles     int  `json:"upload_files"`
	UploadBlobs     int  `json:"upload_blobs"`
	UploadSameReply bool `json:"upload_same_answer"`
}

const (
	workGoal = "chaoswork"
	workChat = "oc_chaos_work"
)

// setSchedulers turns the replicas' schedulers on or off; they restart at the next
// ensureTransport.
func (s *suite) setSchedulers(on bool) {
	v := "off"
	if on {
		v = "on"
	}
	for i, r := range s.replicas {
		env := r.env[:0:0]
		for _, kv := range r.env {
			if !strings.HasPrefix(kv, "LOOPX_SCHEDULER=") {
				env = append(env, kv)
			}
		}
		s.replicas[i].env = append(env, "LOOPX_SCHEDULER="+v)
	}
	s.transport = "" // force the restart
}

// workScenario checks "one effect each" for running the work from chat:
//
//   - A failing exec agent, fired three times (each run request sent twice under one
//     Idempotency-Key) while three schedulers sweep its turns: three turns, one failure card
//     per turn, then exactly one hold (one audit row, one breaker card).
//   - An image sent in a chat, its event delivered again (the same event, the same event to
//     another replica at once, the same message under a new event id): one inbox item, one
//     file, one stored content, one download from Lark, the same SHA-256.
//   - A deliverable uploaded with evidence, the request retried on every replica at once
//     under one Idempotency-Key: one evidence, one file, one stored content, one answer.
func (s *suite) workScenario(ctx context.Context, res *Results) error {
	s.setSchedulers(true)
	defer s.setSchedulers(false)
	if err := s.ensureTransport(ctx, "ws"); err != nil {
		return err
	}
	r := &WorkResult{}
	res.Work = r
	if err := s.failingAgent(ctx, res, r); err != nil {
		return fmt.Errorf("failing agent: %w", err)
	}
	if err := s.fileUnderRedelivery(ctx, res, r); err != nil {
		return fmt.Errorf("file under redelivery: %w", err)
	}
	if err := s.uploadUnderRetry(ctx, res, r); err != nil {
		return fmt.Errorf("upload under retry: %w", err)
	}
	return nil
}

func (s *suite) uploadUnderRetry(ctx context.Context, res *Results, r *WorkResult) error {
	data := make([]byte, 200<<10)
	_, _ = rand.Read(data)
	sum := sha256.Sum256(data)
	body := map[string]any{"agent_id": "fail", "summary": "chaos deliverable", "kind": "artifact",
		"file": map[string]any{"name": "report.bin", "content_base64": base64.StdEncoding.EncodeToString(data)}}
	type answer struct {
		status int
		body   []byte
		err    error
	}
	answers := make(chan answer, len(s.replicas)+1)
	send := func(base string) {
		st, b, err := s.api(ctx, base, "POST", "/v1/goals/"+workGoal+"/evidence", adminToken, "chaos-upload-1", body)
		answers <- answer{st, b, err}
	}
	go send(s.replicas[0].url) // the first try, and at once the retries, to every replica
	for _, rp := range s.replicas {
		go send(rp.url)
	}
	var first []byte
	r.UploadSameReply = true
	for range len(s.replicas) + 1 {
		a := <-answers
		if a.err != nil {
			return a.err
		}
		if a.status != 201 && a.status != 200 {
			return fmt.Errorf("evidence upload answered %d: %s", a.status, a.body)
		}
		r.UploadTries++
		var ev struct {
			ID int64 `json:"evidence_id"`
		}
		if err := json.Unmarshal(a.body, &ev); err != nil || ev.ID == 0 {
			return fmt.Errorf("evidence upload answer %s: %v", a.body, err)
		}
		id := []byte(strconv.FormatInt(ev.ID, 10))
		if first == nil {
			first = id
		} else if string(first) != string(id) {
			r.UploadSameReply = false
		}
	}
	var cerr error
	count := func(sql string, args ...any) int {
		n, err := s.count(ctx, sql, args...)
		cerr = errors.Join(cerr, err)
		return n
	}
	r.UploadEvidence = count(`SELECT count(*) FROM evidence WHERE goal_id = $1 AND summary = 'chaos deliverable'`, workGoal)
	r.UploadFiles = count(`SELECT count(*) FROM attachment a JOIN evidence e ON e.id = a.evidence_id
		WHERE e.goal_id = $1 AND e.summary = 'chaos deliverable'`, workGoal)
	r.UploadBlobs = count(`SELECT count(*) FROM file_blob WHERE sha256 = $1`, sum[:])
	if cerr != nil {
		return cerr
	}
	res.check(r.UploadEvidence == 1, "work: %d evidence rows for one upload retried %d times, want 1", r.UploadEvidence, r.UploadTries)
	res.check(r.UploadFiles == 1, "work: %d files for one upload, want 1", r.UploadFiles)
	res.check(r.UploadBlobs == 1, "work: %d stored contents for one upload, want 1", r.UploadBlobs)
	res.check(r.UploadSameReply, "work: the retried upload answered different evidence")
	return nil
}

func (s *suite) failingAgent(ctx context.Context, res *Results, r *WorkResult) error {
	script := filepath.Join(s.dir, "fail.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho 'building'\necho 'error: chaos says no' >&2\nexit 3\n"), 0o755); err != nil {
		return err
	}
	if _, err := s.mustAPI(ctx, "POST", "/v1/goals", adminToken, map[string]any{"goal_id": workGoal, "title": "Chaos work",
		"owners": []string{ownerID}, "allowed_slots": 100}, 201); err != nil {
		return err
	}
	if _, err := s.mustAPI(ctx, "POST", "/v1/goals/"+workGoal+"/agents", adminToken, map[string]any{"agent_id": "fail",
		"runner": "exec", "runner_config": map[string]any{"argv": []string{"/bin/sh", script}}}, 201); err != nil {
		return err
	}
	if _, err := s.mustAPI(ctx, "POST", "/v1/goals/"+workGoal+"/todos", adminToken, map[string]any{"text": "build it"}, 201); err != nil {
		return err
	}
	_ = s.sb.AddChat(workChat, sandbox.ChatGroup, "chaos work")
	d, err := s.sb.UserSays(workChat, sandbox.ChatGroup, ownerID, "/bind #"+workGoal, sandbox.MentionBot())
	if err != nil {
		return err
	}
	if _, failed := waitDelivered(ctx, []*sandbox.Delivery{d}); failed > 0 {
		return errors.New("/bind not acknowledged")
	}
	for i := 1; i <= 3; i++ {
		key := fmt.Sprintf("chaos-run-%d", i)
		for try := range 2 { // the same request again, to another replica, as a client retrying a lost answer
			base := s.replicas[(i+try)%len(s.replicas)].url
			if st, body, err := s.api(ctx, base, "POST", "/v1/goals/"+workGoal+"/agents/fail/run", adminToken, key, map[string]any{}); err != nil || st != 202 {
				return fmt.Errorf("run request %d: %d %s %v", i, st, body, err)
			}
		}
		if err := s.waitCount(ctx, 2*time.Minute, i, `SELECT count(*) FROM turn WHERE goal_id = $1 AND agent_id = 'fail' AND state = 'failed'`, workGoal); err != nil {
			return fmt.Errorf("turn %d: %w", i, err)
		}
	}
	if err := s.waitCount(ctx, time.Minute, 1, `SELECT count(*) FROM agent WHERE goal_id = $1 AND id = 'fail' AND held_at IS NOT NULL`, workGoal); err != nil {
		return fmt.Errorf("the breaker: %w", err)
	}
	if err := s.waitCount(ctx, time.Minute, 0, `SELECT count(*) FROM turn WHERE goal_id = $1 AND card_state <> 'done'`, workGoal); err != nil {
		return fmt.Errorf("turn cards: %w", err)
	}
	if _, err := s.waitOutboxDrained(ctx, 2*time.Minute); err != nil {
		return err
	}
	var cerr error
	count := func(sql string) int {
		n, err := s.count(ctx, sql, workGoal)
		cerr = errors.Join(cerr, err)
		return n
	}
	r.Turns = count(`SELECT count(*) FROM turn WHERE goal_id = $1 AND agent_id = 'fail'`)
	r.FailureCards = count(`SELECT count(*) FROM outbox WHERE goal_id = $1 AND kind = 'card' AND dedupe_key LIKE 'turn:%:card:` + workChat + `'`)
	r.BreakerCards = count(`SELECT count(*) FROM outbox WHERE goal_id = $1 AND dedupe_key LIKE 'breaker:%'`)
	r.Holds = count(`SELECT count(*) FROM audit WHERE goal_id = $1 AND action = 'agent.hold'`)
	r.RunRequests = count(`SELECT count(*) FROM run_request WHERE goal_id = $1`)
	if cerr != nil {
		return cerr
	}
	res.check(r.Turns == 3, "work: %d turns of the failing agent, want 3 (a retried run request must not fire twice)", r.Turns)
	res.check(r.RunRequests == 3, "work: %d run requests, want 3", r.RunRequests)
	res.check(r.FailureCards == 3, "work: %d failure cards, want one per turn (3)", r.FailureCards)
	res.check(r.BreakerCards == 1, "work: %d breaker cards, want 1", r.BreakerCards)
	res.check(r.Holds == 1, "work: %d hold audits, want 1", r.Holds)
	// What the chat shows: three cards that ended failed, one breaker card, nothing twice.
	failed, held := 0, 0
	for _, m := range s.sb.Chat(workChat).BotMessages() {
		c := sandbox.RenderCard(m.Content)
		switch {
		case strings.HasPrefix(c.Title, "Failed · fail"):
			failed++
		case strings.HasPrefix(c.Title, "Agent held · fail"):
			held++
		}
	}
	res.check(failed == 3 && held == 1, "work: the chat shows %d failure cards and %d breaker cards, want 3 and 1", failed, held)
	return nil
}

func (s *suite) fileUnderRedelivery(ctx context.Context, res *Results, r *WorkResult) error {
	data := make([]byte, 300<<10)
	_, _ = rand.Read(data)
	data = append([]byte("\x89PNG\r\n\x1a\n"), data...)
	sum := sha256.Sum256(data)
	d, err := s.sb.UserSendsFile(chatID(0), sandbox.ChatGroup, ownerID, "chaos.png", data, "#"+goalID+" the chart", sandbox.MentionBot())
	if err != nil {
		return err
	}
	if _, err := d.Wait(ctx); err != nil {
		return err
	}
	extra := []*sandbox.Delivery{s.sb.Redeliver(d)}
	if _, err := s.sb.PushWS(ctx, "", d.Payload); err != nil {
		return err
	}
	if _, err := s.sb.PushWS(ctx, "", withEventID(d.Payload, "ev_re_file_chaos")); err != nil {
		return err
	}
	r.Redeliveries = 3
	if _, failed := waitDelivered(ctx, extra); failed > 0 {
		return errors.New("a redelivery of the image was not acknowledged")
	}
	if err := s.waitCount(ctx, time.Minute, 1, `SELECT count(*) FROM attachment a JOIN inbox_item i ON i.id = a.inbox_item_id
		WHERE i.source_message = $1 AND a.state = 'stored'`, d.MessageID); err != nil {
		return fmt.Errorf("the image is stored: %w", err)
	}
	var cerr error
	count := func(sql string, args ...any) int {
		n, err := s.count(ctx, sql, args...)
		cerr = errors.Join(cerr, err)
		return n
	}
	r.FileItems = count(`SELECT count(*) FROM inbox_item WHERE source_message = $1`, d.MessageID)
	r.FileRows = count(`SELECT count(*) FROM attachment a JOIN inbox_item i ON i.id = a.inbox_item_id WHERE i.source_message = $1`, d.MessageID)
	r.FileBlobs = count(`SELECT count(*) FROM file_blob WHERE sha256 = $1`, sum[:])
	if cerr != nil {
		return cerr
	}
	for _, q := range s.sb.Requests() {
		if q.Route == sandbox.RouteResourceGet && strings.Contains(q.Path, d.MessageID) && q.Status == 200 {
			r.FileDownloads++
		}
	}
	var stored []byte
	if err := s.st.DB().QueryRow(ctx, `SELECT a.sha256 FROM attachment a JOIN inbox_item i ON i.id = a.inbox_item_id
		WHERE i.source_message = $1`, d.MessageID).Scan(&stored); err != nil {
		return err
	}
	r.SHA256Matches = string(stored) == string(sum[:])
	res.check(r.FileItems == 1, "work: %d inbox items for the image message, want 1", r.FileItems)
	res.check(r.FileRows == 1, "work: %d files for the image message, want 1", r.FileRows)
	res.check(r.FileBlobs == 1, "work: %d stored contents of the image, want 1", r.FileBlobs)
	res.check(r.FileDownloads == 1, "work: the image was downloaded %d times from Lark, want 1", r.FileDownloads)
	res.check(r.SHA256Matches, "work: the stored image's SHA-256 differs from what was sent")
	return nil
}

// waitCount waits until sql (with args) counts want.
func (s *suite) waitCount(ctx context.Context, limit time.Duration, want int, sql string, args ...any) error {
	deadline := time.Now().Add(limit)
	n := -1
	for time.Now().Before(deadline) && ctx.Err() == nil {
		var err error
		if n, err = s.count(ctx, sql, args...); err == nil && n == want {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("counted %d, want %d after %s", n, want, limit)
}
