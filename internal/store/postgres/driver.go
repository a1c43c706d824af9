package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stackbone/stackbone/internal/store"
)

// The store.Driver of the database. A write transaction is pipelined: the
// statements it queues (store.Tx.Queue) go out with the next statement whose
// result it reads, BEGIN with the first, COMMIT with the last queued ones, so
// a transaction costs a round trip per result it waits for, plus the commit.

var _ store.Driver = (*Store)(nil)

// Name names the driver in errors.
func (s *Store) Name() string { return "postgres" }

// Read returns the pool's querier.
func (s *Store) Read() store.Querier { return poolQuerier{s.pool} }

// MapErr maps an error of a read.
func (s *Store) MapErr(op string, err error) error { return mapErr(op, err) }

// Write runs fn in one pipelined transaction on a connection of the pool.
func (s *Store) Write(ctx context.Context, op string, fn func(store.Tx) error) (err error) {
	defer func() { s.noteWrite(ctx, err) }()
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return mapErr(op, err)
	}
	defer conn.Release()
	tx := &ptx{conn: conn.Conn()}
	if err := fn(tx); err != nil {
		tx.rollback(ctx, s, op)
		return mapErr(op, err)
	}
	if err := tx.commit(ctx); err != nil {
		tx.rollback(ctx, s, op)
		return mapErr(op, err)
	}
	return nil
}

// poolQuerier runs reads on the pool.
type poolQuerier struct{ p *pgxpool.Pool }

func (q poolQuerier) QueryRow(ctx context.Context, sql string, args ...any) store.Row {
	return row{q.p.QueryRow(ctx, sql, args...)}
}

func (q poolQuerier) Query(ctx context.Context, sql string, args ...any) (store.ClosingRows, error) {
	rs, err := q.p.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return rs, nil
}

func (q poolQuerier) Exec(ctx context.Context, sql string, args ...any) (int64, error) {
	tag, err := q.p.Exec(ctx, sql, args...)
	return tag.RowsAffected(), err
}

// row maps pgx's no-row error to the store's.
type row struct{ r pgx.Row }

func (r row) Scan(dest ...any) error {
	err := r.r.Scan(dest...)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ErrNoRows
	}
	return err
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

type queued struct {
	sql  string
	args []any
}

// ptx is a pipelined transaction: BEGIN and the queued statements are sent
// with the next statement that returns a result, or with COMMIT.
type ptx struct {
	conn  *pgx.Conn
	begun bool
	// done: QueryRowLast sent the commit.
	done  bool
	queue []queued
	// err is the transaction's first failure: every statement after it
	// fails with it.
	err error
}

// send sends BEGIN (first time), the queued statements and then extra
// (if any) as one batch, reads the results of all but extra and returns
// the results for extra, which the caller reads and closes.
func (t *ptx) send(ctx context.Context, extra *queued) (pgx.BatchResults, error) {
	return t.sendThen(ctx, extra, nil)
}

// sendThen is send with then (if any) queued after extra, its result left
// for the caller to read after extra's.
func (t *ptx) sendThen(ctx context.Context, extra, then *queued) (pgx.BatchResults, error) {
	if t.err != nil {
		return nil, t.err
	}
	if t.done {
		t.err = errors.New("postgres: a statement after the transaction's last (QueryRowLast)")
		return nil, t.err
	}
	b := &pgx.Batch{}
	n := 0
	if !t.begun {
		b.Queue(`BEGIN`)
		n++
	}
	for _, q := range t.queue {
		b.Queue(q.sql, q.args...)
		n++
	}
	t.queue = t.queue[:0]
	if extra != nil {
		b.Queue(extra.sql, extra.args...)
	}
	if then != nil {
		b.Queue(then.sql, then.args...)
	}
	if b.Len() == 0 {
		return nil, nil
	}
	br := t.conn.SendBatch(ctx, b)
	t.begun = true
	for range n {
		if _, err := br.Exec(); err != nil {
			t.err = err
			_ = br.Close()
			return nil, err
		}
	}
	return br, nil
}

func (t *ptx) QueryRow(ctx context.Context, sql string, args ...any) store.Row {
	br, err := t.send(ctx, &queued{sql, args})
	if err != nil {
		return errRow{err}
	}
	return batchRow{t: t, br: br}
}

// QueryRowLast sends COMMIT in the same batch as the statement: the
// transaction is one round trip when nothing before it read a result.
func (t *ptx) QueryRowLast(ctx context.Context, sql string, args ...any) store.Row {
	br, err := t.sendThen(ctx, &queued{sql, args}, &queued{sql: `COMMIT`})
	if err != nil {
		return errRow{err}
	}
	return batchRow{t: t, br: br, commit: true}
}

// batchRow is the last result of a batch (then COMMIT's, with commit).
type batchRow struct {
	t      *ptx
	br     pgx.BatchResults
	commit bool
}

func (r batchRow) Scan(dest ...any) error {
	err := r.br.QueryRow().Scan(dest...)
	if r.commit {
		// COMMIT runs whatever the row was; in a transaction a failure
		// aborted, it rolls back.
		if _, cerr := r.br.Exec(); cerr != nil && (err == nil || errors.Is(err, pgx.ErrNoRows)) {
			err = cerr
		}
		r.t.begun, r.t.done = false, true
	}
	if cerr := r.br.Close(); err == nil || errors.Is(err, pgx.ErrNoRows) {
		if cerr != nil {
			err = cerr
		}
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ErrNoRows
	}
	if err != nil {
		r.t.err = err
	}
	return err
}

func (t *ptx) Query(ctx context.Context, sql string, args ...any) (store.ClosingRows, error) {
	br, err := t.send(ctx, &queued{sql, args})
	if err != nil {
		return nil, err
	}
	rs, err := br.Query()
	if err != nil {
		t.err = err
		_ = br.Close()
		return nil, err
	}
	return &batchRows{Rows: rs, t: t, br: br}, nil
}

// batchRows are the rows of the last result of a batch.
type batchRows struct {
	pgx.Rows
	t  *ptx
	br pgx.BatchResults
}

func (r *batchRows) Close() {
	r.Rows.Close()
	if err := r.Rows.Err(); err != nil && r.t.err == nil {
		r.t.err = err
	}
	if err := r.br.Close(); err != nil && r.t.err == nil {
		r.t.err = err
	}
}

func (t *ptx) Exec(ctx context.Context, sql string, args ...any) (int64, error) {
	br, err := t.send(ctx, &queued{sql, args})
	if err != nil {
		return 0, err
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.err = err
		return 0, err
	}
	return tag.RowsAffected(), nil
}

func (t *ptx) Queue(sql string, args ...any) {
	t.queue = append(t.queue, queued{sql, args})
}

// commit sends what is queued with COMMIT; a transaction that sent nothing
// has nothing to commit.
func (t *ptx) commit(ctx context.Context) error {
	if t.err != nil {
		return t.err
	}
	if t.done {
		if len(t.queue) > 0 {
			return errors.New("postgres: a statement queued after the transaction's last (QueryRowLast)")
		}
		return nil
	}
	if !t.begun && len(t.queue) == 0 {
		return nil
	}
	br, err := t.send(ctx, &queued{sql: `COMMIT`})
	if err != nil {
		return err
	}
	_, err = br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.err = err
		return err
	}
	t.begun = false
	return nil
}

// rollback ends a transaction that is not to commit. A connection left in
// a transaction is destroyed by the pool on release.
func (t *ptx) rollback(ctx context.Context, s *Store, op string) {
	if !t.begun || t.conn.PgConn().TxStatus() == 'I' {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := t.conn.Exec(rctx, `ROLLBACK`); err != nil && !errors.Is(err, pgconn.ErrConnClosed) {
		s.logger.Warn("postgres rollback failed", "op", op, "err", fmt.Sprint(err))
	}
}
