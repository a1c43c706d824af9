package postgres

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stackbone/stackbone/internal/store"
)

// vectorDB is the database the pgvector test installs the extension in
// (an extension is per database; the test database keeps none).
const vectorDB = "stackbone_vector"

// TestMemoryVectorIndex: with pgvector installed in the database, the
// memory store keeps each embedding in a vector column, makes an HNSW index
// for its length, fills the column for items put before (at open), and a
// search with a query vector takes its candidates from the index and
// scores them as the exact scan does: the nearest items, best first. A
// prefix with fewer items than the page falls back to the exact scan.
// Without the extension on the server the store keeps the exact scan, and
// that is what is checked.
func TestMemoryVectorIndex(t *testing.T) {
	needDB(t)
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, testURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var available bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector')`).Scan(&available); err != nil {
		t.Fatal(err)
	}
	if !available {
		st := openTest(t)
		if st.VectorIndexed() {
			t.Fatal("a vector index without the extension")
		}
		t.Log("pgvector is not on this server: the memory store keeps the exact scan (the conformance suite checks it)")
		return
	}

	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, vectorDB).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if !exists {
		if _, err := conn.Exec(ctx, `CREATE DATABASE `+vectorDB); err != nil && !strings.Contains(err.Error(), "already exists") {
			t.Fatal(err)
		}
	}
	cc := conn.Config()
	dsn := fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable", cc.Host, cc.Port, cc.User, vectorDB)
	if cc.Password != "" {
		dsn += " password=" + cc.Password
	}
	vconn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer vconn.Close(context.Background())
	if _, err := vconn.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS vector`); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
	schema := fmt.Sprintf("sbvec_%d", time.Now().UnixNano())
	t.Cleanup(func() {
		_, _ = vconn.Exec(context.Background(), `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`)
	})
	open := func() *Store {
		t.Helper()
		st, err := OpenSchema(ctx, dsn, schema, testLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	}
	st := open()
	if !st.VectorIndexed() {
		t.Fatal("pgvector is installed, yet the store does not use it")
	}

	const dims = 64
	rng := rand.New(rand.NewPCG(1, 2))
	vec := func() []float32 {
		v := make([]float32, dims)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	type kept struct {
		key string
		v   []float32
	}
	var items []kept
	put := func(ns []string, key string, v []float32) {
		t.Helper()
		if _, err := st.MemoryPut(ctx, store.MemoryPut{Tenant: "acme", Namespace: ns, Key: key, Value: []byte(`{"k":"` + key + `"}`), Embedding: v}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 300 {
		v := vec()
		key := fmt.Sprintf("k%03d", i)
		put([]string{"users", "u1"}, key, v)
		items = append(items, kept{key, store.Normalize(v)})
	}
	for i := range 5 {
		put([]string{"users", "u2"}, fmt.Sprintf("small%d", i), vec())
	}
	put([]string{"users", "u2"}, "plain", nil)
	put([]string{"users", "u9"}, "other-tenant-like", vec()) // another namespace: never in u1's results

	// The index is there and a search can use it.
	tx, err := vconn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, `SET LOCAL search_path = `+pgx.Identifier{schema}.Sanitize()+`, public`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SET LOCAL enable_seqscan = off`); err != nil {
		t.Fatal(err)
	}
	q := vec()
	var plan []string
	rows, err := tx.Query(ctx, fmt.Sprintf(`EXPLAIN SELECT key FROM memory_items WHERE dims = %d AND embedding_vec IS NOT NULL
		ORDER BY embedding_vec::vector(%d) <=> $1::vector(%d) LIMIT 10`, dims, dims, dims), vectorText(q))
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var line string
		_ = rows.Scan(&line)
		plan = append(plan, line)
	}
	rows.Close()
	if p := strings.Join(plan, "\n"); !strings.Contains(p, fmt.Sprintf("memory_items_vec_%d", dims)) {
		t.Fatalf("the search does not use the vector index:\n%s", p)
	}
	_ = tx.Rollback(ctx)

	// The nearest items, best first, scored exactly.
	qn := store.Normalize(q)
	exact := slices.Clone(items)
	sort.Slice(exact, func(i, j int) bool { return dot(qn, exact[i].v) > dot(qn, exact[j].v) })
	got, err := st.MemorySearch(ctx, store.MemorySearch{Tenant: "acme", Prefix: []string{"users", "u1"}, Vector: q, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 10 {
		t.Fatalf("%d results, want 10", len(got))
	}
	want := map[string]bool{}
	for _, e := range exact[:10] {
		want[e.key] = true
	}
	hits := 0
	for i, it := range got {
		if want[it.Key] {
			hits++
		}
		if it.Score == nil || (i > 0 && *it.Score > *got[i-1].Score) {
			t.Fatalf("result %d: score %v after %v; want scores, best first", i, it.Score, got[i-1].Score)
		}
	}
	if hits < 9 { // HNSW is approximate; on 300 items it finds the nearest ten
		t.Fatalf("the index found %d of the 10 nearest items", hits)
	}
	if got[0].Key != exact[0].key || math.Abs(*got[0].Score-dot(qn, exact[0].v)) > 1e-5 {
		t.Fatalf("best %s (%v), want %s (%v)", got[0].Key, *got[0].Score, exact[0].key, dot(qn, exact[0].v))
	}

	// A small prefix falls back to the exact scan: every item, the one
	// without an embedding last.
	small, err := st.MemorySearch(ctx, store.MemorySearch{Tenant: "acme", Prefix: []string{"users", "u2"}, Vector: q, Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	if len(small) != 6 || small[5].Key != "plain" || small[5].Score != nil {
		t.Fatalf("the small prefix: %+v", small)
	}

	// Items put before the extension was there get their vector at open.
	if _, err := vconn.Exec(ctx, `UPDATE `+pgx.Identifier{schema, "memory_items"}.Sanitize()+` SET embedding_vec = NULL WHERE key = 'k000'`); err != nil {
		t.Fatal(err)
	}
	open()
	var filled bool
	if err := vconn.QueryRow(ctx, `SELECT embedding_vec IS NOT NULL FROM `+pgx.Identifier{schema, "memory_items"}.Sanitize()+` WHERE key = 'k000'`).Scan(&filled); err != nil || !filled {
		t.Fatalf("k000's vector after the reopen: %v %v", filled, err)
	}
}

func dot(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

// vectorText is v in pgvector's text form.
func vectorText(v []float32) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return "[" + strings.Join(s, ",") + "]"
}
