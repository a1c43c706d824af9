package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/message"
)

// Events returns up to limit (all when limit <= 0) of the thread's stored
// events with Seq > after, in Seq order.
func (db *DB) Events(ctx context.Context, tenant, threadID string, after int64, limit int) ([]event.Event, error) {
	if err := CheckText("events", "tenant", tenant, "threadID", threadID); err != nil {
		return nil, db.invalid(err)
	}
	q := `SELECT seq, v, json FROM events WHERE tenant = $1 AND thread_id = $2 AND seq > $3 ORDER BY seq`
	args := []any{tenant, threadID, after}
	if limit > 0 {
		q += ` LIMIT $4`
		args = append(args, limit)
	}
	rows, err := db.d.Read().Query(ctx, q, args...)
	if err != nil {
		return nil, db.read("events", err)
	}
	defer rows.Close()
	out, err := ScanEvents(rows)
	if err != nil {
		return nil, db.read("events", err)
	}
	if len(out) == 0 {
		if err := threadExists(ctx, db.d.Read(), tenant, threadID); err != nil {
			return nil, db.read("events", err)
		}
	}
	return out, nil
}

// GetMessage returns the tenant's message with the given id. A stored
// message's JSON begins with its id ({"id":"…"), so the candidates are found
// by that prefix (LIKE, which SQLite compares without case) and the one
// whose id is exactly id is kept: no JSON is parsed in the database, which
// PostgreSQL refuses for text with a \u0000 escape.
func (db *DB) GetMessage(ctx context.Context, tenant, id string) (*message.Message, error) {
	if err := CheckText("get message", "tenant", tenant, "id", id); err != nil {
		return nil, db.invalid(err)
	}
	like, err := messageIDLike(id)
	if err != nil {
		return nil, db.invalid(err)
	}
	rows, err := db.d.Read().Query(ctx, `SELECT seq, v, json FROM messages WHERE tenant = $1 AND json::text LIKE $2 ESCAPE '\' LIMIT 64`,
		tenant, like)
	if err != nil {
		return nil, db.read("get message", err)
	}
	defer rows.Close()
	msgs, err := ScanMessages(rows)
	if err != nil {
		return nil, db.read("get message", err)
	}
	for i := range msgs {
		if msgs[i].ID == id {
			return &msgs[i], nil
		}
	}
	return nil, fmt.Errorf("%s: message %q: %w", db.name, id, ErrNotFound)
}

// messageIDLike is the LIKE pattern (ESCAPE '\') of the stored text of
// messages with the given id: a message's JSON begins with its id.
func messageIDLike(id string) (string, error) {
	lit, err := json.Marshal(id)
	if err != nil {
		return "", err
	}
	return likeEscaper.Replace(`{"id":`+string(lit)) + "%", nil
}

// likeEscaper escapes LIKE's wildcards (ESCAPE '\').
var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

// RevokeSession records a signed-out Studio session until expires and
// deletes the revocations that lapsed at or before now.
func (db *DB) RevokeSession(ctx context.Context, tenant, id string, expires, now time.Time) error {
	if err := CheckSession("RevokeSession", tenant, id); err != nil {
		return err
	}
	return db.d.Write(ctx, "revoke session", func(tx Tx) error {
		tx.Queue(`DELETE FROM studio_revoked_sessions WHERE expires_at <= $1`, now)
		tx.Queue(`INSERT INTO studio_revoked_sessions (tenant, id, expires_at) VALUES ($1, $2, $3)
			ON CONFLICT (tenant, id) DO UPDATE SET expires_at = CASE
				WHEN excluded.expires_at > studio_revoked_sessions.expires_at THEN excluded.expires_at
				ELSE studio_revoked_sessions.expires_at END`,
			tenant, id, expires)
		return nil
	})
}

// SessionRevoked reports whether a Studio session is signed out at now.
func (db *DB) SessionRevoked(ctx context.Context, tenant, id string, now time.Time) (bool, error) {
	if err := CheckSession("SessionRevoked", tenant, id); err != nil {
		return false, err
	}
	var n int
	if err := db.d.Read().QueryRow(ctx, `SELECT count(*) FROM studio_revoked_sessions WHERE tenant = $1 AND id = $2 AND expires_at > $3`,
		tenant, id, now).Scan(&n); err != nil {
		return false, db.read("session revoked", err)
	}
	return n > 0, nil
}

// GetJournal returns the tenant's unexpired journal entry under key, or
// ErrNotFound.
func (db *DB) GetJournal(ctx context.Context, tenant, key string, now time.Time) (*JournalEntry, error) {
	e := &JournalEntry{Tenant: tenant, Key: key}
	var (
		v           int
		msgs, state []byte
	)
	err := db.d.Read().QueryRow(ctx, `SELECT digest, v, messages, state, updated_at, expires_at FROM journal
		WHERE tenant = $1 AND key = $2 AND expires_at > $3`, tenant, key, now).
		Scan(&e.Digest, &v, &msgs, &state, ScanTime(&e.UpdatedAt), ScanTime(&e.ExpiresAt))
	if errors.Is(err, ErrNoRows) {
		return nil, fmt.Errorf("%s: get journal: %w", db.name, ErrNotFound)
	}
	if err != nil {
		return nil, db.read("get journal", err)
	}
	if err := DecodeJournal(e, v, msgs, state); err != nil {
		return nil, db.read("get journal", err)
	}
	return e, nil
}

// PutJournal creates or replaces a journal entry in one statement.
func (db *DB) PutJournal(ctx context.Context, e JournalEntry) error {
	msgs, state, err := e.Encode()
	if err != nil {
		return db.read("put journal", err)
	}
	return db.d.Write(ctx, "put journal", func(tx Tx) error {
		tx.Queue(`INSERT INTO journal (tenant, key, digest, v, messages, state, updated_at, expires_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
			ON CONFLICT (tenant, key) DO UPDATE SET digest = excluded.digest, v = excluded.v,
				messages = excluded.messages, state = excluded.state,
				updated_at = excluded.updated_at, expires_at = excluded.expires_at`,
			e.Tenant, e.Key, e.Digest, FormatVersion, msgs, state, e.UpdatedAt, e.ExpiresAt)
		return nil
	})
}

// SweepJournal deletes the journal entries expired at now.
func (db *DB) SweepJournal(ctx context.Context, now time.Time) (int, error) {
	var n int64
	err := db.d.Write(ctx, "sweep journal", func(tx Tx) error {
		var err error
		n, err = tx.Exec(ctx, `DELETE FROM journal WHERE expires_at <= $1`, now)
		return err
	})
	return int(n), err
}
