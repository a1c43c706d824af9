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
	if m, ok := doc.(map[string]any); ok {
		delete(m, "$schema") // draft is ours to choose; zod emits 2020-12 anyway
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("mem://schema.json", doc); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	s, err := c.Compile("mem://schema.json")
	if err != nil {
		return nil, fmt.Errorf("schema does not compile: %w", err)
	}
	out := &Schema{s: s}
	cache.Store(key, out)
	return out, nil
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
