package web_test

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"loopx/store"
)

// TestOwnersRunTheAgentFromThePage: the goal page's Stop turn, Run now, Pause agent and
// Resume agent need what chat's /stop, /run, /pause and /resume need (owners); a member's
// page has none of them and a member's post changes nothing.
func TestOwnersRunTheAgentFromThePage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	const agentPath = "/web/goals/docs/agents/codex/"

	mb := b.signIn(t, member)
	_, body, _ := mb.get("/web/goals/docs")
	require.NotContains(t, body, `action="`+agentPath+`pause"`, "members get no agent controls")
	status, loc := mb.post(agentPath+"pause", url.Values{})
	require.Equal(t, http.StatusSeeOther, status)
	require.Contains(t, loc, "m=not_allowed")
	a, err := b.st.GetAgent(ctx, "docs", "codex")
	require.NoError(t, err)
	require.Nil(t, a.HeldAt, "a member's post changes nothing")

	ob := b.signIn(t, owner)
	_, body, _ = ob.get("/web/goals/docs")
	for _, verb := range []string{"run", "pause"} {
		require.Contains(t, body, `action="`+agentPath+verb+`"`)
	}
	require.NotContains(t, body, `action="`+agentPath+`stop"`, "no live turn: no Stop turn")
	require.Contains(t, body, "Pause agent")

	status, loc = ob.post(agentPath+"stop", url.Values{})
	require.Equal(t, http.StatusSeeOther, status)
	require.Contains(t, loc, "m=agent_no_turn", "no live turn: nothing to stop, and the page says so")
	_, body, _ = ob.get(loc)
	require.Contains(t, body, "there is nothing to stop")

	status, loc = ob.post(agentPath+"run", url.Values{})
	require.Equal(t, http.StatusSeeOther, status)
	require.Contains(t, loc, "m=agent_run")
	pending, err := b.st.HasPendingRunRequests(ctx, b.clock.Now())
	require.NoError(t, err)
	require.True(t, pending, "Run now leaves a request the scheduler fires")

	status, loc = ob.post(agentPath+"pause", url.Values{})
	require.Equal(t, http.StatusSeeOther, status)
	require.Contains(t, loc, "m=agent_pause")
	require.Contains(t, loc, "#agent-codex")
	a, err = b.st.GetAgent(ctx, "docs", "codex")
	require.NoError(t, err)
	require.NotNil(t, a.HeldAt)
	_, body, _ = ob.get("/web/goals/docs")
	require.Contains(t, body, "Held by "+owner)
	require.Contains(t, body, `action="`+agentPath+`resume"`)
	require.NotContains(t, body, `action="`+agentPath+`pause"`)

	status, loc = ob.post(agentPath+"resume", url.Values{})
	require.Equal(t, http.StatusSeeOther, status)
	require.Contains(t, loc, "m=agent_resume")
	a, err = b.st.GetAgent(ctx, "docs", "codex")
	require.NoError(t, err)
	require.Nil(t, a.HeldAt)
	status, loc = ob.post(agentPath+"resume", url.Values{})
	require.Equal(t, http.StatusSeeOther, status)
	require.Contains(t, loc, "m=agent_not_held")

	status, _ = ob.post("/web/goals/docs/agents/codex/explode", url.Values{})
	require.Equal(t, http.StatusNotFound, status)
}

// TestFilesDownloadForTheGoalsPeopleOnly: evidence's file is linked from the goal page and
// downloads with its bytes for a member; a stranger is told it does not exist.
func TestFilesDownloadForTheGoalsPeopleOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	data := []byte("%PDF-1.4 the release notes\n")
	blob, err := b.st.NewBlob(data)
	require.NoError(t, err)
	require.NoError(t, b.st.StageBlob(ctx, blob))
	ev, err := b.st.AddEvidence(ctx, store.AddEvidenceParams{GoalID: "docs", AgentID: "codex", Kind: "artifact",
		Summary: "Release notes", File: &store.FileUpload{Name: "notes.pdf", Blob: blob}, Meta: agentMeta})
	require.NoError(t, err)
	evs, err := store.WithEvidenceFiles(ctx, b.st.DB(), []store.Evidence{ev})
	require.NoError(t, err)
	require.Len(t, evs[0].Files, 1)
	path := "/web/files/" + strconv.FormatInt(evs[0].Files[0].ID, 10)

	mb := b.signIn(t, member)
	_, body, _ := mb.get("/web/goals/docs")
	require.Contains(t, body, `href="`+path+`"`)
	res, err := mb.c.Get(mb.base + path)
	require.NoError(t, err)
	got, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	sum := sha256.Sum256(data)
	require.Equal(t, hex.EncodeToString(sum[:]), func() string { s := sha256.Sum256(got); return hex.EncodeToString(s[:]) }())
	require.Contains(t, res.Header.Get("Content-Disposition"), "notes.pdf")

	status, _, _ := b.signIn(t, stranger).get(path)
	require.Equal(t, http.StatusNotFound, status, "a stranger is told the file does not exist")
	status, _, _ = mb.get("/web/files/999999")
	require.Equal(t, http.StatusNotFound, status)
}
