package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/store"
)

const threadCols = `tenant, id, agent, status, run_id, v, state, last_error, lease_owner, lease_until, created_at, updated_at, options, turn_seq, turn_key, turn_digest`

// messagesSQL reads a thread's messages after the first $3, in order.
const messagesSQL = `SELECT v, json FROM messages WHERE tenant = $1 AND thread_id = $2 AND seq > $3 ORDER BY seq`

// scanThread scans threadCols, then extra.
func scanThread(row pgx.Row, extra ...any) (*store.Thread, error) {
	var (
		t                store.Thread
		status           string
		v                int
		state, options   []byte
		lease            *time.Time
		created, updated time.Time
	)
	dest := append([]any{&t.Tenant, &t.ID, &t.Agent, &status, &t.RunID, &v, &state,
		&t.LastError, &t.LeaseOwner, &lease, &created, &updated, &options, &t.Turn.Seq, &t.Turn.Key, &t.Turn.Digest}, extra...)
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	if err := store.CheckFormat(v); err != nil {
		return nil, fmt.Errorf("thread %s/%s: %w", t.Tenant, t.ID, err)
	}
	t.Status = store.ThreadStatus(status)
	t.State = json.RawMessage(state)
	t.Options = json.RawMessage(options)
	t.LeaseUntil = utc(lease)
	t.CreatedAt = created.UTC()
	t.UpdatedAt = updated.UTC()
	return &t, nil
}

// GetThread returns a thread of the tenant, or store.ErrNotFound.
func (s *Store) GetThread(ctx context.Context, tenant, id string) (*store.Thread, error) {
	if err := store.CheckText("get thread", "tenant", tenant, "id", id); err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	t, err := scanThread(s.pool.QueryRow(ctx,
		`SELECT `+threadCols+` FROM threads WHERE tenant = $1 AND id = $2`, tenant, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("postgres: get thread %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, mapErr("get thread", err)
	}
	return t, nil
}

// ListThreads lists the tenant's threads, most recently updated first.
func (s *Store) ListThreads(ctx context.Context, tenant string, f store.ThreadFilter) ([]store.Thread, error) {
	if err := f.Validate(tenant); err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	q := strings.Builder{}
	q.WriteString(`SELECT ` + threadCols + ` FROM threads WHERE tenant = $1`)
	args := []any{tenant}
	if f.Agent != "" {
		args = append(args, f.Agent)
		q.WriteString(` AND agent = $` + strconv.Itoa(len(args)))
	}
	if f.Status != "" {
		args = append(args, string(f.Status))
		q.WriteString(` AND status = $` + strconv.Itoa(len(args)))
	}
	args = append(args, store.Limit(f.Limit, store.DefaultLimit))
	q.WriteString(` ORDER BY updated_at DESC, id DESC LIMIT $` + strconv.Itoa(len(args)))
	return s.queryThreads(ctx, "list threads", q.String(), args...)
}

// Stale lists, across tenants, the Queued threads and the Running threads
// whose lease expired before now, least recently updated first.
func (s *Store) Stale(ctx context.Context, now time.Time, limit int) ([]store.Thread, error) {
	return s.queryThreads(ctx, "stale", `SELECT `+threadCols+` FROM threads
		WHERE status IN ('queued', 'running')
			AND (status = 'queued' OR lease_until IS NULL OR lease_until < $1)
		ORDER BY updated_at, tenant, id LIMIT $2`,
		now, store.Limit(limit, store.DefaultLimit))
}

func (s *Store) queryThreads(ctx context.Context, op, query string, args ...any) ([]store.Thread, error) {
	rows, err := s.pool.Query(ctx, query, args...)
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
		return nil, fmt.Errorf("postgres: %w", err)
	}
	rows, err := s.pool.Query(ctx, messagesSQL, tenant, threadID, 0)
	if err != nil {
		return nil, mapErr("messages", err)
	}
	defer rows.Close()
	out, err := store.ScanMessages(rows)
	if err != nil {
		return nil, mapErr("messages", err)
	}
	if len(out) == 0 {
		if err := s.threadExists(ctx, s.pool, tenant, threadID); err != nil {
			return nil, mapErr("messages", err)
		}
	}
	return out, nil
}

// querier is a pool or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// threadExists returns store.ErrNotFound unless the tenant has the thread.
func (s *Store) threadExists(ctx context.Context, q querier, tenant, id string) error {
	var one int
	err := q.QueryRow(ctx, `SELECT 1 FROM threads WHERE tenant = $1 AND id = $2`, tenant, id).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("thread %q: %w", id, store.ErrNotFound)
	}
	return err
}

// leaseLost explains why a run's conditional update matched nothing.
func (s *Store) leaseLost(ctx context.Context, q querier, tenant, id, runID string) error {
	if err := s.threadExists(ctx, q, tenant, id); err != nil {
		return err
	}
	return fmt.Errorf("run %q on thread %q: %w", runID, id, store.ErrLeaseLost)
}

// BeginRun creates the thread if needed and takes its lease for a new run,
// appending the input messages and events and replacing the state if set;
// it returns the thread's messages after the first b.Known as of the commit.
func (s *Store) BeginRun(ctx context.Context, b store.BeginRun) (_ *store.Begun, err error) {
	defer func() { s.noteWrite(ctx, err) }()
	msgs, evs, err := b.Encode()
	if err != nil {
		return nil, fmt.Errorf("postgres: begin run: %w", err)
	}
	if b.Now.IsZero() {
		b.Now = s.now()
	}
	state := store.StateArg(b.State)

	if b.New {
		th, created, err := s.beginNew(ctx, b, state, msgs, evs)
		if err != nil {
			return nil, mapErr("begin run", err)
		}
		if created {
			store.StampEvents(b.Events, b.ThreadID, b.RunID, int64(len(evs)))
			return &store.Begun{Thread: *th, Messages: append([]message.Message(nil), b.Input...)}, nil
		}
	}
	var (
		th            *store.Thread
		convo         []message.Message
		msgSeq, evSeq int64
	)
	err = s.tx(ctx, "begin run", func(tx pgx.Tx) error {
		existed := false
		// A concurrent creator of the same thread makes this insert wait for
		// its commit, then do nothing.
		th, err = scanThread(tx.QueryRow(ctx, `INSERT INTO threads
				(tenant, id, agent, status, run_id, v, state, lease_owner, lease_until, created_at, updated_at, message_seq, event_seq, options,
				 turn_seq, turn_key, turn_digest)
			VALUES ($1, $2, $3, 'running', $4, $5, coalesce($6::json, '{}'), $7, $8, $9, $9, $10, $11, $12::json, 1, $13, $14)
			ON CONFLICT (tenant, id) DO NOTHING
			RETURNING `+threadCols+`, message_seq, event_seq`,
			b.Tenant, b.ThreadID, b.Agent, b.RunID, store.FormatVersion, state, b.Owner, b.LeaseUntil, b.Now,
			len(msgs), len(evs), store.OptionsArg(b.Options), b.Turn.Key, b.Turn.Digest), &msgSeq, &evSeq)
		if errors.Is(err, pgx.ErrNoRows) {
			existed = true
			th, err = s.retakeThread(ctx, tx, b, state, len(msgs), len(evs), &msgSeq, &evSeq)
		}
		if err != nil {
			return err
		}
		if err := appendRows(ctx, tx, b.Tenant, b.ThreadID, msgs, msgSeq, evs, evSeq); err != nil {
			return err
		}
		if !existed {
			convo = append([]message.Message(nil), b.Input...)
			return nil
		}
		rows, err := tx.Query(ctx, messagesSQL, b.Tenant, b.ThreadID, b.Known)
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

// retakeThread starts a run on an existing thread, locked first.
// beginNew creates the thread of b with its input and events in one round
// trip: a pipelined batch, which PostgreSQL runs as one implicit
// transaction. The rows are appended only when the insert created the
// thread for b.RunID; created is false when the thread existed (another
// creator was first), and nothing was written.
func (s *Store) beginNew(ctx context.Context, b store.BeginRun, state any, msgs, evs []string) (*store.Thread, bool, error) {
	batch := &pgx.Batch{}
	batch.Queue(`INSERT INTO threads
			(tenant, id, agent, status, run_id, v, state, lease_owner, lease_until, created_at, updated_at, message_seq, event_seq, options,
			 turn_seq, turn_key, turn_digest)
		VALUES ($1, $2, $3, 'running', $4, $5, coalesce($6::json, '{}'), $7, $8, $9, $9, $10, $11, $12::json, 1, $13, $14)
		ON CONFLICT (tenant, id) DO NOTHING
		RETURNING `+threadCols,
		b.Tenant, b.ThreadID, b.Agent, b.RunID, store.FormatVersion, state, b.Owner, b.LeaseUntil, b.Now,
		len(msgs), len(evs), store.OptionsArg(b.Options), b.Turn.Key, b.Turn.Digest)
	batch.Queue(`WITH ok AS (
			SELECT 1 FROM threads WHERE tenant = $1 AND id = $2 AND run_id = $3
		), m AS (
			INSERT INTO messages (tenant, thread_id, seq, v, json)
			SELECT $1::text, $2::text, x.n, $6::integer, x.j::json
			FROM ok, unnest($4::text[]) WITH ORDINALITY AS x(j, n)
		)
		INSERT INTO events (tenant, thread_id, seq, v, json)
		SELECT $1::text, $2::text, x.n, $6::integer, x.j::json
		FROM ok, unnest($5::text[]) WITH ORDINALITY AS x(j, n)`,
		b.Tenant, b.ThreadID, b.RunID, nonNil(msgs), nonNil(evs), store.FormatVersion)
	res := s.pool.SendBatch(ctx, batch)
	th, err := scanThread(res.QueryRow())
	created := err == nil
	if errors.Is(err, pgx.ErrNoRows) {
		err = nil
	}
	if err == nil {
		_, err = res.Exec()
	}
	if cerr := res.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, false, err
	}
	return th, created, nil
}

func (s *Store) retakeThread(ctx context.Context, tx pgx.Tx, b store.BeginRun, state any, nMsgs, nEvs int,
	msgSeq, evSeq *int64,
) (*store.Thread, error) {
	cur := store.Thread{ID: b.ThreadID}
	var (
		status string
		lease  *time.Time
	)
	err := tx.QueryRow(ctx, `SELECT agent, status, lease_until, run_id FROM threads
		WHERE tenant = $1 AND id = $2 FOR UPDATE`, b.Tenant, b.ThreadID).Scan(&cur.Agent, &status, &lease, &cur.RunID)
	if err != nil {
		return nil, err
	}
	cur.Status = store.ThreadStatus(status)
	if lease != nil {
		cur.LeaseUntil = *lease
	}
	if err := b.Admit(&cur); err != nil {
		return nil, err
	}
	return scanThread(tx.QueryRow(ctx, `UPDATE threads SET
			status = 'running', run_id = $3, lease_owner = $4, lease_until = $5, updated_at = $6, last_error = '',
			state = coalesce($7::json, state), v = $8,
			message_seq = message_seq + $9, event_seq = event_seq + $10, options = $11::json,
			turn_seq = CASE WHEN $14 THEN turn_seq ELSE event_seq + 1 END,
			turn_key = CASE WHEN $14 THEN turn_key ELSE $12 END,
			turn_digest = CASE WHEN $14 THEN turn_digest ELSE $13 END
		WHERE tenant = $1 AND id = $2
		RETURNING `+threadCols+`, message_seq, event_seq`,
		b.Tenant, b.ThreadID, b.RunID, b.Owner, b.LeaseUntil, b.Now, state, store.FormatVersion, nMsgs, nEvs, store.OptionsArg(b.Options),
		b.Turn.Key, b.Turn.Digest, b.Continue),
		msgSeq, evSeq)
}

// Claim takes a Queued thread, or a Running one whose lease expired before
// c.Now, for a new run, with one conditional update.
func (s *Store) Claim(ctx context.Context, c store.Claim) (_ *store.Thread, err error) {
	defer func() { s.noteWrite(ctx, err) }()
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("postgres: claim: %w", err)
	}
	if c.Now.IsZero() {
		c.Now = s.now()
	}
	th, err := scanThread(s.pool.QueryRow(ctx, `UPDATE threads SET
			status = 'running', run_id = $3, lease_owner = $4, lease_until = $5, updated_at = $6, last_error = ''
		WHERE tenant = $1 AND id = $2
			AND (status = 'queued' OR (status = 'running' AND (lease_until IS NULL OR lease_until < $6)))
		RETURNING `+threadCols,
		c.Tenant, c.ThreadID, c.RunID, c.Owner, c.LeaseUntil, c.Now))
	if errors.Is(err, pgx.ErrNoRows) {
		if err := s.threadExists(ctx, s.pool, c.Tenant, c.ThreadID); err != nil {
			return nil, mapErr("claim", err)
		}
		return nil, fmt.Errorf("postgres: claim: thread %q: %w", c.ThreadID, store.ErrNotClaimable)
	}
	if err != nil {
		return nil, mapErr("claim", err)
	}
	return th, nil
}

// checkpointSQL is a whole checkpoint in one statement: the conditional
// update proves the run still holds the thread and reserves the sequence
// numbers of the rows the other parts append; when it matches nothing, they
// append nothing.
const checkpointSQL = `WITH t AS (
	UPDATE threads SET
		state = coalesce($4::json, state),
		lease_until = coalesce($5::timestamptz, lease_until),
		message_seq = message_seq + cardinality($7::text[]),
		event_seq = event_seq + cardinality($8::text[])
	WHERE tenant = $1 AND id = $2 AND status = 'running' AND run_id = $3
	RETURNING agent, message_seq, event_seq
), m AS (
	INSERT INTO messages (tenant, thread_id, seq, v, json)
	SELECT $1::text, $2::text, t.message_seq - cardinality($7::text[]) + x.n, $6::integer, x.j::json
	FROM t, unnest($7::text[]) WITH ORDINALITY AS x(j, n)
), e AS (
	INSERT INTO events (tenant, thread_id, seq, v, json)
	SELECT $1::text, $2::text, t.event_seq - cardinality($8::text[]) + x.n, $6::integer, x.j::json
	FROM t, unnest($8::text[]) WITH ORDINALITY AS x(j, n)
), i AS (
	INSERT INTO interrupts (` + interruptCols + `)
	SELECT x.id, $1::text, $2::text, x.run_id, coalesce(nullif(x.agent, ''), t.agent), x.call, x.tool, $6::integer, x.args::json,
		nullif(x.descr, ''), x.allowed::json, nullif(x.rschema, '')::json, x.subagent, 'pending', x.created, NULL, x.reason,
		nullif(x.expires, '')::timestamptz, x.needed, '[]'::json
	FROM t, unnest($9::text[], $10::text[], $11::text[], $12::text[], $13::text[], $14::text[], $15::text[],
		$16::text[], $17::text[], $18::text[], $19::timestamptz[], $20::text[], $24::text[], $25::integer[])
		AS x(id, run_id, agent, call, tool, args, descr, allowed, rschema, subagent, created, reason, expires, needed)
), u AS (
	DELETE FROM tool_starts ts USING t
	WHERE ts.tenant = $1 AND ts.thread_id = $2 AND ts.tool_call_id = ANY($21::text[])
), st AS (
	INSERT INTO tool_starts (tenant, thread_id, tool_call_id, run_id, started_at)
	SELECT $1::text, $2::text, x, $3::text, $23::timestamptz FROM t, unnest($22::text[]) AS x
	ON CONFLICT (tenant, thread_id, tool_call_id) DO UPDATE SET run_id = excluded.run_id, started_at = excluded.started_at
)
SELECT event_seq, agent FROM t`

// Checkpoint stores a step boundary of the run in one statement.
func (s *Store) Checkpoint(ctx context.Context, c store.Checkpoint) (err error) {
	defer func() { s.noteWrite(ctx, err) }()
	msgs, evs, err := c.Encode()
	if err != nil {
		return fmt.Errorf("postgres: checkpoint: %w", err)
	}
	ins, err := encodeInterrupts(c, s.now)
	if err != nil {
		return fmt.Errorf("postgres: checkpoint: %w", err)
	}
	args := append([]any{c.Tenant, c.ThreadID, c.RunID, store.StateArg(c.State), timeArg(c.LeaseUntil), store.FormatVersion,
		nonNil(msgs), nonNil(evs)}, ins.params()...)
	args = append(args, nonNil(c.Unmarked()), nonNil(c.Started), s.now(), nonNil(ins.expires), nonNilInts(ins.needed))
	var evSeq int64
	// run stores the checkpoint through q; notices are written when new
	// pending decisions have webhook notices to join its transaction.
	run := func(q querier, notify func(agent string) error) error {
		var agent string
		err := q.QueryRow(ctx, checkpointSQL, args...).Scan(&evSeq, &agent)
		if errors.Is(err, pgx.ErrNoRows) {
			return s.leaseLost(ctx, q, c.Tenant, c.ThreadID, c.RunID)
		}
		if err != nil || notify == nil {
			return err
		}
		return notify(agent)
	}
	if len(s.webhooks) > 0 && len(ins.encoded) > 0 {
		err = s.tx(ctx, "checkpoint", func(tx pgx.Tx) error {
			return run(tx, func(agent string) error {
				notices, err := store.PendingNotices(agent, ins.encoded)
				if err != nil {
					return err
				}
				return s.notify(ctx, tx, notices...)
			})
		})
	} else {
		err = mapErr("checkpoint", run(s.pool, nil))
	}
	if err != nil {
		return err
	}
	store.StampEvents(c.Events, c.ThreadID, c.RunID, evSeq)
	return nil
}

// finishRunSQL ends a run (its WHERE is completed by the caller), then
// finishRunEventsSQL appends its events; $1 tenant, $2 thread, $3 status,
// $4 error, $5 now, $6 format version, $7 events.
const (
	finishRunSQL = `WITH t AS (
				UPDATE threads SET
					status = CASE WHEN $3::text = 'waiting' AND NOT EXISTS (
							SELECT 1 FROM interrupts WHERE tenant = $1 AND thread_id = $2 AND status = 'pending')
						THEN 'queued' ELSE $3 END,
					last_error = $4, lease_owner = '', lease_until = NULL, updated_at = $5,
					event_seq = event_seq + cardinality($7::text[])
				WHERE tenant = $1 AND id = $2`
	finishRunEventsSQL = `
				INSERT INTO events (tenant, thread_id, seq, v, json)
				SELECT $1::text, $2::text, t.event_seq - cardinality($7::text[]) + x.n, $6::integer, x.j::json
				FROM t, unnest($7::text[]) WITH ORDINALITY AS x(j, n)
			)
			SELECT event_seq FROM t`
)

// FinishRun ends the run: the thread takes f.Status (Queued instead of
// Waiting when no decision is pending any more) and its lease is released.
func (s *Store) FinishRun(ctx context.Context, f store.FinishRun) (err error) {
	defer func() { s.noteWrite(ctx, err) }()
	evs, err := f.Encode()
	if err != nil {
		return fmt.Errorf("postgres: finish run: %w", err)
	}
	if f.Now.IsZero() {
		f.Now = s.now()
	}
	var evSeq int64
	if len(s.webhooks) == 0 {
		// One round trip: the lock and the update as one pipelined batch,
		// which PostgreSQL runs as one implicit transaction. The lock comes
		// first for the reason below; the update checks the run again, so
		// a run that lost the thread updates nothing.
		b := &pgx.Batch{}
		b.Queue(`SELECT 1 FROM threads WHERE tenant = $1 AND id = $2 AND status = 'running' AND run_id = $3 FOR UPDATE`,
			f.Tenant, f.ThreadID, f.RunID)
		b.Queue(finishRunSQL+` AND status = 'running' AND run_id = $8
				RETURNING event_seq
			), e AS (`+finishRunEventsSQL,
			f.Tenant, f.ThreadID, string(f.Status), store.CleanText(f.Error), f.Now, store.FormatVersion, nonNil(evs), f.RunID)
		res := s.pool.SendBatch(ctx, b)
		_, err := res.Exec()
		if err == nil {
			err = res.QueryRow().Scan(&evSeq)
		}
		if cerr := res.Close(); err == nil {
			err = cerr
		}
		if errors.Is(err, pgx.ErrNoRows) {
			return mapErr("finish run", s.leaseLost(ctx, s.pool, f.Tenant, f.ThreadID, f.RunID))
		}
		if err != nil {
			return mapErr("finish run", err)
		}
		store.StampEvents(f.Events, f.ThreadID, f.RunID, evSeq)
		return nil
	}
	err = s.tx(ctx, "finish run", func(tx pgx.Tx) error {
		// Lock the thread first, so the update below reads the interrupts
		// after any decision that took the lock before us: a decision can
		// land between the checkpoint that stored the interrupts and this
		// call, while the thread is still Running; then nothing is left to
		// wait for and the resume is due at once.
		var agent string
		err := tx.QueryRow(ctx, `SELECT agent FROM threads
			WHERE tenant = $1 AND id = $2 AND status = 'running' AND run_id = $3 FOR UPDATE`,
			f.Tenant, f.ThreadID, f.RunID).Scan(&agent)
		if errors.Is(err, pgx.ErrNoRows) {
			return s.leaseLost(ctx, tx, f.Tenant, f.ThreadID, f.RunID)
		}
		if err != nil {
			return err
		}
		err = tx.QueryRow(ctx, finishRunSQL+`
				RETURNING event_seq
			), e AS (`+finishRunEventsSQL,
			f.Tenant, f.ThreadID, string(f.Status), store.CleanText(f.Error), f.Now, store.FormatVersion, nonNil(evs),
		).Scan(&evSeq)
		if err != nil {
			return err
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
func appendRows(ctx context.Context, tx pgx.Tx, tenant, threadID string,
	msgs []string, lastMsg int64, evs []string, lastEv int64,
) error {
	if len(msgs) == 0 && len(evs) == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, `WITH m AS (
			INSERT INTO messages (tenant, thread_id, seq, v, json)
			SELECT $1::text, $2::text, $3::bigint - cardinality($5::text[]) + x.n, $7::integer, x.j::json
			FROM unnest($5::text[]) WITH ORDINALITY AS x(j, n)
		)
		INSERT INTO events (tenant, thread_id, seq, v, json)
		SELECT $1::text, $2::text, $4::bigint - cardinality($6::text[]) + x.n, $7::integer, x.j::json
		FROM unnest($6::text[]) WITH ORDINALITY AS x(j, n)`,
		tenant, threadID, lastMsg, lastEv, nonNil(msgs), nonNil(evs), store.FormatVersion)
	return err
}

// nonNil binds an empty array rather than NULL.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// ReleaseRun gives up the run's lease without ending it: the thread stays
// running with no lease, so Stale lists it and Claim takes it at once.
func (s *Store) ReleaseRun(ctx context.Context, r store.ReleaseRun) (err error) {
	defer func() { s.noteWrite(ctx, err) }()
	if err := store.CheckText("release run", "tenant", r.Tenant, "threadID", r.ThreadID, "runID", r.RunID); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	if r.Now.IsZero() {
		r.Now = s.now()
	}
	return s.tx(ctx, "release run", func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE threads SET lease_owner = '', lease_until = NULL, updated_at = $1
			WHERE tenant = $2 AND id = $3 AND status = 'running' AND run_id = $4`,
			r.Now, r.Tenant, r.ThreadID, r.RunID)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return s.leaseLost(ctx, tx, r.Tenant, r.ThreadID, r.RunID)
		}
		return nil
	})
}

func nonNilInts(v []int32) []int32 {
	if v == nil {
		return []int32{}
	}
	return v
}
