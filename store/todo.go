package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Todo statuses.
const (
	TodoOpen      = "open"
	TodoBlocked   = "blocked"
	TodoDone      = "done"
	TodoCancelled = "cancelled"
)

// Todo is one slice of work. ClaimedBy is never overwritten by another agent's claim.
type Todo struct {
	ID             int64      `json:"todo_id"`
	GoalID         string     `json:"goal_id"`
	Role           string     `json:"role"` // agent | user
	Text           string     `json:"text"`
	Priority       int        `json:"priority"` // 0 (P0, most urgent) .. 4
	Status         string     `json:"status"`
	ClaimedBy      string     `json:"claimed_by"` // agent id; "" = unclaimed
	ClaimedAt      *time.Time `json:"claimed_at,omitempty"`
	LeaseExpiresAt *time.Time `json:"lease_expires_at,omitempty"`
	BlockedByGate  int64      `json:"blocked_by_gate,omitempty"`
	CreatedBy      string     `json:"created_by"`
	Version        int64      `json:"version"`
	CreatedAt      time.Time  `json:"created_at"`
	UpdatedAt      time.Time  `json:"updated_at"`
	DoneAt         *time.Time `json:"done_at,omitempty"`
	// Criteria must each be named by evidence on the todo (or waived by an owner) before it
	// can be done; Requires are the capabilities an agent needs to claim it.
	Criteria []Criterion `json:"criteria"`
	Requires []string    `json:"requires"`
	// CriteriaMet lists the ids of the criteria met so far (filled by the reads that say so:
	// should-run, the todo's own read).
	CriteriaMet []string `json:"criteria_met,omitempty"`
}

// AddTodoParams adds a todo.
type AddTodoParams struct {
	GoalID   string
	Role     string // agent | user; "" = agent
	Text     string
	Priority *int // 0..4; nil = 2
	// ClaimFor claims the new todo for this registered agent at once ("" = unclaimed).
	ClaimFor string
	// Criteria (ids c1, c2, ... when not given) and the capabilities it requires (each one
	// the goal grants).
	Criteria []Criterion
	Requires []string
	Meta     Meta `json:"-"`
}

// ListTodosParams filters ListTodos. Empty fields do not filter.
type ListTodosParams struct {
	GoalID    string
	Statuses  []string
	ClaimedBy string
	Limit     int // 0 = 100; at most 1000
	AfterID   int64
}

// ClaimTodoParams claims a todo for AgentID. A todo claimed by another agent whose lease has
// not expired is ErrConflict unless Transfer is set.
type ClaimTodoParams struct {
	GoalID   string
	TodoID   int64
	AgentID  string
	Transfer bool
	Lease    time.Duration // 0 = no lease expiry
	// Note and Next, with Transfer, record a handoff from the previous holder: what was done
	// and what is next. A todo with evidence is transferred only with a note.
	Note string
	Next string
	Meta Meta `json:"-"`
}

// UpdateTodoParams changes the fields that are non-nil. Version must equal the version the
// caller read, else ErrConflict. AgentID, when set, must hold the claim (or the todo must be
// unclaimed); "" means a person or the admin, whose permission the caller checked.
type UpdateTodoParams struct {
	GoalID     string
	TodoID     int64
	AgentID    string
	Version    int64
	Text       *string
	Priority   *int
	Status     *string // open | blocked | done | cancelled
	ClearClaim bool
	// Criteria and Requires replace the todo's; only a person may change them (AgentID "").
	Criteria *[]Criterion
	Requires *[]string
	Meta     Meta `json:"-"`
}

const todoCols = `id, goal_id, role, text, priority, status, coalesce(claimed_by, ''), claimed_at,
	lease_expires_at, coalesce(blocked_by_gate, 0), created_by, version, created_at, updated_at, done_at,
	criteria, requires`

func scanTodo(row pgx.Row) (Todo, error) {
	var t Todo
	err := row.Scan(&t.ID, &t.GoalID, &t.Role, &t.Text, &t.Priority, &t.Status, &t.ClaimedBy, &t.ClaimedAt,
		&t.LeaseExpiresAt, &t.BlockedByGate, &t.CreatedBy, &t.Version, &t.CreatedAt, &t.UpdatedAt, &t.DoneAt,
		&t.Criteria, &t.Requires)
	return t, err
}

// AddTodo adds an open todo. ClaimFor claims it at once for a registered agent.
func (s *Store) AddTodo(ctx context.Context, p AddTodoParams) (Todo, error) {
	if err := checkID("goal_id", p.GoalID); err != nil {
		return Todo{}, err
	}
	role := strOr(p.Role, "agent")
	if err := checkOneOf("role", role, "agent", "user"); err != nil {
		return Todo{}, err
	}
	if err := checkText("text", p.Text, MaxText, true); err != nil {
		return Todo{}, err
	}
	prio := orDefault(p.Priority, 2)
	if err := checkRange("priority", prio, 0, 4); err != nil {
		return Todo{}, err
	}
	if p.ClaimFor != "" {
		if err := checkID("claim_for", p.ClaimFor); err != nil {
			return Todo{}, err
		}
		if role == "user" {
			return Todo{}, Errorf(ErrInvalid, "claim_for", "a user todo is done by a person; agents cannot claim it")
		}
	}
	criteria, err := NormalizeCriteria("criteria", "c", p.Criteria)
	if err != nil {
		return Todo{}, err
	}
	requires := nonNil(p.Requires)
	if err := CheckCapabilities("requires", requires); err != nil {
		return Todo{}, err
	}
	return Do(ctx, s, "todo.add", p.Meta, p, func(tx *Tx, now time.Time) (Todo, Audit, error) {
		g, err := getGoal(ctx, tx, p.GoalID, false)
		if err != nil {
			return Todo{}, Audit{}, err
		}
		if err := checkGranted(g, requires); err != nil {
			return Todo{}, Audit{}, err
		}
		var claimedBy, claimedAt any
		if p.ClaimFor != "" {
			a, err := getAgent(ctx, tx, p.GoalID, p.ClaimFor)
			if err != nil {
				return Todo{}, Audit{}, err
			}
			if miss := Missing(requires, a.Capabilities); len(miss) > 0 {
				return Todo{}, Audit{}, capabilityRefusal(p.GoalID, 0, a, requires, miss)
			}
			claimedBy, claimedAt = p.ClaimFor, now
		}
		t, err := scanTodo(tx.QueryRow(ctx, `
			INSERT INTO todo (goal_id, role, text, priority, claimed_by, claimed_at, created_by, created_at, updated_at,
			                  criteria, requires)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8, $9, $10)
			RETURNING `+todoCols,
			p.GoalID, role, p.Text, prio, claimedBy, claimedAt, p.Meta.Actor, now, criteria, requires))
		if err != nil {
			return Todo{}, Audit{}, fmt.Errorf("insert todo: %w", mapErr(err))
		}
		return t, Audit{GoalID: t.GoalID, Target: TodoTarget(t.ID), Detail: auditDetail(map[string]any{"priority": t.Priority})}, nil
	})
}

// GetTodo returns one todo of a goal; unknown is ErrNotFound naming todo_id.
func (s *Store) GetTodo(ctx context.Context, goalID string, id int64) (Todo, error) {
	if err := checkID("goal_id", goalID); err != nil {
		return Todo{}, err
	}
	return getTodo(ctx, s.DB(), goalID, id, false)
}

func getTodo(ctx context.Context, db DB, goalID string, id int64, forUpdate bool) (Todo, error) {
	return getOfGoal(ctx, db, "todo", todoCols, scanTodo, goalID, id, forUpdate)
}

// ListTodos lists a goal's todos by priority, then id.
func (s *Store) ListTodos(ctx context.Context, p ListTodosParams) ([]Todo, error) {
	if err := checkID("goal_id", p.GoalID); err != nil {
		return nil, err
	}
	for _, st := range p.Statuses {
		if err := checkOneOf("status", st, TodoOpen, TodoBlocked, TodoDone, TodoCancelled); err != nil {
			return nil, err
		}
	}
	limit, err := listLimit(p.Limit)
	if err != nil {
		return nil, err
	}
	statuses := p.Statuses
	if statuses == nil {
		statuses = []string{}
	}
	rows, err := s.DB().Query(ctx, `
		SELECT `+todoCols+` FROM todo
		WHERE goal_id = $1
		  AND (cardinality($2::text[]) = 0 OR status = ANY ($2))
		  AND ($3 = '' OR claimed_by = $3)
		  AND id > $4
		ORDER BY priority, id LIMIT $5`, p.GoalID, statuses, p.ClaimedBy, p.AfterID, limit)
	if err != nil {
		return nil, fmt.Errorf("list todos: %w", mapErr(err))
	}
	return collect(rows, "list todos", scanTodo)
}

// ClaimTodo claims a todo for an agent. The row is locked, so of concurrent claimants exactly
// one wins; the others get ErrConflict naming the holder. A claim by another agent is taken
// over only with Transfer, or once its lease has expired. Claiming one's own todo renews the
// lease.
func (s *Store) ClaimTodo(ctx context.Context, p ClaimTodoParams) (Todo, error) {
	if err := checkID("goal_id", p.GoalID); err != nil {
		return Todo{}, err
	}
	if err := checkID("agent_id", p.AgentID); err != nil {
		return Todo{}, err
	}
	if p.Lease < 0 || p.Lease > 7*24*time.Hour {
		return Todo{}, Errorf(ErrInvalid, "lease", "must be between 0 (no expiry) and 7 days")
	}
	if err := checkText("note", p.Note, 4000, false); err != nil {
		return Todo{}, err
	}
	if err := checkText("next", p.Next, 4000, false); err != nil {
		return Todo{}, err
	}
	return Do(ctx, s, "todo.claim", p.Meta, p, func(tx *Tx, now time.Time) (Todo, Audit, error) {
		a, err := getAgent(ctx, tx, p.GoalID, p.AgentID)
		if err != nil {
			return Todo{}, Audit{}, err
		}
		t, err := getTodo(ctx, tx, p.GoalID, p.TodoID, true)
		if err != nil {
			return Todo{}, Audit{}, err
		}
		if t.Role == "user" {
			return Todo{}, Audit{}, Errorf(ErrRefused, "todo_id", "todo %d is a user todo; a person does it, agents cannot claim it", t.ID)
		}
		if t.Status == TodoDone || t.Status == TodoCancelled {
			return Todo{}, Audit{}, Errorf(ErrRefused, "todo_id", "todo %d is %s; there is nothing to claim", t.ID, t.Status)
		}
		prev := t.ClaimedBy
		held := prev != "" && prev != p.AgentID && (t.LeaseExpiresAt == nil || t.LeaseExpiresAt.After(now))
		if held && !p.Transfer {
			return Todo{}, Audit{}, because(ReasonClaimed, Errorf(ErrConflict, "todo_id",
				"todo %d is claimed by agent %q; pass transfer to take it over explicitly", t.ID, prev))
		}
		if miss := Missing(t.Requires, a.Capabilities); len(miss) > 0 {
			return Todo{}, Audit{}, capabilityRefusal(p.GoalID, t.ID, a, t.Requires, miss)
		}
		handover := prev != "" && prev != p.AgentID
		if handover && strings.TrimSpace(p.Note) == "" {
			var evidenced bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM evidence WHERE todo_id = $1)`, t.ID).Scan(&evidenced); err != nil {
				return Todo{}, Audit{}, fmt.Errorf("read the todo's evidence: %w", mapErr(err))
			}
			if evidenced {
				return Todo{}, Audit{}, because(ReasonHandoffNote, Errorf(ErrRefused, "note",
					"todo %d already has evidence from agent %q: take it over with a handoff note (what was done, what is next), "+
						"so the work does not start cold", t.ID, prev))
			}
		}
		var lease any
		if p.Lease > 0 {
			lease = now.Add(p.Lease)
		}
		out, err := scanTodo(tx.QueryRow(ctx, `
			UPDATE todo SET claimed_by = $2,
			       claimed_at = CASE WHEN claimed_by IS DISTINCT FROM $2 THEN $3 ELSE claimed_at END,
			       lease_expires_at = $4, version = version + 1, updated_at = $3
			WHERE id = $1 RETURNING `+todoCols, t.ID, p.AgentID, now, lease))
		if err != nil {
			return Todo{}, Audit{}, fmt.Errorf("claim todo: %w", mapErr(err))
		}
		detail := map[string]any{"agent_id": p.AgentID, "previous": prev, "transfer": held}
		if handover && (strings.TrimSpace(p.Note) != "" || strings.TrimSpace(p.Next) != "") {
			h, err := insertHandoff(ctx, tx, handoffRow{GoalID: t.GoalID, TodoID: t.ID, From: prev, To: p.AgentID,
				Kind: HandoffResume, Done: p.Note, Next: p.Next, CreatedBy: p.Meta.Actor}, now)
			if err != nil {
				return Todo{}, Audit{}, err
			}
			detail["handoff_id"] = h.ID
		}
		return out, Audit{GoalID: t.GoalID, Target: TodoTarget(t.ID), Detail: auditDetail(detail)}, nil
	})
}

// UpdateTodo applies the non-nil fields when Version matches the todo's current version
// (else ErrConflict). An agent may change only a todo it holds or nobody holds. A todo blocked
// by an open gate cannot be reopened until the gate is answered. A change by an agent marks
// its live turn as having progress.
func (s *Store) UpdateTodo(ctx context.Context, p UpdateTodoParams) (Todo, error) {
	if err := checkID("goal_id", p.GoalID); err != nil {
		return Todo{}, err
	}
	if p.AgentID != "" {
		if err := checkID("agent_id", p.AgentID); err != nil {
			return Todo{}, err
		}
	}
	if p.Version <= 0 {
		return Todo{}, Errorf(ErrInvalid, "version", "is required: pass the version you read")
	}
	if p.Text != nil {
		if err := checkText("text", *p.Text, MaxText, true); err != nil {
			return Todo{}, err
		}
	}
	if p.Priority != nil {
		if err := checkRange("priority", *p.Priority, 0, 4); err != nil {
			return Todo{}, err
		}
	}
	if p.Status != nil {
		if err := checkOneOf("status", *p.Status, TodoOpen, TodoBlocked, TodoDone, TodoCancelled); err != nil {
			return Todo{}, err
		}
	}
	if p.AgentID != "" && (p.Criteria != nil || p.Requires != nil) {
		field := "criteria"
		if p.Criteria == nil {
			field = "requires"
		}
		return Todo{}, Errorf(ErrForbidden, field, "an agent cannot change a todo's criteria or the capabilities it requires; an owner can")
	}
	var criteria []Criterion
	if p.Criteria != nil {
		var err error
		if criteria, err = NormalizeCriteria("criteria", "c", *p.Criteria); err != nil {
			return Todo{}, err
		}
	}
	if p.Requires != nil {
		if err := CheckCapabilities("requires", *p.Requires); err != nil {
			return Todo{}, err
		}
	}
	return Do(ctx, s, "todo.update", p.Meta, p, func(tx *Tx, now time.Time) (Todo, Audit, error) {
		t, err := getTodo(ctx, tx, p.GoalID, p.TodoID, true)
		if err != nil {
			return Todo{}, Audit{}, err
		}
		if t.Version != p.Version {
			return Todo{}, Audit{}, Errorf(ErrConflict, "version",
				"todo %d is at version %d, not %d; read it again and retry", t.ID, t.Version, p.Version)
		}
		if p.AgentID != "" && t.ClaimedBy != "" && t.ClaimedBy != p.AgentID {
			return Todo{}, Audit{}, because(ReasonClaimed, Errorf(ErrConflict, "agent_id",
				"todo %d is claimed by agent %q; only its holder may change it", t.ID, t.ClaimedBy))
		}
		before := t
		if p.Text != nil {
			t.Text = *p.Text
		}
		if p.Priority != nil {
			t.Priority = *p.Priority
		}
		if p.ClearClaim {
			t.ClaimedBy, t.ClaimedAt, t.LeaseExpiresAt = "", nil, nil
		}
		if p.Criteria != nil {
			t.Criteria = criteria
		}
		if p.Requires != nil {
			g, err := getGoal(ctx, tx, p.GoalID, false)
			if err != nil {
				return Todo{}, Audit{}, err
			}
			if err := checkGranted(g, *p.Requires); err != nil {
				return Todo{}, Audit{}, err
			}
			t.Requires = nonNil(*p.Requires)
		}
		if p.Status != nil && *p.Status == TodoDone && t.Status != TodoDone && len(t.Criteria) > 0 {
			st, err := CriteriaStatus(ctx, tx, t.GoalID, t.ID, t.Criteria)
			if err != nil {
				return Todo{}, Audit{}, err
			}
			if unmet := Unmet(st); len(unmet) > 0 {
				return Todo{}, Audit{}, unmetRefusal(t, unmet)
			}
		}
		if p.Status != nil && *p.Status != t.Status {
			if t.Status == TodoBlocked && t.BlockedByGate != 0 {
				var open bool
				if err := tx.QueryRow(ctx, `SELECT status = 'open' FROM gate WHERE id = $1`, t.BlockedByGate).Scan(&open); err != nil {
					return Todo{}, Audit{}, fmt.Errorf("read blocking gate: %w", mapErr(err))
				}
				if open {
					return Todo{}, Audit{}, Errorf(ErrRefused, "status",
						"todo %d waits on open gate %d; an owner must answer it (or the asking agent cancel it) first", t.ID, t.BlockedByGate)
				}
				t.BlockedByGate = 0
			}
			t.Status = *p.Status
			t.DoneAt = nil
			if t.Status == TodoDone || t.Status == TodoCancelled {
				t.DoneAt = &now
			}
		}
		var claimedBy, blocked any
		if t.ClaimedBy != "" {
			claimedBy = t.ClaimedBy
		}
		if t.BlockedByGate != 0 {
			blocked = t.BlockedByGate
		}
		out, err := scanTodo(tx.QueryRow(ctx, `
			UPDATE todo SET text = $2, priority = $3, status = $4, claimed_by = $5, claimed_at = $6,
			       lease_expires_at = $7, blocked_by_gate = $8, done_at = $9, version = version + 1, updated_at = $10,
			       criteria = $11, requires = $12
			WHERE id = $1 RETURNING `+todoCols,
			t.ID, t.Text, t.Priority, t.Status, claimedBy, t.ClaimedAt, t.LeaseExpiresAt, blocked, t.DoneAt, now,
			nonNilCriteria(t.Criteria), nonNil(t.Requires)))
		if err != nil {
			return Todo{}, Audit{}, fmt.Errorf("update todo: %w", mapErr(err))
		}
		if p.AgentID != "" {
			if err := markProgress(ctx, tx, p.GoalID, p.AgentID, 0, now); err != nil {
				return Todo{}, Audit{}, err
			}
		}
		return out, Audit{GoalID: t.GoalID, Target: TodoTarget(t.ID), Detail: auditDetail(map[string]any{
			"status": out.Status, "version": out.Version, "agent_id": p.AgentID,
			"changes": changes(before, out, "version", "updated_at", "created_at"),
		})}, nil
	})
}

// checkGranted refuses requires that name a capability goal g does not grant: no agent
// could ever claim such a todo.
func checkGranted(g Goal, requires []string) error {
	if miss := Missing(requires, g.Capabilities); len(miss) > 0 {
		return Errorf(ErrInvalid, "requires", "goal %s grants no capability %s (it grants: %s); an owner adds it to the goal first",
			g.ID, strings.Join(miss, ", "), orNone(strings.Join(g.Capabilities, ", ")))
	}
	return nil
}

// capabilityRefusal is the answer to agent a claiming a todo whose requires it does not all
// hold: ErrForbidden with ReasonMissingCapability, audited.
func capabilityRefusal(goalID string, todoID int64, a Agent, requires, missing []string) error {
	what := "the new todo"
	target := ""
	if todoID != 0 {
		what, target = fmt.Sprintf("todo %d", todoID), TodoTarget(todoID)
	}
	msg := fmt.Sprintf("agent %s may not claim %s: it needs %s, and agent %s lacks %s; an owner grants capabilities to agents",
		a.ID, what, strings.Join(requires, ", "), a.ID, strings.Join(missing, ", "))
	return because(ReasonMissingCapability, refuse(ErrForbidden, "agent_id", msg, goalID, target,
		map[string]any{"agent_id": a.ID, "requires": requires, "missing": missing, "reason": ReasonMissingCapability}))
}

// unmetRefusal is the answer to finishing todo t while criteria are unmet: ErrRefused with
// ReasonCriteriaUnmet, naming each and what would meet it.
func unmetRefusal(t Todo, unmet []CriterionStatus) error {
	parts := make([]string, len(unmet))
	for i, c := range unmet {
		parts[i] = fmt.Sprintf("%s (%s)", c.ID, clipText(c.Text, 80))
	}
	ids := strings.Join(CriterionIDs(unmet), ", ")
	msg := fmt.Sprintf("todo %d is not finished: criteria %s have no evidence yet; add evidence naming them (criteria: %s), "+
		"or ask an owner to waive them", t.ID, strings.Join(parts, "; "), ids)
	return because(ReasonCriteriaUnmet, refuse(ErrRefused, "criteria", msg, t.GoalID, TodoTarget(t.ID),
		map[string]any{"unmet": CriterionIDs(unmet), "reason": ReasonCriteriaUnmet}))
}

func clipText(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// markProgress records that a turn moved something: the given turn, or the agent's live turn
// when turnID is 0.
func markProgress(ctx context.Context, db DB, goalID, agentID string, turnID int64, now time.Time) error {
	var err error
	if turnID != 0 {
		_, err = db.Exec(ctx, `UPDATE turn SET progress = true WHERE id = $1 AND NOT progress`, turnID)
	} else {
		_, err = db.Exec(ctx, `
			UPDATE turn SET progress = true
			WHERE goal_id = $1 AND agent_id = $2 AND state = 'live' AND lease_expires_at > $3 AND NOT progress`,
			goalID, agentID, now)
	}
	if err != nil {
		return fmt.Errorf("mark turn progress: %w", mapErr(err))
	}
	return nil
}

// GetTodoText returns a todo's text through db ("" when it does not exist), for gate cards.
func GetTodoText(ctx context.Context, db DB, id int64) (string, error) {
	var text string
	err := db.QueryRow(ctx, `SELECT text FROM todo WHERE id = $1`, id).Scan(&text)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read todo %d: %w", id, mapErr(err))
	}
	return text, nil
}

// ListGoalTodos lists up to limit of a goal's todos through db: open and blocked ones first
// (by priority), then the others, newest first.
func ListGoalTodos(ctx context.Context, db DB, goalID string, limit int) ([]Todo, error) {
	rows, err := db.Query(ctx, `SELECT `+todoCols+` FROM todo WHERE goal_id = $1
		ORDER BY status NOT IN ('open', 'blocked'), CASE WHEN status IN ('open', 'blocked') THEN priority END, id DESC
		LIMIT $2`, goalID, limit)
	if err != nil {
		return nil, fmt.Errorf("list todos: %w", mapErr(err))
	}
	return collect(rows, "list todos", scanTodo)
}

// SetTodoStatuses moves todos ids of goal to status in tx (a replan's cancellations and
// reopenings): a cancelled todo keeps its claim and records when it ended; a reopened one is
// open again, unclaimed, with nothing blocking it.
func SetTodoStatuses(ctx context.Context, tx DB, goalID string, ids []int64, status string, now time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	var q string
	switch status {
	case TodoCancelled:
		q = `UPDATE todo SET status = 'cancelled', done_at = $3, version = version + 1, updated_at = $3
			WHERE goal_id = $1 AND id = ANY ($2) AND status IN ('open', 'blocked')`
	case TodoOpen:
		q = `UPDATE todo SET status = 'open', done_at = NULL, claimed_by = NULL, claimed_at = NULL, lease_expires_at = NULL,
			blocked_by_gate = NULL, version = version + 1, updated_at = $3
			WHERE goal_id = $1 AND id = ANY ($2) AND status IN ('done', 'cancelled')`
	default:
		return Errorf(ErrInvalid, "status", "%q is not cancelled or open", status)
	}
	if _, err := tx.Exec(ctx, q, goalID, ids, now); err != nil {
		return fmt.Errorf("set todo statuses: %w", mapErr(err))
	}
	return nil
}
