package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Driver is what a database engine gives the store: a pool to read from, a
// way to run a write transaction with the engine's commit mechanics (SQLite's
// group commit, PostgreSQL's pipelined round trips), and the mapping of its
// errors. Every durable transaction is written once, in this package, over
// it (DB); a driver holds only its dialect and mechanics.
//
// Statements are written in PostgreSQL's dialect: numbered parameters ($1),
// casts (::json) where PostgreSQL needs a type, FOR UPDATE where a row lock
// orders writers. A driver for another engine translates them (the SQLite
// driver turns $1 into ?1 and drops casts and row locks, which its single
// writer makes moot). Arguments are Go values: strings, integers, booleans,
// and time.Time (TimeArg binds the zero time as NULL); time columns scan into
// ScanTime.
type Driver interface {
	// Name names the driver in errors ("sqlite", "postgres").
	Name() string
	// Read returns the querier of reads outside a write transaction.
	Read() Querier
	// Write runs fn in one write transaction and commits it, rolling it
	// back when fn fails (fn's error is returned, mapped as MapErr does).
	// fn must not call Write. The outcome is LastWrite's.
	Write(ctx context.Context, op string, fn func(Tx) error) error
	// MapErr wraps an error of a read with the operation's name, adding
	// ErrUnavailable when the database could not be reached and ErrInvalid
	// when it refused the data.
	MapErr(op string, err error) error
	// Ping checks the database answers.
	Ping(ctx context.Context) error
	// LastWrite is the outcome of the latest write.
	LastWrite() WriteStatus
	// Close closes the database.
	Close() error
}

// Querier runs statements.
type Querier interface {
	// QueryRow runs a statement that returns at most one row; its Scan
	// returns ErrNoRows when there is none.
	QueryRow(ctx context.Context, sql string, args ...any) Row
	// Query runs a statement that returns rows; the caller closes them.
	Query(ctx context.Context, sql string, args ...any) (ClosingRows, error)
	// Exec runs a statement and returns how many rows it changed.
	Exec(ctx context.Context, sql string, args ...any) (int64, error)
}

// Tx is a write transaction.
type Tx interface {
	Querier
	// Queue adds a statement whose result the transaction needs only to
	// have succeeded: it runs before the next statement run through the
	// Querier, or at the commit, in the order queued, and its failure is
	// that statement's or the commit's. A driver may send the queued
	// statements with the next one in a single round trip.
	Queue(sql string, args ...any)
	// QueryRowLast is QueryRow as the transaction's last statement: a
	// driver may send the commit with it, so fn must return once it has
	// scanned the row, and returning an error then no longer undoes
	// anything. For a statement whose outcome does not decide whether to
	// commit (it reads what the transaction wrote).
	QueryRowLast(ctx context.Context, sql string, args ...any) Row
}

// Row is one row of a query.
type Row interface {
	Scan(dest ...any) error
}

// ClosingRows are the rows of a query, closed by the caller.
type ClosingRows interface {
	Rows
	Close()
}

// ErrNoRows is what Row.Scan returns when the query returned no row.
var ErrNoRows = errors.New("no rows in result set")

// TimeArg binds t as a time, or as NULL when t is zero.
func TimeArg(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

// TimePtrArg binds *t as a time, or as NULL when t is nil or zero.
func TimePtrArg(t *time.Time) any {
	if t == nil {
		return nil
	}
	return TimeArg(*t)
}

// ScanTime returns a scan destination that stores a time column in *t (in
// UTC; the zero time for NULL), whichever form the driver reads it in: a
// time.Time, or Unix microseconds.
func ScanTime(t *time.Time) any { return timeDest{t} }

type timeDest struct{ t *time.Time }

// Scan implements sql.Scanner.
func (d timeDest) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*d.t = time.Time{}
	case time.Time:
		*d.t = v.UTC()
	case int64:
		*d.t = time.UnixMicro(v).UTC()
	default:
		return fmt.Errorf("store: cannot scan %T into a time", src)
	}
	return nil
}

// ScanTimePtr is ScanTime into a *time.Time that stays nil for NULL.
func ScanTimePtr(t **time.Time) any { return timePtrDest{t} }

type timePtrDest struct{ t **time.Time }

// Scan implements sql.Scanner.
func (d timePtrDest) Scan(src any) error {
	if src == nil {
		*d.t = nil
		return nil
	}
	var t time.Time
	if err := (timeDest{&t}).Scan(src); err != nil {
		return err
	}
	*d.t = &t
	return nil
}

// Params returns n numbered parameters starting at $from, comma-separated
// ("$3, $4, $5"): the list of an IN (…) or a VALUES row.
func Params(from, n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('$')
		b.WriteString(strconv.Itoa(from + i))
	}
	return b.String()
}

// valuesRows returns the VALUES rows of a multi-row insert of rows rows of
// cols columns, numbered from $from: "($1, $2), ($3, $4)".
func valuesRows(from, rows, cols int) string {
	var b strings.Builder
	for r := range rows {
		if r > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('(')
		b.WriteString(Params(from+r*cols, cols))
		b.WriteByte(')')
	}
	return b.String()
}
