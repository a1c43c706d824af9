package postgres

import (
	"context"
	"time"

	"github.com/stackbone/stackbone/internal/store"
)

// RevokeSession records a signed-out Studio session until expires and
// deletes the revocations that lapsed at or before now.
func (s *Store) RevokeSession(ctx context.Context, tenant, id string, expires, now time.Time) (err error) {
	defer func() { s.noteWrite(ctx, err) }()
	if err := store.CheckSession("RevokeSession", tenant, id); err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, `DELETE FROM studio_revoked_sessions WHERE expires_at <= $1`, now); err != nil {
		return mapErr("revoke session", err)
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO studio_revoked_sessions (tenant, id, expires_at) VALUES ($1, $2, $3)
		ON CONFLICT (tenant, id) DO UPDATE SET expires_at = greatest(studio_revoked_sessions.expires_at, excluded.expires_at)`,
		tenant, id, expires); err != nil {
		return mapErr("revoke session", err)
	}
	return nil
}

// SessionRevoked reports whether a Studio session is signed out at now.
func (s *Store) SessionRevoked(ctx context.Context, tenant, id string, now time.Time) (bool, error) {
	if err := store.CheckSession("SessionRevoked", tenant, id); err != nil {
		return false, err
	}
	var revoked bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM studio_revoked_sessions WHERE tenant = $1 AND id = $2 AND expires_at > $3)`,
		tenant, id, now).Scan(&revoked); err != nil {
		return false, mapErr("session revoked", err)
	}
	return revoked, nil
}
