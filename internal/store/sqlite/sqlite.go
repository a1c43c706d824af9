// Package sqlite is the embedded store driver, built on the pure-Go
// modernc.org/sqlite (no cgo).
//
// The database runs in WAL mode with synchronous=NORMAL and foreign keys on.
// Writes go through a pool of one connection and run in BEGIN IMMEDIATE
// transactions, so writers of one process queue in Go instead of failing with
// SQLITE_BUSY; reads use a separate read-only pool. Another process on the
// same file waits up to the busy timeout.
//
// Group commit: the writes that queue while a transaction runs go together
// in the next one (up to 64), each in a savepoint of its own, and commit
// once. A write that fails is rolled back to its savepoint and returns its
// own error (store.ErrLeaseLost, store.ErrAlreadyDecided, a constraint
// error, ...) while the others commit. A write whose context ends while it
// waits is skipped with the context's error; once it ran, it waits for the
// COMMIT (its statements ignore the cancellation). A lone writer runs at
// once on its own goroutine, without a savepoint.
//
// Durability: a write returns (is acknowledged) only after the COMMIT of the
// transaction that holds it succeeded; when that COMMIT fails, every write
// in the batch returns the error and none of them is stored. With
// synchronous=NORMAL in WAL mode a committed transaction is in the WAL file
// before the write returns, so a crash of the process (kill -9 included)
// loses nothing acknowledged; a power loss or OS crash may lose the
// transactions since the last checkpoint of the WAL, never corrupting the
// database. The store checkpoints on a goroutine and a connection of its
// own (checkpoint.go), not inside a writer's COMMIT, about a second after a
// write at the latest, which bounds that window (a long read holds a
// checkpoint back until it ends: PASSIVE does not wait for readers). Messages, events, state, interrupt
// arguments and decisions are stored as JSON text beside a format version
// (store.FormatVersion); times as Unix microseconds.
//
// The store's transactions are store.DB's, written once for every driver;
// this package is the database's mechanics under them (store.Driver): the
// translation of the store's statements (driver.go), the group commit, the
// statement caches, the checkpointer and the migrations.
package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/stackbone/stackbone/internal/clock"
	"github.com/stackbone/stackbone/internal/store"
)

// DefaultBusyTimeout is how long a write waits for another process's lock
// before it fails with store.ErrUnavailable.
const DefaultBusyTimeout = 5 * time.Second

// Store is a store.Store on one SQLite database file.
type Store struct {
	// DB is the store's transactions, run on this Store as their driver.
	*store.DB
	w      *sql.DB // one connection, BEGIN IMMEDIATE
	r      *sql.DB // read-only pool (== w for an in-memory database)
	logger *slog.Logger
	now    func() time.Time
	// wc and rc cache the prepared statements of the writer and the
	// readers (the same cache for an in-memory database).
	wc, rc *stmtCache
	gc     groupCommit // batches the write transactions
	// ckpt checkpoints the WAL off the write path (nil in memory).
	ckpt *checkpointer
	// health is the outcome of the latest write (LastWrite).
	health store.WriteHealth
}

var _ store.Store = (*Store)(nil)

type options struct {
	busyTimeout time.Duration
	now         func() time.Time
}

// Open opens (creating it and its parent directory if needed) the database
// at path and brings its schema up to date. path ":memory:" opens a private
// in-memory database, useful in tests. A nil logger discards logs.
func Open(ctx context.Context, path string, logger *slog.Logger) (*Store, error) {
	return open(ctx, path, logger, options{busyTimeout: DefaultBusyTimeout, now: time.Now})
}

func open(ctx context.Context, path string, logger *slog.Logger, o options) (*Store, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if path == "" || strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("sqlite: open %q: %w: the path must be non-empty and have no ? or #", path, store.ErrInvalid)
	}
	memory := path == ":memory:"
	if !memory {
		if dir := filepath.Dir(path); dir != "" {
			if err := os.MkdirAll(dir, 0o750); err != nil {
				return nil, fmt.Errorf("sqlite: open %q: %w: %w", path, store.ErrUnavailable, err)
			}
		}
	}

	params := func(extra ...string) string {
		q := url.Values{}
		q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", o.busyTimeout.Milliseconds()))
		q.Add("_pragma", "foreign_keys(1)")
		q.Add("_pragma", "synchronous(NORMAL)")
		for _, e := range extra {
			q.Add("_pragma", e)
		}
		return q.Encode()
	}

	s := &Store{logger: logger, now: o.now}
	var err error
	if memory {
		// One connection serves reads and writes: every connection to
		// ":memory:" is a database of its own.
		s.w, err = sql.Open("sqlite", path+"?_txlock=immediate&"+params())
		if err != nil {
			return nil, fmt.Errorf("sqlite: open: %w", err)
		}
		s.w.SetMaxOpenConns(1)
		s.w.SetMaxIdleConns(1)
		s.w.SetConnMaxLifetime(0)
		s.w.SetConnMaxIdleTime(0)
		s.r = s.w
	} else {
		s.w, err = sql.Open("sqlite", path+"?_txlock=immediate&"+params("journal_mode(WAL)",
			fmt.Sprintf("wal_autocheckpoint(%d)", ckptBackstop)))
		if err != nil {
			return nil, fmt.Errorf("sqlite: open: %w", err)
		}
		s.w.SetMaxOpenConns(1)
		s.w.SetMaxIdleConns(1)
		s.w.SetConnMaxIdleTime(0)
		s.w.SetConnMaxLifetime(0)
	}

	// The writer creates the file, switches it to WAL and migrates before a
	// reader opens it.
	if err := migrate(ctx, s.w, logger); err != nil {
		s.w.Close()
		return nil, mapErr("open", err)
	}
	if !memory {
		s.r, err = sql.Open("sqlite", path+"?"+params("query_only(1)"))
		if err != nil {
			s.w.Close()
			return nil, fmt.Errorf("sqlite: open: %w", err)
		}
		n := max(4, runtime.GOMAXPROCS(0))
		s.r.SetMaxOpenConns(n)
		s.r.SetMaxIdleConns(n)
		s.r.SetConnMaxIdleTime(5 * time.Minute)
		ck, err := sql.Open("sqlite", path+"?"+params())
		if err != nil {
			s.w.Close()
			s.r.Close()
			return nil, fmt.Errorf("sqlite: open: %w", err)
		}
		ck.SetMaxOpenConns(1)
		ck.SetMaxIdleConns(1)
		ck.SetConnMaxIdleTime(0)
		ck.SetConnMaxLifetime(0)
		s.ckpt = newCheckpointer(ck, logger)
	}
	s.wc = newStmtCache(s.w)
	s.rc = s.wc
	if s.r != s.w {
		s.rc = newStmtCache(s.r)
	}
	if s.DB, err = store.Open(ctx, s, logger); err != nil {
		s.Close()
		return nil, err
	}
	s.DB.SetClock(clock.Func(o.now))
	logger.Debug("sqlite store open", "path", path)
	return s, nil
}

// Close closes the database.
func (s *Store) Close() error {
	var err error
	if s.ckpt != nil {
		err = s.ckpt.close()
	}
	if s.wc != nil {
		s.wc.close()
	}
	if s.rc != nil && s.rc != s.wc {
		s.rc.close()
	}
	err = errors.Join(err, s.w.Close())
	if s.r != s.w {
		err = errors.Join(err, s.r.Close())
	}
	return err
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.w.PingContext(ctx); err != nil {
		return mapErr("ping", err)
	}
	if err := s.r.PingContext(ctx); err != nil {
		return mapErr("ping", err)
	}
	return nil
}

// LastWrite returns the outcome of the latest write transaction.
func (s *Store) LastWrite() store.WriteStatus { return s.health.Status() }

// noteWrite records the outcome of a write for LastWrite: a commit, or a
// failure of the database; not the writer's own cancellation.
func (s *Store) noteWrite(ctx context.Context, err error) {
	if err != nil && ctx.Err() != nil {
		return
	}
	s.health.Record(s.now(), err)
}

// mapErr wraps err with the operation's name, adding store.ErrUnavailable
// when the database could not be reached, was locked by another process
// beyond the busy timeout, or failed on disk.
func mapErr(op string, err error) error {
	if err == nil {
		return nil
	}
	if unavailable(err) {
		return fmt.Errorf("sqlite: %s: %w: %w", op, store.ErrUnavailable, err)
	}
	return fmt.Errorf("sqlite: %s: %w", op, err)
}

func unavailable(err error) bool {
	if errors.Is(err, store.ErrUnavailable) {
		return false // already marked
	}
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) {
		return true
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_CANTOPEN,
			sqlite3.SQLITE_IOERR, sqlite3.SQLITE_FULL, sqlite3.SQLITE_READONLY,
			sqlite3.SQLITE_PROTOCOL, sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT,
			sqlite3.SQLITE_PERM, sqlite3.SQLITE_NOMEM:
			return true
		}
	}
	return false
}

// SetClock makes the store read the time from c where a call leaves it
// unset (a zero Now or At). Call it before the store is used.
func (s *Store) SetClock(c clock.Clock) {
	s.now = clock.Or(c).Now
	s.DB.SetClock(c)
	if s.ckpt != nil {
		s.ckpt.setClock(c)
	}
}
