package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/store/storetest"
)

// DefaultTestURL is the database the tests use unless STACKBONE_TEST_POSTGRES
// names another.
const DefaultTestURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

func testURL() string {
	if u := os.Getenv("STACKBONE_TEST_POSTGRES"); u != "" {
		return u
	}
	return DefaultTestURL
}

var (
	reachOnce sync.Once
	reachErr  error
)

// needDB fails the test on CI and skips it elsewhere when the test database
// does not answer.
func needDB(t testing.TB) {
	t.Helper()
	reachOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, testURL())
		if err != nil {
			reachErr = err
			return
		}
		defer conn.Close(ctx)
		reachErr = conn.Ping(ctx)
	})
	if reachErr == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("PostgreSQL at %s (STACKBONE_TEST_POSTGRES) is unreachable: %v", testURL(), reachErr)
	}
	t.Skipf("PostgreSQL at %s is unreachable (set STACKBONE_TEST_POSTGRES to a reachable database; CI=true fails instead): %v",
		testURL(), reachErr)
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

var dropper struct {
	once sync.Once
	pool *pgxpool.Pool
	err  error
}

// dropPool is the connection pool the tests drop their schemas through: one
// for the package, not a new connection per test.
func dropPool() (*pgxpool.Pool, error) {
	dropper.once.Do(func() { dropper.pool, dropper.err = pgxpool.New(context.Background(), testURL()) })
	return dropper.pool, dropper.err
}

// newSchema returns a fresh schema name, dropped with everything in it when
// the test ends.
func newSchema(t testing.TB) string {
	t.Helper()
	needDB(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "sbtest_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		pool, err := dropPool()
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		if _, err := pool.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return schema
}

// openSchema opens a store on schema, closed when the test ends (before the
// schema is dropped).
func openSchema(t testing.TB, schema string) *Store {
	t.Helper()
	s, err := OpenSchema(context.Background(), testURL(), schema, testLogger(t))
	if err != nil {
		t.Fatalf("OpenSchema %s: %v", schema, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// openTest opens a store on a fresh schema of its own.
func openTest(t testing.TB) *Store {
	t.Helper()
	return openSchema(t, newSchema(t))
}

// rawConn is a plain connection to the schema, as an operator's psql.
func rawConn(t testing.TB, schema string) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(testURL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["search_path"] = pgx.Identifier{schema}.Sanitize()
	conn, err := pgx.ConnectConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func TestConformance(t *testing.T) {
	t.Parallel()
	needDB(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		return openTest(t)
	})
}

func TestDriver(t *testing.T) {
	t.Parallel()
	needDB(t)
	storetest.RunDriver(t, func(t *testing.T) store.Driver {
		return openTest(t)
	})
}
