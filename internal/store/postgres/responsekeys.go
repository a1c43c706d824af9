package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stackbone/stackbone/internal/store"
)

// ClaimResponseKey records k unless another entry holds (k.Tenant, k.Key)
// and names a thread other than replace; it returns the entry that holds.
// A concurrent claim of the same key waits for the first to commit (the
// primary key), then finds its entry.
func (s *Store) ClaimResponseKey(ctx context.Context, k store.ResponseKey, replace string) (*store.ResponseKey, bool, error) {
	if err := k.Validate(replace); err != nil {
		return nil, false, fmt.Errorf("postgres: %w", err)
	}
	if k.CreatedAt.IsZero() {
		k.CreatedAt = s.now()
	}
	var (
		out *store.ResponseKey
		won bool
	)
	err := s.tx(ctx, "claim response key", func(tx pgx.Tx) error {
		var err error
		out, err = scanResponseKey(k, tx.QueryRow(ctx, `INSERT INTO response_keys
				(tenant, key, digest, thread_id, created_at, expires_at)
			VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT (tenant, key) DO UPDATE SET digest = excluded.digest, thread_id = excluded.thread_id,
				created_at = excluded.created_at, expires_at = excluded.expires_at
			WHERE response_keys.thread_id = $7
			RETURNING digest, thread_id, created_at, expires_at`,
			k.Tenant, k.Key, k.Digest, k.ThreadID, k.CreatedAt, k.ExpiresAt, replace))
		if err == nil {
			won = true
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		out, err = scanResponseKey(k, tx.QueryRow(ctx, `SELECT digest, thread_id, created_at, expires_at
			FROM response_keys WHERE tenant = $1 AND key = $2`, k.Tenant, k.Key))
		return err
	})
	if err != nil {
		return nil, false, err
	}
	return out, won, nil
}

// GetResponseKey returns the entry of (tenant, key), or store.ErrNotFound.
func (s *Store) GetResponseKey(ctx context.Context, tenant, key string) (*store.ResponseKey, error) {
	if err := store.CheckText("get response key", "tenant", tenant, "key", key); err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	out, err := scanResponseKey(store.ResponseKey{Tenant: tenant, Key: key}, s.pool.QueryRow(ctx, `SELECT digest, thread_id, created_at, expires_at
		FROM response_keys WHERE tenant = $1 AND key = $2`, tenant, key))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("postgres: response key %q: %w", key, store.ErrNotFound)
	}
	if err != nil {
		return nil, mapErr("get response key", err)
	}
	return out, nil
}

// scanResponseKey reads the columns the claim returns into an entry of k's
// tenant and key.
func scanResponseKey(k store.ResponseKey, row pgx.Row) (*store.ResponseKey, error) {
	out := &store.ResponseKey{Tenant: k.Tenant, Key: k.Key}
	var created, expires time.Time
	if err := row.Scan(&out.Digest, &out.ThreadID, &created, &expires); err != nil {
		return nil, err
	}
	out.CreatedAt, out.ExpiresAt = created.UTC(), expires.UTC()
	return out, nil
}

// SweepResponseKeys deletes the entries expired at now whose thread no
// longer runs.
func (s *Store) SweepResponseKeys(ctx context.Context, now time.Time) (int, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM response_keys WHERE expires_at <= $1 AND NOT EXISTS (
		SELECT 1 FROM threads WHERE threads.tenant = response_keys.tenant AND threads.id = response_keys.thread_id
			AND threads.status IN ('running', 'queued'))`, now)
	if err != nil {
		return 0, mapErr("sweep response keys", err)
	}
	return int(tag.RowsAffected()), nil
}
