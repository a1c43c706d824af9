package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/store"
)

const responseCols = `id, tenant, thread_id, seq, previous_id, background, cancelled, request, created_at`

func scanResponse(row interface{ Scan(...any) error }) (*store.Response, error) {
	var (
		r       store.Response
		req     []byte
		created sql.NullInt64
	)
	if err := row.Scan(&r.ID, &r.Tenant, &r.ThreadID, &r.Seq, &r.PreviousID, &r.Background, &r.Cancelled, &req, &created); err != nil {
		return nil, err
	}
	r.Request, r.CreatedAt = req, fromMicros(created)
	return &r, nil
}

// PutResponse stores a response unless its thread has one at its seq.
func (s *Store) PutResponse(ctx context.Context, r store.Response) (*store.Response, bool, error) {
	if err := store.CheckResponse(r); err != nil {
		return nil, false, fmt.Errorf("sqlite: %w", err)
	}
	var (
		out     *store.Response
		created bool
	)
	err := s.write(ctx, "put response", func(tx *wtx) error {
		if err := s.threadExists(ctx, tx, r.Tenant, r.ThreadID); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO responses (`+responseCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (tenant, thread_id, seq) DO NOTHING`,
			r.ID, r.Tenant, r.ThreadID, r.Seq, r.PreviousID, r.Background, r.Cancelled, string(r.Request), r.CreatedAt.UnixMicro())
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 1 {
			created = true
			cp := r
			out = &cp
			return nil
		}
		out, err = scanResponse(tx.QueryRowContext(ctx, `SELECT `+responseCols+` FROM responses WHERE tenant = ? AND thread_id = ? AND seq = ?`,
			r.Tenant, r.ThreadID, r.Seq))
		return err
	})
	if err != nil {
		return nil, false, mapErr("put response", err)
	}
	return out, created, nil
}

// GetResponse returns a response that is not deleted.
func (s *Store) GetResponse(ctx context.Context, tenant, id string) (*store.Response, error) {
	if err := store.CheckText("get response", "tenant", tenant, "id", id); err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	r, err := scanResponse(s.rc.QueryRowContext(ctx, `SELECT `+responseCols+` FROM responses WHERE tenant = ? AND id = ? AND deleted = 0`, tenant, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlite: response %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, mapErr("get response", err)
	}
	return r, nil
}

// NextResponse returns the thread's first response after seq.
func (s *Store) NextResponse(ctx context.Context, tenant, threadID string, seq int64) (*store.Response, error) {
	if err := store.CheckText("next response", "tenant", tenant, "threadID", threadID); err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	r, err := scanResponse(s.rc.QueryRowContext(ctx, `SELECT `+responseCols+` FROM responses
		WHERE tenant = ? AND thread_id = ? AND seq > ? ORDER BY seq LIMIT 1`, tenant, threadID, seq))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlite: no response after %d in thread %q: %w", seq, threadID, store.ErrNotFound)
	}
	if err != nil {
		return nil, mapErr("next response", err)
	}
	return r, nil
}

// CancelResponse marks a response cancelled.
func (s *Store) CancelResponse(ctx context.Context, tenant, id string) error {
	return s.markResponse(ctx, "cancel response", `UPDATE responses SET cancelled = 1 WHERE tenant = ? AND id = ? AND deleted = 0`, tenant, id)
}

// DeleteResponse hides a response from reads.
func (s *Store) DeleteResponse(ctx context.Context, tenant, id string) error {
	return s.markResponse(ctx, "delete response", `UPDATE responses SET deleted = 1 WHERE tenant = ? AND id = ? AND deleted = 0`, tenant, id)
}

func (s *Store) markResponse(ctx context.Context, op, q, tenant, id string) error {
	if err := store.CheckText(op, "tenant", tenant, "id", id); err != nil {
		return fmt.Errorf("sqlite: %w", err)
	}
	return s.write(ctx, op, func(tx *wtx) error {
		res, err := tx.ExecContext(ctx, q, tenant, id)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("response %q: %w", id, store.ErrNotFound)
		}
		return nil
	})
}

// GetMessage returns the tenant's message with the given id.
func (s *Store) GetMessage(ctx context.Context, tenant, id string) (*message.Message, error) {
	if err := store.CheckText("get message", "tenant", tenant, "id", id); err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	rows, err := s.rc.QueryContext(ctx, `SELECT v, json FROM messages WHERE tenant = ? AND json_extract(json, '$.id') = ? LIMIT 1`, tenant, id)
	if err != nil {
		return nil, mapErr("get message", err)
	}
	defer rows.Close()
	msgs, err := store.ScanMessages(rows)
	if err != nil {
		return nil, mapErr("get message", err)
	}
	if len(msgs) == 0 {
		return nil, fmt.Errorf("sqlite: message %q: %w", id, store.ErrNotFound)
	}
	return &msgs[0], nil
}
