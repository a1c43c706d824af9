package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stackbone/stackbone/internal/store"
)

const responseCols = `tenant, id, thread_id, seq, previous_id, background, cancelled, request, created_at`

// scanResponse scans responseCols.
func scanResponse(row pgx.Row) (*store.Response, error) {
	var (
		r       store.Response
		request []byte
		created time.Time
	)
	if err := row.Scan(&r.Tenant, &r.ID, &r.ThreadID, &r.Seq, &r.PreviousID, &r.Background, &r.Cancelled,
		&request, &created); err != nil {
		return nil, err
	}
	r.Request = json.RawMessage(request)
	r.CreatedAt = created.UTC()
	return &r, nil
}

// PutResponse stores r, unless its thread already has a response at r.Seq:
// then it returns the stored one and false. A zero CreatedAt is now.
func (s *Store) PutResponse(ctx context.Context, r store.Response) (_ *store.Response, _ bool, err error) {
	defer func() { s.noteWrite(ctx, err) }()
	request, err := r.Encode()
	if err != nil {
		return nil, false, mapErr("put response", err)
	}
	if r.CreatedAt.IsZero() {
		r.CreatedAt = s.now()
	}
	var (
		out     *store.Response
		created bool
	)
	err = s.tx(ctx, "put response", func(tx pgx.Tx) error {
		if err := s.threadExists(ctx, tx, r.Tenant, r.ThreadID); err != nil {
			return err
		}
		// Either conflict does nothing: a response already at the seq (a
		// retry, returned below; a concurrent insert is waited for) or a
		// taken id (refused).
		var err error
		out, err = scanResponse(tx.QueryRow(ctx, `INSERT INTO responses
				(tenant, id, thread_id, seq, previous_id, background, request, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
			ON CONFLICT DO NOTHING
			RETURNING `+responseCols,
			r.Tenant, r.ID, r.ThreadID, r.Seq, r.PreviousID, r.Background, request, r.CreatedAt))
		if err == nil {
			created = true
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		out, err = scanResponse(tx.QueryRow(ctx, `SELECT `+responseCols+` FROM responses
			WHERE tenant = $1 AND thread_id = $2 AND seq = $3`, r.Tenant, r.ThreadID, r.Seq))
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: PutResponse: id %q is taken by another response", store.ErrInvalid, r.ID)
		}
		return err
	})
	if err != nil {
		return nil, false, err
	}
	return out, created, nil
}

// GetResponse returns the tenant's response, or store.ErrNotFound when it
// is unknown or deleted.
func (s *Store) GetResponse(ctx context.Context, tenant, id string) (*store.Response, error) {
	if err := store.CheckResponse("GetResponse", tenant, id); err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	r, err := scanResponse(s.pool.QueryRow(ctx, `SELECT `+responseCols+` FROM responses
		WHERE tenant = $1 AND id = $2 AND NOT deleted`, tenant, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("postgres: get response %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, mapErr("get response", err)
	}
	return r, nil
}

// NextResponse returns the thread's first response (deleted ones included)
// with Seq > seq, or store.ErrNotFound.
func (s *Store) NextResponse(ctx context.Context, tenant, threadID string, seq int64) (*store.Response, error) {
	if err := store.CheckResponse("NextResponse", tenant, threadID); err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	r, err := scanResponse(s.pool.QueryRow(ctx, `SELECT `+responseCols+` FROM responses
		WHERE tenant = $1 AND thread_id = $2 AND seq > $3 ORDER BY seq LIMIT 1`, tenant, threadID, seq))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("postgres: next response of thread %q after %d: %w", threadID, seq, store.ErrNotFound)
	}
	if err != nil {
		return nil, mapErr("next response", err)
	}
	return r, nil
}

// CancelResponse marks a response cancelled (store.ErrNotFound as
// GetResponse).
func (s *Store) CancelResponse(ctx context.Context, tenant, id string) (err error) {
	defer func() { s.noteWrite(ctx, err) }()
	return s.markResponse(ctx, "cancel response", "CancelResponse",
		`UPDATE responses SET cancelled = true WHERE tenant = $1 AND id = $2 AND NOT deleted`, tenant, id)
}

// DeleteResponse hides a response from GetResponse (store.ErrNotFound as
// GetResponse); NextResponse still sees it.
func (s *Store) DeleteResponse(ctx context.Context, tenant, id string) (err error) {
	defer func() { s.noteWrite(ctx, err) }()
	return s.markResponse(ctx, "delete response", "DeleteResponse",
		`UPDATE responses SET deleted = true WHERE tenant = $1 AND id = $2 AND NOT deleted`, tenant, id)
}

// markResponse runs an update of one undeleted response.
func (s *Store) markResponse(ctx context.Context, op, method, query, tenant, id string) error {
	if err := store.CheckResponse(method, tenant, id); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	tag, err := s.pool.Exec(ctx, query, tenant, id)
	if err != nil {
		return mapErr(op, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("postgres: %s %q: %w", op, id, store.ErrNotFound)
	}
	return nil
}
