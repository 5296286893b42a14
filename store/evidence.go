package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Evidence is something an agent produced, bound to a todo and/or turn.
type Evidence struct {
	ID      int64  `json:"evidence_id"`
	GoalID  string `json:"goal_id"`
	AgentID string `json:"agent_id"`
	TodoID  int64  `json:"todo_id,omitempty"`
	TurnID  int64  `json:"turn_id,omitempty"`
	Kind    string `json:"kind"` // link | command | note | artifact
	Summary string `json:"summary"`
	Ref     string `json:"ref"`
	// Criteria are the acceptance criteria this evidence shows are met: the todo's (c1, ...)
	// or the goal's (g1, ...).
	Criteria  []string  `json:"criteria"`
	CreatedAt time.Time `json:"created_at"`
	// Files are the deliverables attached to it (WithEvidenceFiles fills them in).
	Files []Attachment `json:"files,omitempty"`
}

// AddEvidenceParams records evidence. TurnID 0 binds it to the agent's live turn, if any,
// which then counts as having made progress.
type AddEvidenceParams struct {
	GoalID  string
	AgentID string
	TodoID  int64
	TurnID  int64
	Kind    string // link | command | note | artifact; "" = note
	Summary string
	Ref     string
	// Criteria it meets: ids of the todo's criteria or of the goal's.
	Criteria []string
	// File, when set, is a deliverable attached to the evidence (staged with StageBlob first).
	File *FileUpload `json:"file,omitempty"`
	Meta Meta        `json:"-"`
}

// ListEvidenceParams filters ListEvidence.
type ListEvidenceParams struct {
	GoalID  string
	TodoID  int64
	AgentID string
	Limit   int
	AfterID int64
}

const evidenceCols = `id, goal_id, agent_id, coalesce(todo_id, 0), coalesce(turn_id, 0), kind, summary, ref, criteria, created_at`

func scanEvidence(row pgx.Row) (Evidence, error) {
	var e Evidence
	err := row.Scan(&e.ID, &e.GoalID, &e.AgentID, &e.TodoID, &e.TurnID, &e.Kind, &e.Summary, &e.Ref, &e.Criteria, &e.CreatedAt)
	return e, err
}

// AddEvidence records what an agent produced. Without a TurnID it binds to the agent's live
// turn, if any; the bound turn then counts as having made progress.
func (s *Store) AddEvidence(ctx context.Context, p AddEvidenceParams) (Evidence, error) {
	if err := checkID("goal_id", p.GoalID); err != nil {
		return Evidence{}, err
	}
	if err := checkID("agent_id", p.AgentID); err != nil {
		return Evidence{}, err
	}
	kind := strOr(p.Kind, "note")
	if err := checkOneOf("kind", kind, "link", "command", "note", "artifact"); err != nil {
		return Evidence{}, err
	}
	if err := checkText("summary", p.Summary, MaxText, true); err != nil {
		return Evidence{}, err
	}
	if err := checkText("ref", p.Ref, 2000, false); err != nil {
		return Evidence{}, err
	}
	criteria := make([]string, 0, len(p.Criteria))
	for _, c := range p.Criteria {
		c = strings.ToLower(strings.TrimSpace(c))
		if !ValidCriterionID(c) {
			return Evidence{}, Errorf(ErrInvalid, "criteria", "%q is not a criterion id (such as c1 or g2)", clip(c))
		}
		if !slices.Contains(criteria, c) {
			criteria = append(criteria, c)
		}
	}
	if len(criteria) > MaxCriteria*2 {
		return Evidence{}, Errorf(ErrInvalid, "criteria", "names %d criteria; at most %d", len(criteria), MaxCriteria*2)
	}
	return Do(ctx, s, "evidence.add", p.Meta, p, func(tx *Tx, now time.Time) (Evidence, Audit, error) {
		if _, err := getAgent(ctx, tx, p.GoalID, p.AgentID); err != nil {
			return Evidence{}, Audit{}, err
		}
		var todoID, turnID any
		var known []Criterion
		if p.TodoID != 0 {
			t, err := getTodo(ctx, tx, p.GoalID, p.TodoID, false)
			if err != nil {
				return Evidence{}, Audit{}, err
			}
			todoID = p.TodoID
			known = append(known, t.Criteria...)
		}
		if len(criteria) > 0 {
			g, err := getGoal(ctx, tx, p.GoalID, false)
			if err != nil {
				return Evidence{}, Audit{}, err
			}
			known = append(known, g.Criteria...)
			for _, c := range criteria {
				if !slices.ContainsFunc(known, func(k Criterion) bool { return k.ID == c }) {
					return Evidence{}, Audit{}, Errorf(ErrInvalid, "criteria", "%s is not a criterion of %s or of the goal (they are: %s)",
						c, criteriaOwner(p.TodoID), orNone(strings.Join(CriterionIDs(known), ", ")))
				}
			}
		}
		var tid int64
		if p.TurnID != 0 {
			var agent string
			err := tx.QueryRow(ctx, `SELECT agent_id FROM turn WHERE id = $1 AND goal_id = $2`, p.TurnID, p.GoalID).Scan(&agent)
			if errors.Is(err, pgx.ErrNoRows) || (err == nil && agent != p.AgentID) {
				return Evidence{}, Audit{}, Errorf(ErrNotFound, "turn_id", "no turn %d of agent %q on goal %q", p.TurnID, p.AgentID, p.GoalID)
			}
			if err != nil {
				return Evidence{}, Audit{}, fmt.Errorf("read turn: %w", mapErr(err))
			}
			tid = p.TurnID
		} else {
			err := tx.QueryRow(ctx, `
				SELECT id FROM turn WHERE goal_id = $1 AND agent_id = $2 AND state = 'live' AND lease_expires_at > $3`,
				p.GoalID, p.AgentID, now).Scan(&tid)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return Evidence{}, Audit{}, fmt.Errorf("read live turn: %w", mapErr(err))
			}
		}
		if tid != 0 {
			turnID = tid
			if err := markProgress(ctx, tx, p.GoalID, p.AgentID, tid, now); err != nil {
				return Evidence{}, Audit{}, err
			}
		}
		e, err := scanEvidence(tx.QueryRow(ctx, `
			INSERT INTO evidence (goal_id, agent_id, todo_id, turn_id, kind, summary, ref, created_at, criteria)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING `+evidenceCols,
			p.GoalID, p.AgentID, todoID, turnID, kind, p.Summary, p.Ref, now, criteria))
		if err != nil {
			return Evidence{}, Audit{}, fmt.Errorf("insert evidence: %w", mapErr(err))
		}
		detail := map[string]any{"todo_id": e.TodoID, "turn_id": e.TurnID}
		if len(criteria) > 0 {
			detail["criteria"] = criteria
		}
		if p.File != nil {
			f, err := s.attachTx(ctx, tx, p.GoalID, "evidence_id", e.ID, *p.File, now)
			if err != nil {
				return Evidence{}, Audit{}, err
			}
			e.Files = []Attachment{f}
			detail["file"] = map[string]any{"file_id": f.ID, "name": f.Name, "size": f.Size, "sha256": f.SHA256}
		}
		return e, Audit{GoalID: e.GoalID, Target: EvidenceTarget(e.ID), Detail: auditDetail(detail)}, nil
	})
}

// ListEvidence lists a goal's evidence, oldest first.
func (s *Store) ListEvidence(ctx context.Context, p ListEvidenceParams) ([]Evidence, error) {
	if err := checkID("goal_id", p.GoalID); err != nil {
		return nil, err
	}
	limit, err := listLimit(p.Limit)
	if err != nil {
		return nil, err
	}
	rows, err := s.DB().Query(ctx, `
		SELECT `+evidenceCols+` FROM evidence
		WHERE goal_id = $1 AND ($2 = 0 OR todo_id = $2) AND ($3 = '' OR agent_id = $3) AND id > $4
		ORDER BY id LIMIT $5`, p.GoalID, p.TodoID, p.AgentID, p.AfterID, limit)
	if err != nil {
		return nil, fmt.Errorf("list evidence: %w", mapErr(err))
	}
	es, err := collect(rows, "list evidence", scanEvidence)
	if err != nil {
		return nil, err
	}
	return WithEvidenceFiles(ctx, s.DB(), es)
}
