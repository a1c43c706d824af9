package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/stackbone/stackbone/internal/store"
)

// querier is a pool or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// threadExists returns store.ErrNotFound unless the tenant has the thread.
func (s *Store) threadExists(ctx context.Context, q querier, tenant, id string) error {
	var one int
	err := q.QueryRow(ctx, `SELECT 1 FROM threads WHERE tenant = $1 AND id = $2`, tenant, id).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("thread %q: %w", id, store.ErrNotFound)
	}
	return err
}
