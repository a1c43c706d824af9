package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// QueuedTurn is a turn that waits for its thread's running turn to end (the
// multitask strategy "enqueue"): the thread's next turns run its queue in
// order, each once, whichever replica starts it (BeginRun.Dequeue).
type QueuedTurn struct {
	Tenant   string
	ThreadID string
	// Seq orders a thread's queue (the store sets it on Enqueue).
	Seq int64
	// ID is the run id the queued turn runs under.
	ID string
	// Turn identifies the request that queued it (its Key and Digest), so
	// a retry of that request finds it (Enqueue) and its turn is recorded
	// as the thread's last when it starts.
	Turn Turn
	// Input is the queued turn's input, a JSON record the engine wrote.
	Input     json.RawMessage
	CreatedAt time.Time
}

// MaxQueue bounds how many turns one thread's queue holds: a follow-up
// beyond it is refused as the thread being busy.
const MaxQueue = 100

// ErrDequeued refuses a BeginRun.Dequeue whose queued turn is no longer in
// its thread's queue: another runner started it, or it was removed.
var ErrDequeued = errors.New("the queued turn was started or removed")

// QueueStore is the turn queue part of Store (QueuedTurn).
type QueueStore interface {
	// Enqueue appends q to its thread's queue, numbering it after the
	// last, in one transaction that locks the thread (ErrNotFound for an
	// unknown or foreign thread). A queued turn of the thread with q's
	// Turn.Key (when set), else with its Turn.Digest (when set), is
	// returned instead with false: a retry of the request that queued it.
	// A full queue (MaxQueue) is a *RunInProgressError.
	Enqueue(ctx context.Context, q QueuedTurn) (*QueuedTurn, bool, error)
	// Queue lists a thread's queued turns in order (none for an unknown
	// thread).
	Queue(ctx context.Context, tenant, threadID string) ([]QueuedTurn, error)
	// QueuedTurn returns the tenant's queued turn of the given id (its
	// thread's queue is found by it): ErrNotFound when none is queued.
	QueuedTurn(ctx context.Context, tenant, id string) (*QueuedTurn, error)
	// Unqueue removes a queued turn by its id and reports whether it was
	// queued.
	Unqueue(ctx context.Context, tenant, threadID, id string) (bool, error)
	// Backlogged lists threads, of every tenant, that no run holds or
	// waits on (idle or failed) while their queue holds a turn: a runner
	// that died between a turn's end and the start of the next left it.
	Backlogged(ctx context.Context, limit int) ([]Thread, error)
}

var _ QueueStore = (*DB)(nil)

// Enqueue appends q to its thread's queue (QueueStore.Enqueue).
func (db *DB) Enqueue(ctx context.Context, q QueuedTurn) (*QueuedTurn, bool, error) {
	if err := CheckText("enqueue", "tenant", q.Tenant, "threadID", q.ThreadID, "id", q.ID,
		"key", q.Turn.Key, "digest", q.Turn.Digest); err != nil {
		return nil, false, db.invalid(err)
	}
	if q.ID == "" {
		return nil, false, db.invalid(fmt.Errorf("%w: enqueue: ID is required", ErrInvalid))
	}
	if err := checkJSONText("enqueue", "Input", q.Input); err != nil || !json.Valid(q.Input) {
		return nil, false, db.invalid(fmt.Errorf("%w: enqueue: Input must be a JSON value", ErrInvalid))
	}
	if q.CreatedAt.IsZero() {
		q.CreatedAt = db.now()
	}
	var (
		out   QueuedTurn
		added bool
	)
	err := db.d.Write(ctx, "enqueue", func(tx Tx) error {
		var one int
		err := tx.QueryRow(ctx, `SELECT 1 FROM threads WHERE tenant = $1 AND id = $2 FOR UPDATE`, q.Tenant, q.ThreadID).Scan(&one)
		if errors.Is(err, ErrNoRows) {
			return fmt.Errorf("thread %q: %w", q.ThreadID, ErrNotFound)
		}
		if err != nil {
			return err
		}
		if q.Turn.Key != "" || q.Turn.Digest != "" {
			rows, err := tx.Query(ctx, `SELECT `+queuedCols+` FROM turn_queue WHERE tenant = $1 AND thread_id = $2
				AND (($3 <> '' AND turn_key = $3) OR ($3 = '' AND $4 <> '' AND turn_key = '' AND turn_digest = $4))
				ORDER BY seq LIMIT 1`, q.Tenant, q.ThreadID, q.Turn.Key, q.Turn.Digest)
			if err != nil {
				return err
			}
			found, err := CollectRows(rows, scanQueued)
			rows.Close()
			if err != nil {
				return err
			}
			if len(found) > 0 {
				out = found[0]
				return nil
			}
		}
		var n, last int64
		if err := tx.QueryRow(ctx, `SELECT count(*), coalesce(max(seq), 0) FROM turn_queue WHERE tenant = $1 AND thread_id = $2`,
			q.Tenant, q.ThreadID).Scan(&n, &last); err != nil {
			return err
		}
		if n >= MaxQueue {
			return &RunInProgressError{ThreadID: q.ThreadID, Why: fmt.Sprintf("its queue holds %d messages already: ", n)}
		}
		q.Seq = last + 1
		tx.Queue(`INSERT INTO turn_queue (tenant, thread_id, seq, id, turn_key, turn_digest, v, json, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8::json, $9)`,
			q.Tenant, q.ThreadID, q.Seq, q.ID, q.Turn.Key, q.Turn.Digest, FormatVersion, string(q.Input), q.CreatedAt)
		out, added = q, true
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return &out, added, nil
}

// queuedCols are the turn_queue columns scanQueued reads.
const queuedCols = `tenant, thread_id, seq, id, turn_key, turn_digest, v, json::text, created_at`

func scanQueued(r Rows) (*QueuedTurn, error) {
	var (
		q   QueuedTurn
		v   int
		raw string
	)
	if err := r.Scan(&q.Tenant, &q.ThreadID, &q.Seq, &q.ID, &q.Turn.Key, &q.Turn.Digest, &v, &raw, ScanTime(&q.CreatedAt)); err != nil {
		return nil, err
	}
	if v != FormatVersion {
		return nil, fmt.Errorf("queued turn %q: %w: format version %d", q.ID, ErrInvalid, v)
	}
	q.Input = json.RawMessage(raw)
	return &q, nil
}

// Queue lists a thread's queued turns in order (QueueStore.Queue).
func (db *DB) Queue(ctx context.Context, tenant, threadID string) ([]QueuedTurn, error) {
	if err := CheckText("queue", "tenant", tenant, "threadID", threadID); err != nil {
		return nil, db.invalid(err)
	}
	rows, err := db.d.Read().Query(ctx, `SELECT `+queuedCols+` FROM turn_queue
		WHERE tenant = $1 AND thread_id = $2 ORDER BY seq`, tenant, threadID)
	if err != nil {
		return nil, db.read("queue", err)
	}
	defer rows.Close()
	found, err := CollectRows(rows, scanQueued)
	if err != nil {
		return nil, db.read("queue", err)
	}
	return found, nil
}

// QueuedTurn returns a queued turn by its id (QueueStore.QueuedTurn).
func (db *DB) QueuedTurn(ctx context.Context, tenant, id string) (*QueuedTurn, error) {
	if err := CheckText("queued turn", "tenant", tenant, "id", id); err != nil {
		return nil, db.invalid(err)
	}
	rows, err := db.d.Read().Query(ctx, `SELECT `+queuedCols+` FROM turn_queue WHERE tenant = $1 AND id = $2 ORDER BY seq LIMIT 1`, tenant, id)
	if err != nil {
		return nil, db.read("queued turn", err)
	}
	defer rows.Close()
	found, err := CollectRows(rows, scanQueued)
	if err != nil {
		return nil, db.read("queued turn", err)
	}
	if len(found) == 0 {
		return nil, fmt.Errorf("queued turn %q: %w", id, ErrNotFound)
	}
	return &found[0], nil
}

// Unqueue removes a queued turn (QueueStore.Unqueue).
func (db *DB) Unqueue(ctx context.Context, tenant, threadID, id string) (bool, error) {
	if err := CheckText("unqueue", "tenant", tenant, "threadID", threadID, "id", id); err != nil {
		return false, db.invalid(err)
	}
	var n int64
	err := db.d.Write(ctx, "unqueue", func(tx Tx) error {
		var err error
		n, err = tx.Exec(ctx, `DELETE FROM turn_queue WHERE tenant = $1 AND thread_id = $2 AND id = $3`, tenant, threadID, id)
		return err
	})
	return n > 0, err
}

// Backlogged lists idle or failed threads with queued turns
// (QueueStore.Backlogged), the longest unchanged first.
func (db *DB) Backlogged(ctx context.Context, limit int) ([]Thread, error) {
	return db.queryThreads(ctx, "backlogged", `SELECT `+threadCols+` FROM threads
		WHERE status IN ('idle', 'failed') AND EXISTS (
			SELECT 1 FROM turn_queue q WHERE q.tenant = threads.tenant AND q.thread_id = threads.id)
		ORDER BY updated_at, tenant, id LIMIT $1`, Limit(limit, DefaultLimit))
}

// dequeue deletes, in BeginRun's transaction (the thread locked), the
// queued turn a run begins: ErrDequeued when it is not queued.
func dequeue(ctx context.Context, tx Tx, b BeginRun) error {
	if b.Dequeue == "" {
		return nil
	}
	n, err := tx.Exec(ctx, `DELETE FROM turn_queue WHERE tenant = $1 AND thread_id = $2 AND id = $3`, b.Tenant, b.ThreadID, b.Dequeue)
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("queued turn %q of thread %q: %w", b.Dequeue, b.ThreadID, ErrDequeued)
	}
	return nil
}
