package store

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// VectorIndex is how a database indexes the memory store's embeddings
// for nearest-neighbour search: PostgreSQL with the pgvector extension
// installed in the database. Without one (SQLite, or PostgreSQL without
// the extension) a search with a query vector is an exact scan.
//
// With one, each item's embedding is also kept in a vector column
// (embedding_vec), an HNSW index on its cosine distance is made for each
// length the embeddings have (at most MaxIndexedDims), and a search with a
// query vector and no filter asks the index for its candidates, which are
// then scored exactly as the exact scan does. Fewer candidates than the
// page needs (a small prefix, items without embeddings) fall back to the
// exact scan, so the answer is the exact scan's whenever the index finds
// the nearest items.
type VectorIndex struct {
	// Type and Ops are the qualified names of the extension's vector type
	// and its cosine operator class; Distance its cosine distance
	// operator, as OPERATOR(schema.<=>).
	Type, Ops, Distance string
	// PlanFresh, when not nil, is put before the nearest-neighbour
	// query's arguments so the driver plans it with its values each time
	// (pgx.QueryExecModeExec): a prepared statement's generic plan sorts
	// the prefix's rows instead of walking the index (measured 2-3x
	// slower; BENCHMARKS.md).
	PlanFresh any
	made      sync.Map // dims → the index is made
}

// MaxIndexedDims is the longest embedding pgvector's HNSW index takes.
const MaxIndexedDims = 2000

// EnableVectorIndex makes the memory store use v: it adds the vector
// column if missing and fills it for the items put before. PostgreSQL's
// driver calls it at open when the extension is installed.
func (db *DB) EnableVectorIndex(ctx context.Context, v *VectorIndex) error {
	if err := db.d.Write(ctx, "memory vector column", func(tx Tx) error {
		tx.Queue(`ALTER TABLE memory_items ADD COLUMN IF NOT EXISTS embedding_vec ` + v.Type)
		return nil
	}); err != nil {
		return err
	}
	filled := 0
	for {
		rows, err := db.d.Read().Query(ctx, `SELECT tenant, namespace, key, embedding FROM memory_items
			WHERE embedding IS NOT NULL AND embedding_vec IS NULL LIMIT 500`)
		if err != nil {
			return db.read("memory vector backfill", err)
		}
		type row struct {
			tenant, ns, key string
			emb             []byte
		}
		var batch []row
		for rows.Next() {
			var r row
			if err := rows.Scan(&r.tenant, &r.ns, &r.key, &r.emb); err != nil {
				rows.Close()
				return db.read("memory vector backfill", err)
			}
			batch = append(batch, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return db.read("memory vector backfill", err)
		}
		if len(batch) == 0 {
			break
		}
		if err := db.d.Write(ctx, "memory vector backfill", func(tx Tx) error {
			for _, r := range batch {
				tx.Queue(`UPDATE memory_items SET embedding_vec = $4::`+v.Type+` WHERE tenant = $1 AND namespace = $2 AND key = $3`,
					r.tenant, r.ns, r.key, vectorLiteral(DecodeVector(r.emb)))
			}
			return nil
		}); err != nil {
			return err
		}
		filled += len(batch)
	}
	db.vector = v
	db.logger.Info("memory store: pgvector index in use", "type", v.Type, "backfilled", filled)
	return nil
}

// VectorIndexed reports whether the memory store searches through a
// vector index (EnableVectorIndex).
func (db *DB) VectorIndexed() bool { return db.vector != nil }

// ensureVectorIndex makes the index of embeddings of length dims, once per
// process (CREATE INDEX IF NOT EXISTS: a replica that made it first wins).
func (db *DB) ensureVectorIndex(ctx context.Context, dims int) {
	v := db.vector
	if dims > MaxIndexedDims {
		return
	}
	if _, done := v.made.Load(dims); done {
		return
	}
	err := db.d.Write(ctx, "memory vector index", func(tx Tx) error {
		tx.Queue(fmt.Sprintf(`CREATE INDEX IF NOT EXISTS memory_items_vec_%d ON memory_items
			USING hnsw ((embedding_vec::%s(%d)) %s) WHERE dims = %d`, dims, v.Type, dims, v.Ops, dims))
		return nil
	})
	if err != nil {
		db.logger.Warn("memory store: make the vector index", "dims", dims, "err", err)
		return
	}
	v.made.Store(dims, true)
}

// indexedCandidates asks the vector index for the keep items under where
// (its arguments args) nearest q; ok is false when it found fewer (the
// caller scans exactly).
func (db *DB) indexedCandidates(ctx context.Context, where string, args []any, q []float32, keep int) (ClosingRows, bool, error) {
	v, d := db.vector, len(q)
	var n int64
	p := strconv.Itoa(len(args) + 1)
	cond := where + ` AND dims = ` + strconv.Itoa(d) + ` AND embedding_vec IS NOT NULL`
	if err := db.d.Read().QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM memory_items WHERE `+cond+
		fmt.Sprintf(` LIMIT %d) AS c`, keep), args...).Scan(&n); err != nil {
		return nil, false, db.read("memory search", err)
	}
	if int(n) < keep {
		return nil, false, nil
	}
	typ := fmt.Sprintf("%s(%d)", v.Type, d)
	qargs := append(slices.Clone(args), vectorLiteral(q))
	if v.PlanFresh != nil {
		qargs = append([]any{v.PlanFresh}, qargs...)
	}
	rows, err := db.d.Read().Query(ctx, `SELECT `+memoryCols+`, embedding FROM memory_items WHERE `+cond+
		` ORDER BY embedding_vec::`+typ+` `+v.Distance+` $`+p+`::`+typ+fmt.Sprintf(` LIMIT %d`, keep), qargs...)
	if err != nil {
		return nil, false, db.read("memory search", err)
	}
	return rows, true, nil
}

// vectorLiteral is v in pgvector's text form: [1,2,3].
func vectorLiteral(v []float32) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, x := range v {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatFloat(float64(x), 'g', -1, 32))
	}
	b.WriteByte(']')
	return b.String()
}
