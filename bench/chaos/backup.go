package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"loopx/bot/sandbox"
	"loopx/store"
	"loopx/store/devpg"
)

// BackupResult is a backup taken under load and restored into a new database by the steps
// of docs/deploy.md: pg_dump -Fc, pg_restore into a new database, loopx migrate
// --after-restore, the replicas started on it, loopx doctor. The state the dump holds
// (goals, open gates with their cards, rows queued to Lark) is checked on the restored
// servers, and every queued row reaches Lark once, though the original servers sent them
// all after the dump.
type BackupResult struct {
	Steps []string `json:"steps"`

	EventsDuringDump    int     `json:"chat_events_during_the_dump"`
	APIWritesDuringDump int     `json:"api_writes_during_the_dump"`
	DumpBytes           int64   `json:"dump_bytes"`
	DumpSeconds         float64 `json:"dump_seconds"`
	RestoreSeconds      float64 `json:"restore_seconds"`
	ReadySeconds        float64 `json:"restored_readyz_seconds"`

	Goals       int            `json:"goals_in_the_dump"`
	OpenGates   int            `json:"open_gates_in_the_dump"`
	GateCards   int            `json:"gate_cards_in_the_dump"`
	Queued      map[string]int `json:"queued_in_the_dump"`
	SentByFirst int            `json:"queued_rows_the_original_sent_after_the_dump"`

	AfterRestore *store.RestoreReport `json:"migrate_after_restore"`

	GoalsRestored     int `json:"goals_restored"`
	GatesStillOpen    int `json:"gates_open_after_the_restore"`
	GatesAnsweredCard int `json:"gates_answered_with_their_card_after_the_restore"`
	SentOnce          int `json:"queued_rows_in_lark_once"`
	SentTwice         int `json:"queued_rows_in_lark_twice"`
	NotSent           int `json:"queued_rows_not_sent"`
	DoctorExit        int `json:"doctor_exit_code"`
}

// queuedRow is an outbox row the dump holds unsent.
type queuedRow struct {
	id                 int64
	uuid, kind, target string
	restoredState      string
}

func (s *suite) backupScenario(ctx context.Context, res *Results) error {
	r := &BackupResult{Queued: map[string]int{}}
	res.Backup = r
	if err := s.ensureTransport(ctx, "http"); err != nil {
		return err
	}
	step := func(format string, args ...any) { r.Steps = append(r.Steps, fmt.Sprintf(format, args...)) }
	pgDump, err := pgTool("pg_dump")
	if err != nil {
		return err
	}
	pgRestore, err := pgTool("pg_restore")
	if err != nil {
		return err
	}

	// Load, and Lark answering slowly, so that the dump catches rows queued and in flight.
	l := s.startLoad(ctx, "backup")
	time.Sleep(2 * time.Second)
	s.sb.FailNext(sandbox.RouteCreate, 60, sandbox.Fail{Delay: 1500 * time.Millisecond})
	s.sb.FailNext(sandbox.RouteReactionCreate, 60, sandbox.Fail{Delay: 1500 * time.Millisecond})
	for i := range 3 {
		if _, err := s.mustAPI(ctx, "POST", "/v1/goals/"+goalID+"/gates", adminToken,
			map[string]any{"question": fmt.Sprintf("Restore drill %d: go ahead?", i+1), "agent_id": agentID}, 201); err != nil {
			l.halt()
			return err
		}
	}
	time.Sleep(500 * time.Millisecond)
	l.mu.Lock()
	eventsBefore, writesBefore := len(l.msgs), len(l.acked)
	l.mu.Unlock()

	// The dump, and what it holds read in the dump's own snapshot.
	dump := filepath.Join(s.dir, "loopx.dump")
	var goals []string
	var gates []int64
	var queued []queuedRow
	err = s.st.WithTx(ctx, func(tx *store.Tx) error {
		if _, err := tx.Exec(ctx, `SET TRANSACTION ISOLATION LEVEL REPEATABLE READ`); err != nil {
			return err
		}
		var snap string
		if err := tx.QueryRow(ctx, `SELECT pg_export_snapshot()`).Scan(&snap); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT id FROM goal ORDER BY id`)
		if err != nil {
			return err
		}
		for rows.Next() {
			var g string
			_ = rows.Scan(&g)
			goals = append(goals, g)
		}
		rows.Close()
		rows, err = tx.Query(ctx, `SELECT id FROM gate WHERE goal_id = $1 AND status = 'open' ORDER BY id`, goalID)
		if err != nil {
			return err
		}
		for rows.Next() {
			var g int64
			_ = rows.Scan(&g)
			gates = append(gates, g)
		}
		rows.Close()
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE kind = 'card' AND gate_id = ANY($1)`, gates).Scan(&r.GateCards); err != nil {
			return err
		}
		rows, err = tx.Query(ctx, `SELECT id, uuid, kind, target_message FROM outbox
			WHERE state IN ('pending', 'sending') ORDER BY id`)
		if err != nil {
			return err
		}
		for rows.Next() {
			var q queuedRow
			_ = rows.Scan(&q.id, &q.uuid, &q.kind, &q.target)
			queued = append(queued, q)
		}
		rows.Close()
		t0 := time.Now()
		out, err := exec.CommandContext(ctx, pgDump, "--format=custom", "--snapshot="+snap,
			"--file="+dump, "--dbname="+s.pg.URL(s.dbName)).CombinedOutput()
		r.DumpSeconds = time.Since(t0).Seconds()
		if err != nil {
			return fmt.Errorf("pg_dump: %v: %s", err, out)
		}
		return nil
	})
	if err != nil {
		l.halt()
		return fmt.Errorf("take the backup: %w", err)
	}
	if fi, err := os.Stat(dump); err == nil {
		r.DumpBytes = fi.Size()
	}
	r.Goals, r.OpenGates = len(goals), len(gates)
	for _, q := range queued {
		r.Queued[q.kind]++
	}
	step("pg_dump -Fc under load: %d goals, %d open gates, %d rows queued to Lark", r.Goals, r.OpenGates, len(queued))

	// The original servers carry on, then stop: everything queued in the dump reached Lark.
	time.Sleep(2 * time.Second)
	l.halt()
	l.mu.Lock()
	r.EventsDuringDump, r.APIWritesDuringDump = len(l.msgs)-eventsBefore, len(l.acked)-writesBefore
	msgs := l.msgs
	l.mu.Unlock()
	var ds []*sandbox.Delivery
	for _, m := range msgs {
		ds = append(ds, m.d)
	}
	waitDelivered(ctx, ds)
	if _, err := s.waitOutboxDrained(ctx, 3*time.Minute); err != nil {
		res.check(false, "backup: the original servers: %v", err)
	}
	ids := make([]int64, len(queued))
	for i, q := range queued {
		ids[i] = q.id
	}
	if err := s.st.DB().QueryRow(ctx, `SELECT count(*) FROM outbox WHERE id = ANY($1) AND state = 'sent'`, ids).Scan(&r.SentByFirst); err != nil {
		return err
	}
	for _, rep := range s.replicas {
		if rep.alive() {
			if _, err := rep.term(15 * time.Second); err != nil {
				res.check(false, "backup: %s did not stop cleanly: %v", rep.name, err)
			}
		}
	}
	s.transport = "" // the next scenario on the suite's replicas starts them again
	step("the original servers sent %d of the %d queued rows after the dump, then stopped", r.SentByFirst, len(queued))

	// The documented restore: a new database, pg_restore, loopx migrate --after-restore.
	const restored = "restored"
	if err := createDatabase(ctx, s.pg.URL("postgres"), restored); err != nil {
		return err
	}
	t0 := time.Now()
	if out, err := exec.CommandContext(ctx, pgRestore, "--no-owner", "--no-privileges",
		"--dbname="+s.pg.URL(restored), dump).CombinedOutput(); err != nil {
		return fmt.Errorf("pg_restore: %v: %s", err, out)
	}
	r.RestoreSeconds = time.Since(t0).Seconds()
	code, out, _, err := s.runOnce(ctx, s.bin, restored, "migrate", "--after-restore", "--format", "json")
	if err != nil || code != 0 {
		return fmt.Errorf("loopx migrate --after-restore: exit %d %v %s", code, err, out)
	}
	var mr struct {
		AfterRestore *store.RestoreReport `json:"after_restore"`
	}
	if err := json.Unmarshal([]byte(lastLine(out)), &mr); err != nil || mr.AfterRestore == nil {
		return fmt.Errorf("loopx migrate --after-restore said %q (%v)", out, err)
	}
	r.AfterRestore = mr.AfterRestore
	step("pg_restore into a new database in %.1f s; loopx migrate --after-restore: %d receipts to look up, %d claims released",
		r.RestoreSeconds, r.AfterRestore.ReactionsToCheck, r.AfterRestore.ClaimsReleased)

	var reps []*replica
	defer func() {
		for _, rep := range reps {
			if rep.alive() {
				_, _ = rep.term(10 * time.Second)
			}
		}
	}()
	t0 = time.Now()
	for i := range 2 {
		rep, err := s.newReplica(fmt.Sprintf("restored-%d", i+1), s.pg.URL(restored), map[string]string{"LARK_TRANSPORT": "http"})
		if err != nil {
			return err
		}
		if err := rep.start(); err != nil {
			return err
		}
		reps = append(reps, rep)
	}
	for _, rep := range reps {
		if _, err := rep.waitReady(ctx, 60*time.Second); err != nil {
			return err
		}
	}
	r.ReadySeconds = time.Since(t0).Seconds()
	s.lb.set(reps)
	defer s.lb.set(s.replicas)
	st, err := s.storeOf(ctx, restored)
	if err != nil {
		return err
	}
	if _, err := waitDrainedOf(ctx, st, 3*time.Minute); err != nil {
		res.check(false, "backup: the restored servers: %v", err)
	}
	step("two servers on the restored database ready in %.1f s; its queue drained", r.ReadySeconds)

	// The state of the dump, on the restored servers.
	var restoredGoals []string
	rows, err := st.DB().Query(ctx, `SELECT id FROM goal ORDER BY id`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var g string
		_ = rows.Scan(&g)
		restoredGoals = append(restoredGoals, g)
	}
	rows.Close()
	r.GoalsRestored = len(restoredGoals)
	res.check(slices.Equal(goals, restoredGoals), "backup: goals %v restored as %v", goals, restoredGoals)
	if err := st.DB().QueryRow(ctx, `SELECT count(*) FROM gate WHERE id = ANY($1) AND status = 'open'`, gates).Scan(&r.GatesStillOpen); err != nil {
		return err
	}
	res.check(r.GatesStillOpen == len(gates), "backup: %d of the %d open gates are open after the restore", r.GatesStillOpen, len(gates))

	// Every row queued in the dump is in Lark once: a message or card under its uuid, a
	// receipt as one reaction of the bot on its message.
	uuids := map[string]int{}
	for _, c := range s.sb.Chats() {
		for _, m := range s.sb.Chat(c.ID).Messages() {
			if m.UUID != "" {
				uuids[m.UUID]++
			}
		}
	}
	for i := range queued {
		q := &queued[i]
		if err := st.DB().QueryRow(ctx, `SELECT state FROM outbox WHERE id = $1`, q.id).Scan(&q.restoredState); err != nil {
			return err
		}
		if q.restoredState != "sent" {
			r.NotSent++
			continue
		}
		n := 1 // a card update patches its card in place: once or twice shows the same
		switch q.kind {
		case "text", "card":
			n = uuids[q.uuid]
		case "reaction":
			n = 0
			if m, ok := s.sb.Message(q.target); ok {
				for _, rc := range m.Reactions {
					if rc.OperatorType == sandbox.SenderApp {
						n++
					}
				}
			}
		}
		switch {
		case n == 1:
			r.SentOnce++
		case n > 1:
			r.SentTwice++
			s.log.Warn("queued row in Lark twice after the restore", "outbox_id", q.id, "kind", q.kind, "uuid", q.uuid)
		default:
			r.NotSent++
		}
	}
	res.check(len(queued) > 0, "backup: the dump held no queued row: nothing was tested")
	res.check(r.SentTwice == 0, "backup: %d rows queued in the dump reached Lark twice after the restore", r.SentTwice)
	res.check(r.NotSent == 0, "backup: %d rows queued in the dump were not sent after the restore", r.NotSent)

	// Each open gate is answered with the card the original servers posted.
	for _, g := range gates {
		var msg string
		if err := st.DB().QueryRow(ctx, `SELECT lark_message_id FROM outbox WHERE gate_id = $1 AND kind = 'card' AND state = 'sent'
			AND lark_message_id <> '' ORDER BY id LIMIT 1`, g).Scan(&msg); err != nil {
			res.check(false, "backup: gate %d has no sent card after the restore: %v", g, err)
			continue
		}
		if _, err := s.sb.ClickButtonN(ctx, msg, ownerID, 1); err != nil {
			res.check(false, "backup: click gate %d's card: %v", g, err)
			continue
		}
		if err := waitFor(ctx, 30*time.Second, func() (bool, error) {
			var status string
			err := st.DB().QueryRow(ctx, `SELECT status FROM gate WHERE id = $1`, g).Scan(&status)
			return status == "approved", err
		}); err != nil {
			res.check(false, "backup: gate %d not approved by its card after the restore: %v", g, err)
			continue
		}
		r.GatesAnsweredCard++
	}
	res.check(r.GatesAnsweredCard == len(gates), "backup: %d of %d open gates answered with their card after the restore", r.GatesAnsweredCard, len(gates))
	step("%d of %d open gates answered with their card after the restore", r.GatesAnsweredCard, len(gates))

	// The last documented step: loopx doctor against a restored server.
	doctor := exec.CommandContext(ctx, s.bin, "doctor", "--format", "json")
	doctor.Env = append(slices.Clone(reps[0].env), "LOOPX_URL="+reps[0].url, "LOOPX_TOKEN="+adminToken)
	dout, err := doctor.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		r.DoctorExit = ee.ExitCode()
	} else if err != nil {
		return err
	}
	res.check(r.DoctorExit == 0, "backup: loopx doctor after the restore exited %d: %s", r.DoctorExit, dout)
	step("loopx doctor after the restore: exit %s", strconv.Itoa(r.DoctorExit))
	return nil
}

// pgTool finds a PostgreSQL client program: beside the server the suite runs, else on PATH,
// else the newest of Debian's.
func pgTool(name string) (string, error) {
	if dir, err := devpg.BinDir(); err == nil {
		if p := filepath.Join(dir, name); fileExists(p) {
			return p, nil
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/" + name)
	if len(matches) == 0 {
		return "", fmt.Errorf("no %s on this machine (Debian's postgresql-client has it)", name)
	}
	slices.Sort(matches)
	return matches[len(matches)-1], nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
