package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/stackbone/stackbone/internal/store"
)

const responseCols = `tenant, id, thread_id, seq, previous_id, background, cancelled, request, created_at`

// Response statements (prepared once through the statement caches).
const (
	// insResponseSQL does nothing on either conflict: a response already at
	// the seq (a retry, returned by PutResponse) or a taken id (refused).
	insResponseSQL = `INSERT INTO responses (tenant, id, thread_id, seq, previous_id, background, request, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT DO NOTHING
		RETURNING ` + responseCols
	responseAtSQL   = `SELECT ` + responseCols + ` FROM responses WHERE tenant = ? AND thread_id = ? AND seq = ?`
	getResponseSQL  = `SELECT ` + responseCols + ` FROM responses WHERE tenant = ? AND id = ? AND deleted = 0`
	nextResponseSQL = `SELECT ` + responseCols + ` FROM responses
		WHERE tenant = ? AND thread_id = ? AND seq > ? ORDER BY seq LIMIT 1`
	cancelResponseSQL = `UPDATE responses SET cancelled = 1 WHERE tenant = ? AND id = ? AND deleted = 0`
	deleteResponseSQL = `UPDATE responses SET deleted = 1 WHERE tenant = ? AND id = ? AND deleted = 0`
)

// scanResponse scans responseCols.
func scanResponse(sc scanner) (*store.Response, error) {
	var (
		r       store.Response
		request []byte
		created sql.NullInt64
	)
	if err := sc.Scan(&r.Tenant, &r.ID, &r.ThreadID, &r.Seq, &r.PreviousID, &r.Background, &r.Cancelled,
		&request, &created); err != nil {
		return nil, err
	}
	r.Request = json.RawMessage(request)
	r.CreatedAt = fromMicros(created)
	return &r, nil
}

// PutResponse stores r, unless its thread already has a response at r.Seq:
// then it returns the stored one and false. A zero CreatedAt is now.
func (s *Store) PutResponse(ctx context.Context, r store.Response) (*store.Response, bool, error) {
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
	err = s.write(ctx, "put response", func(tx *wtx) error {
		if err := s.threadExists(ctx, tx, r.Tenant, r.ThreadID); err != nil {
			return err
		}
		var err error
		out, err = scanResponse(tx.QueryRowContext(ctx, insResponseSQL, r.Tenant, r.ID, r.ThreadID, r.Seq,
			r.PreviousID, r.Background, request, r.CreatedAt.UnixMicro()))
		if err == nil {
			created = true
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		out, err = scanResponse(tx.QueryRowContext(ctx, responseAtSQL, r.Tenant, r.ThreadID, r.Seq))
		if errors.Is(err, sql.ErrNoRows) {
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
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	r, err := scanResponse(s.rc.QueryRowContext(ctx, getResponseSQL, tenant, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlite: get response %q: %w", id, store.ErrNotFound)
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
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	r, err := scanResponse(s.rc.QueryRowContext(ctx, nextResponseSQL, tenant, threadID, seq))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlite: next response of thread %q after %d: %w", threadID, seq, store.ErrNotFound)
	}
	if err != nil {
		return nil, mapErr("next response", err)
	}
	return r, nil
}

// CancelResponse marks a response cancelled (store.ErrNotFound as
// GetResponse).
func (s *Store) CancelResponse(ctx context.Context, tenant, id string) error {
	return s.markResponse(ctx, "cancel response", "CancelResponse", cancelResponseSQL, tenant, id)
}

// DeleteResponse hides a response from GetResponse (store.ErrNotFound as
// GetResponse); NextResponse still sees it.
func (s *Store) DeleteResponse(ctx context.Context, tenant, id string) error {
	return s.markResponse(ctx, "delete response", "DeleteResponse", deleteResponseSQL, tenant, id)
}

// markResponse runs an update of one undeleted response.
func (s *Store) markResponse(ctx context.Context, op, method, query, tenant, id string) error {
	if err := store.CheckResponse(method, tenant, id); err != nil {
		return fmt.Errorf("sqlite: %w", err)
	}
	return s.write(ctx, op, func(tx *wtx) error {
		res, err := tx.ExecContext(ctx, query, tenant, id)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("response %q: %w", id, store.ErrNotFound)
		}
		return nil
	})
}
