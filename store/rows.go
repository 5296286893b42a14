package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// collect scans every row of rows with scan, closes rows, and wraps a failure with what (the
// operation, e.g. "list goals"), so each listing states only its query and its scanner.
func collect[T any](rows pgx.Rows, what string, scan func(pgx.Row) (T, error)) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, mapErr(err))
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, mapErr(err))
	}
	return out, nil
}

// getOfGoal reads the row id of goalID from table (gate or todo: rows numbered within their
// goal), locking it against concurrent changes when forUpdate. An unknown row is ErrNotFound
// naming <table>_id.
func getOfGoal[T any](ctx context.Context, db DB, table, cols string, scan func(pgx.Row) (T, error),
	goalID string, id int64, forUpdate bool) (T, error) {
	q := `SELECT ` + cols + ` FROM ` + table + ` WHERE goal_id = $1 AND id = $2`
	if forUpdate {
		q += ` FOR NO KEY UPDATE` // ids never change; rows referencing this one need not wait
	}
	v, err := scan(db.QueryRow(ctx, q, goalID, id))
	var zero T
	if errors.Is(err, pgx.ErrNoRows) {
		return zero, Errorf(ErrNotFound, table+"_id", "no %s %d on goal %q", table, id, goalID)
	}
	if err != nil {
		return zero, fmt.Errorf("read %s: %w", table, mapErr(err))
	}
	return v, nil
}
