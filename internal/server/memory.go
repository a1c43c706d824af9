package server

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/stackbone/stackbone/internal/apierror"
	"github.com/stackbone/stackbone/internal/memory"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/tool"
	"github.com/stackbone/stackbone/internal/wire/httpjson"
)

// The memory store's routes take LangGraph's store API shapes (its SDKs'
// putItem, getItem, deleteItem, searchItems and listNamespaces), under
// /v1/store, on the caller's tenant.

// StoreItemView is an item as the store routes answer it (LangGraph's Item,
// SearchItem with score).
type StoreItemView struct {
	Namespace []string        `json:"namespace"`
	Key       string          `json:"key"`
	Value     json.RawMessage `json:"value"`
	CreatedAt time.Time       `json:"created_at"`
	UpdatedAt time.Time       `json:"updated_at"`
	ExpiresAt *time.Time      `json:"expires_at,omitempty"`
	Score     *float64        `json:"score,omitempty"`
}

func itemView(it store.MemoryItem) StoreItemView {
	return StoreItemView{Namespace: it.Namespace, Key: it.Key, Value: it.Value, CreatedAt: it.CreatedAt, UpdatedAt: it.UpdatedAt,
		ExpiresAt: it.ExpiresAt, Score: it.Score}
}

// StorePutRequest is the body of PUT /v1/store/items.
type StorePutRequest struct {
	Namespace []string        `json:"namespace"`
	Key       string          `json:"key"`
	Value     json.RawMessage `json:"value"`
	// Index is null (the whole value), false (no embedding) or the field
	// paths to embed.
	Index json.RawMessage `json:"index"`
	// TTL is in minutes (null: never expires).
	TTL *float64 `json:"ttl"`
}

// StoreDeleteRequest is the body of DELETE /v1/store/items.
type StoreDeleteRequest struct {
	Namespace []string `json:"namespace"`
	Key       string   `json:"key"`
}

// StoreSearchRequest is the body of POST /v1/store/items/search.
type StoreSearchRequest struct {
	NamespacePrefix []string                   `json:"namespace_prefix"`
	Filter          map[string]json.RawMessage `json:"filter"`
	Limit           *int                       `json:"limit"`
	Offset          int                        `json:"offset"`
	Query           *string                    `json:"query"`
	RefreshTTL      *bool                      `json:"refresh_ttl"`
}

// StoreNamespacesRequest is the body of POST /v1/store/namespaces.
type StoreNamespacesRequest struct {
	Prefix   []string `json:"prefix"`
	Suffix   []string `json:"suffix"`
	MaxDepth *int     `json:"max_depth"`
	Limit    *int     `json:"limit"`
	Offset   int      `json:"offset"`
}

func (s *Server) memoryRoutes() {
	s.Handle("PUT /v1/store/items", WireOpenAI, true, requires(ActMemory, s.putStoreItem))
	s.Handle("GET /v1/store/items", WireOpenAI, true, s.getStoreItem)
	s.Handle("DELETE /v1/store/items", WireOpenAI, true, requires(ActMemory, s.deleteStoreItem))
	s.Handle("POST /v1/store/items/search", WireOpenAI, true, s.searchStoreItems)
	s.Handle("POST /v1/store/namespaces", WireOpenAI, true, s.listStoreNamespaces)
}

// errNoMemory is the answer of a server built without a memory store.
var errNoMemory = apierror.New(apierror.Unavailable, "memory_unavailable", "This server has no memory store.")

// memory is the server's memory store, or errNoMemory.
func (s *Server) memory() (*memory.Service, error) {
	if s.Runner.Memory == nil {
		return nil, errNoMemory
	}
	return s.Runner.Memory, nil
}

func (s *Server) putStoreItem(w http.ResponseWriter, r *http.Request) error {
	mem, err := s.memory()
	if err != nil {
		return err
	}
	var req StorePutRequest
	if err := decodeRequired(r, &req); err != nil {
		return err
	}
	put := memory.PutRequest{Namespace: req.Namespace, Key: req.Key, Value: req.Value}
	if req.TTL != nil {
		if *req.TTL <= 0 || math.IsNaN(*req.TTL) || math.IsInf(*req.TTL, 0) || *req.TTL > 1e9 {
			return apierror.Invalid("ttl", "`ttl` is a positive number of minutes (null: the item never expires).")
		}
		put.TTL = time.Duration(*req.TTL * float64(time.Minute))
	}
	switch string(req.Index) {
	case "", "null", "true":
	case "false":
		put.NoIndex = true
	default:
		if err := json.Unmarshal(req.Index, &put.Index); err != nil {
			return apierror.Invalid("index", "`index` is false (no embedding), null (the whole value) or a list of field paths.")
		}
	}
	if _, err := mem.Put(r.Context(), PrincipalFrom(r.Context()).Tenant, put); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) getStoreItem(w http.ResponseWriter, r *http.Request) error {
	mem, err := s.memory()
	if err != nil {
		return err
	}
	q := r.URL.Query()
	if !q.Has("namespace") || !q.Has("key") {
		return apierror.Invalid("namespace", "`namespace` (its labels joined with '.') and `key` are required query parameters.")
	}
	refresh := false
	if v := q.Get("refresh_ttl"); v != "" {
		if refresh, err = strconv.ParseBool(v); err != nil {
			return apierror.Invalid("refresh_ttl", "`refresh_ttl` is true or false.")
		}
	}
	it, err := mem.Get(r.Context(), PrincipalFrom(r.Context()).Tenant, store.SplitNamespace(q.Get("namespace")), q.Get("key"), refresh)
	if errors.Is(err, store.ErrNotFound) {
		return apierror.New(apierror.NotFound, "not_found", "No item with this namespace and key (or it expired).")
	}
	if err != nil {
		return err
	}
	return httpjson.Write(w, http.StatusOK, itemView(*it))
}

func (s *Server) deleteStoreItem(w http.ResponseWriter, r *http.Request) error {
	mem, err := s.memory()
	if err != nil {
		return err
	}
	var req StoreDeleteRequest
	if err := decodeRequired(r, &req); err != nil {
		return err
	}
	if err := mem.Delete(r.Context(), PrincipalFrom(r.Context()).Tenant, req.Namespace, req.Key); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// pageParams checks a store body's limit (def when nil) and offset.
func pageParams(limit *int, offset, def int) (int, error) {
	l := def
	if limit != nil {
		l = *limit
	}
	if l < 1 || l > store.MaxLimit {
		return 0, apierror.Invalid("limit", "`limit` is 1 to %d.", store.MaxLimit)
	}
	if offset < 0 {
		return 0, apierror.Invalid("offset", "`offset` must not be negative.")
	}
	return l, nil
}

func (s *Server) searchStoreItems(w http.ResponseWriter, r *http.Request) error {
	mem, err := s.memory()
	if err != nil {
		return err
	}
	var req StoreSearchRequest
	if err := decodeOptional(r, &req); err != nil {
		return err
	}
	limit, err := pageParams(req.Limit, req.Offset, store.DefaultMemoryLimit)
	if err != nil {
		return err
	}
	o := tool.MemorySearch{Filter: req.Filter, Limit: limit, Offset: req.Offset}
	if req.Query != nil {
		o.Query = *req.Query
	}
	if req.RefreshTTL != nil {
		o.Refresh = *req.RefreshTTL
	}
	items, err := mem.Search(r.Context(), PrincipalFrom(r.Context()).Tenant, req.NamespacePrefix, o)
	if err != nil {
		return err
	}
	out := struct {
		Items []StoreItemView `json:"items"`
	}{Items: make([]StoreItemView, 0, len(items))}
	for _, it := range items {
		out.Items = append(out.Items, itemView(it))
	}
	return httpjson.Write(w, http.StatusOK, out)
}

func (s *Server) listStoreNamespaces(w http.ResponseWriter, r *http.Request) error {
	mem, err := s.memory()
	if err != nil {
		return err
	}
	var req StoreNamespacesRequest
	if err := decodeOptional(r, &req); err != nil {
		return err
	}
	limit, err := pageParams(req.Limit, req.Offset, store.DefaultLimit)
	if err != nil {
		return err
	}
	o := tool.MemoryNamespaces{Suffix: req.Suffix, Limit: limit, Offset: req.Offset}
	if req.MaxDepth != nil {
		if *req.MaxDepth < 1 {
			return apierror.Invalid("max_depth", "`max_depth` is a positive number of labels (null: whole namespaces).")
		}
		o.MaxDepth = *req.MaxDepth
	}
	nss, err := mem.ListNamespaces(r.Context(), PrincipalFrom(r.Context()).Tenant, req.Prefix, o)
	if err != nil {
		return err
	}
	if nss == nil {
		nss = [][]string{}
	}
	return httpjson.Write(w, http.StatusOK, map[string]any{"namespaces": nss})
}
