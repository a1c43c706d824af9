package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/stackbone/stackbone/internal/store"
)

// The store.Driver of the database: the store's statements, written in
// PostgreSQL's dialect, translated once each (rebind) and run on the
// writer's group commit or the read pool, prepared through their caches.

var _ store.Driver = (*Store)(nil)

// Name names the driver in errors.
func (s *Store) Name() string { return "sqlite" }

// Read returns the read pool's querier.
func (s *Store) Read() store.Querier { return reader{s.rc} }

// Write runs fn in a write transaction of the group commit (see the
// package doc).
func (s *Store) Write(ctx context.Context, op string, fn func(store.Tx) error) error {
	return s.write(ctx, op, func(tx *wtx) error {
		tx.err = nil
		if err := fn(tx); err != nil {
			return err
		}
		return tx.err
	})
}

// MapErr maps an error of a read.
func (s *Store) MapErr(op string, err error) error { return mapErr(op, err) }

var (
	placeholder = regexp.MustCompile(`\$(\d+)`)
	cast        = regexp.MustCompile(`::[a-z]+(\[\])?`)
	rowLock     = regexp.MustCompile(`\s+FOR (UPDATE|SHARE)(\s+OF\s+\w+)?(\s+SKIP LOCKED)?`)
	rebound     sync.Map // statement text → its SQLite translation
)

// rebind translates a statement from PostgreSQL's dialect: $1 becomes ?1,
// casts go (SQLite's columns take the value as bound), and so do row locks
// (the one writer already orders every write).
func rebind(q string) string {
	if v, ok := rebound.Load(q); ok {
		return v.(string)
	}
	out := placeholder.ReplaceAllString(q, "?$1")
	out = cast.ReplaceAllString(out, "")
	out = rowLock.ReplaceAllString(out, "")
	rebound.Store(q, out)
	return out
}

// bindArgs binds times as Unix microseconds, as they are stored.
func bindArgs(args []any) []any {
	var out []any
	for i, a := range args {
		if t, ok := a.(time.Time); ok {
			if out == nil {
				out = append([]any(nil), args...)
			}
			out[i] = t.UnixMicro()
		}
	}
	if out == nil {
		return args
	}
	return out
}

// row maps database/sql's no-row error to the store's.
type row struct{ r *sql.Row }

func (r row) Scan(dest ...any) error {
	err := r.r.Scan(dest...)
	if errors.Is(err, sql.ErrNoRows) {
		return store.ErrNoRows
	}
	return err
}

// errRow is a row that failed before its query ran.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// rows closes without an error to report (Err has it).
type rows struct{ *sql.Rows }

func (r rows) Close() { _ = r.Rows.Close() }

// reader runs the reads on the read pool, prepared through its cache.
type reader struct{ c *stmtCache }

func (q reader) QueryRow(ctx context.Context, sql string, args ...any) store.Row {
	return row{q.c.QueryRowContext(ctx, rebind(sql), bindArgs(args)...)}
}

func (q reader) Query(ctx context.Context, sql string, args ...any) (store.ClosingRows, error) {
	rs, err := q.c.QueryContext(ctx, rebind(sql), bindArgs(args)...)
	if err != nil {
		return nil, err
	}
	return rows{rs}, nil
}

func (q reader) Exec(ctx context.Context, sql string, args ...any) (int64, error) {
	st, err := q.c.get(ctx, rebind(sql))
	if err != nil {
		return 0, err
	}
	res, err := st.ExecContext(ctx, bindArgs(args)...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// QueryRow runs a statement of the store in the transaction.
func (t *wtx) QueryRow(ctx context.Context, sql string, args ...any) store.Row {
	if t.err != nil {
		return errRow{t.err}
	}
	return row{t.QueryRowContext(ctx, rebind(sql), bindArgs(args)...)}
}

// QueryRowLast is QueryRow: the group commit commits once fn returns.
func (t *wtx) QueryRowLast(ctx context.Context, sql string, args ...any) store.Row {
	return t.QueryRow(ctx, sql, args...)
}

// Query runs a statement of the store in the transaction.
func (t *wtx) Query(ctx context.Context, sql string, args ...any) (store.ClosingRows, error) {
	if t.err != nil {
		return nil, t.err
	}
	rs, err := t.QueryContext(ctx, rebind(sql), bindArgs(args)...)
	if err != nil {
		return nil, err
	}
	return rows{rs}, nil
}

// Exec runs a statement of the store in the transaction.
func (t *wtx) Exec(ctx context.Context, sql string, args ...any) (int64, error) {
	if t.err != nil {
		return 0, t.err
	}
	res, err := t.ExecContext(ctx, rebind(sql), bindArgs(args)...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// Queue runs the statement at once (the database is in the process: there
// is no round trip to save); its failure is the next statement's, or the
// transaction's. A queued SELECT only takes a row lock (FOR UPDATE), which
// the one writer makes moot: it is skipped.
func (t *wtx) Queue(sql string, args ...any) {
	if t.err != nil || strings.HasPrefix(strings.TrimSpace(sql), "SELECT") {
		return
	}
	if _, err := t.ExecContext(t.ctx, rebind(sql), bindArgs(args)...); err != nil {
		t.err = err
	}
}
