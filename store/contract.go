package store

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bmatcuk/doublestar/v4"
)

// The goal contract: what a goal's agents may change (scope), what they may do
// (capabilities, granted by the goal to each agent, required by todos) and when the work is
// finished (acceptance criteria on the goal and on todos, met by evidence that names them or
// waived by an owner). The goal's part is versioned with the goal and changed only through
// the change kernel; a todo's criteria and required capabilities are set when it is added
// (and changed later only by people).

// Criterion is one acceptance criterion: a short id (g1, c2, or one its author chose) and
// what must be true.
type Criterion struct {
	ID   string `json:"id"`
	Text string `json:"text"`
}

// CriterionStatus is a criterion and whether it is met: by evidence naming it (the first
// such evidence's id) or by an owner's waiver.
type CriterionStatus struct {
	Criterion
	Met        bool   `json:"met"`
	EvidenceID int64  `json:"evidence_id,omitempty"`
	WaivedBy   string `json:"waived_by,omitempty"`
	Waiver     string `json:"waiver,omitempty"` // the owner's reason
}

// Scope is what a goal's agents may change: editable and protected paths (globs such as
// src/** or deploy/*.yaml; ** spans folders) and boundaries in words.
type Scope struct {
	Editable  []string `json:"editable"`
	Protected []string `json:"protected"`
	Notes     string   `json:"notes"`
}

// Limits of the contract's parts.
const (
	MaxCriteria     = 20
	MaxCriterionLen = 500
	MaxCapabilities = 30
	MaxScopeGlobs   = 50
	MaxScopeNotes   = 4000
)

// Contract is the goal contract as an agent reads it each turn (should-run, the MCP goal
// resource, the turn packet and the turn prompt).
type Contract struct {
	Objective    string            `json:"objective"`
	GoalVersion  int64             `json:"goal_version"`
	Scope        Scope             `json:"scope"`
	Capabilities ContractGrants    `json:"capabilities"`
	Criteria     []CriterionStatus `json:"criteria"`
}

// ContractGrants are the capabilities the goal grants and those its agent holds.
type ContractGrants struct {
	Goal  []string `json:"goal"`
	Agent []string `json:"agent"`
}

// Scope is g's scope.
func (g Goal) Scope() Scope {
	return Scope{Editable: nonNil(g.ScopeEditable), Protected: nonNil(g.ScopeProtected), Notes: g.ScopeNotes}
}

// ValidCriterionID reports whether s is a criterion id: 1 to 16 characters of a-z, 0-9, '-',
// '_', starting with a letter or digit.
func ValidCriterionID(s string) bool {
	return validChars(s, 16, func(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' },
		func(c byte) bool { return c == '-' || c == '_' })
}

// ValidCapability reports whether s is a capability name: 1 to 40 characters of a-z, 0-9,
// '-', starting with a letter or digit (write-code, publish, spend-money).
func ValidCapability(s string) bool {
	return validChars(s, 40, func(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' },
		func(c byte) bool { return c == '-' })
}

// NormalizeCriteria trims each criterion, gives the ones without an id the next free id of
// prefix (g for a goal's, c for a todo's: g1, g2, ...) and checks them all.
func NormalizeCriteria(field, prefix string, cs []Criterion) ([]Criterion, error) {
	if len(cs) > MaxCriteria {
		return nil, Errorf(ErrInvalid, field, "lists %d criteria; at most %d", len(cs), MaxCriteria)
	}
	out := make([]Criterion, 0, len(cs))
	used := map[string]bool{}
	for _, c := range cs {
		c.ID = strings.ToLower(strings.TrimSpace(c.ID))
		if c.ID != "" {
			used[c.ID] = true
		}
	}
	next := 1
	for _, c := range cs {
		c.ID, c.Text = strings.ToLower(strings.TrimSpace(c.ID)), strings.TrimSpace(c.Text)
		if err := checkText(field, c.Text, MaxCriterionLen, true); err != nil {
			return nil, err
		}
		if c.ID == "" {
			for used[prefix+strconv.Itoa(next)] {
				next++
			}
			c.ID = prefix + strconv.Itoa(next)
			used[c.ID] = true
		}
		if !ValidCriterionID(c.ID) {
			return nil, Errorf(ErrInvalid, field, "%q is not a criterion id: use 1-16 characters of a-z, 0-9, '-', '_'", clip(c.ID))
		}
		if slices.ContainsFunc(out, func(o Criterion) bool { return o.ID == c.ID }) {
			return nil, Errorf(ErrInvalid, field, "criterion %s is listed twice", c.ID)
		}
		out = append(out, c)
	}
	return out, nil
}

// ParseCriterion reads a criterion as people type it: "text", or "id: text" / "id=text" to
// choose its id.
func ParseCriterion(s string) Criterion {
	s = strings.TrimSpace(s)
	for _, sep := range []string{"=", ":"} {
		if id, text, ok := strings.Cut(s, sep); ok && ValidCriterionID(strings.ToLower(strings.TrimSpace(id))) && strings.TrimSpace(text) != "" {
			return Criterion{ID: strings.ToLower(strings.TrimSpace(id)), Text: strings.TrimSpace(text)}
		}
	}
	return Criterion{Text: s}
}

// CheckCapabilities checks a list of capability names (no repeats).
func CheckCapabilities(field string, caps []string) error {
	if len(caps) > MaxCapabilities {
		return Errorf(ErrInvalid, field, "lists %d capabilities; at most %d", len(caps), MaxCapabilities)
	}
	for i, c := range caps {
		if !ValidCapability(c) {
			return Errorf(ErrInvalid, field, "%q is not a capability name: use 1-40 characters of a-z, 0-9, '-', such as write-code", clip(c))
		}
		if slices.Contains(caps[:i], c) {
			return Errorf(ErrInvalid, field, "%s is listed twice", c)
		}
	}
	return nil
}

// CheckScope checks a scope: globs that parse, notes of a bounded length.
func CheckScope(s Scope) error {
	for field, globs := range map[string][]string{"scope_editable": s.Editable, "scope_protected": s.Protected} {
		if len(globs) > MaxScopeGlobs {
			return Errorf(ErrInvalid, field, "lists %d paths; at most %d", len(globs), MaxScopeGlobs)
		}
		for i, g := range globs {
			if err := checkText(field, g, 200, true); err != nil {
				return err
			}
			if strings.ContainsAny(g, "\n\r") || !doublestar.ValidatePattern(g) {
				return Errorf(ErrInvalid, field, "%q is not a path pattern (such as src/** or docs/*.md)", clip(g))
			}
			if slices.Contains(globs[:i], g) {
				return Errorf(ErrInvalid, field, "%s is listed twice", g)
			}
		}
	}
	return checkText("scope_notes", s.Notes, MaxScopeNotes, false)
}

// ScopeOf says where path falls in scope s: protected (a protected pattern matches; it wins),
// editable (an editable pattern matches, or the goal lists none), or outside. path is
// relative to the project folder, with forward slashes.
func ScopeOf(s Scope, path string) string {
	path = strings.TrimPrefix(strings.ReplaceAll(path, "\\", "/"), "./")
	for _, p := range s.Protected {
		if ok, _ := doublestar.Match(p, path); ok {
			return "protected"
		}
	}
	if len(s.Editable) == 0 {
		return "editable"
	}
	for _, p := range s.Editable {
		if ok, _ := doublestar.Match(p, path); ok {
			return "editable"
		}
	}
	return "outside"
}

// Missing lists the capabilities of need that have does not include.
func Missing(need, have []string) []string {
	var out []string
	for _, c := range need {
		if !slices.Contains(have, c) {
			out = append(out, c)
		}
	}
	return out
}

// criteriaMetSQL lists the criteria ids met for goal $1 and todo $2 (0: the goal's own
// criteria): named by evidence bound to that todo (for the goal: any evidence of the goal),
// or waived.
const criteriaMetSQL = `
	SELECT c, min(e.id), '' , '' FROM evidence e, unnest(e.criteria) c
	 WHERE e.goal_id = $1 AND ($2 = 0 OR e.todo_id = $2) GROUP BY c
	UNION ALL
	SELECT w.criterion, 0, w.waived_by, w.reason FROM criterion_waiver w
	 WHERE w.goal_id = $1 AND coalesce(w.todo_id, 0) = $2`

// CriteriaStatus says which of cs (the criteria of todo todoID of goal, or of the goal when
// todoID is 0) are met, in cs's order.
func CriteriaStatus(ctx context.Context, db DB, goalID string, todoID int64, cs []Criterion) ([]CriterionStatus, error) {
	out := make([]CriterionStatus, len(cs))
	for i, c := range cs {
		out[i] = CriterionStatus{Criterion: c}
	}
	if len(cs) == 0 {
		return out, nil
	}
	rows, err := db.Query(ctx, criteriaMetSQL, goalID, todoID)
	if err != nil {
		return nil, fmt.Errorf("read met criteria: %w", mapErr(err))
	}
	defer rows.Close()
	for rows.Next() {
		var id, by, reason string
		var ev int64
		if err := rows.Scan(&id, &ev, &by, &reason); err != nil {
			return nil, fmt.Errorf("scan met criterion: %w", mapErr(err))
		}
		for i := range out {
			if out[i].ID != id {
				continue
			}
			out[i].Met = true
			if ev != 0 && out[i].EvidenceID == 0 {
				out[i].EvidenceID = ev
			}
			if by != "" {
				out[i].WaivedBy, out[i].Waiver = by, reason
			}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read met criteria: %w", mapErr(err))
	}
	return out, nil
}

// Unmet lists the criteria of st that are not met.
func Unmet(st []CriterionStatus) []CriterionStatus {
	var out []CriterionStatus
	for _, c := range st {
		if !c.Met {
			out = append(out, c)
		}
	}
	return out
}

// CriterionIDs lists the ids of cs.
func CriterionIDs[C interface{ id() string }](cs []C) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.id()
	}
	return out
}

func (c Criterion) id() string       { return c.ID }
func (c CriterionStatus) id() string { return c.ID }

// ReadContract reads goal's contract as agent sees it, through db.
func ReadContract(ctx context.Context, db DB, g Goal, agentCaps []string) (Contract, error) {
	st, err := CriteriaStatus(ctx, db, g.ID, 0, g.Criteria)
	if err != nil {
		return Contract{}, err
	}
	return Contract{Objective: g.Objective, GoalVersion: g.Version, Scope: g.Scope(),
		Capabilities: ContractGrants{Goal: nonNil(g.Capabilities), Agent: nonNil(agentCaps)}, Criteria: st}, nil
}

// WaiveParams records an owner's waiver of a criterion: of todo TodoID, or of the goal when
// TodoID is 0. The caller checked that the person may (an owner or an admin).
type WaiveParams struct {
	GoalID    string
	TodoID    int64
	Criterion string
	Reason    string
	Meta      Meta `json:"-"`
}

// Waiver is a recorded waiver.
type Waiver struct {
	ID        int64     `json:"waiver_id"`
	GoalID    string    `json:"goal_id"`
	TodoID    int64     `json:"todo_id,omitempty"`
	Criterion string    `json:"criterion"`
	Reason    string    `json:"reason"`
	WaivedBy  string    `json:"waived_by"`
	CreatedAt time.Time `json:"created_at"`
}

// WaiveCriterion records that a criterion counts as met without evidence. The criterion must
// be one of the todo's (or the goal's); waiving one already waived answers the first waiver.
func (s *Store) WaiveCriterion(ctx context.Context, p WaiveParams) (Waiver, error) {
	if err := checkID("goal_id", p.GoalID); err != nil {
		return Waiver{}, err
	}
	p.Criterion = strings.ToLower(strings.TrimSpace(p.Criterion))
	if !ValidCriterionID(p.Criterion) {
		return Waiver{}, Errorf(ErrInvalid, "criterion", "%q is not a criterion id", clip(p.Criterion))
	}
	if err := checkText("reason", p.Reason, 2000, true); err != nil {
		return Waiver{}, err
	}
	return Do(ctx, s, "criterion.waive", p.Meta, p, func(tx *Tx, now time.Time) (Waiver, Audit, error) {
		g, err := getGoal(ctx, tx, p.GoalID, false)
		if err != nil {
			return Waiver{}, Audit{}, err
		}
		cs, target := g.Criteria, GoalTarget(g.ID)
		if p.TodoID != 0 {
			t, err := getTodo(ctx, tx, p.GoalID, p.TodoID, true)
			if err != nil {
				return Waiver{}, Audit{}, err
			}
			cs, target = t.Criteria, TodoTarget(t.ID)
		}
		if !slices.ContainsFunc(cs, func(c Criterion) bool { return c.ID == p.Criterion }) {
			return Waiver{}, Audit{}, Errorf(ErrNotFound, "criterion", "%s has no criterion %s (it has: %s)",
				criteriaOwner(p.TodoID), p.Criterion, orNone(strings.Join(CriterionIDs(cs), ", ")))
		}
		var todo any
		if p.TodoID != 0 {
			todo = p.TodoID
		}
		var w Waiver
		err = tx.QueryRow(ctx, `
			INSERT INTO criterion_waiver (goal_id, todo_id, criterion, reason, waived_by, created_at)
			VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT (goal_id, coalesce(todo_id, 0), criterion) DO UPDATE SET goal_id = EXCLUDED.goal_id
			RETURNING id, goal_id, coalesce(todo_id, 0), criterion, reason, waived_by, created_at`,
			p.GoalID, todo, p.Criterion, strings.TrimSpace(p.Reason), p.Meta.Actor, now).
			Scan(&w.ID, &w.GoalID, &w.TodoID, &w.Criterion, &w.Reason, &w.WaivedBy, &w.CreatedAt)
		if err != nil {
			return Waiver{}, Audit{}, fmt.Errorf("record waiver: %w", mapErr(err))
		}
		return w, Audit{GoalID: p.GoalID, Target: target, Detail: auditDetail(map[string]any{
			"criterion": w.Criterion, "reason": w.Reason})}, nil
	})
}

func criteriaOwner(todoID int64) string {
	if todoID == 0 {
		return "the goal"
	}
	return "todo " + strconv.FormatInt(todoID, 10)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func itoa(n int) string { return strconv.Itoa(n) }
