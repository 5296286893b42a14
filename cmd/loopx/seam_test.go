package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loopx/store"
	"loopx/store/storetest"
)

// post sends one API call to s and returns the status and body. A transport error is
// returned, not failed on, so a caller can tell a hung server from an answer.
func (s *serveProc) post(ctx context.Context, token, key, path string, body any) (int, []byte, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url+path, bytes.NewReader(b))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}

func (s *serveProc) mustPost(t *testing.T, token, path string, body any, want int) map[string]any {
	t.Helper()
	status, out, err := s.post(t.Context(), token, fmt.Sprintf("k-%d", time.Now().UnixNano()), path, body)
	require.NoError(t, err)
	require.Equal(t, want, status, "POST %s: %s", path, out)
	var m map[string]any
	require.NoError(t, json.Unmarshal(out, &m))
	return m
}

// The transaction seam under a burst, through a real `loopx serve` whose pool has only four
// connections: three goals that just stalled (three turns without evidence, stall_turns 3)
// each get 30 concurrent should-runs with begin_turn, 90 in all. Every call is answered 200
// within 20 s, /readyz stays 200, and each goal has exactly one open stall gate with one
// owner card. (Before the seam was fixed, the stall-gate card took a second pool connection
// inside the should-run transaction and four such transactions hung the server.)
func TestStallBurstWithFourConnections(t *testing.T) {
	t.Parallel()
	dbURL := storetest.NewDatabase(t) + "&pool_max_conns=4"
	s := startServe(t, map[string]string{"DATABASE_URL": dbURL, "LOOPX_ADMIN_TOKEN": e2eAdminToken,
		"LOOPX_BOT": "off", "LOOPX_SCHEDULER": "off"})
	goals := []string{"stall-a", "stall-b", "stall-c"}
	tokens := map[string]string{}
	for _, g := range goals {
		s.mustPost(t, e2eAdminToken, "/v1/goals", map[string]any{"goal_id": g, "owners": []string{"ou_owner"}, "stall_turns": 3}, 201)
		reg := s.mustPost(t, e2eAdminToken, "/v1/goals/"+g+"/agents", map[string]any{"agent_id": "codex"}, 201)
		tokens[g] = reg["token"].(string)
		s.mustPost(t, e2eAdminToken, "/v1/goals/"+g+"/todos", map[string]any{"text": "make progress"}, 201)
		for i := range 3 { // three turns that end without evidence
			turn := fmt.Sprintf("s%d", i)
			d := s.mustPost(t, tokens[g], "/v1/goals/"+g+"/should-run", map[string]any{"turn_instance_id": turn, "begin_turn": true}, 200)
			require.Equal(t, "run", d["decision"], "%v", d)
			s.mustPost(t, tokens[g], "/v1/goals/"+g+"/spend-slot", map[string]any{"turn_instance_id": turn}, 200)
		}
	}

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute) // bounds a stuck burst, not a slow machine
	defer cancel()
	type answer struct {
		goal   string
		status int
		body   []byte
		err    error
	}
	answers := make(chan answer, 90)
	var wg sync.WaitGroup
	for _, g := range goals {
		for i := range 30 {
			wg.Go(func() {
				status, body, err := s.post(ctx, tokens[g], fmt.Sprintf("burst-%s-%d", g, i), "/v1/goals/"+g+"/should-run",
					map[string]any{"turn_instance_id": fmt.Sprintf("x%d", i), "begin_turn": true})
				answers <- answer{goal: g, status: status, body: body, err: err}
			})
		}
	}
	wg.Wait()
	close(answers)
	for a := range answers {
		require.NoError(t, a.err, "every call is answered within 20 s (goal %s)", a.goal)
		require.Equal(t, http.StatusOK, a.status, "goal %s: %s", a.goal, a.body)
		var d map[string]any
		require.NoError(t, json.Unmarshal(a.body, &d))
		// The calls that decided before the gate committed answer stalled; later ones see the
		// open gate and wait for the owner.
		require.Contains(t, []any{"stalled", "waiting"}, d["state"], "goal %s: %s", a.goal, a.body)
	}

	resp, err := http.Get(s.url + "/readyz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "/readyz after the burst")

	pool, err := store.Open(t.Context(), dbURL)
	require.NoError(t, err)
	defer pool.Close()
	for _, g := range goals {
		var gates, cards int
		require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM gate WHERE goal_id = $1 AND kind = 'stall' AND status = 'open'`, g).Scan(&gates))
		require.Equal(t, 1, gates, "goal %s: one open stall gate", g)
		require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM outbox o JOIN gate s ON s.id = o.gate_id
			WHERE s.goal_id = $1 AND s.kind = 'stall' AND o.kind = 'card'`, g).Scan(&cards))
		require.Equal(t, 1, cards, "goal %s: one owner card", g)
	}
}
