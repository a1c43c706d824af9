package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

const responseCols = `tenant, id, thread_id, seq, previous_id, background, cancelled, request, created_at`

// scanResponse scans responseCols.
func scanResponse(row Row) (*Response, error) {
	var (
		r       Response
		request []byte
	)
	if err := row.Scan(&r.Tenant, &r.ID, &r.ThreadID, &r.Seq, &r.PreviousID, &r.Background, &r.Cancelled,
		&request, ScanTime(&r.CreatedAt)); err != nil {
		return nil, err
	}
	r.Request = json.RawMessage(request)
	return &r, nil
}

// PutResponse stores r, unless its thread already has a response at r.Seq:
// then it returns the stored one and false. A zero CreatedAt is now.
func (db *DB) PutResponse(ctx context.Context, r Response) (*Response, bool, error) {
	request, err := r.Encode()
	if err != nil {
		return nil, false, db.read("put response", err)
	}
	if r.CreatedAt.IsZero() {
		r.CreatedAt = db.now()
	}
	var (
		out     *Response
		created bool
	)
	err = db.d.Write(ctx, "put response", func(tx Tx) error {
		if err := threadExists(ctx, tx, r.Tenant, r.ThreadID); err != nil {
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
		if !errors.Is(err, ErrNoRows) {
			return err
		}
		out, err = scanResponse(tx.QueryRow(ctx, `SELECT `+responseCols+` FROM responses
			WHERE tenant = $1 AND thread_id = $2 AND seq = $3`, r.Tenant, r.ThreadID, r.Seq))
		if errors.Is(err, ErrNoRows) {
			return fmt.Errorf("%w: PutResponse: id %q is taken by another response", ErrInvalid, r.ID)
		}
		return err
	})
	if err != nil {
		return nil, false, err
	}
	return out, created, nil
}

// GetResponse returns the tenant's response, or ErrNotFound when it is
// unknown or deleted.
func (db *DB) GetResponse(ctx context.Context, tenant, id string) (*Response, error) {
	if err := CheckResponse("GetResponse", tenant, id); err != nil {
		return nil, db.invalid(err)
	}
	r, err := scanResponse(db.d.Read().QueryRow(ctx, `SELECT `+responseCols+` FROM responses
		WHERE tenant = $1 AND id = $2 AND NOT deleted`, tenant, id))
	if errors.Is(err, ErrNoRows) {
		return nil, fmt.Errorf("%s: get response %q: %w", db.name, id, ErrNotFound)
	}
	if err != nil {
		return nil, db.read("get response", err)
	}
	return r, nil
}

// NextResponse returns the thread's first response (deleted ones included)
// with Seq > seq, or ErrNotFound.
func (db *DB) NextResponse(ctx context.Context, tenant, threadID string, seq int64) (*Response, error) {
	if err := CheckResponse("NextResponse", tenant, threadID); err != nil {
		return nil, db.invalid(err)
	}
	r, err := scanResponse(db.d.Read().QueryRow(ctx, `SELECT `+responseCols+` FROM responses
		WHERE tenant = $1 AND thread_id = $2 AND seq > $3 ORDER BY seq LIMIT 1`, tenant, threadID, seq))
	if errors.Is(err, ErrNoRows) {
		return nil, fmt.Errorf("%s: next response of thread %q after %d: %w", db.name, threadID, seq, ErrNotFound)
	}
	if err != nil {
		return nil, db.read("next response", err)
	}
	return r, nil
}

// CancelResponse marks a response cancelled (ErrNotFound as GetResponse).
func (db *DB) CancelResponse(ctx context.Context, tenant, id string) error {
	return db.markResponse(ctx, "cancel response", "CancelResponse", "cancelled", tenant, id)
}

// DeleteResponse hides a response from GetResponse (ErrNotFound as
// GetResponse); NextResponse still sees it.
func (db *DB) DeleteResponse(ctx context.Context, tenant, id string) error {
	return db.markResponse(ctx, "delete response", "DeleteResponse", "deleted", tenant, id)
}

// markResponse sets the flag column (cancelled or deleted) of one undeleted
// response.
func (db *DB) markResponse(ctx context.Context, op, method, column, tenant, id string) error {
	if err := CheckResponse(method, tenant, id); err != nil {
		return db.invalid(err)
	}
	return db.d.Write(ctx, op, func(tx Tx) error {
		n, err := tx.Exec(ctx, `UPDATE responses SET `+column+` = $1 WHERE tenant = $2 AND id = $3 AND NOT deleted`,
			true, tenant, id)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("response %q: %w", id, ErrNotFound)
		}
		return nil
	})
}

const responseKeyCols = `digest, thread_id, created_at, expires_at`

// ClaimResponseKey records k unless another entry holds (k.Tenant, k.Key)
// and names a thread other than replace; it returns the entry that holds.
// A concurrent claim of the same key waits for the first to commit (the
// primary key), then finds its entry.
func (db *DB) ClaimResponseKey(ctx context.Context, k ResponseKey, replace string) (*ResponseKey, bool, error) {
	if err := k.Validate(replace); err != nil {
		return nil, false, db.invalid(err)
	}
	if k.CreatedAt.IsZero() {
		k.CreatedAt = db.now()
	}
	var (
		out *ResponseKey
		won bool
	)
	err := db.d.Write(ctx, "claim response key", func(tx Tx) error {
		var err error
		out, err = scanResponseKey(k.Tenant, k.Key, tx.QueryRow(ctx, `INSERT INTO response_keys
				(tenant, key, digest, thread_id, created_at, expires_at)
			VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT (tenant, key) DO UPDATE SET digest = excluded.digest, thread_id = excluded.thread_id,
				created_at = excluded.created_at, expires_at = excluded.expires_at
			WHERE response_keys.thread_id = $7
			RETURNING `+responseKeyCols,
			k.Tenant, k.Key, k.Digest, k.ThreadID, k.CreatedAt, k.ExpiresAt, replace))
		if err == nil {
			won = true
			return nil
		}
		if !errors.Is(err, ErrNoRows) {
			return err
		}
		out, err = scanResponseKey(k.Tenant, k.Key, tx.QueryRow(ctx, `SELECT `+responseKeyCols+`
			FROM response_keys WHERE tenant = $1 AND key = $2`, k.Tenant, k.Key))
		return err
	})
	if err != nil {
		return nil, false, err
	}
	return out, won, nil
}

// GetResponseKey returns the entry of (tenant, key), or ErrNotFound.
func (db *DB) GetResponseKey(ctx context.Context, tenant, key string) (*ResponseKey, error) {
	if err := CheckText("get response key", "tenant", tenant, "key", key); err != nil {
		return nil, db.invalid(err)
	}
	out, err := scanResponseKey(tenant, key, db.d.Read().QueryRow(ctx, `SELECT `+responseKeyCols+`
		FROM response_keys WHERE tenant = $1 AND key = $2`, tenant, key))
	if errors.Is(err, ErrNoRows) {
		return nil, fmt.Errorf("%s: response key %q: %w", db.name, key, ErrNotFound)
	}
	if err != nil {
		return nil, db.read("get response key", err)
	}
	return out, nil
}

// scanResponseKey scans responseKeyCols into an entry of tenant and key.
func scanResponseKey(tenant, key string, row Row) (*ResponseKey, error) {
	out := &ResponseKey{Tenant: tenant, Key: key}
	if err := row.Scan(&out.Digest, &out.ThreadID, ScanTime(&out.CreatedAt), ScanTime(&out.ExpiresAt)); err != nil {
		return nil, err
	}
	return out, nil
}

// SweepResponseKeys deletes the entries expired at now whose thread no
// longer runs.
func (db *DB) SweepResponseKeys(ctx context.Context, now time.Time) (int, error) {
	var n int64
	err := db.d.Write(ctx, "sweep response keys", func(tx Tx) error {
		var err error
		n, err = tx.Exec(ctx, `DELETE FROM response_keys WHERE expires_at <= $1 AND NOT EXISTS (
			SELECT 1 FROM threads WHERE threads.tenant = response_keys.tenant AND threads.id = response_keys.thread_id
				AND threads.status IN ('running', 'queued'))`, now)
		return err
	})
	return int(n), err
}
