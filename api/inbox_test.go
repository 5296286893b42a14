package api_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"loopx/store"
)

func TestInboxEndpoints(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.goalWithAgent(t, "g", "a")
	other := b.agent(t, "g", "b")
	for i, text := range []string{"first", "second"} {
		_, _, err := store.InsertInboxItem(t.Context(), b.pool, store.InboxInsert{
			GoalID: "g", AgentID: "a", Text: text, Sender: "ou_m", SourceChat: "oc_1",
			SourceMessage: "om_" + itoa(int64(i)), SourceThread: "om_root",
		}, 200)
		require.NoError(t, err)
	}
	base := "/v1/goals/g/agents/a/inbox"

	r := b.do(t, "GET", base, tok, "", nil)
	require.Equal(t, 200, r.status, "%s", r.body)
	require.Equal(t, float64(2), r.json(t)["inbox"].(map[string]any)["pending"])

	// Another agent's token may not touch this inbox; the refusal is audited.
	before := b.counts(t)["audit"]
	r = b.do(t, "POST", base+"/drain", other, newKey(), map[string]any{})
	require.Equal(t, 403, r.status, "%s", r.body)
	require.Equal(t, before+1, b.counts(t)["audit"])

	// Drain; a retry with the same key returns the same items, a new key finds none.
	key := newKey()
	first := b.do(t, "POST", base+"/drain", tok, key, map[string]any{"limit": 10})
	require.Equal(t, 200, first.status, "%s", first.body)
	items := first.json(t)["items"].([]any)
	require.Len(t, items, 2)
	again := b.do(t, "POST", base+"/drain", tok, key, map[string]any{"limit": 10})
	require.Equal(t, string(first.body), string(again.body))
	empty := b.do(t, "POST", base+"/drain", tok, newKey(), map[string]any{})
	require.Equal(t, 200, empty.status)
	require.Empty(t, empty.json(t)["items"])

	id := int64(items[0].(map[string]any)["item_id"].(float64))
	// Reply twice (two keys, same text): one outbox row in the source thread.
	rep := b.do(t, "POST", base+"/reply", tok, newKey(), map[string]any{"item_id": id, "text": "on it"})
	require.Equal(t, 200, rep.status, "%s", rep.body)
	rep2 := b.do(t, "POST", base+"/reply", tok, newKey(), map[string]any{"item_id": id, "text": "on it"})
	require.Equal(t, rep.json(t)["outbox_id"], rep2.json(t)["outbox_id"])
	require.Equal(t, false, rep2.json(t)["created"])
	rows, err := store.ListOutboxAfter(t.Context(), b.pool, 0, 0)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.Equal(t, "om_0", rows[0].ReplyTo)

	// Bad input names the field and changes nothing.
	bad := b.do(t, "POST", base+"/reply", tok, newKey(), map[string]any{"item_id": id, "text": ""})
	require.Equal(t, 422, bad.status)
	require.Equal(t, "text", bad.err(t).Field)
	bad = b.do(t, "POST", base+"/ack", tok, newKey(), map[string]any{"item_ids": []int64{}})
	require.Equal(t, "item_ids", bad.err(t).Field)

	ack := b.do(t, "POST", base+"/ack", tok, newKey(), map[string]any{"item_ids": []int64{id}})
	require.Equal(t, 200, ack.status, "%s", ack.body)
	require.Equal(t, "acked", ack.json(t)["items"].([]any)[0].(map[string]any)["state"])
	r = b.do(t, "GET", base, tok, "", nil)
	require.Equal(t, float64(1), r.json(t)["inbox"].(map[string]any)["delivered"])
}
