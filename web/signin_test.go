package web_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"loopx/store"
)

// TestLinkLandsOnItsPageInTheChatsLanguage: a gate card's link lands on the gate; a link from
// a Chinese chat opens a Chinese workspace; a link from nowhere follows the person's last
// choice in chat.
func TestLinkLandsOnItsPageInTheChatsLanguage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	l, err := b.srv.SignInLink(ctx, b.st.DB(), store.SignInParams{OpenID: owner, Lang: "zh", Next: "/web/goals/docs#gate-1"})
	require.NoError(t, err)
	br := b.newBrowser(t)
	status, body, _ := br.get(strings.TrimPrefix(l, br.base))
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, `<html lang="zh-CN">`, "the link's page is in the chat's language")
	status, loc := br.signInWith(l)
	require.Equal(t, http.StatusSeeOther, status)
	require.Equal(t, "/web/goals/docs#gate-1", loc)
	_, body, _ = br.get("/web/goals/docs")
	require.Contains(t, body, `<html lang="zh-CN">`)
	require.Contains(t, body, `id="gate-1"`)

	_, err = b.srv.SignInLink(ctx, b.st.DB(), store.SignInParams{OpenID: owner, Next: "https://evil.test/"})
	require.ErrorIs(t, err, store.ErrInvalid, "a link lands only on the workspace")

	require.NoError(t, store.SetChatLang(ctx, b.st.DB(), "oc_dm_member", "zh", member))
	mb := b.signIn(t, member)
	_, body, _ = mb.get("/web/")
	require.Contains(t, body, `<html lang="zh-CN">`, "the person's choice in chat")
	require.Contains(t, body, "待你处理")
}

// fakeLark stands in for Lark's OAuth here (the real SDK against the sandbox is exercised by
// the browser test): it returns to the workspace with a code that names the person.
type fakeLark struct{}

func (fakeLark) AuthorizeURL(redirectURI, state string) string {
	return "https://lark.test/authorize?" + url.Values{"redirect_uri": {redirectURI}, "state": {state}}.Encode()
}

func (fakeLark) PersonFromCode(_ context.Context, code string) (string, error) {
	if openID, ok := strings.CutPrefix(code, "code-"); ok {
		return openID, nil
	}
	return "", errors.New("lark code 20003: the code is unknown")
}

func TestSignInWithLark(t *testing.T) {
	t.Parallel()
	b := setupWith(t, func(o *webOptions) { o.Lark = fakeLark{} })
	br := b.newBrowser(t)
	status, body, _ := br.get("/web/goals/docs")
	require.Equal(t, http.StatusUnauthorized, status)
	require.Contains(t, body, `href="/web/signin/lark?next=%2fweb%2fgoals%2fdocs"`)

	res, err := br.c.Get(b.http.URL + "/web/signin/lark?next=/web/goals/docs")
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusFound, res.StatusCode)
	to, err := url.Parse(res.Header.Get("Location"))
	require.NoError(t, err)
	state := to.Query().Get("state")
	require.NotEmpty(t, state)
	require.Equal(t, b.http.URL+"/web/signin/lark/callback", to.Query().Get("redirect_uri"))

	// Another browser (without the state cookie) cannot finish this sign-in.
	status, body, _ = b.newBrowser(t).get("/web/signin/lark/callback?" + url.Values{"code": {"code-" + owner}, "state": {state}}.Encode())
	require.Equal(t, http.StatusUnauthorized, status)
	require.Contains(t, body, "Signing in with Lark did not work")

	status, body, _ = br.get("/web/signin/lark/callback?" + url.Values{"code": {"nonsense"}, "state": {state}}.Encode())
	require.Equal(t, http.StatusUnauthorized, status, "a code Lark refuses signs nobody in")
	require.Contains(t, body, "Signing in with Lark did not work")

	res, err = br.c.Get(b.http.URL + "/web/signin/lark?next=/web/goals/docs")
	require.NoError(t, err)
	res.Body.Close()
	to, _ = url.Parse(res.Header.Get("Location"))
	res, err = br.c.Get(b.http.URL + "/web/signin/lark/callback?" + url.Values{"code": {"code-" + owner}, "state": {to.Query().Get("state")}}.Encode())
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Equal(t, "/web/goals/docs", res.Header.Get("Location"))
	status, body, _ = br.get("/web/goals/docs")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, "Publish the draft?")
}

// TestAdminTokenIssuesLinks: POST /web/signin/links with the admin token issues a one-time
// link (loopx dashboard's); without it, nothing, and the refusal is audited.
func TestAdminTokenIssuesLinks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	post := func(token, body string) (int, string) {
		req, err := http.NewRequest(http.MethodPost, b.http.URL+"/web/signin/links", strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		var out struct {
			URL, Error string
		}
		require.NoError(t, json.NewDecoder(res.Body).Decode(&out))
		return res.StatusCode, out.URL + out.Error
	}
	status, msg := post("wrong", "")
	require.Equal(t, http.StatusUnauthorized, status)
	require.Contains(t, msg, "admin token")
	status, link := post(admin, `{"next": "/web/goals"}`)
	require.Equal(t, http.StatusCreated, status)
	br := b.newBrowser(t)
	status, loc := br.signInWith(link)
	require.Equal(t, http.StatusSeeOther, status)
	require.Equal(t, "/web/goals", loc)
	_, body, _ := br.get("/web/goals")
	require.Contains(t, body, "#docs", "the admin sees every goal")
	status, msg = post(admin, `{"next": "//evil.test/"}`)
	require.Equal(t, http.StatusUnprocessableEntity, status)
	require.Contains(t, msg, "not a page of the workspace")
}
