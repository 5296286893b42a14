package store

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
)

// A permission gate is a host's own permission prompt (may this agent run this tool?) asked
// of the goal's owners: a gate of kind permission with the options approve (allow once),
// allow_turn (allow this tool for the rest of the turn) and reject (deny), announced as a
// card like any gate and answered by an owner only (AnswerGate). It blocks nothing in
// should-run. Nobody answered by ExpiresAt: the request is denied (ExpirePermission closes
// the gate, and AnswerGate refuses a late answer). A goal's policy allows or denies named
// tools without asking, and sets the time limit.

// Permission answers.
const (
	PermissionAllowOnce = "approve"    // the gate's option: allow this call
	PermissionAllowTurn = "allow_turn" // the gate's option: allow the tool for the rest of the turn
	PermissionDeny      = "reject"     // the gate's option: deny this call
)

// Decisions of a permission request.
const (
	PermitAllow = "allow"
	PermitAsk   = "ask" // a gate is open: wait for its answer
	PermitDeny  = "deny"
)

// PermissionRequest is what a host asks to run, as the card shows it.
type PermissionRequest struct {
	Host    string `json:"host"`    // claude-code, codex
	Tool    string `json:"tool"`    // the host's tool name: Bash, Write, mcp__x__y
	Summary string `json:"summary"` // its arguments, readable and short
	Folder  string `json:"folder"`  // where the host runs
	Turn    string `json:"turn"`    // the LoopX turn instance, else the host's session
	// Paths are the files the tool writes, relative to the project folder with forward
	// slashes (../ when it leaves the folder), as the hook read them from its arguments.
	Paths []string `json:"paths,omitempty"`
	// Outside lists the paths outside the goal's editable ones; AskPermission sets it (what
	// a client sends is replaced) and the card names them.
	Outside []string `json:"outside,omitempty"`
}

// AskPermissionParams asks the goal's owners whether agent may run a tool.
type AskPermissionParams struct {
	GoalID  string
	AgentID string
	Request PermissionRequest
	// Notice announces the gate (the permission card), inside the transaction.
	Notice NoticeFunc `json:"-"`
	Meta   Meta       `json:"-"`
}

// PermissionAnswer is what AskPermission decided, or the gate that asks.
type PermissionAnswer struct {
	Decision string `json:"decision"` // allow | deny | ask
	// Reason: rule_allow, rule_deny (the goal's policy), scope_protected (a path the goal's
	// scope protects), turn_allowed (an owner allowed the tool for this turn), asked (a gate
	// is open).
	Reason string `json:"reason"`
	// Protected lists the paths the goal's scope protects (reason scope_protected).
	Protected []string   `json:"protected,omitempty"`
	Gate      *Gate      `json:"gate,omitempty"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// PermissionPolicy is a goal's rules for permission requests.
type PermissionPolicy struct {
	GoalID         string `json:"goal_id"`
	TimeoutSeconds int    `json:"timeout_seconds"`
	// TimeoutSet: the goal set its own limit; otherwise it follows the machine default
	// (MachineDefaults.PermissionTimeoutSeconds).
	TimeoutSet bool     `json:"timeout_set"`
	AllowTools []string `json:"allow_tools"`
	DenyTools  []string `json:"deny_tools"`
}

// SetPermissionPolicyParams sets a goal's policy; nil fields keep their value.
type SetPermissionPolicyParams struct {
	GoalID         string
	TimeoutSeconds *int
	// TimeoutDefault puts the limit back to the machine default.
	TimeoutDefault bool
	AllowTools     *[]string
	DenyTools      *[]string
	Meta           Meta `json:"-"`
}

func checkPermissionRequest(r PermissionRequest) error {
	for field, v := range map[string]struct {
		s   string
		max int
	}{"tool": {r.Tool, 200}, "summary": {r.Summary, 2000}, "folder": {r.Folder, 1000}, "turn": {r.Turn, 200}, "host": {r.Host, 50}} {
		if err := checkText(field, v.s, v.max, field == "tool"); err != nil {
			return err
		}
	}
	if len(r.Paths) > maxRequestPaths {
		return Errorf(ErrInvalid, "paths", "lists %d paths; at most %d", len(r.Paths), maxRequestPaths)
	}
	for _, p := range r.Paths {
		if err := checkText("paths", p, 1000, true); err != nil {
			return err
		}
		if strings.ContainsAny(p, "\x00\n\r") {
			return Errorf(ErrInvalid, "paths", "%q is not a path", clip(p))
		}
	}
	return nil
}

// maxRequestPaths bounds the files one permission request names (a patch of many files).
const maxRequestPaths = 200

// requestScope sorts the paths a request writes by the goal's scope: those it protects and
// those outside its editable paths. A path that leaves the project folder is outside
// whenever the goal lists editable paths.
func requestScope(s Scope, paths []string) (protected, outside []string) {
	for _, p := range paths {
		clean := path.Clean(strings.ReplaceAll(p, "\\", "/"))
		where := ScopeOf(s, clean)
		if where != "protected" && len(s.Editable) > 0 && (clean == ".." || strings.HasPrefix(clean, "../") || strings.HasPrefix(clean, "/")) {
			where = "outside"
		}
		switch where {
		case "protected":
			protected = append(protected, p)
		case "outside":
			outside = append(outside, p)
		}
	}
	return protected, outside
}

// toolMatches: a rule names a tool exactly, or a prefix ending in *.
func toolMatches(rules []string, tool string) bool {
	return slices.ContainsFunc(rules, func(r string) bool {
		if p, ok := strings.CutSuffix(r, "*"); ok {
			return strings.HasPrefix(tool, p)
		}
		return r == tool
	})
}

// AskPermission decides a permission request: the goal's deny rules, then its allow rules,
// then an answer "allow for this turn" to the same tool in the same turn; otherwise it opens
// a permission gate (announced by Notice) that expires after the goal's time limit.
func (s *Store) AskPermission(ctx context.Context, p AskPermissionParams) (PermissionAnswer, error) {
	if err := checkID("goal_id", p.GoalID); err != nil {
		return PermissionAnswer{}, err
	}
	if err := checkID("agent_id", p.AgentID); err != nil {
		return PermissionAnswer{}, err
	}
	if err := checkPermissionRequest(p.Request); err != nil {
		return PermissionAnswer{}, err
	}
	return Do(ctx, s, "permission.ask", p.Meta, p, func(tx *Tx, now time.Time) (PermissionAnswer, Audit, error) {
		goal, err := getGoal(ctx, tx, p.GoalID, false)
		if err != nil {
			return PermissionAnswer{}, Audit{}, err
		}
		if _, err := getAgent(ctx, tx, p.GoalID, p.AgentID); err != nil {
			return PermissionAnswer{}, Audit{}, err
		}
		pol, err := getPermissionPolicy(ctx, tx, goal.ID)
		if err != nil {
			return PermissionAnswer{}, Audit{}, err
		}
		detail := map[string]any{"agent_id": p.AgentID, "tool": p.Request.Tool, "turn": p.Request.Turn}
		if len(p.Request.Paths) > 0 {
			detail["paths"] = p.Request.Paths
		}
		decided := func(decision, reason string, protected []string) (PermissionAnswer, Audit, error) {
			detail["decision"], detail["reason"] = decision, reason
			return PermissionAnswer{Decision: decision, Reason: reason, Protected: protected},
				Audit{GoalID: goal.ID, Target: AgentTarget(goal.ID, p.AgentID), Detail: auditDetail(detail)}, nil
		}
		// The scope speaks of paths, the rules of tools: a protected path is denied even for
		// an allowed tool, and a path outside the editable ones is always asked.
		protected, outside := requestScope(goal.Scope(), p.Request.Paths)
		p.Request.Outside = outside
		switch {
		case toolMatches(pol.DenyTools, p.Request.Tool):
			return decided(PermitDeny, "rule_deny", nil)
		case len(protected) > 0:
			return decided(PermitDeny, "scope_protected", protected)
		case len(outside) > 0:
		case toolMatches(pol.AllowTools, p.Request.Tool):
			return decided(PermitAllow, "rule_allow", nil)
		}
		if p.Request.Turn != "" && len(outside) == 0 {
			var n int
			err := tx.QueryRow(ctx, `SELECT count(*) FROM gate
				WHERE goal_id = $1 AND agent_id = $2 AND kind = 'permission' AND answer = 'allow_turn'
				  AND request->>'turn' = $3 AND request->>'tool' = $4`, goal.ID, p.AgentID, p.Request.Turn, p.Request.Tool).Scan(&n)
			if err != nil {
				return PermissionAnswer{}, Audit{}, fmt.Errorf("read earlier answers: %w", mapErr(err))
			}
			if n > 0 {
				return decided(PermitAllow, "turn_allowed", nil)
			}
		}
		expires := now.Add(time.Duration(pol.TimeoutSeconds) * time.Second)
		g, err := scanGate(tx.QueryRow(ctx, `
			INSERT INTO gate (goal_id, agent_id, kind, question, options, request, expires_at, next_reminder_at, created_at)
			VALUES ($1, $2, 'permission', $3, $4, $5, $6, $7, $8)
			RETURNING `+gateCols,
			goal.ID, p.AgentID, permissionQuestion(p.AgentID, p.Request), []string{PermissionAllowOnce, PermissionAllowTurn, PermissionDeny},
			p.Request, expires, now.Add(firstReminder), now))
		if err != nil {
			return PermissionAnswer{}, Audit{}, fmt.Errorf("insert permission gate: %w", mapErr(err))
		}
		if err := gateNotice(ctx, tx, p.Notice, g); err != nil {
			return PermissionAnswer{}, Audit{}, err
		}
		detail["decision"], detail["reason"], detail["expires_at"] = PermitAsk, "asked", expires
		return PermissionAnswer{Decision: PermitAsk, Reason: "asked", Gate: &g, ExpiresAt: &expires},
			Audit{GoalID: goal.ID, Target: GateTarget(g.ID), Detail: auditDetail(detail)}, nil
	})
}

// permissionQuestion is the gate's question in plain words, for the places that list gates
// (chat /gates, the workspace, digests).
func permissionQuestion(agent string, r PermissionRequest) string {
	q := fmt.Sprintf("Agent %s asks to run %s", agent, r.Tool)
	if r.Summary != "" {
		q += ": " + r.Summary
	}
	if r.Folder != "" {
		q += " (in " + r.Folder + ")"
	}
	return clipRunes(q, MaxText)
}

func clipRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// PermissionDecision is what an answered permission gate decides: allow (approve,
// allow_turn) or deny (reject, expired, cancelled); "" while it is open.
func PermissionDecision(g Gate) string {
	switch {
	case g.Status == GateOpen:
		return ""
	case g.Status == GateApproved, g.Status == GateAnswered && g.Answer == PermissionAllowTurn:
		return PermitAllow
	}
	return PermitDeny
}

// ExpirePermission closes permission gate id of goal as denied once its time is up (a
// cancelled gate with a comment saying so), announced by notice (the card update). A gate
// already closed is answered as it is; one whose time is not up yet is ErrRefused.
func (s *Store) ExpirePermission(ctx context.Context, goalID string, id int64, notice NoticeFunc, meta Meta) (Gate, error) {
	if err := checkID("goal_id", goalID); err != nil {
		return Gate{}, err
	}
	return Do(ctx, s, "permission.expire", meta, []any{goalID, id}, func(tx *Tx, now time.Time) (Gate, Audit, error) {
		g, err := getGate(ctx, tx, goalID, id, true)
		if err != nil {
			return Gate{}, Audit{}, err
		}
		audit := Audit{GoalID: goalID, Target: GateTarget(g.ID)}
		if g.Kind != GateKindPermission {
			return Gate{}, Audit{}, Errorf(ErrInvalid, "gate_id", "gate %d is not a permission request", g.ID)
		}
		if g.Status != GateOpen {
			return g, audit, nil
		}
		if g.ExpiresAt == nil || now.Before(*g.ExpiresAt) {
			return Gate{}, Audit{}, Errorf(ErrRefused, "gate_id", "gate %d waits for an owner until %s", g.ID, g.ExpiresAt.UTC().Format(time.RFC3339))
		}
		out, err := closeGate(ctx, tx, g, GateCancelled, "", "", expiredComment, now)
		if err != nil {
			return Gate{}, Audit{}, err
		}
		if err := gateNotice(ctx, tx, notice, out); err != nil {
			return Gate{}, Audit{}, err
		}
		audit.Detail = auditDetail(map[string]any{"decision": PermitDeny, "reason": "expired"})
		return out, audit, nil
	})
}

// expiredComment is the comment of a permission gate nobody answered in time (the card and
// the hook's message say it in words).
const expiredComment = "expired"

// PermissionExpired reports whether g is a permission gate closed because nobody answered.
func PermissionExpired(g Gate) bool {
	return g.Kind == GateKindPermission && g.Status == GateCancelled && g.Comment == expiredComment
}

// GetPermissionPolicy reads a goal's policy (the defaults when it set none).
func (s *Store) GetPermissionPolicy(ctx context.Context, goalID string) (PermissionPolicy, error) {
	if err := checkID("goal_id", goalID); err != nil {
		return PermissionPolicy{}, err
	}
	if _, err := getGoal(ctx, s.DB(), goalID, false); err != nil {
		return PermissionPolicy{}, err
	}
	return getPermissionPolicy(ctx, s.DB(), goalID)
}

func getPermissionPolicy(ctx context.Context, db DB, goalID string) (PermissionPolicy, error) {
	p := PermissionPolicy{GoalID: goalID, AllowTools: []string{}, DenyTools: []string{}}
	err := db.QueryRow(ctx, `SELECT CASE WHEN coalesce(pp.timeout_set, false) THEN pp.timeout_seconds ELSE d.permission_timeout_seconds END,
			coalesce(pp.timeout_set, false), coalesce(pp.allow_tools, '{}'), coalesce(pp.deny_tools, '{}')
		FROM machine_defaults d LEFT JOIN permission_policy pp ON pp.goal_id = $1`, goalID).
		Scan(&p.TimeoutSeconds, &p.TimeoutSet, &p.AllowTools, &p.DenyTools)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return p, fmt.Errorf("read permission policy: %w", mapErr(err))
	}
	if errors.Is(err, pgx.ErrNoRows) {
		p.TimeoutSeconds = BuiltinDefaults().PermissionTimeoutSeconds
	}
	return p, nil
}

func checkToolRules(field string, rules []string) error {
	if len(rules) > 100 {
		return Errorf(ErrInvalid, field, "lists %d tools; at most 100", len(rules))
	}
	for _, r := range rules {
		if err := checkText(field, r, 200, true); err != nil {
			return err
		}
		if strings.Contains(strings.TrimSuffix(r, "*"), "*") {
			return Errorf(ErrInvalid, field, "%q: a * may only end a rule (a prefix such as mcp__github__*)", clip(r))
		}
	}
	return nil
}

// SetPermissionPolicy changes a goal's policy (admin), audited with what changed.
func (s *Store) SetPermissionPolicy(ctx context.Context, p SetPermissionPolicyParams) (PermissionPolicy, error) {
	if err := checkID("goal_id", p.GoalID); err != nil {
		return PermissionPolicy{}, err
	}
	if p.TimeoutSeconds != nil {
		if err := checkRange("timeout_seconds", *p.TimeoutSeconds, 10, 86400); err != nil {
			return PermissionPolicy{}, err
		}
	}
	for field, v := range map[string]*[]string{"allow_tools": p.AllowTools, "deny_tools": p.DenyTools} {
		if v != nil {
			if err := checkToolRules(field, *v); err != nil {
				return PermissionPolicy{}, err
			}
		}
	}
	return Do(ctx, s, "permission.policy", p.Meta, p, func(tx *Tx, now time.Time) (PermissionPolicy, Audit, error) {
		if _, err := getGoal(ctx, tx, p.GoalID, true); err != nil {
			return PermissionPolicy{}, Audit{}, err
		}
		before, err := getPermissionPolicy(ctx, tx, p.GoalID)
		if err != nil {
			return PermissionPolicy{}, Audit{}, err
		}
		after := before
		if p.TimeoutSeconds != nil {
			after.TimeoutSeconds, after.TimeoutSet = *p.TimeoutSeconds, true
		}
		if p.TimeoutDefault {
			d, err := GetMachineDefaults(ctx, tx)
			if err != nil {
				return PermissionPolicy{}, Audit{}, err
			}
			after.TimeoutSeconds, after.TimeoutSet = d.PermissionTimeoutSeconds, false
		}
		if p.AllowTools != nil {
			after.AllowTools = *p.AllowTools
		}
		if p.DenyTools != nil {
			after.DenyTools = *p.DenyTools
		}
		if _, err := tx.Exec(ctx, `
			INSERT INTO permission_policy (goal_id, timeout_seconds, allow_tools, deny_tools, updated_at, timeout_set)
			VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT (goal_id) DO UPDATE SET timeout_seconds = $2, allow_tools = $3, deny_tools = $4, updated_at = $5,
			       timeout_set = $6`,
			p.GoalID, after.TimeoutSeconds, after.AllowTools, after.DenyTools, now, after.TimeoutSet); err != nil {
			return PermissionPolicy{}, Audit{}, fmt.Errorf("write permission policy: %w", mapErr(err))
		}
		return after, Audit{GoalID: p.GoalID, Target: GoalTarget(p.GoalID),
			Detail: auditDetail(map[string]any{"changes": changes(before, after)})}, nil
	})
}

// ExpireOverduePermissions closes, as denied, the open permission gates whose limit passed
// more than grace ago: the hook that waited for them is gone (the host stopped), so nobody
// else would. Each is announced by notice (the card update). At most 100 per call.
func (s *Store) ExpireOverduePermissions(ctx context.Context, grace time.Duration, notice NoticeFunc) ([]Gate, error) {
	rows, err := s.DB().Query(ctx, `SELECT goal_id, id FROM gate
		WHERE kind = 'permission' AND status = 'open' AND expires_at < $1 ORDER BY id LIMIT 100`, s.Now().Add(-grace))
	if err != nil {
		return nil, fmt.Errorf("list overdue permission gates: %w", mapErr(err))
	}
	type ref struct {
		goal string
		id   int64
	}
	refs, err := collect(rows, "list overdue permission gates", func(r pgx.Row) (ref, error) {
		var x ref
		return x, r.Scan(&x.goal, &x.id)
	})
	if err != nil {
		return nil, err
	}
	var out []Gate
	for _, r := range refs {
		g, err := s.ExpirePermission(ctx, r.goal, r.id, notice, Meta{Actor: "system", Surface: "system"})
		if err != nil {
			return out, err
		}
		out = append(out, g)
	}
	return out, nil
}
