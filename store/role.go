package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Role is what a person may do on a goal. It is decided by the SQL function loopx_role
// (migration 00042), the one definition every path uses: the router's reads below, the
// kernel's gate answers and the chat fast path's statement.
type Role string

// Roles, weakest first.
const (
	RoleStranger Role = "stranger" // may do nothing
	RoleMember   Role = "member"   // may message the goal's agents and read its status
	RoleOwner    Role = "owner"    // may also steer, pause, resume, budget and answer gates
	RoleAdmin    Role = "admin"    // a service admin: everything on every goal
)

// AtLeast reports whether r includes everything min may do.
func (r Role) AtLeast(min Role) bool { return r.rank() >= min.rank() }

func (r Role) rank() int {
	switch r {
	case RoleMember:
		return 1
	case RoleOwner:
		return 2
	case RoleAdmin:
		return 3
	}
	return 0
}

// Person is who asks: a Lark open_id, and whether the service lists them as an admin.
type Person struct {
	OpenID string
	Admin  bool
}

// GoalAs is a goal with the role of the person who read it.
type GoalAs struct {
	Goal
	Role Role
}

const roleCol = `loopx_role(owners, members, $2, $3)`

// GetGoalAs reads one goal and the person's role on it; ErrNotFound when it does not exist.
func GetGoalAs(ctx context.Context, db DB, id string, who Person) (GoalAs, error) {
	g, err := scanGoalAs(db.QueryRow(ctx, `SELECT `+goalCols+`, `+roleCol+` FROM goal WHERE id = $1`,
		id, who.OpenID, who.Admin))
	if err != nil {
		return GoalAs{}, fmt.Errorf("read goal %s: %w", id, mapErr(err))
	}
	return g, nil
}

// ListGoalsVisibleTo lists, by id, the goals a person may see (any role but stranger), at most
// 1000, with the person's role on each.
func ListGoalsVisibleTo(ctx context.Context, db DB, who Person) ([]GoalAs, error) {
	const role = `loopx_role(owners, members, $1, $2)`
	rows, err := db.Query(ctx, `SELECT `+goalCols+`, `+role+` FROM goal
		WHERE `+role+` <> 'stranger' ORDER BY id LIMIT 1000`, who.OpenID, who.Admin)
	if err != nil {
		return nil, fmt.Errorf("list visible goals: %w", mapErr(err))
	}
	return collect(rows, "list visible goals", scanGoalAs)
}

func scanGoalAs(row pgx.Row) (GoalAs, error) {
	var g GoalAs
	err := row.Scan(append(goalDests(&g.Goal), &g.Role)...)
	return g, err
}

// MessageAgent returns the agent a message to goalID reaches (loopx_message_agent): named,
// when it exists, else the goal's default agent, else its only agent. ok is false when none
// applies; the caller then lists the agents and asks which.
func MessageAgent(ctx context.Context, db DB, goalID, named string) (agentID string, ok bool, err error) {
	var id *string
	if err := db.QueryRow(ctx, `SELECT agent_id FROM loopx_message_agent($1, $2)`, goalID, named).Scan(&id); err != nil {
		return "", false, fmt.Errorf("resolve agent: %w", mapErr(err))
	}
	if id == nil {
		return "", false, nil
	}
	return *id, true, nil
}

// goalRole reads a person's role on a goal inside the caller's transaction.
func goalRole(ctx context.Context, db DB, goalID string, who Person) (Role, error) {
	var r Role
	err := db.QueryRow(ctx, `SELECT `+roleCol+` FROM goal WHERE id = $1`, goalID, who.OpenID, who.Admin).Scan(&r)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", Errorf(ErrNotFound, "goal_id", "no goal %q", goalID)
	}
	if err != nil {
		return "", fmt.Errorf("read role: %w", mapErr(err))
	}
	return r, nil
}
