package memory_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/store/sqlite"
)

// benchDims is the embeddings' length in the search benchmark
// (text-embedding-3-small's).
const benchDims = 1536

// fill puts n items with random embeddings under ["bench", "u<i%100>"],
// from 8 writers at once.
func fill(b *testing.B, st store.Store, n int) {
	b.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 1))
			for i := w; i < n; i += 8 {
				v := make([]float32, benchDims)
				for j := range v {
					v[j] = float32(r.NormFloat64())
				}
				value, _ := json.Marshal(map[string]any{"fact": fmt.Sprintf("fact number %d", i), "n": i})
				if _, err := st.MemoryPut(ctx, store.MemoryPut{Tenant: "acme", Namespace: []string{"bench", fmt.Sprintf("u%d", i%100)},
					Key: fmt.Sprintf("k%06d", i), Value: value, Embedding: v}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkMemorySearch measures the exact scan: a search with a query
// vector over every item of the tenant (namespace prefix ["bench"]),
// 1536 dimensions, top 10, on SQLite and PostgreSQL at 10k and 100k items.
// It reports the p50 and p99 of the searches it ran (run it with
// -benchtime=Nx for N searches).
func BenchmarkMemorySearch(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		for _, driver := range []string{"sqlite", "postgres"} {
			b.Run(fmt.Sprintf("%s/%dk", driver, n/1000), func(b *testing.B) {
				var st store.Store
				if driver == "sqlite" {
					s, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"), nil)
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { _ = s.Close() })
					st = s
				} else {
					st = stacktest.Postgres(b, "membench")
				}
				start := time.Now()
				fill(b, st, n)
				b.Logf("%s: %d items put in %s", driver, n, time.Since(start).Round(time.Millisecond))
				r := rand.New(rand.NewPCG(42, 42))
				q := make([]float32, benchDims)
				var took []time.Duration
				b.ResetTimer()
				for b.Loop() {
					for j := range q {
						q[j] = float32(r.NormFloat64())
					}
					t0 := time.Now()
					items, err := st.MemorySearch(context.Background(), store.MemorySearch{Tenant: "acme", Prefix: []string{"bench"}, Vector: q, Limit: 10})
					took = append(took, time.Since(t0))
					if err != nil || len(items) != 10 {
						b.Fatalf("search: %d items, %v", len(items), err)
					}
				}
				slices.Sort(took)
				pct := func(p float64) float64 {
					return float64(took[min(len(took)-1, int(p*float64(len(took))))].Microseconds()) / 1000
				}
				b.ReportMetric(pct(0.50), "p50-ms")
				b.ReportMetric(pct(0.99), "p99-ms")
			})
		}
	}
}
