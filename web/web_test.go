package web_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loopx/cards"
	"loopx/change"
	"loopx/inbox"
	"loopx/store"
	"loopx/store/storetest"
	"loopx/templates"
	"loopx/web"
)

const (
	owner    = "ou_owner"
	member   = "ou_member"
	stranger = "ou_stranger"
	admin    = "admin-token-0123456789"
)

var setupMeta = store.Meta{Actor: "admin", Surface: "system"}

type testBundle struct {
	st    *store.Store
	srv   *web.Server
	http  *httptest.Server
	clock *storetest.Clock
	k     *change.Kernel
	tpl   *templates.Set
}

// setup is a workspace over goal "docs" (owner ou_owner, member ou_member, 12 slots) with
// agent codex and one open gate announced to the owner.
func setup(t *testing.T) *testBundle {
	t.Helper()
	return setupWith(t, nil)
}

type webOptions = web.Options

// setupWith is setup with the workspace's options changed by edit.
func setupWith(t *testing.T, edit func(*webOptions)) *testBundle {
	t.Helper()
	clock := storetest.NewClock(time.Now().UTC().Truncate(time.Microsecond))
	st := storetest.New(t, store.Options{Now: clock.Now})
	ctx := t.Context()
	slots := 12
	_, err := st.CreateGoal(ctx, store.CreateGoalParams{ID: "docs", Title: "Docs site", Owners: []string{owner}, Members: []string{member}, AllowedSlots: &slots, Meta: setupMeta})
	require.NoError(t, err)
	_, err = st.RegisterAgent(ctx, store.RegisterAgentParams{GoalID: "docs", AgentID: "codex", Meta: setupMeta})
	require.NoError(t, err)
	tpl, err := templates.New()
	require.NoError(t, err)
	cs := cards.New(tpl, "en")
	_, err = st.AskGate(ctx, store.AskGateParams{GoalID: "docs", AgentID: "codex", Question: "Publish the draft?", Notice: cs.Gates.Ask,
		Meta: store.Meta{Actor: "agent:docs/codex", Surface: "api"}})
	require.NoError(t, err)
	k, err := change.New(st, change.Options{Templates: tpl, Cards: cs.Proposals.Update})
	require.NoError(t, err)
	ib, err := inbox.New(st, inbox.Options{Now: clock.Now, Templates: tpl})
	require.NoError(t, err)
	srv, err := web.New(web.Options{Store: st, Changes: k, Cards: cs, Templates: tpl, Inbox: ib, AdminToken: admin, Now: clock.Now})
	require.NoError(t, err)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	opts := web.Options{Store: st, Changes: k, Cards: cs, Templates: tpl, Inbox: ib, AdminToken: admin, Now: clock.Now, BaseURL: hs.URL}
	if edit != nil {
		edit(&opts)
	}
	srv2, err := web.New(opts)
	require.NoError(t, err)
	hs.Config.Handler = srv2
	return &testBundle{st: st, srv: srv2, http: hs, clock: clock, k: k, tpl: tpl}
}

// browser is one signed-in client.
type browser struct {
	t    *testing.T
	c    *http.Client
	base string
	csrf string
}

func (b *testBundle) newBrowser(t *testing.T) *browser {
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &browser{t: t, c: c, base: b.http.URL}
}

// link issues a sign-in link for openID as the bot would.
func (b *testBundle) link(t *testing.T, openID string) string {
	t.Helper()
	l, err := b.srv.SignInLink(t.Context(), b.st.DB(), store.SignInParams{OpenID: openID})
	require.NoError(t, err)
	return l
}

func (b *testBundle) signIn(t *testing.T, openID string) *browser {
	t.Helper()
	br := b.newBrowser(t)
	status, _ := br.signInWith(b.link(t, openID))
	require.Equal(t, http.StatusSeeOther, status)
	return br
}

func (br *browser) signInWith(link string) (int, string) {
	br.t.Helper()
	status, body, _ := br.get(strings.TrimPrefix(link, br.base))
	require.Equal(br.t, http.StatusOK, status)
	require.Contains(br.t, body, `action="/web/signin"`)
	u, err := url.Parse(link)
	require.NoError(br.t, err)
	return br.postRaw("/web/signin", url.Values{"t": {u.Query().Get("t")}})
}

var csrfRe = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func (br *browser) get(path string) (int, string, http.Header) {
	br.t.Helper()
	res, err := br.c.Get(br.base + path)
	require.NoError(br.t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(br.t, err)
	if m := csrfRe.FindStringSubmatch(string(b)); m != nil {
		br.csrf = m[1]
	}
	return res.StatusCode, string(b), res.Header
}

func (br *browser) postRaw(path string, form url.Values) (int, string) {
	br.t.Helper()
	res, err := br.c.PostForm(br.base+path, form)
	require.NoError(br.t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(br.t, err)
	if res.StatusCode == http.StatusSeeOther {
		return res.StatusCode, res.Header.Get("Location")
	}
	return res.StatusCode, string(b)
}

// post submits a form of the session (CSRF token and a fresh key added).
func (br *browser) post(path string, form url.Values) (int, string) {
	br.t.Helper()
	if br.csrf == "" {
		br.get("/web/")
	}
	form.Set("csrf", br.csrf)
	if !form.Has("key") {
		form.Set("key", "k-"+time.Now().Format("150405.000000000"))
	}
	return br.postRaw(path, form)
}

func TestSignInLinkIsSingleUseBoundAndShort(t *testing.T) {
	t.Parallel()
	b := setup(t)
	link := b.link(t, owner)
	require.True(t, strings.HasPrefix(link, b.http.URL+"/web/signin?t="))

	br := b.newBrowser(t)
	status, _, _ := br.get("/web/")
	require.Equal(t, http.StatusUnauthorized, status, "no session: the sign-in page")
	status, loc := br.signInWith(link)
	require.Equal(t, http.StatusSeeOther, status)
	require.Equal(t, "/web/", loc)
	u, _ := url.Parse(b.http.URL)
	cookies := br.c.Jar.Cookies(&url.URL{Scheme: "http", Host: u.Host, Path: "/web/"})
	require.Len(t, cookies, 1)
	status, body, _ := br.get("/web/")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, "What needs you")
	require.Contains(t, body, owner)

	// The same link a second time says so before any click, and signs nobody in.
	other := b.newBrowser(t)
	status, body, _ = other.get(strings.TrimPrefix(link, other.base))
	require.Equal(t, http.StatusGone, status)
	require.Contains(t, body, "This link was already used")
	require.NotContains(t, body, `action="/web/signin"`, "no Continue button on a used link")
	lu, _ := url.Parse(link)
	status, body = other.postRaw("/web/signin", url.Values{"t": {lu.Query().Get("t")}})
	require.Equal(t, http.StatusUnauthorized, status)
	require.Contains(t, body, "This link does not work")

	// A link older than 10 minutes neither; it says it expired.
	late := b.link(t, owner)
	b.clock.Add(store.SignInTTL + time.Second)
	status, body, _ = b.newBrowser(t).get(strings.TrimPrefix(late, b.http.URL))
	require.Equal(t, http.StatusGone, status)
	require.Contains(t, body, "This link has expired")
	lu, _ = url.Parse(late)
	status, _ = b.newBrowser(t).postRaw("/web/signin", url.Values{"t": {lu.Query().Get("t")}})
	require.Equal(t, http.StatusUnauthorized, status)
	status, body, _ = b.newBrowser(t).get("/web/signin?t=0123")
	require.Equal(t, http.StatusNotFound, status)
	require.Contains(t, body, "This is not a sign-in link of this workspace")

	// Sign-out ends the session on the server.
	b.clock.Add(-store.SignInTTL - time.Second)
	status, loc = br.post("/web/signout", url.Values{})
	require.Equal(t, http.StatusSeeOther, status)
	require.Contains(t, loc, "/web/signin")
	status, _, _ = br.get("/web/")
	require.Equal(t, http.StatusUnauthorized, status)
}

func TestCookieAndHeaders(t *testing.T) {
	t.Parallel()
	b := setup(t)
	br := b.newBrowser(t)
	link := b.link(t, owner)
	br.get(strings.TrimPrefix(link, b.http.URL))
	u, _ := url.Parse(link)
	res, err := br.c.PostForm(b.http.URL+"/web/signin", url.Values{"t": {u.Query().Get("t")}})
	require.NoError(t, err)
	res.Body.Close()
	sc := res.Header.Get("Set-Cookie")
	require.Contains(t, sc, "HttpOnly")
	require.Contains(t, sc, "SameSite=Strict")
	require.Contains(t, sc, "Path=/web")
	require.NotContains(t, sc, "Secure", "plain HTTP: not Secure")
	_, _, h := br.get("/web/")
	require.Contains(t, h.Get("Content-Security-Policy"), "default-src 'self'")
	require.Equal(t, "DENY", h.Get("X-Frame-Options"))
}

// A gate asked with options of the agent's own offers them as buttons; the chosen one is
// stored and shown, as in chat.
func TestGateWithCustomOptionsShowsTheChosenOne(t *testing.T) {
	t.Parallel()
	b := setup(t)
	g, err := b.st.AskGate(t.Context(), store.AskGateParams{GoalID: "docs", AgentID: "codex", Question: "Ship tonight?",
		Options: []string{"approve", "later"}, Meta: store.Meta{Actor: "agent:docs/codex", Surface: "api"}})
	require.NoError(t, err)
	br := b.signIn(t, owner)
	_, body, _ := br.get("/web/goals/docs")
	require.Contains(t, body, `value="later"`)
	status, loc := br.post("/web/goals/docs/gates/"+itoa(g.ID)+"/answer", url.Values{"answer": {"later"}})
	require.Equal(t, http.StatusSeeOther, status)
	require.Contains(t, loc, "a=answered&m=answered")
	got, err := b.st.GetGate(t.Context(), "docs", g.ID)
	require.NoError(t, err)
	require.Equal(t, "later", got.Answer)
	_, body, _ = br.get(loc)
	require.Contains(t, body, "Gate answered.")
	require.Contains(t, body, "answered · answer: later")
}

func TestHomeListsTheGateAndTheOwnerAnswersIt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	br := b.signIn(t, owner)
	_, body, _ := br.get("/web/")
	require.Contains(t, body, "Publish the draft?")
	require.Regexp(t, `Open gates you can answer <span class="count">1</span>`, body)
	// What needs the owner first, then one quiet line for the rest; no empty section.
	require.Less(t, strings.Index(body, `id="h-gates"`), strings.Index(body, `id="home-quiet"`))
	require.Contains(t, body, `<p class="empty" id="home-quiet">Nothing else waits for you.</p>`)
	require.NotContains(t, body, "Nothing here.")
	require.Equal(t, 1, strings.Count(body, "<section"), "only the section that holds something")

	// The member sees the goal but no gate to answer, and no controls: nothing waits for them.
	mb := b.signIn(t, member)
	_, body, _ = mb.get("/web/")
	require.NotContains(t, body, "Open gates you can answer")
	require.Contains(t, body, `<p class="empty" id="home-quiet">Nothing waits for you.</p>`)
	require.NotContains(t, body, "<section")
	status, body, _ := mb.get("/web/goals/docs")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, "Publish the draft?")
	require.NotContains(t, body, "Preview change")
	require.NotContains(t, body, `value="approve"`)
	gates, err := b.st.ListGates(t.Context(), store.ListGatesParams{GoalID: "docs"})
	require.NoError(t, err)
	gateID := gates[0].ID
	gatePath := "/web/goals/docs/gates/" + itoa(gateID) + "/answer"
	status, loc := mb.post(gatePath, url.Values{"answer": {"approve"}})
	require.Equal(t, http.StatusSeeOther, status)
	require.Contains(t, loc, "m=not_allowed")

	_, body, _ = br.get("/web/goals/docs")
	require.Contains(t, body, `value="approve"`)
	before, err := store.ListOutboxAfter(t.Context(), b.st.DB(), 0, 0)
	require.NoError(t, err)
	status, loc = br.post(gatePath, url.Values{"answer": {"approve"}, "comment": {"ship it"}})
	require.Equal(t, http.StatusSeeOther, status)
	require.Contains(t, loc, "a=approved&m=answered")
	g, err := b.st.GetGate(t.Context(), "docs", gateID)
	require.NoError(t, err)
	require.Equal(t, store.GateApproved, g.Status)
	require.Equal(t, owner, g.AnsweredBy)
	after, err := store.ListOutboxAfter(t.Context(), b.st.DB(), before[len(before)-1].ID, 0)
	require.NoError(t, err)
	require.Len(t, after, 1, "the Lark card is updated like a chat answer")
	require.Equal(t, "card_update", after[0].Kind)
	_, body, _ = br.get(loc)
	require.Contains(t, body, "Gate approved.")
}

// A form refused answers with its error kind's status: a person who may not make the change
// is sent back with "not allowed"; a gate that is no longer open shows the goal page again
// with why, answered as the API answers it (409).
func TestFormErrorsAnswerWithTheirKind(t *testing.T) {
	t.Parallel()
	b := setup(t)
	br := b.signIn(t, owner)
	mb := b.signIn(t, member)
	gates, err := b.st.ListGates(t.Context(), store.ListGatesParams{GoalID: "docs"})
	require.NoError(t, err)
	gatePath := "/web/goals/docs/gates/" + itoa(gates[0].ID) + "/answer"

	form := url.Values{"kind": {"goal.pause"}}
	status, loc := mb.post("/web/goals/docs/proposals", form)
	require.Equal(t, http.StatusSeeOther, status)
	require.Contains(t, loc, "m=not_allowed")
	status, loc = br.post("/web/goals/docs/proposals", url.Values{"kind": {"goal.pause"}})
	require.Equal(t, http.StatusSeeOther, status)
	require.Regexp(t, `^/web/proposals/\d+$`, loc)
	status, back := mb.post(loc+"/confirm", url.Values{})
	require.Equal(t, http.StatusSeeOther, status)
	require.Contains(t, back, "m=not_allowed")

	status, _ = br.post(gatePath, url.Values{"answer": {"approve"}})
	require.Equal(t, http.StatusSeeOther, status)
	status, body := br.post(gatePath, url.Values{"answer": {"reject"}})
	refused, _ := store.KindByCode(store.CodeRefused)
	require.Equal(t, refused.Status, status)
	require.Contains(t, body, "is already approved")
}

func TestBudgetPreviewConfirmAndStale(t *testing.T) {
	t.Parallel()
	b := setup(t)
	br := b.signIn(t, owner)
	br.get("/web/goals/docs")
	form := url.Values{"kind": {"goal.set"}, "allowed_slots": {"50"}, "window_hours": {"24"}, "heartbeat_spec": {""},
		"heartbeat_tz": {"UTC"}, "report_spec": {""}, "report_tz": {"UTC"}, "stall_turns": {"3"}, "owners": {owner}, "members": {member}}
	status, loc := br.post("/web/goals/docs/proposals", form)
	require.Equal(t, http.StatusSeeOther, status)
	require.Regexp(t, `^/web/proposals/\d+$`, loc)
	_, body, _ := br.get(loc)
	require.Contains(t, body, `<th scope="row">turns per window</th>`)
	require.Contains(t, body, "<td>12</td><td><ins>50</ins></td>")
	require.Contains(t, body, "quota 12 of 12 left in 24 h → 50 of 50 in 24 h")
	require.Equal(t, 12, goal(t, b).AllowedSlots, "a preview applies nothing")
	status, loc2 := br.post(loc+"/confirm", url.Values{})
	require.Equal(t, http.StatusSeeOther, status)
	require.Contains(t, loc2, "m=applied")
	_, body, _ = br.get(loc2)
	require.Contains(t, body, "Applied.")
	require.Contains(t, body, "Receipt: proposed by ou_owner, confirmed by ou_owner")
	require.Equal(t, 50, goal(t, b).AllowedSlots)

	// Stale: the goal changes between preview and confirm.
	form.Set("allowed_slots", "60")
	form.Del("key") // a new form render carries a new key; the old one replays the first answer
	_, loc = br.post("/web/goals/docs/proposals", form)
	w := 48
	_, err := b.st.UpdateGoal(t.Context(), store.UpdateGoalParams{GoalID: "docs", WindowHours: &w, Meta: setupMeta})
	require.NoError(t, err)
	status, loc2 = br.post(loc+"/confirm", url.Values{})
	require.Equal(t, http.StatusSeeOther, status)
	require.Contains(t, loc2, "m=stale")
	require.NotEqual(t, strings.SplitN(loc2, "?", 2)[0], loc, "the answer is the fresh proposal")
	_, body, _ = br.get(loc2)
	require.Contains(t, body, "The goal changed since this preview; nothing was applied.")
	require.Equal(t, 50, goal(t, b).AllowedSlots)
	_, body, _ = br.get(loc)
	require.Contains(t, body, "stale")

	// Bad input names the field and changes nothing.
	form.Set("allowed_slots", "many")
	form.Del("key")
	status, body = br.post("/web/goals/docs/proposals", form)
	require.Equal(t, http.StatusUnprocessableEntity, status)
	require.Contains(t, body, "turns per window: &#34;many&#34; is not a whole number", "the field in people's words, never its internal name")

	// A form without the session's CSRF token changes nothing.
	status, _ = br.postRaw("/web/goals/docs/proposals", url.Values{"kind": {"goal.pause"}, "csrf": {"forged"}})
	require.Equal(t, http.StatusForbidden, status)
}

func TestStrangerSeesNothingAndChineseRenders(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sb := b.signIn(t, stranger)
	_, body, _ := sb.get("/web/")
	require.Contains(t, body, "0 goals you can see")
	require.NotContains(t, body, "Publish the draft?")
	status, body, _ := sb.get("/web/goals/docs")
	require.Equal(t, http.StatusNotFound, status)
	require.Contains(t, body, "There is nothing here you can see.")
	status, _, _ = sb.get("/web/goals/nope")
	require.Equal(t, http.StatusNotFound, status, "an unknown goal reads the same")

	br := b.signIn(t, owner)
	br.get("/web/")
	status, loc := br.post("/web/lang", url.Values{"lang": {"zh"}, "back": {"/web/goals/docs"}})
	require.Equal(t, http.StatusSeeOther, status)
	require.Equal(t, "/web/goals/docs", loc)
	_, body, _ = br.get("/web/goals/docs")
	require.Contains(t, body, `<html lang="zh-CN">`)
	require.Contains(t, body, "待决事项")
	require.Contains(t, body, "预览变更")

	// The admin token signs an admin in, who sees every goal.
	ab := b.newBrowser(t)
	status, loc = ab.postRaw("/web/signin/admin", url.Values{"token": {admin}})
	require.Equal(t, http.StatusSeeOther, status)
	_, body, _ = ab.get(loc)
	require.Contains(t, body, "1 goal you can see")
	status, _ = b.newBrowser(t).postRaw("/web/signin/admin", url.Values{"token": {"wrong"}})
	require.Equal(t, http.StatusUnauthorized, status)
}

func goal(t *testing.T, b *testBundle) store.Goal {
	t.Helper()
	g, err := b.st.GetGoal(t.Context(), "docs")
	require.NoError(t, err)
	return g
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// Another site cannot sign a victim in as the attacker: a sign-in POST that a browser marks
// cross-site (Origin of another host, or Sec-Fetch-Site: cross-site) is refused before its
// token is looked at, and the link stays unused.
func TestCrossSiteSignInIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	link := b.link(t, owner)
	u, err := url.Parse(link)
	require.NoError(t, err)
	post := func(path string, form url.Values, header map[string]string) (int, http.Header) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, b.http.URL+path, strings.NewReader(form.Encode()))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, v := range header {
			req.Header.Set(k, v)
		}
		res, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		require.NoError(t, err)
		res.Body.Close()
		return res.StatusCode, res.Header
	}
	for _, h := range []map[string]string{
		{"Origin": "https://evil.example"},
		{"Sec-Fetch-Site": "cross-site"},
	} {
		status, hdr := post("/web/signin", url.Values{"t": {u.Query().Get("t")}}, h)
		require.Equal(t, http.StatusForbidden, status, "%v", h)
		require.Empty(t, hdr.Get("Set-Cookie"), "no session")
		status, hdr = post("/web/signin/admin", url.Values{"token": {admin}}, h)
		require.Equal(t, http.StatusForbidden, status, "%v", h)
		require.Empty(t, hdr.Get("Set-Cookie"), "no session")
	}
	// From the workspace's own page, the same link still signs in: it was never spent.
	status, hdr := post("/web/signin", url.Values{"t": {u.Query().Get("t")}}, map[string]string{"Origin": b.http.URL})
	require.Equal(t, http.StatusSeeOther, status)
	require.NotEmpty(t, hdr.Get("Set-Cookie"))
}

// A flood of wrong admin tokens from one source is bounded: after ten tries the source is
// answered 429 without a check, and the audit gets one row for the window, not one a try.
func TestWrongAdminTokensAreBoundedAndAuditedInBulk(t *testing.T) {
	t.Parallel()
	b := setup(t)
	count := func() int {
		var n int
		require.NoError(t, b.st.DB().QueryRow(t.Context(), `SELECT count(*) FROM audit WHERE action = 'web.signin.admin' AND NOT allowed`).Scan(&n))
		return n
	}
	statuses := map[int]int{}
	for i := range 1000 {
		br := b.newBrowser(t)
		status, _ := br.postRaw("/web/signin/admin", url.Values{"token": {fmt.Sprintf("wrong-admin-token-%04d", i)}})
		statuses[status]++
	}
	require.Equal(t, 10, statuses[http.StatusUnauthorized], "ten are checked")
	require.Equal(t, 990, statuses[http.StatusTooManyRequests], "the rest are turned away unchecked")
	require.Equal(t, 1, count(), "one audit row for the window")
	// The window passes: its other refusals are written as one row, with their number.
	b.clock.Add(2 * time.Minute)
	br := b.newBrowser(t)
	status, _ := br.postRaw("/web/signin/admin", url.Values{"token": {"wrong-again-0123456789"}})
	require.Equal(t, http.StatusUnauthorized, status)
	require.Equal(t, 3, count(), "the summary of the last window and the new window's first")
	var n int
	require.NoError(t, b.st.DB().QueryRow(t.Context(), `SELECT (detail->>'count')::int FROM audit
		WHERE action = 'web.signin.admin' AND detail ? 'count'`).Scan(&n))
	require.Equal(t, 9, n, "the window's nine other refusals")
}

// While PostgreSQL is down the workspace answers 503 with Retry-After, like the API, on a
// page in the person's language, never 500.
func TestDatabaseOutageIs503WithRetryAfter(t *testing.T) {
	t.Parallel()
	outage := storetest.NewOutage(t)
	st := store.New(outage.Pool, store.Options{})
	tpl, err := templates.New()
	require.NoError(t, err)
	cs := cards.New(tpl, "zh")
	k, err := change.New(st, change.Options{Templates: tpl, Cards: cs.Proposals.Update})
	require.NoError(t, err)
	ib, err := inbox.New(st, inbox.Options{Templates: tpl})
	require.NoError(t, err)
	srv, err := web.New(web.Options{Store: st, Changes: k, Cards: cs, Templates: tpl, Inbox: ib, AdminToken: admin, DefaultLang: "zh"})
	require.NoError(t, err)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	b := &testBundle{st: st, srv: srv, http: hs}
	br := b.newBrowser(t)
	status, _ := br.postRaw("/web/signin/admin", url.Values{"token": {admin}})
	require.Equal(t, http.StatusSeeOther, status)

	outage.Cut()
	for _, path := range []string{"/web/", "/web/goals/docs"} {
		status, body, hdr := br.get(path)
		require.Equal(t, http.StatusServiceUnavailable, status, path)
		require.Equal(t, store.RetryAfterSeconds, hdr.Get("Retry-After"), path)
		require.Contains(t, body, "数据库", path)
	}
	status, body := br.postRaw("/web/signin/admin", url.Values{"token": {"wrong-token-0123456789"}})
	require.NotEqual(t, http.StatusInternalServerError, status, body)
}

// TestPermissionGateShowsTheRequestAndItsButtons: a host's permission request is a gate on the
// goal page with the request in words, its deadline, and Allow once / Allow for this turn /
// Deny; the owner's Allow for this turn answers it.
func TestPermissionGateShowsTheRequestAndItsButtons(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a, err := b.st.AskPermission(t.Context(), store.AskPermissionParams{GoalID: "docs", AgentID: "codex",
		Request: store.PermissionRequest{Host: "claude-code", Tool: "Bash", Summary: "rm -rf build/", Folder: "/src/docs", Turn: "t-1"},
		Meta:    store.Meta{Actor: "agent:docs/codex", Surface: "api"}})
	require.NoError(t, err)
	br := b.signIn(t, owner)
	_, body, _ := br.get("/web/goals/docs")
	require.Contains(t, body, "Agent codex asks to run Bash: rm -rf build/ (in /src/docs)")
	require.Contains(t, body, "Denied if nobody answers by")
	for _, button := range []string{`value="approve" class="primary">Allow once`, `value="allow_turn">Allow for this turn`, `value="reject" class="danger">Deny`} {
		require.Contains(t, body, button)
	}
	status, loc := br.post("/web/goals/docs/gates/"+itoa(a.Gate.ID)+"/answer", url.Values{"answer": {"allow_turn"}})
	require.Equal(t, http.StatusSeeOther, status, loc)
	g, err := b.st.GetGate(t.Context(), "docs", a.Gate.ID)
	require.NoError(t, err)
	require.Equal(t, store.PermitAllow, store.PermissionDecision(g))
}

// The stall guard's gate reads in the page's language: its question (stored in the goal's
// language) and its buttons, which still answer with the stored values.
func TestStallGateReadsInThePagesLanguage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	var g store.Gate
	require.NoError(t, b.st.WithTx(ctx, func(tx *store.Tx) error {
		var err error
		g, _, err = store.OpenStallGate(ctx, tx, store.StallGateParams{GoalID: "docs", AgentID: "codex",
			Question: b.tpl.Word("en", "stall_question", 3)}, b.clock.Now())
		return err
	}))
	br := b.signIn(t, owner)
	br.get("/web/")
	br.post("/web/lang", url.Values{"lang": {"zh"}, "back": {"/web/"}})
	_, home, _ := br.get("/web/")
	require.Contains(t, home, "连续 3 轮没有进展：继续还是暂停？")
	require.NotContains(t, home, "no progress")
	require.Contains(t, home, "没有其他需要你处理的事。")
	require.NotContains(t, home, "暂无。")
	_, page, _ := br.get("/web/goals/docs")
	require.Contains(t, page, "连续 3 轮没有进展：继续还是暂停？")
	require.Contains(t, page, `value="continue" class="primary">继续</button>`)
	require.Contains(t, page, `value="pause" class="danger">暂停目标</button>`)
	status, loc := br.post("/web/goals/docs/gates/"+itoa(g.ID)+"/answer", url.Values{"answer": {"continue"}})
	require.Equal(t, http.StatusSeeOther, status, loc)
	got, err := b.st.GetGate(ctx, "docs", g.ID)
	require.NoError(t, err)
	require.Equal(t, store.GateApproved, got.Status)
	require.Equal(t, store.StallContinue, got.Answer)
}
