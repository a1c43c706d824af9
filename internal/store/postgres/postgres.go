// Package postgres is the store driver for PostgreSQL, built on
// github.com/jackc/pgx/v5 (pgxpool), for deployments of several replicas
// sharing one database.
//
// Every table lives in one schema: the first of the connection's search_path
// (Open, honouring ?search_path= in the URL), or the one OpenSchema names and
// creates. The schema is migrated on open from embedded, numbered migrations
// recorded in schema_version; replicas opening at once migrate it once, under
// an advisory lock. Messages, events, state, interrupt arguments and
// decisions are stored in json columns (kept as written, unlike jsonb, which
// refuses the \u0000 escape) beside a format version (store.FormatVersion);
// times as timestamptz (microseconds).
//
// The store's transactions are store.DB's, written once for every driver;
// this package is the database's mechanics under them (store.Driver):
// pipelined transactions (driver.go), the pool, the migrations, and Bridge.
// Concurrency between replicas rests on row locks of the thread: Claim and
// Checkpoint are conditional updates of the thread row, whose counters also
// hand out message and event sequence numbers; BeginRun, FinishRun and
// Decide lock the thread row before they look at its interrupts, so a
// decision and the end of a run cannot both miss that nothing is left
// pending.
//
// A failure to reach the database (refused or lost connections, timeouts, a
// server shutting down, a cancelled context) is reported wrapped in
// store.ErrUnavailable; the pool reconnects by itself once the database is
// back. Pool size and timeouts follow the URL's parameters (pool_max_conns,
// connect_timeout, which is 5s when unset, statement_timeout).
//
// Bridge carries live events between the replicas' buses.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stackbone/stackbone/internal/clock"
	"github.com/stackbone/stackbone/internal/store"
)

// DefaultConnectTimeout bounds a connection attempt when the URL sets no
// connect_timeout.
const DefaultConnectTimeout = 5 * time.Second

// Store is a store.Store on one schema of a PostgreSQL database.
type Store struct {
	// DB is the store's transactions, run on this Store as their driver.
	*store.DB
	pool   *pgxpool.Pool
	cfg    *pgxpool.Config
	schema string
	logger *slog.Logger
	now    func() time.Time
	// health is the outcome of the latest write transaction (LastWrite).
	health store.WriteHealth
}

var _ store.Store = (*Store)(nil)

// Open connects to the database at url (postgres://… or a key=value DSN),
// and brings the schema first in its search_path (public by default) up to
// date. A nil logger discards logs.
func Open(ctx context.Context, url string, logger *slog.Logger) (*Store, error) {
	return open(ctx, url, "", logger)
}

// OpenSchema is Open on the named schema, created if missing: every
// connection's search_path is that schema alone. Tests use one schema each.
func OpenSchema(ctx context.Context, url, schema string, logger *slog.Logger) (*Store, error) {
	if schema == "" {
		return nil, fmt.Errorf("postgres: open: %w: the schema name is empty", store.ErrInvalid)
	}
	return open(ctx, url, schema, logger)
}

func open(ctx context.Context, url, schema string, logger *slog.Logger) (*Store, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// The error may quote the URL; it is the operator's own.
		return nil, fmt.Errorf("postgres: open: %w: %w", store.ErrInvalid, err)
	}
	cc := cfg.ConnConfig
	if cc.ConnectTimeout <= 0 {
		cc.ConnectTimeout = DefaultConnectTimeout
	}
	if cc.RuntimeParams == nil {
		cc.RuntimeParams = map[string]string{}
	}
	if cc.RuntimeParams["application_name"] == "" {
		cc.RuntimeParams["application_name"] = "stackbone"
	}
	if schema != "" {
		if err := createSchema(ctx, cc, schema); err != nil {
			return nil, mapErr("open", err)
		}
		cc.RuntimeParams["search_path"] = pgx.Identifier{schema}.Sanitize()
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, mapErr("open", err)
	}
	s := &Store{pool: pool, cfg: cfg, logger: logger, now: time.Now}
	var current *string
	if err := pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&current); err != nil {
		pool.Close()
		return nil, mapErr("open", err)
	}
	if current == nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: open: %w: no schema of the search_path exists", store.ErrInvalid)
	}
	s.schema = *current
	if err := migrate(ctx, pool, logger); err != nil {
		pool.Close()
		return nil, mapErr("open", err)
	}
	if s.DB, err = store.Open(ctx, s, logger); err != nil {
		pool.Close()
		return nil, err
	}
	if err := s.detectVector(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	logger.Debug("postgres store open", "host", cc.Host, "database", cc.Database, "schema", s.schema)
	return s, nil
}

// createSchema creates schema on a connection of its own.
func createSchema(ctx context.Context, cc *pgx.ConnConfig, schema string) error {
	conn, err := pgx.ConnectConfig(ctx, cc.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+pgx.Identifier{schema}.Sanitize())
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" {
		return nil // a concurrent opener created it
	}
	return err
}

// Schema returns the schema the store's tables are in.
func (s *Store) Schema() string { return s.schema }

// Close closes the pool's connections.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	return mapErr("ping", s.pool.Ping(ctx))
}

// LastWrite returns the outcome of the latest write transaction.
func (s *Store) LastWrite() store.WriteStatus { return s.health.Status() }

// noteWrite records the outcome of a write (every method that writes
// defers it) for LastWrite: a
// commit, or the database refusing the write for want of means (SQLSTATE
// class 53: a full disk, no memory; 58: an I/O error; XX: corrupted data;
// 25006: a read-only standby after a failover). Other failures are not
// recorded: the writer's own cancellation, contention a retry gets past (a
// serialization failure, a deadlock, a lock timeout), and a lost
// connection, which Ping sees.
func (s *Store) noteWrite(ctx context.Context, err error) {
	if err != nil {
		var pe *pgconn.PgError
		if ctx.Err() != nil || !errors.As(err, &pe) {
			return
		}
		switch c := pe.Code; {
		case strings.HasPrefix(c, "53"), strings.HasPrefix(c, "58"), strings.HasPrefix(c, "XX"), c == "25006":
		default:
			return
		}
		if !errors.Is(err, store.ErrUnavailable) {
			err = fmt.Errorf("%w: %w", store.ErrUnavailable, err)
		}
	}
	s.health.Record(s.now(), err)
}

// tx runs fn in one transaction.
func (s *Store) tx(ctx context.Context, op string, fn func(tx pgx.Tx) error) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return mapErr(op, err)
	}
	if err := fn(tx); err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if rerr := tx.Rollback(rctx); rerr != nil && !errors.Is(rerr, pgx.ErrTxClosed) {
			s.logger.Warn("postgres rollback failed", "op", op, "err", rerr)
		}
		return mapErr(op, err)
	}
	return mapErr(op, tx.Commit(ctx))
}

// mapErr wraps err with the operation's name, adding store.ErrUnavailable
// when the database could not be reached and store.ErrInvalid when it
// refused the data (a NUL byte or invalid UTF-8 in a text field).
func mapErr(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case unavailable(err):
		return fmt.Errorf("postgres: %s: %w: %w", op, store.ErrUnavailable, err)
	case invalidData(err):
		return fmt.Errorf("postgres: %s: %w: %w", op, store.ErrInvalid, err)
	}
	return fmt.Errorf("postgres: %s: %w", op, err)
}

func unavailable(err error) bool {
	if errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrInvalid) {
		return false // already marked
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case strings.HasPrefix(pe.Code, "08"), // connection exception
			strings.HasPrefix(pe.Code, "53"),       // insufficient resources (too many connections, disk full)
			strings.HasPrefix(pe.Code, "57P"),      // admin or crash shutdown, cannot connect now
			pe.Code == "57014",                     // statement timeout, cancelled query
			pe.Code == "40001", pe.Code == "40P01", // serialization failure, deadlock: try again
			pe.Code == "55P03", // lock not available
			pe.Code == "25006": // read-only transaction: a standby after a failover
			return true
		}
		return false
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	switch {
	case errors.As(err, &ce), errors.As(err, &ne),
		pgconn.Timeout(err), pgconn.SafeToRetry(err),
		errors.Is(err, pgconn.ErrConnClosed), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, net.ErrClosed), strings.Contains(err.Error(), "closed pool"):
		return true
	}
	return false
}

// invalidData is a data exception (SQLSTATE class 22): the server refused a
// value, such as text with a NUL byte or invalid UTF-8.
func invalidData(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && strings.HasPrefix(pe.Code, "22")
}

// SetClock makes the store read the time from c where a call leaves it
// unset (a zero Now or At). Call it before the store is used.
func (s *Store) SetClock(c clock.Clock) {
	s.now = clock.Or(c).Now
	s.DB.SetClock(c)
}

// detectVector makes the memory store search through pgvector when the
// extension is installed in the database (CREATE EXTENSION vector, by the
// operator: Stackbone does not install it).
func (s *Store) detectVector(ctx context.Context) error {
	var ns string
	err := s.pool.QueryRow(ctx, `SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
		WHERE e.extname = 'vector'`).Scan(&ns)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return mapErr("open", err)
	}
	q := pgx.Identifier{ns}.Sanitize()
	return s.EnableVectorIndex(ctx, &store.VectorIndex{Type: q + ".vector", Ops: q + ".vector_cosine_ops",
		Distance: "OPERATOR(" + q + ".<=>)", PlanFresh: pgx.QueryExecModeExec})
}
