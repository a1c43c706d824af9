package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/stackbone/stackbone/internal/store"
)

// Journal statements (prepared once through the statement caches).
const (
	getJournalSQL = `SELECT digest, v, messages, state, updated_at, expires_at FROM journal
		WHERE tenant = ? AND key = ? AND expires_at > ?`
	putJournalSQL = `INSERT INTO journal (tenant, key, digest, v, messages, state, updated_at, expires_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (tenant, key) DO UPDATE SET digest = excluded.digest, v = excluded.v,
			messages = excluded.messages, state = excluded.state,
			updated_at = excluded.updated_at, expires_at = excluded.expires_at`
	sweepJournalSQL = `DELETE FROM journal WHERE expires_at <= ?`
)

// GetJournal returns the tenant's unexpired journal entry under key, or
// store.ErrNotFound.
func (s *Store) GetJournal(ctx context.Context, tenant, key string, now time.Time) (*store.JournalEntry, error) {
	e := &store.JournalEntry{Tenant: tenant, Key: key}
	var (
		v                int
		msgs, state      []byte
		updated, expires sql.NullInt64
	)
	err := s.rc.QueryRowContext(ctx, getJournalSQL, tenant, key, now.UnixMicro()).
		Scan(&e.Digest, &v, &msgs, &state, &updated, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlite: get journal: %w", store.ErrNotFound)
	}
	if err != nil {
		return nil, mapErr("get journal", err)
	}
	if err := store.DecodeJournal(e, v, msgs, state); err != nil {
		return nil, mapErr("get journal", err)
	}
	e.UpdatedAt, e.ExpiresAt = fromMicros(updated), fromMicros(expires)
	return e, nil
}

// PutJournal creates or replaces a journal entry.
func (s *Store) PutJournal(ctx context.Context, e store.JournalEntry) error {
	msgs, state, err := e.Encode()
	if err != nil {
		return mapErr("put journal", err)
	}
	return s.write(ctx, "put journal", func(tx *wtx) error {
		_, err := tx.ExecContext(ctx, putJournalSQL, e.Tenant, e.Key, e.Digest, store.FormatVersion, msgs, state,
			e.UpdatedAt.UnixMicro(), e.ExpiresAt.UnixMicro())
		return err
	})
}

// SweepJournal deletes the journal entries expired at now.
func (s *Store) SweepJournal(ctx context.Context, now time.Time) (int, error) {
	var n int64
	err := s.write(ctx, "sweep journal", func(tx *wtx) error {
		res, err := tx.ExecContext(ctx, sweepJournalSQL, now.UnixMicro())
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}
