package stacktest

import (
	"testing"

	"github.com/stackbone/stackbone/internal/store/postgres"
)

// Bridge connects env's bus to the other replicas of its PostgreSQL store,
// as `stackbone start` does (live events and run control then cross
// replicas); for another store it does nothing. The bridge closes when the
// test ends, before the stack does.
func Bridge(tb testing.TB, env *Env) {
	tb.Helper()
	pg, ok := env.Store.(*postgres.Store)
	if !ok {
		return
	}
	br, err := postgres.StartBridge(tb.Context(), pg, env.Runner.Bus, nil)
	if err != nil {
		tb.Fatalf("start the event bridge: %v", err)
	}
	tb.Cleanup(func() { _ = br.Close() })
}

// Replicas returns two stacks that serve one database, built from opts:
// on PostgreSQL (postgres true) two replicas of one fresh schema, each
// bridged; otherwise one SQLite stack, returned twice (a single process).
func Replicas(t *testing.T, postgresql bool, opts Options) (a, b *Env) {
	t.Helper()
	if !postgresql {
		a = New(t, opts)
		return a, a
	}
	st := Postgres(t, "replicas")
	oa, ob := opts, opts
	oa.Store, ob.Store = st, PostgresReplica(t, st)
	a, b = New(t, oa), New(t, ob)
	Bridge(t, a)
	Bridge(t, b)
	return a, b
}
