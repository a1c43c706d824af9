package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stackbone/stackbone/internal/store"
)

// GetJournal returns the tenant's unexpired journal entry under key, or
// store.ErrNotFound.
func (s *Store) GetJournal(ctx context.Context, tenant, key string, now time.Time) (*store.JournalEntry, error) {
	e := &store.JournalEntry{Tenant: tenant, Key: key}
	var (
		v                int
		msgs, state      []byte
		updated, expires time.Time
	)
	err := s.pool.QueryRow(ctx, `SELECT digest, v, messages, state, updated_at, expires_at FROM journal
		WHERE tenant = $1 AND key = $2 AND expires_at > $3`, tenant, key, now).
		Scan(&e.Digest, &v, &msgs, &state, &updated, &expires)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("postgres: get journal: %w", store.ErrNotFound)
	}
	if err != nil {
		return nil, mapErr("get journal", err)
	}
	if err := store.DecodeJournal(e, v, msgs, state); err != nil {
		return nil, mapErr("get journal", err)
	}
	e.UpdatedAt, e.ExpiresAt = updated.UTC(), expires.UTC()
	return e, nil
}

// PutJournal creates or replaces a journal entry in one statement.
func (s *Store) PutJournal(ctx context.Context, e store.JournalEntry) (err error) {
	defer func() { s.noteWrite(ctx, err) }()
	msgs, state, err := e.Encode()
	if err != nil {
		return mapErr("put journal", err)
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO journal (tenant, key, digest, v, messages, state, updated_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (tenant, key) DO UPDATE SET digest = excluded.digest, v = excluded.v,
			messages = excluded.messages, state = excluded.state,
			updated_at = excluded.updated_at, expires_at = excluded.expires_at`,
		e.Tenant, e.Key, e.Digest, store.FormatVersion, msgs, state, e.UpdatedAt, e.ExpiresAt)
	return mapErr("put journal", err)
}

// SweepJournal deletes the journal entries expired at now.
func (s *Store) SweepJournal(ctx context.Context, now time.Time) (_ int, err error) {
	defer func() { s.noteWrite(ctx, err) }()
	tag, err := s.pool.Exec(ctx, `DELETE FROM journal WHERE expires_at <= $1`, now)
	if err != nil {
		return 0, mapErr("sweep journal", err)
	}
	return int(tag.RowsAffected()), nil
}
