package mcp_test

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"

	"loopx/api"
	"loopx/mcp"
	"loopx/quota"
	"loopx/store"
)

// The tools of running the work: progress notes on the turn, a deliverable attached to
// evidence, the files people sent with their messages (inbox_drain, file_get), and an
// owner's stop learned from should_run.
func TestProgressFilesAndStop(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	cs := b.session(t, b.client(b.token))

	d := ok[mcp.ShouldRunOut](t, cs, "should_run", nil)
	require.True(t, d.ShouldRun)
	require.Equal(t, 1, b.count(`SELECT count(*) FROM turn WHERE via = 'mcp' AND state = 'live'`), "an MCP turn (progress card by default)")
	ok[store.TurnNote](t, cs, "progress", map[string]any{"text": "parsing the grammar"})
	require.Equal(t, 1, b.count(`SELECT count(*) FROM turn_note WHERE text = 'parsing the grammar'`))

	report := []byte("the parser report\n")
	ev := ok[mcp.EvidenceOut](t, cs, "evidence_add", map[string]any{"summary": "the report", "file_name": "report.txt",
		"content_base64": base64.StdEncoding.EncodeToString(report)})
	require.Len(t, ev.Evidence.Files, 1)
	sum := sha256.Sum256(report)
	require.Equal(t, hex.EncodeToString(sum[:]), ev.Evidence.Files[0].SHA256)
	res := call(t, cs, "evidence_add", map[string]any{"summary": "x", "file_path": "/etc/hostname"})
	require.True(t, res.IsError, "no local paths over this endpoint")
	require.Contains(t, text(res), "file_path")

	// A person sent an image: once fetched, the item goes to the agent with it.
	image := make([]byte, 5000)
	_, _ = rand.Read(image)
	image = append([]byte("\x89PNG\r\n\x1a\n"), image...)
	require.NoError(t, b.st.WithTx(ctx, func(tx *store.Tx) error {
		_, _, err := store.InsertInboxItem(ctx, tx, store.InboxInsert{GoalID: "demo", AgentID: "codex", Text: "see this",
			Sender: b.ownerID, SourceChat: "oc_room", SourceMessage: "om_pic", Files: []store.LarkFile{{Key: "img_1", Kind: "image"}}}, 0)
		return err
	}))
	require.Equal(t, 0, b.count(`SELECT count(*) FROM inbox_item WHERE state = 'pending'`), "not before its file is there")
	fetches, err := b.st.ClaimFetches(ctx, "test", 60e9, 10)
	require.NoError(t, err)
	require.Len(t, fetches, 1)
	require.NoError(t, b.st.SaveFetched(ctx, fetches[0].AttachmentID, "test", "", image, nil))
	items := ok[api.InboxItems](t, cs, "inbox_drain", nil).Items
	require.Len(t, items, 1)
	require.Len(t, items[0].Files, 1)
	f := items[0].Files[0]
	require.Equal(t, "image", f.Kind)
	require.Equal(t, "image/png", f.Mime)
	got := ok[mcp.FileGetOut](t, cs, "file_get", map[string]any{"file_id": f.ID})
	raw, err := base64.StdEncoding.DecodeString(got.ContentBase64)
	require.NoError(t, err)
	require.True(t, bytes.Equal(image, raw), "the bytes that were sent")
	// Another goal's agent cannot read it.
	other := b.session(t, b.client(b.other))
	require.True(t, call(t, other, "file_get", map[string]any{"file_id": f.ID}).IsError)

	// An owner stops the turn: the next should_run says so and ends it as stopped.
	_, err = b.st.RequestStop(ctx, store.StopParams{GoalID: "demo", AgentID: "codex", Meta: store.Meta{Actor: b.ownerID, Surface: "chat"}})
	require.NoError(t, err)
	stop := ok[mcp.ShouldRunOut](t, cs, "should_run", nil)
	require.Equal(t, quota.StateStop, stop.State)
	require.NotNil(t, stop.Stopped)
	require.Equal(t, store.TurnStopped, stop.Stopped.State)
	require.Contains(t, stop.NextStep, "An owner stopped your turn")
	require.Equal(t, 1, b.count(`SELECT count(*) FROM turn WHERE state = 'stopped'`))
}
