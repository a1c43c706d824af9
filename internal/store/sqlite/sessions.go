package sqlite

import (
	"context"
	"time"

	"github.com/stackbone/stackbone/internal/store"
)

// RevokeSession records a signed-out Studio session until expires and
// deletes the revocations that lapsed at or before now.
func (s *Store) RevokeSession(ctx context.Context, tenant, id string, expires, now time.Time) error {
	if err := store.CheckSession("RevokeSession", tenant, id); err != nil {
		return err
	}
	return s.write(ctx, "revoke session", func(tx *wtx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM studio_revoked_sessions WHERE expires_at <= ?`, now.UnixMicro()); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO studio_revoked_sessions (tenant, id, expires_at) VALUES (?, ?, ?)
			ON CONFLICT (tenant, id) DO UPDATE SET expires_at = max(expires_at, excluded.expires_at)`,
			tenant, id, expires.UnixMicro())
		return err
	})
}

// SessionRevoked reports whether a Studio session is signed out at now.
func (s *Store) SessionRevoked(ctx context.Context, tenant, id string, now time.Time) (bool, error) {
	if err := store.CheckSession("SessionRevoked", tenant, id); err != nil {
		return false, err
	}
	var n int
	if err := s.rc.QueryRowContext(ctx, `SELECT count(*) FROM studio_revoked_sessions WHERE tenant = ? AND id = ? AND expires_at > ?`,
		tenant, id, now.UnixMicro()).Scan(&n); err != nil {
		return false, mapErr("session revoked", err)
	}
	return n > 0, nil
}
