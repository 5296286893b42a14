package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"loopx/bot/sandbox"
	"loopx/store"
)

// UpgradeResult is the previous release and this tree across one database (make
// upgrade-test): an upgrade with data in every table, a rolling upgrade under load with both
// versions serving, a downgrade refused, and the rollbacks the refusal names.
type UpgradeResult struct {
	Previous       string  `json:"previous"`
	PreviousCommit string  `json:"previous_commit"`
	Current        string  `json:"current"`
	NewMigrations  []int64 `json:"new_migrations"`

	Tables         int      `json:"tables"`
	EmptyTables    []string `json:"empty_tables"`
	Ticks          []string `json:"ticks_when_a_table_stayed_empty,omitempty"`
	RowsBefore     int64    `json:"rows_before"`
	ChangedTables  []string `json:"tables_changed_by_the_upgrade"`
	MigrateSeconds float64  `json:"migrate_seconds"`
	ReadySeconds   float64  `json:"new_readyz_seconds"`
	AfterUpgrade   []string `json:"after_upgrade"`

	Rolling   *RollingResult   `json:"rolling"`
	Downgrade *DowngradeResult `json:"downgrade"`
	Rollback  *RollbackResult  `json:"rollback_to_previous"`
}

// RollingResult is the rolling upgrade: two replicas of the previous release under chat and
// API load, the new release's migrate run beside them, then each replaced in turn.
type RollingResult struct {
	Steps          []string       `json:"steps"`
	MixedSeconds   float64        `json:"seconds_with_both_versions_serving"`
	Events         int            `json:"events"`
	EventsNotAcked int            `json:"events_not_acked"`
	EventsLost     int            `json:"events_lost"`
	EventsDoubled  int            `json:"events_doubled"`
	ReceiptsDouble int            `json:"receipts_doubled"`
	ReceiptsMissed int            `json:"receipts_missing"`
	APIWrites      int            `json:"api_writes_acknowledged"`
	APIWritesLost  int            `json:"api_writes_lost"`
	APIWritesDoubl int            `json:"api_writes_doubled"`
	APIStatuses    map[string]int `json:"api_statuses"`
}

// DowngradeResult is this tree's binary facing the schema of the release after it (this tree
// with one more migration stands in for it).
type DowngradeResult struct {
	NextMigration  int64   `json:"next_migration"`
	ServeExit      int     `json:"serve_exit_code"`
	ServeSeconds   float64 `json:"serve_seconds_to_refuse"`
	Message        string  `json:"message"`
	MigrateExit    int     `json:"migrate_exit_code"`
	WayBack        string  `json:"way_back_run"`
	ReadyAfterDown bool    `json:"ready_after_the_way_back"`
}

// RollbackResult is the previous release back on the upgraded database after this tree's
// down migrations undid what it added.
type RollbackResult struct {
	Undone        []int64 `json:"undone"`
	PreviousReady bool    `json:"previous_ready"`
	DataIntact    bool    `json:"data_intact"`
}

const upGoal = "up"

// upgradeScenario needs -previous (the previous release's binary), -previous-commit and
// -next (this tree with one more migration); -loopx is this tree.
func (s *suite) upgradeScenario(ctx context.Context, res *Results) error {
	o := s.o
	if o.previous == "" || o.next == "" || o.previousCommit == "" {
		return errors.New("the upgrade scenario needs -previous, -previous-commit and -next (make upgrade-test gives them)")
	}
	r := &UpgradeResult{Previous: o.previousVersion, PreviousCommit: o.previousCommit}
	res.Upgrade = r
	out, err := exec.CommandContext(ctx, s.bin, "version").Output()
	if err != nil {
		return fmt.Errorf("this tree's loopx version: %w", err)
	}
	r.Current = strings.TrimSpace(string(out))
	said := strings.Fields(r.Current) // "loopx <version> (...)"
	if len(said) < 2 {
		return fmt.Errorf("this tree's loopx version said %q", r.Current)
	}
	prevKnown, err := migrationsAt(ctx, o.previousCommit)
	if err != nil {
		return err
	}
	for _, v := range store.KnownMigrations() {
		if !slices.Contains(prevKnown, v) {
			r.NewMigrations = append(r.NewMigrations, v)
		}
	}
	if err := s.upgradeWithData(ctx, r, res); err != nil {
		return fmt.Errorf("upgrade with data: %w", err)
	}
	r.Rolling = &RollingResult{APIStatuses: map[string]int{}}
	if err := s.rollingUpgrade(ctx, r.Rolling, res); err != nil {
		return fmt.Errorf("rolling upgrade: %w", err)
	}
	r.Downgrade = &DowngradeResult{}
	if err := s.downgrade(ctx, r.Downgrade, said[1], res); err != nil {
		return fmt.Errorf("downgrade: %w", err)
	}
	r.Rollback = &RollbackResult{}
	if err := s.rollbackToPrevious(ctx, r, res); err != nil {
		return fmt.Errorf("rollback: %w", err)
	}
	return nil
}

// migrationsAt lists the migration versions of a commit of this repository.
func migrationsAt(ctx context.Context, commit string) ([]int64, error) {
	out, err := exec.CommandContext(ctx, "git", "ls-tree", "--name-only", commit+":store/migrations").Output()
	if err != nil {
		return nil, fmt.Errorf("list the migrations of %s: %w", commit, err)
	}
	var vs []int64
	for _, name := range strings.Fields(string(out)) {
		num, _, _ := strings.Cut(name, "_")
		if v, err := strconv.ParseInt(num, 10, 64); err == nil && strings.HasSuffix(name, ".sql") {
			vs = append(vs, v)
		}
	}
	slices.Sort(vs)
	return vs, nil
}

// upReplica prepares a replica of bin on database db taking Lark's callbacks over HTTP.
func (s *suite) upReplica(name, bin, db string, extra map[string]string) (*replica, error) {
	env := map[string]string{"LARK_TRANSPORT": "http"}
	for k, v := range extra {
		env[k] = v
	}
	rep, err := s.newReplica(name, s.pg.URL(db), env)
	if err != nil {
		return nil, err
	}
	rep.bin = bin
	return rep, nil
}

// runOnce runs bin once with args on database db and returns its exit code and output.
func (s *suite) runOnce(ctx context.Context, bin, db string, args ...string) (int, string, time.Duration, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + s.dir, "LOOPX_HOME=" + filepath.Join(s.dir, "home-once"),
		"DATABASE_URL=" + s.pg.URL(db), "LOOPX_ADMIN_TOKEN=" + adminToken, "LOOPX_SECRET_KEY=" + s.secretKey,
		"LOOPX_LISTEN=127.0.0.1:0", "LOG_LEVEL=warn"}
	start := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out), took, nil
	case errors.As(err, &ee):
		return ee.ExitCode(), string(out), took, nil
	}
	return -1, string(out), took, err
}

// upgradeWithData fills every table with the previous release, stops it, migrates with this
// tree's loopx migrate, checks that no row of the previous schema changed, and starts this
// tree on the database and walks through what the previous release left.
func (s *suite) upgradeWithData(ctx context.Context, r *UpgradeResult, res *Results) error {
	if err := createDatabase(ctx, s.pg.URL("postgres"), "upgrade"); err != nil {
		return err
	}
	hook := newHookServer()
	defer hook.close()
	// The scheduler runs on a clock 60 times faster, so that the heartbeat fires (ticks, a
	// webhook turn and its token) within seconds.
	clock := fmt.Sprintf("%s,%d,60", time.Now().UTC().Format(time.RFC3339), time.Now().UnixNano())
	extra := map[string]string{"LOOPX_SCHEDULER": "on", "LOOPX_TEST_CLOCK": clock, "LOOPX_JITTER_MAX": "1s"}
	old, err := s.upReplica("up-previous", s.o.previous, "upgrade", extra)
	if err != nil {
		return err
	}
	lb := newBalancer()
	if err := lb.start(); err != nil {
		return err
	}
	defer lb.close()
	if err := old.start(); err != nil {
		return err
	}
	defer func() {
		if old.alive() {
			_, _ = old.term(10 * time.Second)
		}
	}()
	if _, err := old.waitReady(ctx, 60*time.Second); err != nil {
		return err
	}
	lb.set([]*replica{old})
	if err := s.sb.SetCallbackURLs(lb.url+"/lark/events", lb.url+"/lark/cards"); err != nil {
		return err
	}
	defer func() { _ = s.sb.SetCallbackURLs("", "") }()
	st, err := s.storeOf(ctx, "upgrade")
	if err != nil {
		return err
	}
	sess, err := s.fillEveryTable(ctx, old.url, hook.url)
	if err != nil {
		return err
	}
	tables, err := tableColumns(ctx, st)
	if err != nil {
		return err
	}
	r.Tables = len(tables)
	// Some tables fill from the scheduler and the sender a moment later.
	_ = waitFor(ctx, 90*time.Second, func() (bool, error) {
		empty, err := emptyTables(ctx, st, tables)
		r.EmptyTables = empty
		return len(empty) == 0, err
	})
	if len(r.EmptyTables) > 0 {
		rows, err := st.DB().Query(ctx, `SELECT format('%s %s %s %s: %s', agent_id, kind, outcome, reason, count(*)) FROM tick
			GROUP BY agent_id, kind, outcome, reason ORDER BY 1`)
		if err == nil {
			for rows.Next() {
				var t string
				_ = rows.Scan(&t)
				r.Ticks = append(r.Ticks, t)
			}
			rows.Close()
		}
	}
	res.check(len(r.EmptyTables) == 0, "upgrade: tables still empty before the upgrade: %v (ticks: %v)", r.EmptyTables, r.Ticks)
	hook.answer()
	if _, err := waitDrainedOf(ctx, st, time.Minute); err != nil {
		res.check(false, "upgrade: %v", err)
	}
	if _, err := old.term(15 * time.Second); err != nil {
		res.check(false, "upgrade: the previous release did not stop cleanly: %v", err)
	}
	before, err := fingerprints(ctx, st, tables)
	if err != nil {
		return err
	}
	for _, f := range before {
		r.RowsBefore += f.rows
	}

	// The documented upgrade: this tree's loopx migrate once, then its serve.
	code, out, took, err := s.runOnce(ctx, s.bin, "upgrade", "migrate")
	if err != nil || code != 0 {
		return fmt.Errorf("loopx migrate: exit %d: %v %s", code, err, out)
	}
	r.MigrateSeconds = took.Seconds()
	after, err := fingerprints(ctx, st, tables)
	if err != nil {
		return err
	}
	for t, f := range before {
		if after[t] != f {
			r.ChangedTables = append(r.ChangedTables, fmt.Sprintf("%s (%d rows before, %d after)", t, f.rows, after[t].rows))
		}
	}
	slices.Sort(r.ChangedTables)
	res.check(len(r.ChangedTables) == 0, "upgrade: the migrations changed rows of the previous schema: %v", r.ChangedTables)

	cur, err := s.upReplica("up-current", s.bin, "upgrade", extra)
	if err != nil {
		return err
	}
	if err := cur.start(); err != nil {
		return err
	}
	defer func() {
		if cur.alive() {
			_, _ = cur.term(10 * time.Second)
		}
	}()
	d, err := cur.waitReady(ctx, 60*time.Second)
	if err != nil {
		return err
	}
	r.ReadySeconds = d.Seconds()
	lb.set([]*replica{cur})
	steps, err := s.walkAfterUpgrade(ctx, cur.url, sess, st)
	r.AfterUpgrade = steps
	if err != nil {
		return err
	}
	if _, err := cur.term(15 * time.Second); err != nil {
		res.check(false, "upgrade: this tree's serve did not stop cleanly: %v", err)
	}
	return nil
}

// upSession is what the fill leaves for the walk after the upgrade.
type upSession struct {
	agentToken string
	gateCard   string // the Lark message id of the open gate's card
	gateID     string
	webCookie  []*http.Cookie
}

// fillEveryTable writes rows into every table through the previous release's API, chat and
// workspace, and its scheduler and sender: goals with schedules, agents (one a webhook with
// a sealed secret), todos, a claim, a turn with evidence and a spent slot, a gate and its
// card, proposals and their card, bindings, a chat language, inbox items, an unroutable
// message, a digest, a sign-in link and a session.
func (s *suite) fillEveryTable(ctx context.Context, base, hookURL string) (upSession, error) {
	var sess upSession
	call := func(method, path, token string, body any, want int) (map[string]any, error) {
		status, out, err := s.api(ctx, base, method, path, token, fmt.Sprintf("fill-%d", time.Now().UnixNano()), body)
		if err != nil {
			return nil, err
		}
		if status != want {
			return nil, fmt.Errorf("%s %s: %d %s", method, path, status, out)
		}
		var m map[string]any
		_ = json.Unmarshal(out, &m)
		return m, nil
	}
	if _, err := call("POST", "/v1/goals", adminToken, map[string]any{"goal_id": upGoal, "title": "Upgrade", "objective": "Survive the upgrade",
		"owners": []string{ownerID}, "members": []string{"ou_up_member"}, "allowed_slots": 50, "heartbeat_spec": "* * * * *",
		"heartbeat_tz": "UTC", "report_spec": "0 9 * * 1", "report_tz": "Asia/Shanghai", "lang": "zh"}, 201); err != nil {
		return sess, err
	}
	reg, err := call("POST", "/v1/goals/"+upGoal+"/agents", adminToken, map[string]any{"agent_id": agentID, "is_default": true}, 201)
	if err != nil {
		return sess, err
	}
	sess.agentToken, _ = reg["token"].(string)
	if _, err := call("POST", "/v1/goals/"+upGoal+"/agents", adminToken, map[string]any{"agent_id": "hook", "runner": "webhook",
		"runner_config": map[string]any{"url": hookURL, "secret": "upgrade-webhook-secret-0123456789"}}, 201); err != nil {
		return sess, err
	}
	todo, err := call("POST", "/v1/goals/"+upGoal+"/todos", adminToken, map[string]any{"text": "Claimed before the upgrade", "priority": 1}, 201)
	if err != nil {
		return sess, err
	}
	if _, err := call("POST", "/v1/goals/"+upGoal+"/todos", adminToken, map[string]any{"text": "For the webhook agent"}, 201); err != nil {
		return sess, err
	}
	todoID, err := idOf(todo, "todo_id")
	if err != nil {
		return sess, err
	}
	if _, err := call("POST", "/v1/goals/"+upGoal+"/todos/"+todoID+"/claim", sess.agentToken, map[string]any{"agent_id": agentID}, 200); err != nil {
		return sess, err
	}
	if _, err := call("POST", "/v1/goals/"+upGoal+"/should-run", sess.agentToken, map[string]any{"agent_id": agentID, "turn_instance_id": "up-t1", "begin_turn": true}, 200); err != nil {
		return sess, err
	}
	if _, err := call("POST", "/v1/goals/"+upGoal+"/evidence", sess.agentToken, map[string]any{"summary": "a note before the upgrade", "agent_id": agentID, "todo_id": todo["todo_id"], "kind": "note"}, 201); err != nil {
		return sess, err
	}
	if _, err := call("POST", "/v1/goals/"+upGoal+"/spend-slot", sess.agentToken, map[string]any{"turn_instance_id": "up-t1", "agent_id": agentID}, 200); err != nil {
		return sess, err
	}
	if _, err := call("POST", "/v1/goals/"+upGoal+"/refresh-state", sess.agentToken, map[string]any{"agent_id": agentID, "next_action": "carry on after the upgrade"}, 200); err != nil {
		return sess, err
	}
	if _, err := call("POST", "/v1/goals/"+upGoal+"/proposals", adminToken, map[string]any{"kind": "goal.set", "goal": map[string]any{"allowed_slots": 60}}, 201); err != nil {
		return sess, err
	}

	// Chat: a bound group, its language, a message to the agent, a report, a budget preview
	// (a proposal card), a message nobody can route, and /web in a direct chat.
	const group, stranger, dm = "oc_up_group", "oc_up_unbound", "oc_up_dm"
	say := func(chat string, typ sandbox.ChatType, text string) error {
		_ = s.sb.AddChat(chat, typ, chat)
		opts := []sandbox.SayOption{}
		if typ == sandbox.ChatGroup {
			opts = append(opts, sandbox.MentionBot())
		}
		d, err := s.sb.UserSays(chat, typ, ownerID, text, opts...)
		if err != nil {
			return err
		}
		if r, err := d.Wait(ctx); err != nil || !r.Acked {
			return fmt.Errorf("%q in %s was not acknowledged (%v)", text, chat, err)
		}
		return nil
	}
	for _, m := range []struct {
		chat string
		typ  sandbox.ChatType
		text string
	}{
		{group, sandbox.ChatGroup, "/bind #" + upGoal},
		{group, sandbox.ChatGroup, "/lang zh"},
		{group, sandbox.ChatGroup, "#" + upGoal + "/" + agentID + " please keep going after the upgrade"},
		{group, sandbox.ChatGroup, "/report #" + upGoal},
		{group, sandbox.ChatGroup, "/budget #" + upGoal + " 40"},
		{stranger, sandbox.ChatGroup, "is anyone there?"},
		{dm, sandbox.ChatP2P, "/web"},
	} {
		if err := say(m.chat, m.typ, m.text); err != nil {
			return sess, err
		}
	}
	// The gate holds a1's todo only, so the webhook agent's todo stays runnable.
	gate, err := call("POST", "/v1/goals/"+upGoal+"/gates", sess.agentToken, map[string]any{"question": "Ship after the upgrade?",
		"agent_id": agentID, "todo_id": todo["todo_id"]}, 201)
	if err != nil {
		return sess, err
	}
	if sess.gateID, err = idOf(gate, "gate_id"); err != nil {
		return sess, err
	}
	if err := waitFor(ctx, 30*time.Second, func() (bool, error) {
		for _, m := range s.sb.Chat(group).Messages() {
			if m.SenderType == sandbox.SenderApp && m.MsgType == "interactive" && strings.Contains(m.Content, "Ship after the upgrade?") {
				sess.gateCard = m.ID
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		return sess, fmt.Errorf("the gate's card never reached the chat: %w", err)
	}

	// An admin signs in to the workspace: a session the upgrade must keep.
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/web/signin/admin", strings.NewReader(url.Values{"token": {adminToken}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	resp, err := hc.Do(req)
	if err != nil {
		return sess, err
	}
	resp.Body.Close()
	u, _ := url.Parse(base + "/web/")
	sess.webCookie = jar.Cookies(u)
	if resp.StatusCode >= 400 || len(sess.webCookie) == 0 {
		return sess, fmt.Errorf("the workspace sign-in answered %d with no session", resp.StatusCode)
	}
	return sess, nil
}

// walkAfterUpgrade uses what the previous release left, on this tree: its gate card is
// answered with its button, its workspace session still opens the workspace, its agent's
// token still works, its claimed todo is still claimed, a message still reaches the agent.
func (s *suite) walkAfterUpgrade(ctx context.Context, base string, sess upSession, st *store.Store) ([]string, error) {
	var steps []string
	get := func(path, token string) (map[string]any, error) {
		status, out, err := s.api(ctx, base, "GET", path, token, "", nil)
		if err != nil {
			return nil, err
		}
		if status != http.StatusOK {
			return nil, fmt.Errorf("GET %s: %d %s", path, status, out)
		}
		var m map[string]any
		return m, json.Unmarshal(out, &m)
	}
	if _, err := s.sb.ClickButtonN(ctx, sess.gateCard, ownerID, 1); err != nil {
		return steps, fmt.Errorf("click the gate card the previous release sent: %w", err)
	}
	if err := waitFor(ctx, 30*time.Second, func() (bool, error) {
		m, err := get("/v1/goals/"+upGoal+"/gates?status=approved", adminToken)
		if err != nil {
			return false, err
		}
		gates, _ := m["gates"].([]any)
		for _, g := range gates {
			if gm, _ := g.(map[string]any); fmt.Sprint(gm["gate_id"]) == sess.gateID {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		return steps, fmt.Errorf("the previous release's gate card did not approve the gate: %w", err)
	}
	steps = append(steps, "the gate card the previous release sent approves its gate")

	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/web/goals/"+upGoal, nil)
	for _, c := range sess.webCookie {
		req.AddCookie(c)
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return steps, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return steps, fmt.Errorf("the workspace session of the previous release: GET /web/goals/%s answered %d", upGoal, resp.StatusCode)
	}
	steps = append(steps, "the workspace session signed in on the previous release opens the goal's page")

	if _, err := get("/v1/goals/"+upGoal+"/todos", sess.agentToken); err != nil {
		return steps, fmt.Errorf("the agent token of the previous release: %w", err)
	}
	var claimed string
	if err := st.DB().QueryRow(ctx, `SELECT claimed_by FROM todo WHERE goal_id = $1 AND text = 'Claimed before the upgrade'`, upGoal).Scan(&claimed); err != nil || claimed != agentID {
		return steps, fmt.Errorf("the claim made before the upgrade: %q %v", claimed, err)
	}
	steps = append(steps, "the agent's token and its claim from before the upgrade hold")

	d, err := s.sb.UserSays("oc_up_group", sandbox.ChatGroup, ownerID, "#"+upGoal+"/"+agentID+" still there after the upgrade?", sandbox.MentionBot())
	if err != nil {
		return steps, err
	}
	if r, err := d.Wait(ctx); err != nil || !r.Acked {
		return steps, fmt.Errorf("a message after the upgrade was not acknowledged: %v", err)
	}
	if err := waitFor(ctx, 30*time.Second, func() (bool, error) {
		var n int
		err := st.DB().QueryRow(ctx, `SELECT count(*) FROM inbox_item WHERE source_message = $1`, d.MessageID).Scan(&n)
		return n == 1, err
	}); err != nil {
		return steps, fmt.Errorf("a message after the upgrade did not reach the agent: %w", err)
	}
	status, out, err := s.api(ctx, base, "POST", "/v1/goals/"+upGoal+"/should-run", sess.agentToken, "after-upgrade-sr",
		map[string]any{"agent_id": agentID, "turn_instance_id": "up-t2", "begin_turn": true})
	if err != nil || status != http.StatusOK {
		return steps, fmt.Errorf("should-run after the upgrade: %d %s %v", status, out, err)
	}
	steps = append(steps, "a chat message reaches the agent's inbox and should-run answers")
	return steps, nil
}

// tableColumns lists the tables of the public schema (goose's own left out) with their
// columns, as the previous release made them.
func tableColumns(ctx context.Context, st *store.Store) (map[string][]string, error) {
	rows, err := st.DB().Query(ctx, `SELECT c.table_name, c.column_name FROM information_schema.columns c
		JOIN information_schema.tables t USING (table_schema, table_name)
		WHERE c.table_schema = 'public' AND t.table_type = 'BASE TABLE' AND c.table_name <> 'goose_db_version'
		ORDER BY c.table_name, c.ordinal_position`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string][]string{}
	for rows.Next() {
		var t, c string
		if err := rows.Scan(&t, &c); err != nil {
			return nil, err
		}
		out[t] = append(out[t], c)
	}
	return out, rows.Err()
}

func emptyTables(ctx context.Context, st *store.Store, tables map[string][]string) ([]string, error) {
	var empty []string
	for t := range tables {
		var has bool
		if err := st.DB().QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+quoteIdent(t)+`)`).Scan(&has); err != nil {
			return nil, err
		}
		if !has {
			empty = append(empty, t)
		}
	}
	slices.Sort(empty)
	return empty, nil
}

// fingerprint is a table's row count and a hash of its rows (the given columns only).
type fingerprint struct {
	rows int64
	hash string
}

func fingerprints(ctx context.Context, st *store.Store, tables map[string][]string) (map[string]fingerprint, error) {
	out := map[string]fingerprint{}
	for t, cols := range tables {
		quoted := make([]string, len(cols))
		for i, c := range cols {
			quoted[i] = quoteIdent(c)
		}
		var f fingerprint
		q := `SELECT count(*), md5(coalesce(string_agg(r::text, E'\n' ORDER BY r::text), '')) FROM (SELECT ` +
			strings.Join(quoted, ", ") + ` FROM ` + quoteIdent(t) + `) r`
		if err := st.DB().QueryRow(ctx, q).Scan(&f.rows, &f.hash); err != nil {
			return nil, fmt.Errorf("fingerprint %s: %w", t, err)
		}
		out[t] = f
	}
	return out, nil
}

var identRE = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

func quoteIdent(s string) string {
	if identRE.MatchString(s) {
		return `"` + s + `"`
	}
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// hookServer is the webhook agent's service. It holds every turn it is handed until release
// (or 60 s): a turn's token lives only while its turn runs, so the fill sees one.
type hookServer struct {
	srv     *http.Server
	url     string
	release chan struct{}
	once    sync.Once
}

func newHookServer() *hookServer {
	h := &hookServer{release: make(chan struct{})}
	port, _ := freePort()
	h.url = fmt.Sprintf("http://127.0.0.1:%d/wake", port)
	h.srv = &http.Server{Addr: fmt.Sprintf("127.0.0.1:%d", port), ReadHeaderTimeout: 5 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-h.release:
			case <-r.Context().Done():
			case <-time.After(60 * time.Second):
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"ok":true}`))
		})}
	go func() { _ = h.srv.ListenAndServe() }()
	return h
}

// answer lets every held turn and every later one finish at once.
func (h *hookServer) answer() { h.once.Do(func() { close(h.release) }) }

func (h *hookServer) close() {
	h.answer()
	_ = h.srv.Close()
}

// rollingUpgrade runs two replicas of the previous release under load, runs this tree's
// migrate beside them, and replaces them one at a time with this tree, keeping both versions
// serving together for a while; nothing acknowledged may be lost or done twice.
func (s *suite) rollingUpgrade(ctx context.Context, r *RollingResult, res *Results) error {
	if err := createDatabase(ctx, s.pg.URL("postgres"), "rolling"); err != nil {
		return err
	}
	st, err := s.storeOf(ctx, "rolling")
	if err != nil {
		return err
	}
	var mu sync.Mutex
	var reps []*replica
	current := func() []*replica {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(reps)
	}
	lb := newBalancer()
	if err := lb.start(); err != nil {
		return err
	}
	defer lb.close()
	defer func() {
		for _, rep := range current() {
			if rep.alive() {
				_, _ = rep.term(10 * time.Second)
			}
		}
	}()
	for _, name := range []string{"roll-a", "roll-b"} {
		rep, err := s.upReplica(name+"-previous", s.o.previous, "rolling", nil)
		if err != nil {
			return err
		}
		if err := rep.start(); err != nil {
			return err
		}
		if _, err := rep.waitReady(ctx, 60*time.Second); err != nil {
			return err
		}
		reps = append(reps, rep)
	}
	lb.set(current())
	if err := s.sb.SetCallbackURLs(lb.url+"/lark/events", lb.url+"/lark/cards"); err != nil {
		return err
	}
	defer func() { _ = s.sb.SetCallbackURLs("", "") }()
	const goal = "roll"
	if _, err := s.mustAPIAt(ctx, reps[0].url, "POST", "/v1/goals", map[string]any{"goal_id": goal, "title": "Rolling", "owners": []string{ownerID}, "allowed_slots": 1000}, 201); err != nil {
		return err
	}
	if _, err := s.mustAPIAt(ctx, reps[0].url, "POST", "/v1/goals/"+goal+"/agents", map[string]any{"agent_id": agentID, "is_default": true}, 201); err != nil {
		return err
	}
	var chats []string
	var binds []*sandbox.Delivery
	for i := range 8 {
		chat := fmt.Sprintf("oc_roll_%d", i)
		chats = append(chats, chat)
		_ = s.sb.AddChat(chat, sandbox.ChatGroup, chat)
		d, err := s.sb.UserSays(chat, sandbox.ChatGroup, ownerID, "/bind #"+goal, sandbox.MentionBot())
		if err != nil {
			return err
		}
		binds = append(binds, d)
	}
	if _, failed := waitDelivered(ctx, binds); failed > 0 {
		return fmt.Errorf("%d /bind messages not acknowledged", failed)
	}
	step := func(format string, args ...any) { r.Steps = append(r.Steps, fmt.Sprintf(format, args...)) }
	step("two replicas of %s serving under load", s.o.previousVersion)

	l := s.startLoadOn(ctx, "roll", loadTarget{goal: goal, chats: chats, replicas: current})
	pause := func() { time.Sleep(3 * time.Second) }
	pause()
	code, out, _, err := s.runOnce(ctx, s.bin, "rolling", "migrate")
	if err != nil || code != 0 {
		l.halt()
		return fmt.Errorf("this tree's loopx migrate beside the running replicas: exit %d %v %s", code, err, out)
	}
	step("this tree's loopx migrate ran while both kept serving")
	pause()
	var mixedFrom time.Time
	for i, name := range []string{"roll-a", "roll-b"} {
		old := current()[i]
		if _, err := old.term(15 * time.Second); err != nil {
			res.check(false, "rolling: %s did not stop cleanly: %v", old.name, err)
		}
		rep, err := s.upReplica(name+"-current", s.bin, "rolling", nil)
		if err != nil {
			l.halt()
			return err
		}
		if err := rep.start(); err != nil {
			l.halt()
			return err
		}
		if _, err := rep.waitReady(ctx, 60*time.Second); err != nil {
			l.halt()
			return err
		}
		mu.Lock()
		reps[i] = rep
		mu.Unlock()
		lb.set(current())
		if i == 0 {
			mixedFrom = time.Now()
			step("%s replaced by this tree: both versions serve together", name)
			time.Sleep(6 * time.Second) // the mixed period under load
		} else {
			r.MixedSeconds = time.Since(mixedFrom).Seconds()
			step("%s replaced by this tree: the upgrade is complete", name)
		}
	}
	pause()
	l.halt()

	l.mu.Lock()
	msgs, acked, statuses := l.msgs, l.acked, l.statuses
	l.mu.Unlock()
	r.APIStatuses, r.APIWrites, r.Events = statuses, len(acked), len(msgs)
	var ds []*sandbox.Delivery
	for _, m := range msgs {
		ds = append(ds, m.d)
	}
	_, r.EventsNotAcked = waitDelivered(ctx, ds)
	if _, err := waitDrainedOf(ctx, st, 3*time.Minute); err != nil {
		res.check(false, "rolling: %v", err)
	}
	for _, text := range acked {
		var n int
		if err := st.DB().QueryRow(ctx, `SELECT count(*) FROM todo WHERE goal_id = $1 AND text = $2`, goal, text).Scan(&n); err != nil {
			return err
		}
		switch {
		case n == 0:
			r.APIWritesLost++
		case n > 1:
			r.APIWritesDoubl++
		}
	}
	if err := s.checkMessagesOf(ctx, st, goal, msgs, &r.EventsLost, &r.EventsDoubled, &r.ReceiptsDouble, &r.ReceiptsMissed); err != nil {
		return err
	}
	res.check(r.Events > 0 && r.APIWrites > 0, "rolling: no load ran (%d events, %d writes)", r.Events, r.APIWrites)
	res.check(r.EventsNotAcked == 0, "rolling: %d chat events never acknowledged", r.EventsNotAcked)
	res.check(r.EventsLost == 0 && r.APIWritesLost == 0, "rolling: %d chat messages and %d API writes lost", r.EventsLost, r.APIWritesLost)
	res.check(r.EventsDoubled == 0 && r.APIWritesDoubl == 0, "rolling: %d chat messages and %d API writes doubled", r.EventsDoubled, r.APIWritesDoubl)
	res.check(r.ReceiptsDouble == 0 && r.ReceiptsMissed == 0, "rolling: %d receipts doubled, %d missing", r.ReceiptsDouble, r.ReceiptsMissed)
	res.check(statuses["500"] == 0, "rolling: %d API answers were 500", statuses["500"])
	return nil
}

// mustAPIAt calls the API of base and requires want.
func (s *suite) mustAPIAt(ctx context.Context, base, method, path string, body any, want int) (map[string]any, error) {
	status, out, err := s.api(ctx, base, method, path, adminToken, fmt.Sprintf("setup-%d", time.Now().UnixNano()), body)
	if err != nil {
		return nil, err
	}
	if status != want {
		return nil, fmt.Errorf("%s %s: %d %s", method, path, status, out)
	}
	var m map[string]any
	_ = json.Unmarshal(out, &m)
	return m, nil
}

// nextMigration is the migration the stand-in for the next release adds (make upgrade-test
// builds it into -next).
const nextMigration = 99999

// downgrade: the release after this tree migrates the upgraded database; this tree's serve
// and migrate refuse it with both versions and the way back; the way back (the next
// release's migrate down) works, and this tree serves again. current is this tree's version
// (loopx version), which the refusal names beside the database's.
func (s *suite) downgrade(ctx context.Context, r *DowngradeResult, current string, res *Results) error {
	r.NextMigration = nextMigration
	code, out, _, err := s.runOnce(ctx, s.o.next, "upgrade", "migrate")
	if err != nil || code != 0 {
		return fmt.Errorf("the next release's migrate: exit %d %v %s", code, err, out)
	}
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	code, out, took, err := s.runOnce(cctx, s.bin, "upgrade", "serve")
	if err != nil {
		return err
	}
	r.ServeExit, r.ServeSeconds = code, took.Seconds()
	r.Message = strings.TrimSpace(lastLine(out))
	res.check(code == 1, "downgrade: serve on a newer schema exited %d, want 1: %s", code, out)
	for _, want := range []string{
		fmt.Sprintf("this loopx (%s, schema version %d)", current, store.LatestMigration()),
		fmt.Sprintf("schema version %d, migrated by loopx next", nextMigration),
		"restore the backup taken before the upgrade",
		fmt.Sprintf("loopx migrate down %d", nextMigration),
	} {
		res.check(strings.Contains(out, want), "downgrade: the refusal does not say %q: %s", want, out)
	}
	code, out, _, err = s.runOnce(ctx, s.bin, "upgrade", "migrate")
	if err != nil {
		return err
	}
	r.MigrateExit = code
	res.check(code == 1 && strings.Contains(out, "will not run on it"), "downgrade: migrate on a newer schema exited %d: %s", code, out)

	r.WayBack = fmt.Sprintf("loopx migrate down %d (with the next release)", nextMigration)
	code, out, _, err = s.runOnce(ctx, s.o.next, "upgrade", "migrate", "down", strconv.Itoa(nextMigration))
	if err != nil || code != 0 {
		return fmt.Errorf("the way back, %s: exit %d %v %s", r.WayBack, code, err, out)
	}
	rep, err := s.upReplica("down-current", s.bin, "upgrade", nil)
	if err != nil {
		return err
	}
	if err := rep.start(); err != nil {
		return err
	}
	defer func() { _, _ = rep.term(10 * time.Second) }()
	if _, err := rep.waitReady(ctx, 60*time.Second); err != nil {
		return fmt.Errorf("this tree after the way back: %w", err)
	}
	r.ReadyAfterDown = true
	return nil
}

// rollbackToPrevious undoes this tree's migrations with its own down sections and runs the
// previous release on the database again, with the data it wrote before the upgrade.
func (s *suite) rollbackToPrevious(ctx context.Context, r *UpgradeResult, res *Results) error {
	rb := r.Rollback
	if len(r.NewMigrations) > 0 {
		args := []string{"migrate", "down"}
		for _, v := range r.NewMigrations {
			args = append(args, strconv.FormatInt(v, 10))
		}
		code, out, _, err := s.runOnce(ctx, s.bin, "upgrade", args...)
		if err != nil || code != 0 {
			return fmt.Errorf("loopx %s: exit %d %v %s", strings.Join(args, " "), code, err, out)
		}
		rb.Undone = r.NewMigrations
	}
	rep, err := s.upReplica("rollback-previous", s.o.previous, "upgrade", nil)
	if err != nil {
		return err
	}
	if err := rep.start(); err != nil {
		return err
	}
	defer func() { _, _ = rep.term(10 * time.Second) }()
	if _, err := rep.waitReady(ctx, 60*time.Second); err != nil {
		return fmt.Errorf("the previous release after the rollback: %w", err)
	}
	rb.PreviousReady = true
	status, out, err := s.api(ctx, rep.url, "GET", "/v1/goals/"+upGoal+"/todos", adminToken, "", nil)
	if err != nil {
		return err
	}
	rb.DataIntact = status == http.StatusOK && bytes.Contains(out, []byte("Claimed before the upgrade"))
	res.check(rb.DataIntact, "rollback: the previous release does not see its data again: %d %s", status, out)
	return nil
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
