package api_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loopx/api/apitest"
	"loopx/store"
	"loopx/store/storetest"
)

// Files are read like what they belong to: a deliverable by any agent of its goal, a file a
// person sent with a message only by the agent the message is for; another goal's agent
// learns nothing (404), and the refusal is audited.
func TestFilesAreAuthorizedLikeTheirItem(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := storetest.New(t, store.Options{})
	const adminTok = "admin-token-for-file-tests-0123456789"
	kit := apitest.New(t, st, apitest.Options{AdminToken: adminTok})
	srv := httptest.NewServer(kit.API)
	t.Cleanup(srv.Close)
	meta := store.Meta{Actor: "admin", Surface: "api"}
	tokens := map[string]string{}
	for _, ga := range [][2]string{{"g", "a"}, {"g", "b"}, {"other", "x"}} {
		if _, err := st.GetGoal(ctx, ga[0]); err != nil {
			_, err = st.CreateGoal(ctx, store.CreateGoalParams{ID: ga[0], Owners: []string{"ou_o"}, Meta: meta})
			require.NoError(t, err)
		}
		reg, err := st.RegisterAgent(ctx, store.RegisterAgentParams{GoalID: ga[0], AgentID: ga[1], Meta: meta})
		require.NoError(t, err)
		tokens[ga[0]+"/"+ga[1]] = reg.Token
	}
	call := func(token, method, path, body string) (int, []byte) {
		req, err := http.NewRequestWithContext(ctx, method, srv.URL+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		if method != http.MethodGet {
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", fmt.Sprint(time.Now().UnixNano()))
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, b
	}
	report := []byte("# the report\n")
	status, body := call(tokens["g/a"], http.MethodPost, "/v1/goals/g/evidence",
		`{"summary":"the report","file":{"name":"report.md","content_base64":"`+base64.StdEncoding.EncodeToString(report)+`"}}`)
	require.Equal(t, http.StatusCreated, status, string(body))
	require.Contains(t, string(body), `"url":"/v1/files/1"`)

	require.NoError(t, st.WithTx(ctx, func(tx *store.Tx) error {
		_, _, err := store.InsertInboxItem(ctx, tx, store.InboxInsert{GoalID: "g", AgentID: "a", Text: "logs", Sender: "ou_o",
			SourceChat: "oc_1", SourceMessage: "om_1", Files: []store.LarkFile{{Key: "file_k", Kind: "file", Name: "app.log"}}}, 0)
		return err
	}))
	fs, err := st.ClaimFetches(ctx, "f", time.Minute, 1)
	require.NoError(t, err)
	require.NoError(t, st.SaveFetched(ctx, fs[0].AttachmentID, "f", "app.log", []byte("line 1\n"), nil))
	inboxFile := fs[0].AttachmentID

	for _, c := range []struct {
		who  string
		file int64
		want int
	}{
		{"g/a", 1, 200}, {"g/b", 1, 200}, {"other/x", 1, 404},
		{"g/a", inboxFile, 200}, {"g/b", inboxFile, 404}, {"other/x", inboxFile, 404},
	} {
		status, body := call(tokens[c.who], http.MethodGet, fmt.Sprintf("/v1/files/%d", c.file), "")
		require.Equal(t, c.want, status, "%s reads file %d: %s", c.who, c.file, body)
		if c.want == 200 && c.file == 1 {
			require.True(t, bytes.Equal(report, body))
		}
	}
	status, body = call(adminTok, http.MethodGet, fmt.Sprintf("/v1/files/%d", inboxFile), "")
	require.Equal(t, 200, status)
	require.Equal(t, "line 1\n", string(body))
	var refused int
	require.NoError(t, st.DB().QueryRow(context.Background(), `SELECT count(*) FROM audit WHERE action = 'read file' AND NOT allowed`).Scan(&refused))
	require.Equal(t, 3, refused)
}
