package store

import (
	"bytes"
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"
)

var _ MemoryStore = (*DB)(nil)

// liveItem is the condition of an item that has not expired at $2.
const liveItem = `(expires_at IS NULL OR expires_at > $2)`

// underPrefix is the condition of an item whose namespace is $3 or under it
// ($4 is $3 + '.', $5 is $3 + '/': '/' follows '.' in byte order).
const underPrefix = `(namespace = $3 OR (namespace >= $4 AND namespace < $5))`

// prefixArgs are the arguments of underPrefix for ns.
func prefixArgs(ns []string) (string, string, string) {
	p := JoinNamespace(ns)
	return p, p + ".", p + "/"
}

// MemoryPut creates or replaces an item.
func (db *DB) MemoryPut(ctx context.Context, p MemoryPut) (*MemoryItem, error) {
	if err := p.Validate(); err != nil {
		return nil, db.invalid(err)
	}
	now := p.Now
	if now.IsZero() {
		now = db.now()
	}
	now = micro(now)
	var emb any
	dims := 0
	if p.Embedding != nil {
		emb, dims = EncodeVector(Normalize(p.Embedding)), len(p.Embedding)
	}
	var expires, ttl any
	it := &MemoryItem{Tenant: p.Tenant, Namespace: slices.Clone(p.Namespace), Key: p.Key, Value: compactJSON(p.Value),
		UpdatedAt: now, TTL: p.TTL, Indexed: p.Embedding != nil}
	if p.TTL > 0 {
		e := micro(now.Add(p.TTL))
		it.ExpiresAt, expires, ttl = &e, e, int64(p.TTL/time.Second)
		if int64(p.TTL/time.Second) == 0 {
			ttl = int64(1)
		}
	}
	args := []any{p.Tenant, now, JoinNamespace(p.Namespace), p.Key, string(it.Value), emb, dims, now, expires, ttl}
	// With a vector index the embedding is also in the index's column.
	vecCol, vecVal, vecSet := "", "", ""
	if db.vector != nil {
		var lit any
		if p.Embedding != nil {
			lit = vectorLiteral(Normalize(p.Embedding))
			db.ensureVectorIndex(ctx, dims)
		}
		args = append(args, lit)
		vecCol, vecVal, vecSet = ", embedding_vec", ", $11::"+db.vector.Type, ", embedding_vec = excluded.embedding_vec"
	}
	err := db.d.Write(ctx, "memory put", func(tx Tx) error {
		// An expired item is replaced as a new one: its CreatedAt goes.
		return tx.QueryRowLast(ctx, `INSERT INTO memory_items (tenant, namespace, key, value, embedding, dims, created_at, updated_at, expires_at, ttl_seconds`+vecCol+`)
			VALUES ($1, $3, $4, $5, $6, $7, $8, $8, $9, $10`+vecVal+`)
			ON CONFLICT (tenant, namespace, key) DO UPDATE SET value = excluded.value, embedding = excluded.embedding, dims = excluded.dims,
				updated_at = excluded.updated_at, expires_at = excluded.expires_at, ttl_seconds = excluded.ttl_seconds`+vecSet+`,
				created_at = CASE WHEN memory_items.expires_at IS NOT NULL AND memory_items.expires_at <= $2 THEN excluded.created_at ELSE memory_items.created_at END
			RETURNING created_at`, args...).Scan(ScanTime(&it.CreatedAt))
	})
	if err != nil {
		return nil, err
	}
	return it, nil
}

// compactJSON is v without insignificant whitespace (v is valid JSON).
func compactJSON(v json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if err := json.Compact(&b, v); err != nil {
		return slices.Clone(v)
	}
	return b.Bytes()
}

const memoryCols = `namespace, key, value, created_at, updated_at, expires_at, ttl_seconds, dims`

// scanMemory scans memoryCols (and, when emb is not nil, the embedding
// after them).
func scanMemory(r Row, tenant string, emb *[]byte) (*MemoryItem, error) {
	var (
		ns    string
		value []byte
		ttl   *int64
		dims  int
	)
	it := MemoryItem{Tenant: tenant}
	dest := []any{&ns, &it.Key, &value, ScanTime(&it.CreatedAt), ScanTime(&it.UpdatedAt), ScanTimePtr(&it.ExpiresAt), &ttl, &dims}
	if emb != nil {
		dest = append(dest, emb)
	}
	if err := r.Scan(dest...); err != nil {
		return nil, err
	}
	it.Namespace, it.Value, it.Indexed = SplitNamespace(ns), json.RawMessage(value), dims > 0
	if ttl != nil {
		it.TTL = time.Duration(*ttl) * time.Second
	}
	return &it, nil
}

// MemoryGet returns a live item, or ErrNotFound.
func (db *DB) MemoryGet(ctx context.Context, g MemoryGet) (*MemoryItem, error) {
	if err := CheckText("memory get", "tenant", g.Tenant); err != nil {
		return nil, db.invalid(err)
	}
	if err := CheckNamespace("namespace", g.Namespace, false); err != nil {
		return nil, db.invalid(err)
	}
	if err := CheckMemoryKey(g.Key); err != nil {
		return nil, db.invalid(err)
	}
	now := g.Now
	if now.IsZero() {
		now = db.now()
	}
	ns := JoinNamespace(g.Namespace)
	it, err := scanMemory(db.d.Read().QueryRow(ctx, `SELECT `+memoryCols+` FROM memory_items
		WHERE tenant = $1 AND `+liveItem+` AND namespace = $3 AND key = $4`, g.Tenant, now, ns, g.Key), g.Tenant, nil)
	if errors.Is(err, ErrNoRows) {
		return nil, fmt.Errorf("memory item %q in %q: %w", g.Key, ns, ErrNotFound)
	}
	if err != nil {
		return nil, db.read("memory get", err)
	}
	if g.Refresh && it.TTL > 0 {
		if err := db.refresh(ctx, now, []MemoryItem{*it}); err != nil {
			return nil, err
		}
		e := micro(now.Add(it.TTL))
		it.ExpiresAt = &e
	}
	return it, nil
}

// refresh renews the expiry of items with a TTL from now, unless they
// expired meanwhile.
func (db *DB) refresh(ctx context.Context, now time.Time, items []MemoryItem) error {
	var due []MemoryItem
	for _, it := range items {
		if it.TTL > 0 {
			due = append(due, it)
		}
	}
	if len(due) == 0 {
		return nil
	}
	return db.d.Write(ctx, "memory refresh", func(tx Tx) error {
		for _, it := range due {
			tx.Queue(`UPDATE memory_items SET expires_at = $5 WHERE tenant = $1 AND namespace = $3 AND key = $4 AND ttl_seconds IS NOT NULL AND `+liveItem,
				it.Tenant, now, JoinNamespace(it.Namespace), it.Key, micro(now.Add(it.TTL)))
		}
		return nil
	})
}

// MemoryDelete deletes an item.
func (db *DB) MemoryDelete(ctx context.Context, tenant string, namespace []string, key string) error {
	if err := CheckText("memory delete", "tenant", tenant); err != nil {
		return db.invalid(err)
	}
	if err := CheckNamespace("namespace", namespace, false); err != nil {
		return db.invalid(err)
	}
	if err := CheckMemoryKey(key); err != nil {
		return db.invalid(err)
	}
	return db.d.Write(ctx, "memory delete", func(tx Tx) error {
		_, err := tx.Exec(ctx, `DELETE FROM memory_items WHERE tenant = $1 AND namespace = $2 AND key = $3`, tenant, JoinNamespace(namespace), key)
		return err
	})
}

// memoryFilter is a search's filter, decoded once.
type memoryFilter map[string]any

func decodeFilter(f map[string]json.RawMessage) (memoryFilter, error) {
	if len(f) == 0 {
		return nil, nil
	}
	out := memoryFilter{}
	for k, raw := range f {
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, memErr("filter", "%v: %q is not JSON", errMemoryFilter, k)
		}
		out[k] = v
	}
	return out, nil
}

// match reports whether value (a JSON object) has each of f's keys with an
// equal value.
func (f memoryFilter) match(value []byte) bool {
	if len(f) == 0 {
		return true
	}
	var obj map[string]any
	if err := json.Unmarshal(value, &obj); err != nil {
		return false
	}
	for k, want := range f {
		got, ok := obj[k]
		if !ok || !reflect.DeepEqual(got, want) {
			return false
		}
	}
	return true
}

// MemorySearch lists the live items under a prefix: by recency, or by
// similarity to a vector through an exact scan of the prefix's embeddings
// (one row at a time, keeping the best Offset+Limit).
func (db *DB) MemorySearch(ctx context.Context, s MemorySearch) ([]MemoryItem, error) {
	if err := CheckText("memory search", "tenant", s.Tenant, "query", s.Contains); err != nil {
		return nil, db.invalid(err)
	}
	if err := CheckNamespace("namespace_prefix", s.Prefix, true); err != nil {
		return nil, db.invalid(err)
	}
	if s.Limit < 0 || s.Offset < 0 {
		return nil, db.invalid(memErr("limit", "limit and offset must not be negative"))
	}
	filter, err := decodeFilter(s.Filter)
	if err != nil {
		return nil, db.invalid(err)
	}
	var q []float32
	if s.Vector != nil {
		if q = Normalize(s.Vector); q == nil {
			return nil, db.invalid(memErr("query", "the query's embedding must be finite and not all zeros"))
		}
	}
	now := s.Now
	if now.IsZero() {
		now = db.now()
	}
	limit := Limit(s.Limit, DefaultMemoryLimit)
	p, lo, hi := prefixArgs(s.Prefix)
	where := `tenant = $1 AND ` + liveItem
	args := []any{s.Tenant, now}
	if len(s.Prefix) > 0 {
		where += ` AND ` + underPrefix
		args = append(args, p, lo, hi)
	}
	contains := strings.ToLower(s.Contains)
	var out []MemoryItem
	if q == nil {
		sql := `SELECT ` + memoryCols + ` FROM memory_items WHERE ` + where + ` ORDER BY updated_at DESC, namespace, key`
		if filter == nil && contains == "" {
			sql += fmt.Sprintf(` LIMIT %d OFFSET %d`, limit, s.Offset)
		}
		rows, err := db.d.Read().Query(ctx, sql, args...)
		if err != nil {
			return nil, db.read("memory search", err)
		}
		skip := s.Offset
		if filter == nil && contains == "" {
			skip = 0
		}
		err = func() error {
			defer rows.Close()
			for rows.Next() && len(out) < limit {
				it, err := scanMemory(rows, s.Tenant, nil)
				if err != nil {
					return err
				}
				if !filter.match(it.Value) || (contains != "" && !strings.Contains(strings.ToLower(string(it.Value)), contains)) {
					continue
				}
				if skip > 0 {
					skip--
					continue
				}
				out = append(out, *it)
			}
			return rows.Err()
		}()
		if err != nil {
			return nil, db.read("memory search", err)
		}
	} else {
		out, err = db.vectorScan(ctx, where, args, q, filter, limit, s.Offset)
		if err != nil {
			return nil, err
		}
	}
	if s.Refresh {
		if err := db.refresh(ctx, now, out); err != nil {
			return nil, err
		}
		for i := range out {
			if out[i].TTL > 0 {
				e := micro(now.Add(out[i].TTL))
				out[i].ExpiresAt = &e
			}
		}
	}
	return out, nil
}

// scored is a candidate of a vector scan.
type scored struct {
	it    MemoryItem
	score float64
	// has is false for an item without an embedding of the query's length.
	has bool
}

// better orders candidates: scored before unscored, then by score, then
// by recency, then by namespace and key.
func better(a, b *scored) bool {
	if a.has != b.has {
		return a.has
	}
	if a.has && a.score != b.score {
		return a.score > b.score
	}
	if !a.it.UpdatedAt.Equal(b.it.UpdatedAt) {
		return a.it.UpdatedAt.After(b.it.UpdatedAt)
	}
	if an, bn := JoinNamespace(a.it.Namespace), JoinNamespace(b.it.Namespace); an != bn {
		return an < bn
	}
	return a.it.Key < b.it.Key
}

// worstFirst is a heap of the best candidates so far, the worst on top.
type worstFirst []*scored

func (h worstFirst) Len() int           { return len(h) }
func (h worstFirst) Less(i, j int) bool { return better(h[j], h[i]) }
func (h worstFirst) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *worstFirst) Push(x any)        { *h = append(*h, x.(*scored)) }
func (h *worstFirst) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// vectorScan is the exact scan: every live row under the prefix is read
// once, scored against q (unit length, as the stored embeddings are), and
// only the best offset+limit are kept.
func (db *DB) vectorScan(ctx context.Context, where string, args []any, q []float32, filter memoryFilter, limit, offset int) ([]MemoryItem, error) {
	keep := limit + offset
	var rows ClosingRows
	if db.vector != nil && filter == nil {
		var ok bool
		var err error
		if rows, ok, err = db.indexedCandidates(ctx, where, args, q, keep); err != nil {
			return nil, err
		} else if !ok {
			rows = nil
		}
	}
	if rows == nil {
		var err error
		if rows, err = db.d.Read().Query(ctx, `SELECT `+memoryCols+`, embedding FROM memory_items WHERE `+where, args...); err != nil {
			return nil, db.read("memory search", err)
		}
	}
	h := make(worstFirst, 0, keep+1)
	err := func() error {
		defer rows.Close()
		var emb []byte
		for rows.Next() {
			emb = emb[:0]
			it, err := scanMemory(rows, "", &emb)
			if err != nil {
				return err
			}
			if !filter.match(it.Value) {
				continue
			}
			c := &scored{it: *it}
			if len(emb) == 4*len(q) {
				c.has, c.score = true, DotBytes(q, emb)
			}
			if len(h) == keep && !better(c, h[0]) {
				continue
			}
			// The row's buffers are the driver's until the next row.
			c.it.Value = slices.Clone(c.it.Value)
			heap.Push(&h, c)
			if len(h) > keep {
				heap.Pop(&h)
			}
		}
		return rows.Err()
	}()
	if err != nil {
		return nil, db.read("memory search", err)
	}
	slices.SortFunc(h, func(a, b *scored) int {
		if better(a, b) {
			return -1
		}
		return 1
	})
	var out []MemoryItem
	for i, c := range h {
		if i < offset {
			continue
		}
		c.it.Tenant = args[0].(string)
		if c.has {
			s := c.score
			c.it.Score = &s
		}
		out = append(out, c.it)
	}
	return out, nil
}

// MemoryListNamespaces lists the distinct namespaces of live items.
func (db *DB) MemoryListNamespaces(ctx context.Context, n MemoryNamespaces) ([][]string, error) {
	if err := CheckText("memory namespaces", "tenant", n.Tenant); err != nil {
		return nil, db.invalid(err)
	}
	if err := CheckNamespace("prefix", n.Prefix, true); err != nil {
		return nil, db.invalid(err)
	}
	if err := CheckNamespace("suffix", n.Suffix, true); err != nil {
		return nil, db.invalid(err)
	}
	if n.MaxDepth < 0 || n.Limit < 0 || n.Offset < 0 {
		return nil, db.invalid(memErr("max_depth", "max_depth, limit and offset must not be negative"))
	}
	now := n.Now
	if now.IsZero() {
		now = db.now()
	}
	where := `tenant = $1 AND ` + liveItem
	args := []any{n.Tenant, now}
	if len(n.Prefix) > 0 {
		p, lo, hi := prefixArgs(n.Prefix)
		where += ` AND ` + underPrefix
		args = append(args, p, lo, hi)
	}
	rows, err := db.d.Read().Query(ctx, `SELECT DISTINCT namespace FROM memory_items WHERE `+where+` ORDER BY namespace`, args...)
	if err != nil {
		return nil, db.read("memory namespaces", err)
	}
	all, err := CollectRows(rows, func(r Rows) (*string, error) {
		var s string
		return &s, r.Scan(&s)
	})
	rows.Close()
	if err != nil {
		return nil, db.read("memory namespaces", err)
	}
	seen := map[string]bool{}
	var out [][]string
	for _, s := range all {
		ns := SplitNamespace(s)
		if len(n.Suffix) > 0 && (len(ns) < len(n.Suffix) || !slices.Equal(ns[len(ns)-len(n.Suffix):], n.Suffix)) {
			continue
		}
		if n.MaxDepth > 0 && len(ns) > n.MaxDepth {
			ns = ns[:n.MaxDepth]
		}
		if j := JoinNamespace(ns); !seen[j] {
			seen[j] = true
			out = append(out, ns)
		}
	}
	slices.SortFunc(out, func(a, b []string) int { return slices.Compare(a, b) })
	if n.Offset >= len(out) {
		return [][]string{}, nil
	}
	out = out[n.Offset:]
	if l := Limit(n.Limit, DefaultLimit); len(out) > l {
		out = out[:l]
	}
	return out, nil
}

// MemorySweep deletes expired items.
func (db *DB) MemorySweep(ctx context.Context, now time.Time) (int, error) {
	var n int64
	err := db.d.Write(ctx, "memory sweep", func(tx Tx) error {
		var err error
		n, err = tx.Exec(ctx, `DELETE FROM memory_items WHERE expires_at IS NOT NULL AND expires_at <= $1`, now)
		return err
	})
	return int(n), err
}
