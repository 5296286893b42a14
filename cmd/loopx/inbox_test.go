package main

import (
	"encoding/json"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"loopx/api"
	"loopx/api/apitest"
	"loopx/store"
	"loopx/store/storetest"
)

func TestInboxCommands(t *testing.T) {
	t.Parallel()
	const admin = "admin-token-for-inbox-cli-tests"
	st := storetest.New(t, store.Options{})
	hs := httptest.NewServer(apitest.New(t, st, apitest.Options{AdminToken: admin}).API)
	t.Cleanup(hs.Close)
	meta := store.Meta{Actor: "admin", Surface: "system"}
	_, err := st.CreateGoal(t.Context(), store.CreateGoalParams{ID: "demo", Owners: []string{"ou_o"}, Meta: meta})
	require.NoError(t, err)
	ag, err := st.RegisterAgent(t.Context(), store.RegisterAgentParams{GoalID: "demo", AgentID: "codex", Meta: meta})
	require.NoError(t, err)
	it, _, err := store.InsertInboxItem(t.Context(), st.DB(), store.InboxInsert{
		GoalID: "demo", AgentID: "codex", Text: "please rebase", Sender: "ou_o",
		SourceChat: "oc_1", SourceMessage: "om_src", SourceThread: "om_src",
	}, 0)
	require.NoError(t, err)
	vars := map[string]string{"LOOPX_URL": hs.URL, "LOOPX_TOKEN": ag.Token}
	id := strconv.FormatInt(it.ID, 10)

	code, out, stderr := runInProcess(t, vars, "inbox", "drain", "--goal-id", "demo", "--agent-id", "codex", "--format", "json")
	require.Equal(t, 0, code, stderr)
	var drained api.InboxItems
	require.NoError(t, json.Unmarshal([]byte(out), &drained))
	require.Len(t, drained.Items, 1)
	require.Equal(t, "please rebase", drained.Items[0].Text)
	require.Equal(t, store.InboxDelivered, drained.Items[0].State)

	code, out, stderr = runInProcess(t, vars, "inbox", "reply", "--goal-id", "demo", "--agent-id", "codex", "--item", id, "--text", "rebased")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "outbox_id")
	rows, err := store.ListOutboxAfter(t.Context(), st.DB(), 0, 0)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.Equal(t, "om_src", rows[0].ReplyTo)
	require.True(t, rows[0].ReplyInThread)

	code, out, stderr = runInProcess(t, vars, "inbox", "ack", "--goal-id", "demo", "--agent-id", "codex", "--item", id)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "acked")

	code, out, stderr = runInProcess(t, vars, "inbox", "status", "--goal-id", "demo", "--agent-id", "codex", "--format", "json")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, `"pending":0`)

	// Another agent's inbox is refused (exit code for a refusal by permission), and bad input
	// is a usage error naming the flag.
	code, _, stderr = runInProcess(t, vars, "inbox", "drain", "--goal-id", "demo", "--agent-id", "other")
	require.NotEqual(t, 0, code)
	require.Contains(t, stderr, "cannot act as")
	code, _, stderr = runInProcess(t, vars, "inbox", "reply", "--goal-id", "demo", "--agent-id", "codex", "--item", id)
	require.Equal(t, exitUsage, code, stderr)
	require.Contains(t, stderr, "text")
}
