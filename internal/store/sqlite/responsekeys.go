package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/stackbone/stackbone/internal/store"
)

// Response key statements (prepared once through the statement caches).
const (
	// claimResponseKeySQL inserts the entry, or takes over the one there
	// when it names the thread to replace; otherwise it returns no row.
	claimResponseKeySQL = `INSERT INTO response_keys (tenant, key, digest, thread_id, created_at, expires_at)
		VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (tenant, key) DO UPDATE SET digest = excluded.digest, thread_id = excluded.thread_id,
			created_at = excluded.created_at, expires_at = excluded.expires_at
		WHERE response_keys.thread_id = ?
		RETURNING digest, thread_id, created_at, expires_at`
	getResponseKeySQL   = `SELECT digest, thread_id, created_at, expires_at FROM response_keys WHERE tenant = ? AND key = ?`
	sweepResponseKeySQL = `DELETE FROM response_keys WHERE expires_at <= ? AND NOT EXISTS (
		SELECT 1 FROM threads WHERE threads.tenant = response_keys.tenant AND threads.id = response_keys.thread_id
			AND threads.status IN ('running', 'queued'))`
)

// ClaimResponseKey records k unless another entry holds (k.Tenant, k.Key)
// and names a thread other than replace; it returns the entry that holds.
func (s *Store) ClaimResponseKey(ctx context.Context, k store.ResponseKey, replace string) (*store.ResponseKey, bool, error) {
	if err := k.Validate(replace); err != nil {
		return nil, false, fmt.Errorf("sqlite: %w", err)
	}
	if k.CreatedAt.IsZero() {
		k.CreatedAt = s.now()
	}
	var (
		out *store.ResponseKey
		won bool
	)
	err := s.write(ctx, "claim response key", func(tx *wtx) error {
		var err error
		out, err = scanResponseKey(k, tx.QueryRowContext(ctx, claimResponseKeySQL, k.Tenant, k.Key, k.Digest, k.ThreadID,
			k.CreatedAt.UnixMicro(), k.ExpiresAt.UnixMicro(), replace))
		if err == nil {
			won = true
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		out, err = scanResponseKey(k, tx.QueryRowContext(ctx, getResponseKeySQL, k.Tenant, k.Key))
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
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	out, err := scanResponseKey(store.ResponseKey{Tenant: tenant, Key: key}, s.rc.QueryRowContext(ctx, getResponseKeySQL, tenant, key))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlite: response key %q: %w", key, store.ErrNotFound)
	}
	if err != nil {
		return nil, mapErr("get response key", err)
	}
	return out, nil
}

// scanResponseKey reads the columns the claim returns into an entry of k's
// tenant and key.
func scanResponseKey(k store.ResponseKey, row *sql.Row) (*store.ResponseKey, error) {
	out := &store.ResponseKey{Tenant: k.Tenant, Key: k.Key}
	var created, expires sql.NullInt64
	if err := row.Scan(&out.Digest, &out.ThreadID, &created, &expires); err != nil {
		return nil, err
	}
	out.CreatedAt, out.ExpiresAt = fromMicros(created), fromMicros(expires)
	return out, nil
}

// SweepResponseKeys deletes the entries expired at now whose thread no
// longer runs.
func (s *Store) SweepResponseKeys(ctx context.Context, now time.Time) (int, error) {
	var n int64
	err := s.write(ctx, "sweep response keys", func(tx *wtx) error {
		res, err := tx.ExecContext(ctx, sweepResponseKeySQL, now.UnixMicro())
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}
