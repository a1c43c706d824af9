package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/store"
)

const responseCols = `id, tenant, thread_id, seq, previous_id, background, cancelled, request, created_at`

func scanResponse(row pgx.Row) (*store.Response, error) {
	var (
		r       store.Response
		req     []byte
		created time.Time
	)
	if err := row.Scan(&r.ID, &r.Tenant, &r.ThreadID, &r.Seq, &r.PreviousID, &r.Background, &r.Cancelled, &req, &created); err != nil {
		return nil, err
	}
	r.Request, r.CreatedAt = req, created.UTC()
	return &r, nil
}

// PutResponse stores a response unless its thread has one at its seq.
func (s *Store) PutResponse(ctx context.Context, r store.Response) (*store.Response, bool, error) {
	if err := store.CheckResponse(r); err != nil {
		return nil, false, fmt.Errorf("postgres: %w", err)
	}
	var (
		out     *store.Response
		created bool
	)
	err := s.tx(ctx, "put response", func(tx pgx.Tx) error {
		if err := s.threadExists(ctx, tx, r.Tenant, r.ThreadID); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `INSERT INTO responses (`+responseCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
			ON CONFLICT (tenant, thread_id, seq) DO NOTHING`,
			r.ID, r.Tenant, r.ThreadID, r.Seq, r.PreviousID, r.Background, r.Cancelled, string(r.Request), r.CreatedAt)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 1 {
			created = true
			cp := r
			out = &cp
			return nil
		}
		out, err = scanResponse(tx.QueryRow(ctx, `SELECT `+responseCols+` FROM responses WHERE tenant = $1 AND thread_id = $2 AND seq = $3`,
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
		return nil, fmt.Errorf("postgres: %w", err)
	}
	r, err := scanResponse(s.pool.QueryRow(ctx, `SELECT `+responseCols+` FROM responses WHERE tenant = $1 AND id = $2 AND NOT deleted`, tenant, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("postgres: response %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, mapErr("get response", err)
	}
	return r, nil
}

// NextResponse returns the thread's first response after seq.
func (s *Store) NextResponse(ctx context.Context, tenant, threadID string, seq int64) (*store.Response, error) {
	if err := store.CheckText("next response", "tenant", tenant, "threadID", threadID); err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	r, err := scanResponse(s.pool.QueryRow(ctx, `SELECT `+responseCols+` FROM responses
		WHERE tenant = $1 AND thread_id = $2 AND seq > $3 ORDER BY seq LIMIT 1`, tenant, threadID, seq))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("postgres: no response after %d in thread %q: %w", seq, threadID, store.ErrNotFound)
	}
	if err != nil {
		return nil, mapErr("next response", err)
	}
	return r, nil
}

// CancelResponse marks a response cancelled.
func (s *Store) CancelResponse(ctx context.Context, tenant, id string) error {
	return s.markResponse(ctx, "cancel response", `UPDATE responses SET cancelled = true WHERE tenant = $1 AND id = $2 AND NOT deleted`, tenant, id)
}

// DeleteResponse hides a response from reads.
func (s *Store) DeleteResponse(ctx context.Context, tenant, id string) error {
	return s.markResponse(ctx, "delete response", `UPDATE responses SET deleted = true WHERE tenant = $1 AND id = $2 AND NOT deleted`, tenant, id)
}

func (s *Store) markResponse(ctx context.Context, op, q, tenant, id string) error {
	if err := store.CheckText(op, "tenant", tenant, "id", id); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	tag, err := s.pool.Exec(ctx, q, tenant, id)
	if err != nil {
		return mapErr(op, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("postgres: response %q: %w", id, store.ErrNotFound)
	}
	return nil
}

// GetMessage returns the tenant's message with the given id.
func (s *Store) GetMessage(ctx context.Context, tenant, id string) (*message.Message, error) {
	if err := store.CheckText("get message", "tenant", tenant, "id", id); err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	rows, err := s.pool.Query(ctx, `SELECT v, json FROM messages WHERE tenant = $1 AND json->>'id' = $2 LIMIT 1`, tenant, id)
	if err != nil {
		return nil, mapErr("get message", err)
	}
	defer rows.Close()
	msgs, err := store.ScanMessages(rows)
	if err != nil {
		return nil, mapErr("get message", err)
	}
	if len(msgs) == 0 {
		return nil, fmt.Errorf("postgres: message %q: %w", id, store.ErrNotFound)
	}
	return &msgs[0], nil
}
