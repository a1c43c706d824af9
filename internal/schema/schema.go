// Package schema compiles and applies JSON Schemas: tool arguments, edited
// arguments of a decision, editable state keys, resume payloads. Compiled
// schemas are cached by their text.
package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"

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

var cache sync.Map // string -> *Schema

// Compile compiles raw (a JSON Schema document). An empty raw accepts any
// value.
func Compile(raw json.RawMessage) (*Schema, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage(`{}`)
	}
	key := string(raw)
	if s, ok := cache.Load(key); ok {
		return s.(*Schema), nil
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("schema is not valid JSON: %w", err)
	}
	out, err := compile(doc)
	if err != nil {
		return nil, err
	}
	cache.Store(key, out)
	return out, nil
}

// compile compiles a decoded schema document. References may name only
// the document itself and the standard meta-schemas: nothing is loaded from
// files or the network.
func compile(doc any) (*Schema, error) {
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

// ToolParameters checks the parameters schema a client declares for a tool
// on any wire: absent or null means none (nil is returned); anything else
// must be a JSON object that compiles as a JSON Schema describing an object.
// The error says what is wrong, for the wire to report as a 400. Client
// schemas are not cached.
func ToolParameters(raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("not valid JSON: %w", err)
	}
	m, ok := doc.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("must be a JSON Schema object, not %s", jsonKind(doc))
	}
	if t, ok := m["type"]; ok && !describesObject(t) {
		return nil, errors.New(`must describe an object: its "type" must be "object"`)
	}
	if _, err := compile(doc); err != nil {
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
