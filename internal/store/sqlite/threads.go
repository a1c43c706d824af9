package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/store"
)

const threadCols = `tenant, id, agent, status, run_id, v, state, last_error, lease_owner, lease_until, created_at, updated_at, options, turn_seq, turn_key, turn_digest`

// Hot-path statements (prepared once through the writer's statement cache).
const (
	insMessageSQL = `INSERT INTO messages (tenant, thread_id, seq, v, json) VALUES (?, ?, ?, ?, ?)`
	insEventSQL   = `INSERT INTO events (tenant, thread_id, seq, v, json) VALUES (?, ?, ?, ?, ?)`
	messagesSQL   = `SELECT v, json FROM messages WHERE tenant = ? AND thread_id = ? AND seq > ? ORDER BY seq`
	// checkpointSQL's conditional update proves the run still holds the
	// thread and reserves the sequence numbers of the rows appended after it.
	checkpointSQL = `UPDATE threads SET
			state = coalesce(?1, state),
			lease_until = coalesce(?2, lease_until),
			message_seq = message_seq + ?3,
			event_seq = event_seq + ?4
		WHERE tenant = ?5 AND id = ?6 AND status = 'running' AND run_id = ?7
		RETURNING agent, message_seq, event_seq`
)

type scanner interface{ Scan(dest ...any) error }

// scanThread scans threadCols, then extra.
func scanThread(sc scanner, extra ...any) (*store.Thread, error) {
	var (
		t                       store.Thread
		status                  string
		v                       int
		state, options          []byte
		lease, created, updated sql.NullInt64
	)
	dest := append([]any{&t.Tenant, &t.ID, &t.Agent, &status, &t.RunID, &v, &state,
		&t.LastError, &t.LeaseOwner, &lease, &created, &updated, &options, &t.Turn.Seq, &t.Turn.Key, &t.Turn.Digest}, extra...)
	if err := sc.Scan(dest...); err != nil {
		return nil, err
	}
	if err := store.CheckFormat(v); err != nil {
		return nil, fmt.Errorf("thread %s/%s: %w", t.Tenant, t.ID, err)
	}
	t.Status = store.ThreadStatus(status)
	t.State = json.RawMessage(state)
	t.Options = json.RawMessage(options)
	t.LeaseUntil = fromMicros(lease)
	t.CreatedAt = fromMicros(created)
	t.UpdatedAt = fromMicros(updated)
	return &t, nil
}

// GetThread returns a thread of the tenant, or store.ErrNotFound.
func (s *Store) GetThread(ctx context.Context, tenant, id string) (*store.Thread, error) {
	if err := store.CheckText("get thread", "tenant", tenant, "id", id); err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	t, err := scanThread(s.rc.QueryRowContext(ctx,
		`SELECT `+threadCols+` FROM threads WHERE tenant = ? AND id = ?`, tenant, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlite: get thread %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, mapErr("get thread", err)
	}
	return t, nil
}

// ListThreads lists the tenant's threads, most recently updated first.
func (s *Store) ListThreads(ctx context.Context, tenant string, f store.ThreadFilter) ([]store.Thread, error) {
	if err := f.Validate(tenant); err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	q := strings.Builder{}
	q.WriteString(`SELECT ` + threadCols + ` FROM threads WHERE tenant = ?`)
	args := []any{tenant}
	if f.Agent != "" {
		q.WriteString(` AND agent = ?`)
		args = append(args, f.Agent)
	}
	if f.Status != "" {
		q.WriteString(` AND status = ?`)
		args = append(args, string(f.Status))
	}
	q.WriteString(` ORDER BY updated_at DESC, id DESC LIMIT ?`)
	args = append(args, store.Limit(f.Limit, store.DefaultLimit))
	return s.queryThreads(ctx, "list threads", q.String(), args...)
}

// Stale lists, across tenants, the Queued threads and the Running threads
// whose lease expired before now, least recently updated first.
func (s *Store) Stale(ctx context.Context, now time.Time, limit int) ([]store.Thread, error) {
	return s.queryThreads(ctx, "stale", `SELECT `+threadCols+` FROM threads
		WHERE status = 'queued' OR (status = 'running' AND (lease_until IS NULL OR lease_until < ?))
		ORDER BY updated_at, tenant, id LIMIT ?`,
		now.UnixMicro(), store.Limit(limit, store.DefaultLimit))
}

func (s *Store) queryThreads(ctx context.Context, op, query string, args ...any) ([]store.Thread, error) {
	rows, err := s.rc.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, mapErr(op, err)
	}
	defer rows.Close()
	out, err := store.CollectRows(rows, func(r store.Rows) (*store.Thread, error) { return scanThread(r) })
	if err != nil {
		return nil, mapErr(op, err)
	}
	return out, nil
}

// Messages returns the thread's messages in the order they were appended.
func (s *Store) Messages(ctx context.Context, tenant, threadID string) ([]message.Message, error) {
	if err := store.CheckText("messages", "tenant", tenant, "threadID", threadID); err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	rows, err := s.rc.QueryContext(ctx, messagesSQL, tenant, threadID, 0)
	if err != nil {
		return nil, mapErr("messages", err)
	}
	defer rows.Close()
	out, err := store.ScanMessages(rows)
	if err != nil {
		return nil, mapErr("messages", err)
	}
	if len(out) == 0 {
		if err := s.threadExists(ctx, s.rc, tenant, threadID); err != nil {
			return nil, mapErr("messages", err)
		}
	}
	return out, nil
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// threadExists returns store.ErrNotFound unless the tenant has the thread.
func (s *Store) threadExists(ctx context.Context, q querier, tenant, id string) error {
	var one int
	err := q.QueryRowContext(ctx, `SELECT 1 FROM threads WHERE tenant = ? AND id = ?`, tenant, id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("thread %q: %w", id, store.ErrNotFound)
	}
	return err
}

// leaseLost explains why a run's conditional update matched nothing.
func (s *Store) leaseLost(ctx context.Context, tx *wtx, tenant, id, runID string) error {
	if err := s.threadExists(ctx, tx, tenant, id); err != nil {
		return err
	}
	return fmt.Errorf("run %q on thread %q: %w", runID, id, store.ErrLeaseLost)
}

// BeginRun creates the thread if needed and takes its lease for a new run,
// appending the input messages and events and replacing the state if set;
// it returns the thread's messages after the first b.Known as of the commit.
func (s *Store) BeginRun(ctx context.Context, b store.BeginRun) (*store.Begun, error) {
	msgs, evs, err := b.Encode()
	if err != nil {
		return nil, fmt.Errorf("sqlite: begin run: %w", err)
	}
	if b.Now.IsZero() {
		b.Now = s.now()
	}
	state := store.StateArg(b.State)
	now := b.Now.UnixMicro()

	var (
		th            *store.Thread
		convo         []message.Message
		msgSeq, evSeq int64
	)
	err = s.write(ctx, "begin run", func(tx *wtx) error {
		var (
			agent, status, runID string
			lease                sql.NullInt64
			existed              = true
			row                  *sql.Row
		)
		create := func() *sql.Row {
			newState := state
			if newState == nil {
				newState = store.EmptyState
			}
			return tx.QueryRowContext(ctx, `INSERT INTO threads
				(tenant, id, agent, status, run_id, v, state, lease_owner, lease_until, created_at, updated_at, message_seq, event_seq, options,
				 turn_seq, turn_key, turn_digest)
				VALUES (?, ?, ?, 'running', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?)
				ON CONFLICT (tenant, id) DO NOTHING
				RETURNING `+threadCols+`, message_seq, event_seq`,
				b.Tenant, b.ThreadID, b.Agent, b.RunID, store.FormatVersion, newState, b.Owner, micros(b.LeaseUntil),
				now, now, len(msgs), len(evs), store.OptionsArg(b.Options), b.Turn.Key, b.Turn.Digest)
		}
		if b.New {
			// The caller found no thread: create it in one statement. The
			// writer is the only one, so no thread appears meanwhile from
			// this process; another process's leaves the insert a no-op.
			th, err = scanThread(create(), &msgSeq, &evSeq)
			if err == nil {
				existed = false
			} else if !errors.Is(err, sql.ErrNoRows) {
				return err
			}
		}
		if existed {
			err := tx.QueryRowContext(ctx, `SELECT agent, status, lease_until, run_id FROM threads WHERE tenant = ? AND id = ?`,
				b.Tenant, b.ThreadID).Scan(&agent, &status, &lease, &runID)
			switch {
			case errors.Is(err, sql.ErrNoRows):
				existed = false
				row = create()
			case err != nil:
				return err
			default:
				cur := store.Thread{ID: b.ThreadID, Agent: agent, Status: store.ThreadStatus(status), LeaseUntil: fromMicros(lease), RunID: runID}
				if err := b.Admit(&cur); err != nil {
					return err
				}
				row = tx.QueryRowContext(ctx, `UPDATE threads SET
						status = 'running', run_id = ?, lease_owner = ?, lease_until = ?, updated_at = ?, last_error = '',
						state = coalesce(?, state), v = ?, options = ?,
						message_seq = message_seq + ?, event_seq = event_seq + ?,
						turn_seq = CASE WHEN ?12 THEN turn_seq ELSE event_seq + 1 END,
						turn_key = CASE WHEN ?12 THEN turn_key ELSE ?10 END,
						turn_digest = CASE WHEN ?12 THEN turn_digest ELSE ?11 END
					WHERE tenant = ?13 AND id = ?14
					RETURNING `+threadCols+`, message_seq, event_seq`,
					b.RunID, b.Owner, micros(b.LeaseUntil), now, state, store.FormatVersion, store.OptionsArg(b.Options),
					len(msgs), len(evs), b.Turn.Key, b.Turn.Digest, b.Continue, b.Tenant, b.ThreadID)
			}
			th, err = scanThread(row, &msgSeq, &evSeq)
			if err != nil {
				return err
			}
		}
		if err := s.appendRows(ctx, tx, b.Tenant, b.ThreadID, msgs, msgSeq, evs, evSeq); err != nil {
			return err
		}
		if !existed {
			convo = append([]message.Message(nil), b.Input...)
			return nil
		}
		rows, err := tx.QueryContext(ctx, messagesSQL, b.Tenant, b.ThreadID, b.Known)
		if err != nil {
			return err
		}
		defer rows.Close()
		convo, err = store.ScanMessages(rows)
		return err
	})
	if err != nil {
		return nil, err
	}
	store.StampEvents(b.Events, b.ThreadID, b.RunID, evSeq)
	return &store.Begun{Thread: *th, Messages: convo}, nil
}

// Claim takes a Queued thread, or a Running one whose lease expired before
// c.Now, for a new run.
func (s *Store) Claim(ctx context.Context, c store.Claim) (*store.Thread, error) {
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("sqlite: claim: %w", err)
	}
	if c.Now.IsZero() {
		c.Now = s.now()
	}
	var th *store.Thread
	err := s.write(ctx, "claim", func(tx *wtx) error {
		var err error
		th, err = scanThread(tx.QueryRowContext(ctx, `UPDATE threads SET
				status = 'running', run_id = ?, lease_owner = ?, lease_until = ?, updated_at = ?, last_error = ''
			WHERE tenant = ? AND id = ?
				AND (status = 'queued' OR (status = 'running' AND (lease_until IS NULL OR lease_until < ?)))
			RETURNING `+threadCols,
			c.RunID, c.Owner, micros(c.LeaseUntil), c.Now.UnixMicro(), c.Tenant, c.ThreadID, c.Now.UnixMicro()))
		if errors.Is(err, sql.ErrNoRows) {
			if err := s.threadExists(ctx, tx, c.Tenant, c.ThreadID); err != nil {
				return err
			}
			return fmt.Errorf("thread %q: %w", c.ThreadID, store.ErrNotClaimable)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return th, nil
}

// Checkpoint stores a step boundary of the run in one transaction.
func (s *Store) Checkpoint(ctx context.Context, c store.Checkpoint) error {
	msgs, evs, err := c.Encode()
	if err != nil {
		return fmt.Errorf("sqlite: checkpoint: %w", err)
	}
	ins, err := store.EncodeInterrupts(c, s.now)
	if err != nil {
		return fmt.Errorf("sqlite: checkpoint: %w", err)
	}
	var evSeq int64
	err = s.write(ctx, "checkpoint", func(tx *wtx) error {
		var (
			agent  string
			msgSeq int64
		)
		err := tx.QueryRowContext(ctx, checkpointSQL,
			store.StateArg(c.State), micros(c.LeaseUntil), len(msgs), len(evs), c.Tenant, c.ThreadID, c.RunID,
		).Scan(&agent, &msgSeq, &evSeq)
		if errors.Is(err, sql.ErrNoRows) {
			return s.leaseLost(ctx, tx, c.Tenant, c.ThreadID, c.RunID)
		}
		if err != nil {
			return err
		}
		if err := s.appendRows(ctx, tx, c.Tenant, c.ThreadID, msgs, msgSeq, evs, evSeq); err != nil {
			return err
		}
		if err := markStarts(ctx, tx, c, s.now().UnixMicro()); err != nil {
			return err
		}
		if err := insertInterrupts(ctx, tx, agent, ins); err != nil {
			return err
		}
		if len(s.webhooks) == 0 {
			return nil
		}
		notices, err := store.PendingNotices(agent, ins)
		if err != nil {
			return err
		}
		return s.notify(ctx, tx, notices...)
	})
	if err != nil {
		return err
	}
	store.StampEvents(c.Events, c.ThreadID, c.RunID, evSeq)
	return nil
}

// FinishRun ends the run: the thread takes f.Status (Queued instead of
// Waiting when no decision is pending any more) and its lease is released.
func (s *Store) FinishRun(ctx context.Context, f store.FinishRun) error {
	evs, err := f.Encode()
	if err != nil {
		return fmt.Errorf("sqlite: finish run: %w", err)
	}
	if f.Now.IsZero() {
		f.Now = s.now()
	}
	var evSeq int64
	err = s.write(ctx, "finish run", func(tx *wtx) error {
		// A decision can land between the checkpoint that stored the
		// interrupts and this call, while the thread is still Running; then
		// nothing is left to wait for and the resume is due at once.
		var agent string
		err := tx.QueryRowContext(ctx, `UPDATE threads SET
				status = CASE WHEN ?1 = 'waiting' AND NOT EXISTS (
						SELECT 1 FROM interrupts WHERE tenant = ?5 AND thread_id = ?6 AND status = 'pending')
					THEN 'queued' ELSE ?1 END,
				last_error = ?2, lease_owner = '', lease_until = NULL, updated_at = ?3,
				event_seq = event_seq + ?4
			WHERE tenant = ?5 AND id = ?6 AND status = 'running' AND run_id = ?7
			RETURNING event_seq, agent`,
			string(f.Status), store.CleanText(f.Error), f.Now.UnixMicro(), len(evs), f.Tenant, f.ThreadID, f.RunID,
		).Scan(&evSeq, &agent)
		if errors.Is(err, sql.ErrNoRows) {
			return s.leaseLost(ctx, tx, f.Tenant, f.ThreadID, f.RunID)
		}
		if err != nil {
			return err
		}
		if err := s.appendRows(ctx, tx, f.Tenant, f.ThreadID, nil, 0, evs, evSeq); err != nil {
			return err
		}
		if len(s.webhooks) == 0 {
			return nil
		}
		n, ok, err := store.RunNotice(f.Tenant, agent, f.ThreadID, f.RunID, f.Status, store.CleanText(f.Error), f.Now)
		if !ok {
			return err
		}
		return s.notify(ctx, tx, n)
	})
	if err != nil {
		return err
	}
	store.StampEvents(f.Events, f.ThreadID, f.RunID, evSeq)
	return nil
}

// appendRows inserts msgs and evs, whose last sequence numbers are lastMsg
// and lastEv (the thread's counters after the reservation).
func (s *Store) appendRows(ctx context.Context, tx *wtx, tenant, threadID string,
	msgs []string, lastMsg int64, evs []string, lastEv int64,
) error {
	if len(msgs) > 0 {
		first := lastMsg - int64(len(msgs)) + 1
		for i, m := range msgs {
			if _, err := tx.ExecContext(ctx, insMessageSQL, tenant, threadID, first+int64(i), store.FormatVersion, m); err != nil {
				return err
			}
		}
	}
	if len(evs) > 0 {
		first := lastEv - int64(len(evs)) + 1
		for i, e := range evs {
			if _, err := tx.ExecContext(ctx, insEventSQL, tenant, threadID, first+int64(i), store.FormatVersion, e); err != nil {
				return err
			}
		}
	}
	return nil
}

// ReleaseRun gives up the run's lease without ending it: the thread stays
// running with no lease, so Stale lists it and Claim takes it at once.
func (s *Store) ReleaseRun(ctx context.Context, r store.ReleaseRun) error {
	if err := store.CheckText("release run", "tenant", r.Tenant, "threadID", r.ThreadID, "runID", r.RunID); err != nil {
		return fmt.Errorf("sqlite: %w", err)
	}
	if r.Now.IsZero() {
		r.Now = s.now()
	}
	return s.write(ctx, "release run", func(tx *wtx) error {
		res, err := tx.ExecContext(ctx, `UPDATE threads SET lease_owner = '', lease_until = NULL, updated_at = ?
			WHERE tenant = ? AND id = ? AND status = 'running' AND run_id = ?`,
			r.Now.UnixMicro(), r.Tenant, r.ThreadID, r.RunID)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			if err != nil {
				return err
			}
			return s.leaseLost(ctx, tx, r.Tenant, r.ThreadID, r.RunID)
		}
		return nil
	})
}
