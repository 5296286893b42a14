package api_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestProposalPreviewConfirmAndStale(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.mustAdmin(t, "POST", "/v1/goals", map[string]any{"goal_id": "g1", "owners": []string{"ou_owner"}, "allowed_slots": 12}, 201)

	key := newKey()
	body := map[string]any{"kind": "goal.set", "goal": map[string]any{"allowed_slots": 50}}
	first := b.do(t, "POST", "/v1/goals/g1/proposals", adminToken, key, body)
	require.Equal(t, http.StatusCreated, first.status, string(first.body))
	p := first.json(t)
	require.Equal(t, "preview_ready", p["state"])
	require.Equal(t, []any{map[string]any{"field": "allowed_slots", "before": "12", "after": "50"}}, p["diff"])
	require.Equal(t, []any{"quota 12 of 12 left in 24 h → 50 of 50 in 24 h"}, p["effects_text"])
	again := b.do(t, "POST", "/v1/goals/g1/proposals", adminToken, key, body)
	require.Equal(t, string(first.body), string(again.body), "same key, same request: the same proposal")
	other := b.do(t, "POST", "/v1/goals/g1/proposals", adminToken, key, map[string]any{"kind": "goal.pause"})
	require.Equal(t, http.StatusConflict, other.status)
	require.Equal(t, "idempotency_key", other.err(t).Field)

	id := itoa(int64(p["proposal_id"].(float64)))
	show := b.mustAdmin(t, "GET", "/v1/goals/g1/proposals/"+id, nil, 200)
	require.Equal(t, "preview_ready", show["state"])

	// The admin token may still apply directly; the proposal computed before goes stale.
	b.mustAdmin(t, "PATCH", "/v1/goals/g1", map[string]any{"version": 1, "window_hours": 48}, 200)
	res := b.mustAdmin(t, "POST", "/v1/goals/g1/proposals/"+id+"/confirm", map[string]any{}, 200)
	require.Equal(t, "stale", res["proposal"].(map[string]any)["state"])
	fresh := res["fresh"].(map[string]any)
	require.Equal(t, "preview_ready", fresh["state"])
	freshID := itoa(int64(fresh["proposal_id"].(float64)))
	res = b.mustAdmin(t, "POST", "/v1/goals/g1/proposals/"+freshID+"/confirm", map[string]any{}, 200)
	require.Equal(t, "applied", res["proposal"].(map[string]any)["state"])
	g := res["goal"].(map[string]any)
	require.Equal(t, float64(50), g["allowed_slots"])
	require.Equal(t, float64(48), g["window_hours"])

	// A cancelled proposal cannot apply.
	p2 := b.mustAdmin(t, "POST", "/v1/goals/g1/proposals", map[string]any{"kind": "goal.pause"}, 201)
	id2 := itoa(int64(p2["proposal_id"].(float64)))
	b.mustAdmin(t, "POST", "/v1/goals/g1/proposals/"+id2+"/cancel", map[string]any{}, 200)
	res = b.mustAdmin(t, "POST", "/v1/goals/g1/proposals/"+id2+"/confirm", map[string]any{}, 200)
	require.Equal(t, true, res["unchanged"])
	require.Equal(t, "cancelled", res["proposal"].(map[string]any)["state"])
	goal := b.mustAdmin(t, "GET", "/v1/goals/g1", nil, 200)
	require.Equal(t, "active", goal["status"])

	// The direct change is audited like a confirmed proposal.
	audit := b.mustAdmin(t, "GET", "/v1/audit?goal_id=g1", nil, 200)
	var actions []string
	for _, a := range audit["audit"].([]any) {
		actions = append(actions, a.(map[string]any)["action"].(string))
	}
	require.Contains(t, actions, "proposal.apply")
	require.Contains(t, actions, "proposal.confirm")

	// An agent token may not propose.
	tok := b.agent(t, "g1", "a1")
	r := b.do(t, "POST", "/v1/goals/g1/proposals", tok, newKey(), map[string]any{"kind": "goal.pause"})
	require.Equal(t, http.StatusForbidden, r.status)
	bad := b.do(t, "POST", "/v1/goals/g1/proposals", adminToken, newKey(), map[string]any{"kind": "goal.set", "goal": map[string]any{"allowed_slots": -3}})
	require.Equal(t, http.StatusUnprocessableEntity, bad.status)
	require.Equal(t, "allowed_slots", bad.err(t).Field)
}
