// Package schema compiles and applies JSON Schemas: tool arguments, edited
// arguments of a decision, editable state keys, resume payloads. Compiled
// schemas are cached by the digest of their text. Schemas a client sends
// (its tools' parameters, a response format) are bounded in depth and size
// before they are compiled.
package schema

import (
	"bytes"
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Schema is a compiled JSON Schema.
type Schema struct {
	s *jsonschema.Schema
}

// ValidationError lists why a value does not match a schema.
type ValidationError struct {
	// Problems are "path: message" lines, sorted.
	Problems []string
}

func (e *ValidationError) Error() string {
	return strings.Join(e.Problems, "; ")
}

// Bounds on a schema a client sends. Compiling costs time that grows faster
// than the schema: a 64 KiB schema compiles in up to a tenth of a second,
// one nested 1,000 deep in seconds.
const (
	// MaxDepth is how deep a client's schema may nest JSON objects and
	// arrays (a property of a property is two levels: the schema and its
	// "properties").
	MaxDepth = 64
	// MaxBytes is the size of one client schema.
	MaxBytes = 64 << 10
	// MaxRequestBytes is the size of the client tool schemas of one
	// request together.
	MaxRequestBytes = 256 << 10
)

// LimitError says a client's schema is beyond one of the bounds.
type LimitError struct {
	// Reason says which bound, in words for the client.
	Reason string
}

func (e *LimitError) Error() string { return e.Reason }

// cacheSize is how many compiled schemas are kept (least recently used go).
const cacheSize = 1024

// compiled is one cache entry: a schema, or why it does not compile.
type compiled struct {
	key [32]byte
	s   *Schema
	err error
}

// lru keeps compiled schemas by the SHA-256 of their text.
type lru struct {
	mu    sync.Mutex
	order *list.List // of *compiled, most recently used first
	byKey map[[32]byte]*list.Element
}

var cache = &lru{order: list.New(), byKey: map[[32]byte]*list.Element{}}

// compiles counts schema compilations (for tests of the cache).
var compiles atomic.Int64

func (c *lru) get(key [32]byte) (*compiled, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[key]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*compiled), true
}

func (c *lru) put(e *compiled) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[e.key]; ok {
		c.order.MoveToFront(el)
		return
	}
	c.byKey[e.key] = c.order.PushFront(e)
	for c.order.Len() > cacheSize {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.byKey, last.Value.(*compiled).key)
	}
}

// cached compiles raw once per text: decode (which may be nil) decodes it
// on a cache miss. A schema that does not compile is cached too, so the
// same bad schema sent again costs no second compilation.
func cached(raw []byte, decode func() (any, error)) (*Schema, error) {
	key := sha256.Sum256(raw)
	if e, ok := cache.get(key); ok {
		return e.s, e.err
	}
	doc, err := decode()
	if err != nil {
		return nil, err
	}
	s, err := compile(doc)
	cache.put(&compiled{key: key, s: s, err: err})
	return s, err
}

// Compile compiles raw (a JSON Schema document). An empty raw accepts any
// value.
func Compile(raw json.RawMessage) (*Schema, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		raw = json.RawMessage(`{}`)
	}
	return cached(raw, func() (any, error) {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("schema is not valid JSON: %w", err)
		}
		return doc, nil
	})
}

// CompileClient compiles a schema a client sent (a response format):
// within MaxDepth and MaxBytes (a *LimitError otherwise), then as Compile.
func CompileClient(raw json.RawMessage) (*Schema, error) {
	if err := bounded(raw, MaxBytes); err != nil {
		return nil, err
	}
	return Compile(raw)
}

// bounded checks raw against MaxDepth and max bytes without decoding it.
func bounded(raw []byte, max int) error {
	if len(raw) > max {
		return &LimitError{Reason: fmt.Sprintf("is %d bytes: a schema may be at most %d", len(raw), max)}
	}
	depth, inString, escaped := 0, false, false
	for _, b := range raw {
		switch {
		case escaped:
			escaped = false
		case inString:
			switch b {
			case '\\':
				escaped = true
			case '"':
				inString = false
			}
		case b == '"':
			inString = true
		case b == '{' || b == '[':
			if depth++; depth > MaxDepth {
				return &LimitError{Reason: fmt.Sprintf("nests deeper than %d levels", MaxDepth)}
			}
		case b == '}' || b == ']':
			depth--
		}
	}
	return nil
}

// compile compiles a decoded schema document. References may name only
// the document itself and the standard meta-schemas: nothing is loaded from
// files or the network.
func compile(doc any) (*Schema, error) {
	compiles.Add(1)
	if m, ok := doc.(map[string]any); ok {
		delete(m, "$schema") // draft is ours to choose; zod emits 2020-12 anyway
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	if err := c.AddResource("mem://schema.json", doc); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	s, err := c.Compile("mem://schema.json")
	if err != nil {
		return nil, fmt.Errorf("schema does not compile: %w", err)
	}
	return &Schema{s: s}, nil
}

// noLoader refuses every external document a schema refers to.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external reference %q is not allowed", url)
}

// ToolParameters checks one client tool's parameters schema, as
// Tools.Parameters does for a request with one tool.
func ToolParameters(raw json.RawMessage) (json.RawMessage, error) {
	return NewTools(context.Background()).Parameters(raw)
}

// Tools checks the parameters schemas a client declares for its tools in
// one request, on any wire, within bounds the request's schemas share.
type Tools struct {
	ctx  context.Context
	used int
}

// NewTools starts the checks of one request's tools; ctx is the request's:
// once it ends (the client went away), no further schema is compiled.
func NewTools(ctx context.Context) *Tools { return &Tools{ctx: ctx} }

// Parameters checks one tool's parameters schema: absent or null means none
// (nil is returned); anything else must be a JSON object within MaxDepth and
// MaxBytes, the request's schemas together within MaxRequestBytes (a
// *LimitError otherwise), that compiles as a JSON Schema describing an
// object. The error says what is wrong, for the wire to report as a 400;
// once the request's context ended it is the context's error. Compiled
// schemas are cached by digest, so a client sending the same tools on every
// request compiles them once.
func (t *Tools) Parameters(raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if err := t.ctx.Err(); err != nil {
		return nil, err
	}
	if err := bounded(raw, MaxBytes); err != nil {
		return nil, err
	}
	if t.used += len(raw); t.used > MaxRequestBytes {
		return nil, &LimitError{Reason: fmt.Sprintf("takes the request's tool schemas beyond %d bytes together", MaxRequestBytes)}
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("not valid JSON: %w", err)
	}
	m, ok := doc.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("must be a JSON Schema object, not %s", jsonKind(doc))
	}
	if ty, ok := m["type"]; ok && !describesObject(ty) {
		return nil, errors.New(`must describe an object: its "type" must be "object"`)
	}
	if _, err := cached(raw, func() (any, error) { return doc, nil }); err != nil {
		return nil, err
	}
	return raw, nil
}

// describesObject reports whether a schema's "type" admits objects.
func describesObject(t any) bool {
	switch t := t.(type) {
	case string:
		return t == "object"
	case []any:
		for _, v := range t {
			if v == "object" {
				return true
			}
		}
	}
	return false
}

// jsonKind names the JSON type of a decoded value.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return "a number"
}

// Validate checks a JSON value; a mismatch is a *ValidationError.
func (s *Schema) Validate(value json.RawMessage) error {
	if len(bytes.TrimSpace(value)) == 0 {
		value = json.RawMessage(`null`)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(value))
	if err != nil {
		return &ValidationError{Problems: []string{"value is not valid JSON"}}
	}
	if probs := outOfRange(inst, ""); len(probs) > 0 {
		sort.Strings(probs)
		return &ValidationError{Problems: probs}
	}
	return s.ValidateValue(inst)
}

// outOfRange lists the numbers of a decoded JSON value that no tool could
// read: beyond float64 (such as 1e400), which a schema's "number" accepts
// but every JSON decoder a tool uses (Go's, JavaScript's) refuses or turns
// into Infinity.
func outOfRange(v any, path string) []string {
	switch v := v.(type) {
	case json.Number:
		if _, err := strconv.ParseFloat(string(v), 64); err != nil {
			return []string{fmt.Sprintf("%s: number %s is out of range (beyond a 64-bit float)", or(path, "/"), v)}
		}
	case map[string]any:
		var out []string
		for k, e := range v {
			out = append(out, outOfRange(e, path+"/"+k)...)
		}
		return out
	case []any:
		var out []string
		for i, e := range v {
			out = append(out, outOfRange(e, path+"/"+strconv.Itoa(i))...)
		}
		return out
	}
	return nil
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// ValidateValue checks a decoded JSON value (from encoding/json with UseNumber,
// or jsonschema.UnmarshalJSON).
func (s *Schema) ValidateValue(v any) error {
	err := s.s.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &ValidationError{Problems: []string{err.Error()}}
	}
	var probs []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			path := "/" + strings.Join(e.InstanceLocation, "/")
			probs = append(probs, fmt.Sprintf("%s: %s", path, e.ErrorKind.LocalizedString(printer)))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	sort.Strings(probs)
	return &ValidationError{Problems: probs}
}

// Validate compiles raw and validates value against it.
func Validate(raw, value json.RawMessage) error {
	s, err := Compile(raw)
	if err != nil {
		return err
	}
	return s.Validate(value)
}
