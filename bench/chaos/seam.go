package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// SeamResult is the transaction seam under bursts through a replica whose pool has four
// connections: goals that just stalled each get concurrent should-runs, and same-key
// retries race each other.
type SeamResult struct {
	PoolConnections  int            `json:"pool_connections"`
	StallGoals       int            `json:"stall_goals"`
	ShouldRuns       int            `json:"should_runs"`
	SameKeyCalls     int            `json:"same_key_calls"`
	SameKeys         int            `json:"same_keys"`
	Statuses         map[string]int `json:"statuses"`
	Unanswered       int            `json:"unanswered_within_30s"`
	OpenStallGates   int            `json:"open_stall_gates"`
	StallCards       int            `json:"stall_cards"`
	TodosFromRetries int            `json:"todos_from_same_key_retries"`
	BurstSeconds     float64        `json:"burst_seconds"`
	ReadyAfter       int            `json:"readyz_after_burst"`
}

func (s *suite) seamScenario(ctx context.Context, res *Results) error {
	r := &SeamResult{PoolConnections: 4, StallGoals: 10, Statuses: map[string]int{}}
	res.Seam = r
	rep, err := s.newReplica("seam", s.pg.URL(s.dbName)+"&pool_max_conns=4", map[string]string{"LOOPX_BOT": "off"})
	if err != nil {
		return err
	}
	if err := rep.start(); err != nil {
		return err
	}
	defer func() { _, _ = rep.term(10 * time.Second) }()
	if _, err := rep.waitReady(ctx, 60*time.Second); err != nil {
		return err
	}
	post := func(ctx context.Context, token, key, path string, body any) (int, []byte, error) {
		return s.api(ctx, rep.url, "POST", path, token, key, body)
	}
	tokens := map[string]string{}
	for g := range r.StallGoals {
		goal := fmt.Sprintf("stall-%02d", g)
		if st, b, err := post(ctx, adminToken, "seed-"+goal, "/v1/goals", map[string]any{"goal_id": goal, "owners": []string{ownerID}, "stall_turns": 3}); err != nil || st != 201 {
			return fmt.Errorf("create %s: %d %s %v", goal, st, b, err)
		}
		st, b, err := post(ctx, adminToken, "seed-agent-"+goal, "/v1/goals/"+goal+"/agents", map[string]any{"agent_id": "codex"})
		if err != nil || st != 201 {
			return fmt.Errorf("agent %s: %d %s %v", goal, st, b, err)
		}
		var reg map[string]any
		_ = json.Unmarshal(b, &reg)
		tokens[goal], _ = reg["token"].(string)
		if st, b, err := post(ctx, adminToken, "seed-todo-"+goal, "/v1/goals/"+goal+"/todos", map[string]any{"text": "make progress"}); err != nil || st != 201 {
			return fmt.Errorf("todo %s: %d %s %v", goal, st, b, err)
		}
		for i := range 3 { // three turns that end without evidence: the goal has stalled
			turn := fmt.Sprintf("s%d", i)
			if st, b, err := post(ctx, tokens[goal], "sr-"+goal+turn, "/v1/goals/"+goal+"/should-run", map[string]any{"turn_instance_id": turn, "begin_turn": true}); err != nil || st != 200 {
				return fmt.Errorf("should-run %s: %d %s %v", goal, st, b, err)
			}
			if st, b, err := post(ctx, tokens[goal], "sp-"+goal+turn, "/v1/goals/"+goal+"/spend-slot", map[string]any{"turn_instance_id": turn}); err != nil || st != 200 {
				return fmt.Errorf("spend %s: %d %s %v", goal, st, b, err)
			}
		}
	}
	burstCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	record := func(status int, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			r.Unanswered++
			return
		}
		r.Statuses[fmt.Sprint(status)]++
	}
	start := time.Now()
	for goal, tok := range tokens {
		for i := range 30 {
			r.ShouldRuns++
			wg.Go(func() {
				st, _, err := post(burstCtx, tok, fmt.Sprintf("burst-%s-%d", goal, i), "/v1/goals/"+goal+"/should-run",
					map[string]any{"turn_instance_id": fmt.Sprintf("x%d", i), "begin_turn": true})
				record(st, err)
			})
		}
	}
	r.SameKeys = 20
	for k := range r.SameKeys {
		for range 10 {
			r.SameKeyCalls++
			wg.Go(func() {
				st, _, err := post(burstCtx, adminToken, fmt.Sprintf("same-key-%d", k), "/v1/goals/stall-00/todos",
					map[string]any{"text": fmt.Sprintf("retried todo %d", k)})
				record(st, err)
			})
		}
	}
	wg.Wait()
	r.BurstSeconds = time.Since(start).Seconds()
	r.ReadyAfter = s.status(ctx, rep.url+"/readyz")
	r.OpenStallGates, _ = s.count(ctx, `SELECT count(*) FROM gate WHERE goal_id LIKE 'stall-%' AND kind = 'stall' AND status = 'open'`)
	r.StallCards, _ = s.count(ctx, `SELECT count(*) FROM outbox o JOIN gate g ON g.id = o.gate_id WHERE g.goal_id LIKE 'stall-%' AND g.kind = 'stall' AND o.kind = 'card'`)
	r.TodosFromRetries, _ = s.count(ctx, `SELECT count(*) FROM todo WHERE goal_id = 'stall-00' AND text LIKE 'retried todo %'`)
	res.check(r.Unanswered == 0, "seam: %d calls unanswered within 30 s", r.Unanswered)
	for st, n := range r.Statuses {
		res.check(st == "200" || st == "201", "seam: %d calls answered %s", n, st)
	}
	res.check(r.OpenStallGates == r.StallGoals, "seam: %d open stall gates for %d stalled goals", r.OpenStallGates, r.StallGoals)
	res.check(r.StallCards == r.StallGoals, "seam: %d stall cards for %d goals (owners get one each)", r.StallCards, r.StallGoals)
	res.check(r.TodosFromRetries == r.SameKeys, "seam: %d todos from %d keys retried 10 times each", r.TodosFromRetries, r.SameKeys)
	res.check(r.ReadyAfter == http.StatusOK, "seam: /readyz %d after the burst", r.ReadyAfter)
	return nil
}
