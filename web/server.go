package web

import (
	"cmp"
	"context"
	"crypto/rand"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"loopx/cards"
	"loopx/change"
	"loopx/inbox"
	"loopx/store"
	"loopx/templates"
)

//go:embed static
var static embed.FS

// CookieName is the session cookie.
const CookieName = "loopx_session"

// Options configures a Server.
type Options struct {
	Store *store.Store
	// Changes proposes and confirms protected changes. Required.
	Changes *change.Kernel
	// Cards updates gate cards in Lark when a gate is answered here, and words proposals:
	// the process's one set. Required.
	Cards *cards.Set
	// Templates words effects and field names (the same words as chat). Required.
	Templates *templates.Set
	// Inbox takes the messages people send agents from the page (the chat's bounds). Required.
	Inbox *inbox.Inbox
	// AdminToken signs an admin in. "" turns admin sign-in off.
	AdminToken string
	// Admins are the open_ids allowed everything (LOOPX_ADMINS).
	Admins []string
	// DefaultLang is the language when neither the person nor the goal chose one ("" = en).
	DefaultLang string
	// BaseURL is the workspace's address as people reach it (http://host:port), for the
	// sign-in links the bot sends. Required for SignInLink.
	BaseURL string
	// Lark signs people in with Lark's OAuth (GET /web/signin/lark); nil leaves the one-time
	// links and the admin token.
	Lark LarkSignIn
	// SecureCookies marks the session cookie Secure even on plain HTTP (behind a TLS proxy).
	SecureCookies bool
	// SessionTTL is how long a session lasts; 0 = 12 hours.
	SessionTTL time.Duration
	Now        func() time.Time
	Logger     *slog.Logger
}

// Server serves the workspace under /web/. It is safe for concurrent use.
type Server struct {
	opts      Options
	st        *store.Store
	pages     *templates.Pages
	proposals cards.ProposalCards
	signins   *signInGuard
	admins    map[string]bool
	mux       *http.ServeMux
	log       *slog.Logger

	mu   sync.Mutex
	subs map[chan struct{}]struct{}
}

// New checks opts and builds the server and its routes.
func New(opts Options) (*Server, error) {
	if opts.Store == nil || opts.Changes == nil || opts.Templates == nil || opts.Cards == nil || opts.Inbox == nil {
		return nil, errors.New("new workspace: Store, Changes, Cards, Templates and Inbox are required")
	}
	pages, err := templates.NewPages()
	if err != nil {
		return nil, fmt.Errorf("new workspace: %w", err)
	}
	opts.DefaultLang = templates.Lang(opts.DefaultLang) // "" and unsupported ones: the default language
	if opts.SessionTTL == 0 {
		opts.SessionTTL = 12 * time.Hour
	}
	if opts.Now == nil {
		opts.Now = opts.Store.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	opts.BaseURL = strings.TrimRight(opts.BaseURL, "/")
	s := &Server{
		opts: opts, st: opts.Store, pages: pages, proposals: opts.Cards.Proposals, signins: newSignInGuard(opts.Now),
		admins: map[string]bool{}, mux: http.NewServeMux(), log: opts.Logger, subs: map[chan struct{}]struct{}{},
	}
	for _, a := range opts.Admins {
		if a = strings.TrimSpace(a); a != "" {
			s.admins[a] = true
		}
	}
	assets, err := fs.Sub(static, "static")
	if err != nil {
		return nil, fmt.Errorf("new workspace: %w", err)
	}
	s.mux.Handle("GET /web/static/", http.StripPrefix("/web/static/", cacheFor(http.FileServerFS(assets))))
	s.mux.HandleFunc("GET /web/manifest.webmanifest", s.manifest)
	s.mux.HandleFunc("GET /web/sw.js", s.serviceWorker)
	s.mux.HandleFunc("GET /web/offline", s.offline)
	s.mux.HandleFunc("GET /web/{$}", s.page(s.home))
	s.mux.HandleFunc("GET /web/goals", s.page(s.goals))
	s.mux.HandleFunc("GET /web/goals/{goal}", s.page(s.goal))
	s.mux.HandleFunc("GET /web/goals/{goal}/turns/{turn}", s.page(s.turn))
	s.mux.HandleFunc("GET /web/proposals/{proposal}", s.page(s.proposal))
	s.mux.HandleFunc("POST /web/goals/{goal}/proposals", s.form(s.propose))
	s.mux.HandleFunc("POST /web/goals/{goal}/gates/{gate}/answer", s.form(s.answerGate))
	s.mux.HandleFunc("POST /web/goals/{goal}/todos", s.form(s.addTodo))
	s.mux.HandleFunc("POST /web/goals/{goal}/todos/{todo}", s.form(s.moveTodo))
	s.mux.HandleFunc("POST /web/goals/{goal}/todos/{todo}/handoff", s.form(s.handOff))
	s.mux.HandleFunc("POST /web/goals/{goal}/waivers", s.form(s.waive))
	s.mux.HandleFunc("GET /web/goals/{goal}/replan", s.page(s.replan))
	s.mux.HandleFunc("GET /web/defaults", s.page(s.defaults))
	s.mux.HandleFunc("POST /web/defaults/proposals", s.form(s.proposeDefaults))
	s.mux.HandleFunc("POST /web/goals/{goal}/agents/{agent}/messages", s.form(s.message))
	s.mux.HandleFunc("POST /web/proposals/{proposal}/confirm", s.form(s.confirm))
	s.mux.HandleFunc("POST /web/proposals/{proposal}/cancel", s.form(s.cancel))
	s.mux.HandleFunc("POST /web/lang", s.form(s.setLang))
	s.mux.HandleFunc("POST /web/goals/{goal}/agents/{agent}/{verb}", s.form(s.agentWork))
	s.mux.HandleFunc("GET /web/files/{file}", s.file)
	s.mux.HandleFunc("POST /web/signout", s.form(s.signOut))
	s.mux.HandleFunc("GET /web/signin", s.signInPage)
	s.mux.HandleFunc("POST /web/signin", s.signIn)
	s.mux.HandleFunc("POST /web/signin/admin", s.signInAdmin)
	s.mux.HandleFunc("POST /web/signin/links", s.issueLink)
	s.mux.HandleFunc("GET /web/signin/lark", s.larkSignIn)
	s.mux.HandleFunc("GET /web/signin/lark/callback", s.larkCallback)
	s.mux.HandleFunc("GET /web/events", s.events)
	s.mux.HandleFunc("/web/", s.unknownPage)
	s.mux.HandleFunc("GET /web", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/web/", http.StatusFound)
	})
	return s, nil
}

// ServeHTTP serves the workspace; mount it at /web/ (and /web) on the process's mux.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin") // "no-referrer" would make browsers send Origin: null on our own forms
	h.Set("X-Frame-Options", "DENY")
	s.mux.ServeHTTP(w, r)
}

func cacheFor(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		h.ServeHTTP(w, r)
	})
}

// session is a signed-in browser.
type session struct {
	id string
	store.WebSession
}

// person is who the session is on the role rule.
func (ss *session) person(admins map[string]bool) store.Person {
	return store.Person{OpenID: ss.OpenID, Admin: ss.Admin || admins[ss.OpenID]}
}

// actor is the session's name in audit rows.
func (ss *session) actor() string {
	if ss.OpenID == "" {
		return store.ActorAdmin
	}
	return ss.OpenID
}

func (s *Server) session(r *http.Request) (*session, error) {
	c, err := r.Cookie(CookieName)
	if err != nil || c.Value == "" || len(c.Value) > 128 {
		return nil, nil
	}
	ws, err := store.GetSession(r.Context(), s.st.DB(), c.Value, s.opts.Now())
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &session{id: c.Value, WebSession: ws}, nil
}

func (s *Server) setCookie(w http.ResponseWriter, r *http.Request, value string, expires time.Time) {
	http.SetCookie(w, &http.Cookie{
		Name: CookieName, Value: value, Path: "/web", Expires: expires, MaxAge: int(time.Until(expires).Seconds()),
		HttpOnly: true, Secure: r.TLS != nil || s.opts.SecureCookies, SameSite: http.SameSiteStrictMode,
	})
	if value == "" {
		http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/web", MaxAge: -1, HttpOnly: true,
			Secure: r.TLS != nil || s.opts.SecureCookies, SameSite: http.SameSiteStrictMode})
	}
}

// view is what every page template gets.
type view struct {
	Lang, Title, Name, Path string
	Signed, Admin           bool
	Who, CSRF               string
	Live                    string
	Flash, FlashKind        string
	UnmetTodo               int64 // the todo a refused finish named (flash criteria_unmet)
	HandoffTodo             int64 // the todo whose handoff form the goal page opens (?handoff=)
	Now                     time.Time
	Key                     string // a fresh idempotency key for the page's forms

	Home      store.Home
	DoneGoals store.GoalList // the home's done goals, newest first
	Proposals []cards.ProposalView

	Goal       store.Goal
	Role       string
	Page       store.GoalPage
	Agents     []agentView
	CanChange  bool
	CanAnswer  bool
	CanConfirm bool
	// The goal contract and what hangs on it (contract.go): the board's todos with their
	// criteria and latest handoff, the goal's criteria, settings with their source, the trail.
	Todos    []todoView
	Contract contractView
	Settings []settingView
	Trail    []decisionView
	Done     *decisionView // the decision that finished a done goal (the newest), nil otherwise

	Proposal   cards.ProposalView
	ReplanFrom int64 // a replan proposal whose suggestions the replan form can take
	IsDefaults bool  // the proposal changes the machine defaults (no goal)

	Replan   replanView
	Defaults defaultsView

	Goals       goalsView
	Turn        store.TurnPage
	Handoff     *store.Handoff                  // the handoff the turn ended with, nil when none
	TurnOutcome struct{ HaltedBy, Text string } // the turn's outcome in words (cards.Outcome)
	CanAct      bool                            // the person may add todos and message agents (a member)
	ShowLog     bool                            // the turn page shows the runner's log tail (owners, admins)

	Token            string
	Lark             bool   // the sign-in page offers Lark's sign-in
	Next             string // the page to land on after signing in
	Heading, Message string
}

type agentView struct {
	store.Agent
	Inbox []store.InboxItem
	Live  *store.Turn // its live turn, which Stop turn ends; nil: none
	// Pending are the handoffs the agent has not acknowledged yet, oldest first: its next
	// should-run carries the first as its continuation.
	Pending []store.Handoff
	// Unread is the replan the agent has not acknowledged (should-run's objective_changed).
	Unread *store.GoalDecision
}

// pageFunc fills v for a signed-in session and returns the page to render and its status.
type pageFunc func(ctx context.Context, r *http.Request, ss *session, v *view) (page string, status int, err error)

func newKey() string { return "web-" + rand.Text() }

func (s *Server) baseView(r *http.Request, ss *session, lang string) *view {
	v := &view{Lang: lang, Path: r.URL.Path, Now: s.opts.Now(), Key: newKey()}
	if ss != nil {
		v.Signed, v.Admin, v.Who, v.CSRF = true, ss.person(s.admins).Admin, ss.actor(), ss.CSRF
	}
	return v
}

// page serves a GET page to a signed-in session; anyone else gets the sign-in page.
func (s *Server) page(fn pageFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		ss, err := s.session(r)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if ss == nil {
			s.signInPrompt(w, r)
			return
		}
		v := s.baseView(r, ss, cmp.Or(ss.Lang, s.opts.DefaultLang))
		s.flash(r, v)
		name, status, err := fn(ctx, r, ss, v)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		s.render(w, status, name, v)
	}
}

// flash reads the outcome a POST redirected with (?m=code&a=arg) into the page. Codes and
// their arguments come from a fixed list, so a crafted link cannot put words on the page.
func (s *Server) flash(r *http.Request, v *view) {
	q := r.URL.Query()
	code, arg := q.Get("m"), q.Get("a")
	if code == "criteria_unmet" {
		// The todo's id: the goal page names its unmet criteria (criteriaFlash); this
		// general line stands when it cannot.
		if id, ok := parseID(arg); ok {
			v.Flash, v.FlashKind, v.UnmetTodo = s.pages.Word(v.Lang, "flash_criteria_unmet_any"), "warn", id
		}
		return
	}
	allowed := map[string][]string{
		"applied": nil, "cancelled": nil, "stale": nil, "expired": nil, "refused": nil, "signed_out": nil,
		"todo_added": nil, "todo_moved": nil, "todo_changed": nil, "steer_no_turn": nil, "inbox_full": nil,
		"settled":      {"applied", "cancelled", "stale", "expired", "refused"},
		"answered":     {"approved", "rejected", "answered"},
		"not_allowed":  {"owners", "members", "admins"},
		"message_sent": {"inbox", "queue", "steer"},
		"agent_stop":   nil, "agent_run": nil, "agent_pause": nil, "agent_resume": nil, "agent_no_turn": nil, "agent_not_held": nil,
		"waived": nil, "handed_off": nil, "handoff_capability": nil,
	}
	args, ok := allowed[code]
	if !ok || (args != nil && !contains(args, arg)) {
		return
	}
	words := map[string]string{"approved": s.pages.Word(v.Lang, "gate_approved"), "rejected": s.pages.Word(v.Lang, "gate_rejected"),
		"answered": s.pages.Word(v.Lang, "gate_answered"),
		"owners":   s.pages.Word(v.Lang, "owners_word"), "members": s.pages.Word(v.Lang, "members_word"), "admins": s.pages.Word(v.Lang, "admins_word"),
		"inbox": s.pages.Word(v.Lang, "sent_inbox"), "queue": s.pages.Word(v.Lang, "sent_queue"), "steer": s.pages.Word(v.Lang, "sent_steer")}
	a := cmp.Or(words[arg], s.pages.Word(v.Lang, "state_"+arg))
	if args == nil {
		v.Flash = s.pages.Word(v.Lang, "flash_"+code)
	} else {
		v.Flash = s.pages.Word(v.Lang, "flash_"+code, a)
	}
	v.FlashKind = map[string]string{"applied": "ok", "answered": "ok", "signed_out": "ok", "cancelled": "info", "settled": "info",
		"todo_added": "ok", "todo_moved": "ok", "message_sent": "ok",
		"agent_stop": "ok", "agent_run": "ok", "agent_pause": "ok", "agent_resume": "ok", "waived": "ok", "handed_off": "ok"}[code]
	if v.FlashKind == "" {
		v.FlashKind = "warn"
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func (s *Server) render(w http.ResponseWriter, status int, name string, v *view) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if v.Title == "" {
		v.Title = s.pages.Word(v.Lang, "home")
	}
	v.Name = name
	var buf strings.Builder
	if err := s.pages.Render(&buf, v.Lang, name, v); err != nil {
		s.log.Error("render workspace page", "page", name, "err", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.WriteHeader(status)
	_, _ = w.Write([]byte(buf.String()))
}

// notFound answers a goal or proposal the person may not see exactly like one that does not
// exist.
func (s *Server) notFound(v *view) (string, int, error) {
	v.Heading, v.Message = s.pages.Word(v.Lang, "not_found_heading"), s.pages.Word(v.Lang, "not_found")
	v.Title = v.Heading
	return "notice", pageStatus(store.ErrNotFound), nil
}

// pageStatus is the status of a page that answers err: its kind's, from the table of error
// kinds (store.ErrorKinds), as the API answers it.
func pageStatus(err error) int { return store.KindOf(err).Status }

// fail answers an error the page cannot show as an answer (the database, a failure of the
// server) with the status of its kind: 503 while the database cannot be reached, else 500.
// The page says so in the workspace's language; a 503 carries Retry-After, like the API's.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	status := pageStatus(err)
	s.log.ErrorContext(r.Context(), "workspace request failed", "path", r.URL.Path, "status", status, "err", err)
	v := s.baseView(r, nil, s.opts.DefaultLang)
	v.Heading, v.Message = s.pages.Word(v.Lang, "failed_heading"), s.pages.Word(v.Lang, "failed")
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", store.RetryAfterSeconds)
		v.Heading, v.Message = s.pages.Word(v.Lang, "unavailable_heading"), s.pages.Word(v.Lang, "unavailable")
	}
	v.Title = v.Heading
	s.render(w, status, "notice", v)
}

// signInPrompt answers a page asked for without a session. A link followed from Lark is a
// cross-site navigation, on which a SameSite=Strict cookie is not sent: the page reloads
// itself once from this origin, which sends it.
func (s *Server) signInPrompt(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("again") == "" && r.Header.Get("Sec-Fetch-Site") == "cross-site" {
		u := *r.URL
		q := u.Query()
		q.Set("again", "1")
		u.RawQuery = q.Encode()
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		fmt.Fprintf(w, `<!doctype html><meta charset="utf-8"><meta http-equiv="refresh" content="0;url=%s"><title>LoopX</title>`,
			htmlEscape(u.RequestURI()))
		return
	}
	v := s.baseView(r, nil, s.opts.DefaultLang)
	s.flash(r, v)
	v.Title = s.pages.Word(v.Lang, "sign_in")
	v.Lark, v.Next = s.opts.Lark != nil, "/web/"
	if r.Method == http.MethodGet && store.SafeNext(r.URL.RequestURI()) {
		v.Next = r.URL.RequestURI()
	}
	s.render(w, http.StatusUnauthorized, "signin", v)
}

func htmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&#39;").Replace(s)
}

// formFunc handles a POST of a signed-in session whose CSRF token checked out.
type formFunc func(ctx context.Context, w http.ResponseWriter, r *http.Request, ss *session)

// form checks a POST: a session, the same origin, and the session's CSRF token.
func (s *Server) form(fn formFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		ss, err := s.session(r)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if ss == nil {
			s.signInPrompt(w, r)
			return
		}
		if err := r.ParseForm(); err != nil {
			http.Error(w, "the form could not be read", http.StatusBadRequest)
			return
		}
		if !sameOrigin(r) || !store.EqualSecret(r.PostFormValue("csrf"), ss.CSRF) {
			v := s.baseView(r, ss, cmp.Or(ss.Lang, s.opts.DefaultLang))
			v.Heading, v.Message = s.pages.Word(v.Lang, "link_bad_heading"), s.pages.Word(v.Lang, "csrf_bad")
			s.render(w, http.StatusForbidden, "notice", v)
			return
		}
		fn(r.Context(), w, r, ss)
	}
}

// sameOrigin refuses a POST whose Origin (when the browser sends one) is not this host.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return r.Header.Get("Sec-Fetch-Site") != "cross-site"
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
}

// back redirects a POST to a page of the workspace (303), with an outcome to show.
func back(w http.ResponseWriter, r *http.Request, path, code, arg, fragment string) {
	u := url.URL{Path: path}
	if code != "" {
		q := url.Values{"m": {code}}
		if arg != "" {
			q.Set("a", arg)
		}
		u.RawQuery = q.Encode()
	}
	u.Fragment = fragment
	http.Redirect(w, r, u.String(), http.StatusSeeOther)
}
