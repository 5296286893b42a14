package s3blob_test

import (
	"bytes"
	"crypto/rand"
	"io"
	"net/http/httptest"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/stretchr/testify/require"

	"loopx/store"
	"loopx/store/s3blob"
	"loopx/store/storetest"
)

// fakeS3 serves the S3 API on loopback (gofakes3, in memory) with one bucket.
func fakeS3(t *testing.T, bucket string) string {
	t.Helper()
	backend := s3mem.New()
	require.NoError(t, backend.CreateBucket(bucket))
	srv := httptest.NewServer(gofakes3.New(backend).Server())
	t.Cleanup(srv.Close)
	return srv.URL
}

// A file kept in an S3-compatible store round-trips through the store byte for byte: the
// upload happens before the recording transaction, the read streams the object, and a file
// nothing refers to any more is deleted from the bucket too.
func TestFilesInS3RoundTrip(t *testing.T) {
	t.Parallel()
	url := fakeS3(t, "loopx")
	blobs, err := s3blob.New(s3blob.Config{Endpoint: url, Bucket: "loopx", Prefix: "files/", AccessKey: "k", SecretKey: "s", Region: "us-east-1"})
	require.NoError(t, err)
	require.NoError(t, blobs.Check(t.Context()))
	st := storetest.New(t, store.Options{Blobs: blobs})
	ctx := t.Context()
	_, err = st.CreateGoal(ctx, store.CreateGoalParams{ID: "g", Owners: []string{"ou_o"}, Meta: store.Meta{Actor: "admin", Surface: "api"}})
	require.NoError(t, err)
	_, err = st.RegisterAgent(ctx, store.RegisterAgentParams{GoalID: "g", AgentID: "a", Meta: store.Meta{Actor: "admin", Surface: "api"}})
	require.NoError(t, err)

	data := make([]byte, 3<<20+17) // several PostgreSQL chunks' worth, were it kept there
	_, _ = rand.Read(data)
	b, err := st.NewBlob(data)
	require.NoError(t, err)
	require.NoError(t, st.StageBlob(ctx, b))
	e, err := st.AddEvidence(ctx, store.AddEvidenceParams{GoalID: "g", AgentID: "a", Summary: "the report",
		File: &store.FileUpload{Name: "report.bin", Blob: b}, Meta: store.Meta{Actor: "admin", Surface: "api"}})
	require.NoError(t, err)
	require.Len(t, e.Files, 1)
	require.Equal(t, b.Hex(), e.Files[0].SHA256)

	obj, err := blobs.Get(ctx, b.SHA256)
	require.NoError(t, err, "the content is in the bucket")
	obj.Close()
	r, err := st.OpenAttachment(ctx, e.Files[0])
	require.NoError(t, err)
	got, err := io.ReadAll(r)
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, got), "the same bytes come back")
	var inPG int
	require.NoError(t, st.DB().QueryRow(ctx, `SELECT count(*) FROM file_chunk`).Scan(&inPG))
	require.Zero(t, inPG, "nothing of it is kept in PostgreSQL")
}
