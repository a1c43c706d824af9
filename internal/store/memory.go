package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Bounds of the memory store's items, checked before anything is written.
const (
	// MaxMemoryValueBytes bounds an item's value (its JSON text).
	MaxMemoryValueBytes = 64 << 10
	// MaxMemoryDepth bounds a namespace's labels.
	MaxMemoryDepth = 16
	// MaxMemoryLabelBytes bounds one namespace label, and a key.
	MaxMemoryLabelBytes = 256
	// MaxMemoryDims bounds an embedding's length.
	MaxMemoryDims = 8192
)

// MemoryError is a memory request the store refuses before touching the
// database: a bad namespace, key, value, TTL or embedding. It is ErrInvalid
// (errors.Is), so nothing was written; Field names the offending part
// ("namespace", "key", "value", "ttl", "filter", "embedding") and Reason
// says what is wrong, in words a client can act on.
type MemoryError struct {
	Field  string
	Reason string
}

// Error implements error.
func (e *MemoryError) Error() string { return "memory " + e.Field + ": " + e.Reason }

// Is makes a MemoryError ErrInvalid.
func (e *MemoryError) Is(target error) bool { return target == ErrInvalid }

func memErr(field, format string, args ...any) error {
	return &MemoryError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// MemoryItem is one item of the memory store.
type MemoryItem struct {
	Tenant string `json:"-"`
	// Namespace is the item's path of labels, e.g. ["users", "u1"].
	Namespace []string `json:"namespace"`
	Key       string   `json:"key"`
	// Value is a JSON object.
	Value     json.RawMessage `json:"value"`
	CreatedAt time.Time       `json:"created_at"`
	UpdatedAt time.Time       `json:"updated_at"`
	// ExpiresAt is when the item expires (nil: never); TTL is the TTL it
	// was put with (0: none), which a read with Refresh renews.
	ExpiresAt *time.Time    `json:"expires_at,omitempty"`
	TTL       time.Duration `json:"-"`
	// Indexed says the item has an embedding.
	Indexed bool `json:"-"`
	// Score is the cosine similarity to a search's vector (nil outside a
	// vector search, or for an item without an embedding).
	Score *float64 `json:"score,omitempty"`
}

// MemoryPut creates or replaces an item (Store.MemoryPut).
type MemoryPut struct {
	Tenant    string
	Namespace []string
	Key       string
	// Value must be a JSON object of at most MaxMemoryValueBytes.
	Value json.RawMessage
	// Embedding is the value's embedding (nil: not indexed); the store
	// keeps it at unit length.
	Embedding []float32
	// TTL makes the item expire TTL after now (0: never).
	TTL time.Duration
	// Now is the time of the put (zero: the store's clock).
	Now time.Time
}

// MemoryGet reads one item (Store.MemoryGet).
type MemoryGet struct {
	Tenant    string
	Namespace []string
	Key       string
	// Refresh renews an item's TTL from now (refreshOnRead).
	Refresh bool
	Now     time.Time
}

// MemorySearch lists the items under a namespace prefix (Store.MemorySearch).
type MemorySearch struct {
	Tenant string
	// Prefix is the namespace prefix (empty: every namespace).
	Prefix []string
	// Filter keeps the items whose value has each top-level key with an
	// equal JSON value.
	Filter map[string]json.RawMessage
	// Vector, when set, orders the items by cosine similarity to it
	// (highest first; items without an embedding of its length last, by
	// recency); otherwise they come by updated_at, latest first.
	Vector []float32
	// Contains, when set (and Vector is not), keeps the items whose value's
	// JSON text contains it, case-insensitively.
	Contains string
	// Limit (default 10, at most MaxLimit) and Offset page the result.
	Limit, Offset int
	// Refresh renews the TTL of the items returned.
	Refresh bool
	Now     time.Time
}

// DefaultMemoryLimit is a search's page size when it names none.
const DefaultMemoryLimit = 10

// MemoryNamespaces lists namespaces (Store.MemoryListNamespaces).
type MemoryNamespaces struct {
	Tenant string
	// Prefix and Suffix keep the namespaces that start, and end, with them.
	Prefix, Suffix []string
	// MaxDepth, when positive, cuts each namespace to its first MaxDepth
	// labels (duplicates merged).
	MaxDepth int
	// Limit (default DefaultLimit) and Offset page the result.
	Limit, Offset int
	Now           time.Time
}

// MemoryStore is the long-term memory store: JSON objects by tenant,
// namespace and key, with TTLs and search. An expired item is never
// returned, before or after MemorySweep deletes it.
type MemoryStore interface {
	// MemoryPut creates or replaces an item (an overwrite keeps its
	// CreatedAt) and returns it; a *MemoryError for a bad request, which
	// writes nothing.
	MemoryPut(ctx context.Context, p MemoryPut) (*MemoryItem, error)
	// MemoryGet returns an item, or ErrNotFound (expired included).
	MemoryGet(ctx context.Context, g MemoryGet) (*MemoryItem, error)
	// MemoryDelete deletes an item; deleting a missing one is not an error.
	MemoryDelete(ctx context.Context, tenant string, namespace []string, key string) error
	// MemorySearch lists the items under a prefix, as MemorySearch says.
	MemorySearch(ctx context.Context, s MemorySearch) ([]MemoryItem, error)
	// MemoryListNamespaces lists the distinct namespaces of the tenant's
	// live items, sorted.
	MemoryListNamespaces(ctx context.Context, n MemoryNamespaces) ([][]string, error)
	// MemorySweep deletes the items (of every tenant) expired at or before
	// now and returns how many it deleted.
	MemorySweep(ctx context.Context, now time.Time) (int, error)
}

// CheckNamespace returns a *MemoryError unless ns is a namespace an item
// can have: 1 to MaxMemoryDepth labels (0 allowed when prefix is true),
// each non-empty, at most MaxMemoryLabelBytes of valid UTF-8 without '.' or
// control characters.
func CheckNamespace(field string, ns []string, prefix bool) error {
	if len(ns) == 0 && !prefix {
		return memErr(field, "a namespace needs at least one label, e.g. [\"users\", \"u1\"]")
	}
	if len(ns) > MaxMemoryDepth {
		return memErr(field, "a namespace has at most %d labels, this one has %d", MaxMemoryDepth, len(ns))
	}
	for i, l := range ns {
		if err := checkLabel(l); err != "" {
			return memErr(field, "label %d %s", i, err)
		}
	}
	return nil
}

// checkLabel says what is wrong with a namespace label or key ("" nothing).
func checkLabel(l string) string {
	switch {
	case l == "":
		return "is empty"
	case len(l) > MaxMemoryLabelBytes:
		return fmt.Sprintf("is longer than %d bytes", MaxMemoryLabelBytes)
	case !utf8.ValidString(l):
		return "is not valid UTF-8"
	case strings.ContainsRune(l, '.'):
		return fmt.Sprintf("%q holds a '.', which separates labels", l)
	case strings.IndexFunc(l, unicode.IsControl) >= 0:
		return "holds a control character"
	}
	return ""
}

// CheckMemoryKey returns a *MemoryError unless key is a valid item key:
// non-empty, at most MaxMemoryLabelBytes of valid UTF-8 without NUL bytes.
func CheckMemoryKey(key string) error {
	switch {
	case key == "":
		return memErr("key", "is required")
	case len(key) > MaxMemoryLabelBytes:
		return memErr("key", "is longer than %d bytes", MaxMemoryLabelBytes)
	case !utf8.ValidString(key) || strings.IndexByte(key, 0) >= 0:
		return memErr("key", "must be valid UTF-8 without NUL bytes")
	}
	return nil
}

// CheckMemoryValue returns a *MemoryError unless v is a JSON object of at
// most MaxMemoryValueBytes of valid UTF-8.
func CheckMemoryValue(v json.RawMessage) error {
	if len(v) > MaxMemoryValueBytes {
		return memErr("value", "is %d bytes of JSON, more than the %d allowed", len(v), MaxMemoryValueBytes)
	}
	t := bytes.TrimSpace(v)
	if len(t) == 0 || t[0] != '{' || !json.Valid(t) {
		return memErr("value", "must be a JSON object")
	}
	if !utf8.Valid(t) || bytes.Contains(t, []byte(`\u0000`)) {
		return memErr("value", "must be valid UTF-8 without NUL characters")
	}
	return nil
}

// JoinNamespace is the stored form of a namespace: its labels joined with '.'.
func JoinNamespace(ns []string) string { return strings.Join(ns, ".") }

// SplitNamespace is the namespace of a stored (or dotted) form.
func SplitNamespace(s string) []string {
	if s == "" {
		return []string{}
	}
	return strings.Split(s, ".")
}

// Validate checks a put.
func (p *MemoryPut) Validate() error {
	if err := CheckText("memory put", "tenant", p.Tenant); err != nil {
		return err
	}
	if err := CheckNamespace("namespace", p.Namespace, false); err != nil {
		return err
	}
	if err := CheckMemoryKey(p.Key); err != nil {
		return err
	}
	if err := CheckMemoryValue(p.Value); err != nil {
		return err
	}
	if p.TTL < 0 {
		return memErr("ttl", "must not be negative")
	}
	if p.Embedding != nil {
		if len(p.Embedding) == 0 || len(p.Embedding) > MaxMemoryDims {
			return memErr("embedding", "must have 1 to %d dimensions, not %d", MaxMemoryDims, len(p.Embedding))
		}
		if Normalize(p.Embedding) == nil {
			return memErr("embedding", "must be finite and not all zeros")
		}
	}
	return nil
}

// Normalize returns v scaled to unit length (a new slice), or nil when it
// has no length (all zeros) or holds a NaN or an infinity.
func Normalize(v []float32) []float32 {
	var sum float64
	for _, x := range v {
		f := float64(x)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil
		}
		sum += f * f
	}
	if sum == 0 || math.IsInf(sum, 0) {
		return nil
	}
	n := math.Sqrt(sum)
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(float64(x) / n)
	}
	return out
}

// EncodeVector is v as little-endian float32s.
func EncodeVector(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// DecodeVector is the vector EncodeVector made b from.
func DecodeVector(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// DotBytes is the dot product of q and the little-endian float32 vector b
// of the same length (the caller checks the lengths).
func DotBytes(q []float32, b []byte) float64 {
	var s float32
	for i, x := range q {
		s += x * math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return float64(s)
}

// errMemoryFilter is a filter that is not a map of JSON values.
var errMemoryFilter = errors.New("a filter maps top-level keys to JSON values")
