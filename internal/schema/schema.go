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
	"reflect"
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

// Three caches, by the SHA-256 of a schema's text, least recently used
// going first. A compiled schema can take about 90 times its text in memory
// (a 64 KiB schema of many properties keeps ~5.7 MB), so what clients send
// is kept apart and bounded by size:
//   - cache: the server's own schemas (agents' tools, state keys), by count;
//   - formats: compiled response formats clients send, by the bytes of
//     their text (formatBudget);
//   - verdicts: client tool parameters, of which only whether they compile
//     is needed: no compiled schema is kept.
const (
	cacheSize    = 1024
	verdictSize  = 4096
	formatBudget = 1 << 20
)

// compiled is one cache entry: a schema (nil in verdicts), or why it does
// not compile, and the size of its text.
type compiled struct {
	key  [32]byte
	s    *Schema
	err  error
	size int
}

// lru keeps entries by key within a count (max) and a total size (budget;
// 0: none).
type lru struct {
	mu          sync.Mutex
	order       *list.List // of *compiled, most recently used first
	byKey       map[[32]byte]*list.Element
	max, budget int
	size        int
}

func newLRU(max, budget int) *lru {
	return &lru{order: list.New(), byKey: map[[32]byte]*list.Element{}, max: max, budget: budget}
}

var (
	cache    = newLRU(cacheSize, 0)
	formats  = newLRU(cacheSize, formatBudget)
	verdicts = newLRU(verdictSize, 0)
)

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
	if c.budget > 0 && e.size > c.budget {
		return // larger than the whole budget: not kept
	}
	c.byKey[e.key] = c.order.PushFront(e)
	c.size += e.size
	for c.order.Len() > c.max || (c.budget > 0 && c.size > c.budget) {
		last := c.order.Back()
		c.order.Remove(last)
		old := last.Value.(*compiled)
		delete(c.byKey, old.key)
		c.size -= old.size
	}
}

// cached compiles raw once per text: decode (which may be nil) decodes it
// on a cache miss. A schema that does not compile is cached too, so the
// same bad schema sent again costs no second compilation.
func cached(c *lru, raw []byte, decode func() (any, error)) (*Schema, error) {
	key := sha256.Sum256(raw)
	if e, ok := c.get(key); ok {
		return e.s, e.err
	}
	doc, err := decode()
	if err != nil {
		return nil, err
	}
	s, err := compile(doc)
	if c == verdicts {
		s = nil // only the verdict is kept, and returned
	}
	c.put(&compiled{key: key, s: s, err: err, size: len(raw)})
	return s, err
}

// decodeJSON decodes a schema's text for compile.
func decodeJSON(raw []byte) (any, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("schema is not valid JSON: %w", err)
	}
	return doc, nil
}

// Compile compiles raw (a JSON Schema document). An empty raw accepts any
// value.
func Compile(raw json.RawMessage) (*Schema, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		raw = json.RawMessage(`{}`)
	}
	return cached(cache, raw, func() (any, error) { return decodeJSON(raw) })
}

// CompileClient compiles a schema a client sent (a response format):
// within MaxDepth and MaxBytes and expanding through its references to at
// most MaxExpanded schemas (a *LimitError otherwise), then as Compile, in a
// cache of its own bounded by size.
func CompileClient(raw json.RawMessage) (*Schema, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		raw = json.RawMessage(`{}`)
	}
	if err := bounded(raw, MaxBytes); err != nil {
		return nil, err
	}
	return cached(formats, raw, func() (any, error) {
		doc, err := decodeJSON(raw)
		if err != nil {
			return nil, err
		}
		if err := expansion(doc); err != nil {
			return nil, err
		}
		return doc, nil
	})
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
	if err := expansion(doc); err != nil {
		return nil, err
	}
	if _, err := cached(verdicts, raw, func() (any, error) { return doc, nil }); err != nil {
		return nil, err
	}
	return raw, nil
}

// MaxExpanded is how many subschemas a client's schema may stand for once
// its references are followed: references can fan out (a definition that
// refers twice to the next, forty deep), so a schema of a few kilobytes can
// stand for billions of subschemas, and validating a value against it takes
// as long.
const MaxExpanded = 10000

// expansion refuses a decoded client schema that stands for more than
// MaxExpanded subschemas when its local references ("#", "#/pointer",
// "#anchor") are followed (a reference to a schema it is inside counts
// once: recursion follows the value, not the schema), and one with dynamic
// references, whose target is only known while validating.
func expansion(doc any) error {
	anchors := map[string]any{}
	var collect func(v any)
	collect = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if a, ok := v["$anchor"].(string); ok {
				anchors[a] = v
			}
			for _, e := range v {
				collect(e)
			}
		case []any:
			for _, e := range v {
				collect(e)
			}
		}
	}
	collect(doc)
	resolve := func(ref string) (any, bool) {
		if !strings.HasPrefix(ref, "#") {
			return nil, false
		}
		frag := ref[1:]
		if frag == "" {
			return doc, true
		}
		if !strings.HasPrefix(frag, "/") {
			n, ok := anchors[frag]
			return n, ok
		}
		cur := doc
		for _, tok := range strings.Split(frag[1:], "/") {
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
			switch c := cur.(type) {
			case map[string]any:
				next, ok := c[tok]
				if !ok {
					return nil, false
				}
				cur = next
			case []any:
				i, err := strconv.Atoi(tok)
				if err != nil || i < 0 || i >= len(c) {
					return nil, false
				}
				cur = c[i]
			default:
				return nil, false
			}
		}
		return cur, true
	}
	errTooMany := &LimitError{Reason: fmt.Sprintf("stands for more than %d subschemas once its $ref references are followed", MaxExpanded)}
	memo := map[uintptr]int{} // by the identity of a decoded object
	onPath := map[uintptr]bool{}
	var count func(v any) (int, error)
	count = func(v any) (int, error) {
		var m map[string]any
		switch v := v.(type) {
		case []any:
			n := 0
			for _, e := range v {
				c, err := count(e)
				if err != nil {
					return 0, err
				}
				if n += c; n > MaxExpanded {
					return 0, errTooMany
				}
			}
			return n, nil
		case map[string]any:
			m = v
		default:
			return 0, nil
		}
		key := reflect.ValueOf(m).Pointer()
		if n, ok := memo[key]; ok {
			return n, nil
		}
		if onPath[key] {
			return 1, nil
		}
		onPath[key] = true
		defer delete(onPath, key)
		for _, dyn := range []string{"$dynamicRef", "$recursiveRef"} {
			if _, ok := m[dyn]; ok {
				return 0, &LimitError{Reason: "uses " + dyn + ", which a client's schema may not"}
			}
		}
		n := 1
		for k, e := range m {
			if k == "$ref" {
				ref, _ := e.(string)
				target, ok := resolve(ref)
				if !ok {
					continue // compile refuses what does not resolve
				}
				e = target
			}
			c, err := count(e)
			if err != nil {
				return 0, err
			}
			if n += c; n > MaxExpanded {
				return 0, errTooMany
			}
		}
		memo[key] = n
		return n, nil
	}
	_, err := count(doc)
	return err
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

// ValidateClient is Validate for a schema a client sent (CompileClient).
func ValidateClient(raw, value json.RawMessage) error {
	s, err := CompileClient(raw)
	if err != nil {
		return err
	}
	return s.Validate(value)
}
