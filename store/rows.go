package store

import (
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
