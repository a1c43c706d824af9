package stacktest

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stackbone/stackbone/internal/store/postgres"
)

// PostgresURL is the test database: STACKBONE_TEST_POSTGRES, or the local
// server every development machine and CI run has.
func PostgresURL() string {
	if u := os.Getenv("STACKBONE_TEST_POSTGRES"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// Postgres opens a PostgreSQL store on a fresh schema named after prefix,
// dropped when the test ends. An unreachable database fails the test under
// CI=true and skips it elsewhere.
func Postgres(tb testing.TB, prefix string) *postgres.Store {
	tb.Helper()
	return PostgresAt(tb, PostgresURL(), prefix)
}

// PostgresAt is Postgres through url (for example a proxy the test
// controls); the schema is dropped through PostgresURL.
func PostgresAt(tb testing.TB, url, prefix string) *postgres.Store {
	tb.Helper()
	schema := fmt.Sprintf("%s_%d", prefix, time.Now().UnixNano())
	st, err := postgres.OpenSchema(context.Background(), url, schema, nil)
	if err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("PostgreSQL unreachable: %v", err)
		}
		tb.Skipf("PostgreSQL unreachable: %v", err)
	}
	tb.Cleanup(func() {
		st.Close()
		conn, err := pgx.Connect(context.Background(), PostgresURL())
		if err == nil {
			_, _ = conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
			_ = conn.Close(context.Background())
		}
	})
	return st
}

// PostgresReplica opens another store on st's schema, as a second replica
// of the same database would; it is closed when the test ends.
func PostgresReplica(tb testing.TB, st *postgres.Store) *postgres.Store {
	tb.Helper()
	other, err := postgres.OpenSchema(context.Background(), PostgresURL(), st.Schema(), nil)
	if err != nil {
		tb.Fatalf("PostgreSQL replica store: %v", err)
	}
	tb.Cleanup(func() { _ = other.Close() })
	return other
}
