package store_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loopx/store"
	"loopx/store/storetest"
)

func filesStore(t *testing.T, maxFile int64) *store.Store {
	t.Helper()
	st := storetest.New(t, store.Options{MaxFileBytes: maxFile})
	ctx := t.Context()
	meta := store.Meta{Actor: "admin", Surface: "api"}
	_, err := st.CreateGoal(ctx, store.CreateGoalParams{ID: "g", Owners: []string{"ou_o"}, Meta: meta})
	require.NoError(t, err)
	_, err = st.RegisterAgent(ctx, store.RegisterAgentParams{GoalID: "g", AgentID: "a", Meta: meta})
	require.NoError(t, err)
	return st
}

// Files in PostgreSQL: stored once per content in 1 MiB chunks, streamed back whole; the
// same content twice is one stored blob; the size cap and empty files are refused.
func TestFilesAreContentAddressedAndCapped(t *testing.T) {
	t.Parallel()
	st := filesStore(t, 4<<20)
	ctx := t.Context()
	data := make([]byte, 2<<20+123)
	_, _ = rand.Read(data)
	b, err := st.NewBlob(data)
	require.NoError(t, err)
	require.NoError(t, st.StageBlob(ctx, b))
	meta := store.Meta{Actor: "admin", Surface: "api"}
	var ids []int64
	for i := range 2 {
		e, err := st.AddEvidence(ctx, store.AddEvidenceParams{GoalID: "g", AgentID: "a", Summary: "report",
			File: &store.FileUpload{Name: "../../etc/report\n.bin", Blob: b}, Meta: meta})
		require.NoError(t, err, i)
		require.Equal(t, "report.bin", e.Files[0].Name, "a base name, no control characters")
		ids = append(ids, e.Files[0].ID)
	}
	var blobs, chunks int
	require.NoError(t, st.DB().QueryRow(ctx, `SELECT (SELECT count(*) FROM file_blob), (SELECT count(*) FROM file_chunk)`).Scan(&blobs, &chunks))
	require.Equal(t, 1, blobs, "one content for two files")
	require.Equal(t, 3, chunks)
	a, err := st.GetAttachment(ctx, ids[1])
	require.NoError(t, err)
	r, err := st.OpenAttachment(ctx, a)
	require.NoError(t, err)
	got, err := io.ReadAll(r)
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, got))

	_, err = st.NewBlob(make([]byte, 4<<20+1))
	require.ErrorIs(t, err, store.ErrInvalid)
	var se *store.Error
	require.ErrorAs(t, err, &se)
	require.Equal(t, store.ReasonTooLarge, se.Reason)
	_, err = st.NewBlob(nil)
	require.ErrorIs(t, err, store.ErrInvalid)
}

// A message's file over the cap fails for good: the chat is told (once), the item goes to
// its agent with the file marked failed; contents nothing refers to any more are pruned.
func TestFetchedFileOverTheCap(t *testing.T) {
	t.Parallel()
	st := filesStore(t, 1024)
	ctx := t.Context()
	require.NoError(t, st.WithTx(ctx, func(tx *store.Tx) error {
		_, _, err := store.InsertInboxItem(ctx, tx, store.InboxInsert{GoalID: "g", AgentID: "a", Text: "the logs",
			Sender: "ou_o", SourceChat: "oc_room", SourceMessage: "om_1",
			Files: []store.LarkFile{{Key: "file_1", Kind: "file", Name: "huge.log"}, {Key: "img_1", Kind: "image"}}}, 0)
		return err
	}))
	fs, err := st.ClaimFetches(ctx, "f", time.Minute, 10)
	require.NoError(t, err)
	require.Len(t, fs, 2)
	notices := 0
	notice := func(_ context.Context, _ store.DB, a store.Attachment, it store.InboxItem) ([]store.OutboxInsert, error) {
		notices++
		return []store.OutboxInsert{{DedupeKey: store.FileRefusedKey(a.ID), Kind: "text", ReceiveID: it.SourceChat,
			ReplyTo: it.SourceMessage, Content: a.Name + " refused: " + a.Error}}, nil
	}
	require.NoError(t, st.SaveFetched(ctx, fs[0].AttachmentID, "f", "huge.log", make([]byte, 2048), notice))
	items, err := store.ListInbox(ctx, st.DB(), "g", "a", store.InboxPending)
	require.NoError(t, err)
	require.Empty(t, items, "one file is still being fetched")
	require.NoError(t, st.SaveFetched(ctx, fs[1].AttachmentID, "f", "", []byte("\x89PNG\r\n\x1a\nsmall"), notice))
	require.NoError(t, st.SaveFetched(ctx, fs[1].AttachmentID, "f", "", []byte("again"), notice), "a lost claim writes nothing")
	items, err = store.ListInbox(ctx, st.DB(), "g", "a", store.InboxPending)
	require.NoError(t, err)
	require.Len(t, items, 1, "every file settled: the item goes to its agent")
	items, err = store.WithItemFiles(ctx, st.DB(), items)
	require.NoError(t, err)
	require.Equal(t, store.FileFailed, items[0].Files[0].State)
	require.Contains(t, items[0].Files[0].Error, store.ReasonTooLarge)
	require.Equal(t, store.FileStored, items[0].Files[1].State)
	require.Equal(t, "image.png", items[0].Files[1].Name, "an image is named by its type")
	require.Equal(t, 1, notices)
	n, err := st.PruneFiles(ctx, 100)
	require.NoError(t, err)
	require.Zero(t, n, "a file still refers to the content")
}
