// Package memory is the long-term memory store as agents and the API use
// it: a Service over the store's items (store.MemoryStore) that embeds
// values on put and queries on search when an embedding model is
// configured (stackbone.json "embeddings"), the tenant-scoped view tools
// get as ctx.store (tool.Memory), and the built-in memory tools an agent
// file turns on with `memory` (remember, recall, forget).
//
// Search with a query is an exact scan: every item under the namespace
// prefix is scored by cosine similarity in Go, on SQLite and PostgreSQL
// alike (see BENCHMARKS.md for its cost). Without an embedding model a
// query keeps the items whose value contains it, case-insensitively,
// latest first.
package memory

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/stackbone/stackbone/internal/clock"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/tool"
)

// Config is what New builds a Service from; Store is required.
type Config struct {
	Store store.MemoryStore
	// Embedder embeds values and queries (nil: no semantic search).
	Embedder Embedder
	Logger   *slog.Logger
	Clock    clock.Clock
}

// Service is the memory store of a server.
type Service struct {
	st     store.MemoryStore
	emb    Embedder
	logger *slog.Logger
	clock  clock.Clock
}

// New returns the Service of cfg.
func New(cfg Config) *Service {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Service{st: cfg.Store, emb: cfg.Embedder, logger: logger, clock: clock.Or(cfg.Clock)}
}

// Semantic reports whether search with a query orders by similarity (an
// embedding model is configured).
func (s *Service) Semantic() bool { return s.emb != nil }

// PutRequest is one put (Service.Put).
type PutRequest struct {
	Namespace []string
	Key       string
	Value     json.RawMessage
	tool.MemoryPut
}

// Put stores an item, embedding the text of its indexed fields when an
// embedding model is configured.
func (s *Service) Put(ctx context.Context, tenant string, r PutRequest) (*store.MemoryItem, error) {
	p := store.MemoryPut{Tenant: tenant, Namespace: r.Namespace, Key: r.Key, Value: r.Value, TTL: r.TTL, Now: s.clock.Now()}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if s.emb != nil && !r.NoIndex {
		text, err := IndexText(r.Value, r.Index)
		if err != nil {
			return nil, err
		}
		if strings.TrimSpace(text) != "" {
			vecs, err := s.emb.Embed(ctx, []string{text})
			if err != nil {
				return nil, err
			}
			p.Embedding = vecs[0]
		}
	}
	return s.st.MemoryPut(ctx, p)
}

// Get returns an item, or store.ErrNotFound.
func (s *Service) Get(ctx context.Context, tenant string, namespace []string, key string, refresh bool) (*store.MemoryItem, error) {
	return s.st.MemoryGet(ctx, store.MemoryGet{Tenant: tenant, Namespace: namespace, Key: key, Refresh: refresh, Now: s.clock.Now()})
}

// Delete deletes an item.
func (s *Service) Delete(ctx context.Context, tenant string, namespace []string, key string) error {
	return s.st.MemoryDelete(ctx, tenant, namespace, key)
}

// Search lists the items under prefix: by similarity to the query when an
// embedding model is configured, else (a query keeping the items that
// contain it) latest first.
func (s *Service) Search(ctx context.Context, tenant string, prefix []string, o tool.MemorySearch) ([]store.MemoryItem, error) {
	q := store.MemorySearch{Tenant: tenant, Prefix: prefix, Filter: o.Filter, Limit: o.Limit, Offset: o.Offset, Refresh: o.Refresh, Now: s.clock.Now()}
	if strings.TrimSpace(o.Query) != "" {
		if s.emb == nil {
			q.Contains = o.Query
		} else {
			vecs, err := s.emb.Embed(ctx, []string{o.Query})
			if err != nil {
				return nil, err
			}
			q.Vector = vecs[0]
		}
	}
	return s.st.MemorySearch(ctx, q)
}

// ListNamespaces lists the tenant's namespaces under prefix.
func (s *Service) ListNamespaces(ctx context.Context, tenant string, prefix []string, o tool.MemoryNamespaces) ([][]string, error) {
	return s.st.MemoryListNamespaces(ctx, store.MemoryNamespaces{Tenant: tenant, Prefix: prefix, Suffix: o.Suffix, MaxDepth: o.MaxDepth,
		Limit: o.Limit, Offset: o.Offset, Now: s.clock.Now()})
}

// Sweep deletes the items expired at now.
func (s *Service) Sweep(ctx context.Context, now time.Time) (int, error) {
	return s.st.MemorySweep(ctx, now)
}

// For is the tenant's memory store as its tools see it (nil when s is nil).
func (s *Service) For(tenant string) tool.Memory {
	if s == nil {
		return nil
	}
	return scoped{s: s, tenant: tenant}
}

// scoped is one tenant's view of the store (ctx.store).
type scoped struct {
	s      *Service
	tenant string
}

var _ tool.Memory = scoped{}

func (m scoped) Put(ctx context.Context, namespace []string, key string, value json.RawMessage, o tool.MemoryPut) (*store.MemoryItem, error) {
	return m.s.Put(ctx, m.tenant, PutRequest{Namespace: namespace, Key: key, Value: value, MemoryPut: o})
}

func (m scoped) Get(ctx context.Context, namespace []string, key string, refresh bool) (*store.MemoryItem, error) {
	it, err := m.s.Get(ctx, m.tenant, namespace, key, refresh)
	if isNotFound(err) {
		return nil, nil
	}
	return it, err
}

func (m scoped) Delete(ctx context.Context, namespace []string, key string) error {
	return m.s.Delete(ctx, m.tenant, namespace, key)
}

func (m scoped) Search(ctx context.Context, prefix []string, o tool.MemorySearch) ([]store.MemoryItem, error) {
	return m.s.Search(ctx, m.tenant, prefix, o)
}

func (m scoped) ListNamespaces(ctx context.Context, prefix []string, o tool.MemoryNamespaces) ([][]string, error) {
	return m.s.ListNamespaces(ctx, m.tenant, prefix, o)
}

// IndexText is the text of value embedded for search: the text of each
// field of fields (a dotted path into nested objects, e.g. "profile.bio")
// that the value has, or of the whole value when fields is nil. The text of
// a string is itself; of an object or array, its members' texts, one a
// line (object keys in order); of anything else, its JSON.
func IndexText(value json.RawMessage, fields []string) (string, error) {
	var v any
	if err := json.Unmarshal(value, &v); err != nil {
		return "", &store.MemoryError{Field: "value", Reason: "must be a JSON object"}
	}
	if fields == nil {
		return textOf(v), nil
	}
	var parts []string
	for _, f := range fields {
		if f == "" {
			return "", &store.MemoryError{Field: "index", Reason: "a field path is empty"}
		}
		cur := v
		for _, seg := range strings.Split(f, ".") {
			obj, ok := cur.(map[string]any)
			if !ok {
				cur = nil
				break
			}
			cur = obj[seg]
		}
		if cur != nil {
			parts = append(parts, textOf(cur))
		}
	}
	return strings.Join(parts, "\n"), nil
}

func textOf(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var parts []string
		for _, k := range keys {
			if t := textOf(x[k]); t != "" {
				parts = append(parts, t)
			}
		}
		return strings.Join(parts, "\n")
	case []any:
		var parts []string
		for _, e := range x {
			if t := textOf(e); t != "" {
				parts = append(parts, t)
			}
		}
		return strings.Join(parts, "\n")
	case nil:
		return ""
	case bool:
		return strconv.FormatBool(x)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	}
	return fmt.Sprint(v)
}
