package schema

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestValidateListsProblems(t *testing.T) {
	raw := json.RawMessage(`{"type":"object","properties":{"orderId":{"type":"string"},"amount":{"type":"number","minimum":0}},"required":["orderId","amount"]}`)
	if err := Validate(raw, json.RawMessage(`{"orderId":"o1","amount":5}`)); err != nil {
		t.Fatalf("valid value rejected: %v", err)
	}
	err := Validate(raw, json.RawMessage(`{"amount":-1}`))
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("want ValidationError, got %v", err)
	}
	msg := ve.Error()
	if !strings.Contains(msg, "orderId") || !strings.Contains(msg, "/amount") {
		t.Fatalf("problems do not name the fields: %q", msg)
	}
}

func TestEmptySchemaAcceptsAnything(t *testing.T) {
	if err := Validate(nil, json.RawMessage(`[1,2]`)); err != nil {
		t.Fatal(err)
	}
}

func TestToolParameters(t *testing.T) {
	for _, ok := range []string{``, `null`, `{}`, `{"type":"object","properties":{"a":{"type":"string"}}}`,
		`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object"}`, `{"properties":{"a":{"$ref":"#/$defs/x"}},"$defs":{"x":{"type":"number"}}}`} {
		if _, err := ToolParameters(json.RawMessage(ok)); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for bad, want := range map[string]string{
		`"x"`: "not a string", `5`: "not a number", `[1]`: "not an array", `true`: "not a boolean",
		`{"type":"string"}`:                    `"type" must be "object"`,
		`{"type":"object","properties":5}`:     "does not compile",
		`{"type":"object","required":"a"}`:     "does not compile",
		`{"$ref":"file:///etc/passwd"}`:        "not allowed",
		`{"$ref":"http://example.com/s.json"}`: "not allowed",
		`{"type":"object"`:                     "not valid JSON",
	} {
		_, err := ToolParameters(json.RawMessage(bad))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one containing %q", bad, err, want)
		}
	}
}

func TestNumbersBeyondFloat64AreRefused(t *testing.T) {
	err := Validate(nil, json.RawMessage(`{"a":[1,1e400],"b":{"c":-2E+999},"d":1e300}`))
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) != 2 ||
		ve.Problems[0] != "/a/1: number 1e400 is out of range (beyond a 64-bit float)" ||
		ve.Problems[1] != "/b/c: number -2E+999 is out of range (beyond a 64-bit float)" {
		t.Fatalf("got %v", err)
	}
	if err := Validate(json.RawMessage(`{"type":"number"}`), json.RawMessage(`1e400`)); err == nil || !strings.Contains(err.Error(), "/: number 1e400") {
		t.Fatalf("top-level number: %v", err)
	}
}

// nested is an object schema whose property "a" nests n objects deep.
func nested(n int) json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{"a":` + strings.Repeat(`{"type":"object","properties":{"a":`, n) +
		`{"type":"string"}` + strings.Repeat(`}}`, n) + `}}`)
}

func TestClientSchemasAreBounded(t *testing.T) {
	var le *LimitError
	if _, err := ToolParameters(nested(30)); err != nil {
		t.Fatalf("a schema 62 levels deep: %v", err)
	}
	if _, err := ToolParameters(nested(1000)); !errors.As(err, &le) || !strings.Contains(err.Error(), "nests deeper than 64 levels") {
		t.Fatalf("a schema 1,000 deep: %v", err)
	}
	// Brackets inside strings do not count.
	deepText := json.RawMessage(`{"type":"object","description":"` + strings.Repeat(`{[`, 200) + `\"{"}`)
	if _, err := ToolParameters(deepText); err != nil {
		t.Fatalf("brackets in a description: %v", err)
	}
	big := json.RawMessage(`{"type":"object","description":"` + strings.Repeat("x", MaxBytes) + `"}`)
	if _, err := ToolParameters(big); !errors.As(err, &le) || !strings.Contains(err.Error(), "at most 65536") {
		t.Fatalf("a schema over 64 KiB: %v", err)
	}
	if _, err := CompileClient(nested(1000)); !errors.As(err, &le) {
		t.Fatalf("a deep response format schema: %v", err)
	}
	// The request's schemas share a budget.
	tools := NewTools(context.Background())
	part := json.RawMessage(`{"type":"object","description":"` + strings.Repeat("y", MaxBytes-100) + `"}`)
	var err error
	for i := 0; i < MaxRequestBytes/len(part)+1 && err == nil; i++ {
		_, err = tools.Parameters(part)
	}
	if !errors.As(err, &le) || !strings.Contains(err.Error(), "beyond 262144 bytes together") {
		t.Fatalf("the request's schemas together: %v", err)
	}
}

func TestClientSchemasCompileOnceByDigest(t *testing.T) {
	raw := json.RawMessage(`{"type":"object","properties":{"digest_test":{"type":"integer"}}}`)
	before := compiles.Load()
	for i := 0; i < 3; i++ {
		if _, err := NewTools(context.Background()).Parameters(raw); err != nil {
			t.Fatal(err)
		}
	}
	if n := compiles.Load() - before; n != 1 {
		t.Fatalf("compiled %d times; want once", n)
	}
}

// fanOut is a schema of a few hundred bytes whose definitions each refer
// twice to the next: followed, it stands for 2^levels subschemas, and
// validating a value against it takes as long.
func fanOut(levels int) json.RawMessage {
	var b strings.Builder
	b.WriteString(`{"type":"object","$defs":{`)
	for i := 0; i < levels; i++ {
		fmt.Fprintf(&b, `"d%d":{"allOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]},`, i, i+1, i+1)
	}
	fmt.Fprintf(&b, `"d%d":{}},"properties":{"x":{"$ref":"#/$defs/d0"}}}`, levels)
	return json.RawMessage(b.String())
}

// TestClientSchemaExpansionIsBounded: a client's schema whose references
// fan out (40 levels: 2^40 subschemas in 2.6 KB) is refused as a tool's
// parameters and as a response format, at once, before anything validates
// against it; a recursive schema (a tree) and one that refers to a
// definition a few times are fine.
func TestClientSchemaExpansionIsBounded(t *testing.T) {
	bomb := fanOut(40)
	var le *LimitError
	if _, err := NewTools(context.Background()).Parameters(bomb); !errors.As(err, &le) || !strings.Contains(err.Error(), "$ref") {
		t.Fatalf("tool parameters that fan out: %v", err)
	}
	if _, err := CompileClient(bomb); !errors.As(err, &le) {
		t.Fatalf("a response format that fans out: %v", err)
	}
	if _, err := CompileClient(json.RawMessage(`{"type":"object","properties":{"x":{"$dynamicRef":"#a"}}}`)); !errors.As(err, &le) {
		t.Fatalf("a $dynamicRef: %v", err)
	}
	tree := json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"},"children":{"type":"array","items":{"$ref":"#"}}}}`)
	s, err := CompileClient(tree)
	if err != nil {
		t.Fatalf("a recursive schema: %v", err)
	}
	if err := s.Validate(json.RawMessage(`{"name":"a","children":[{"name":"b","children":[]}]}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := NewTools(context.Background()).Parameters(fanOut(8)); err != nil {
		t.Fatalf("a schema that refers to its definitions 2^8 times: %v", err)
	}
}

// TestClientSchemaCachesAreBounded: client tool parameters keep only their
// verdict (no compiled schema), and compiled response formats are kept
// within formatBudget bytes of text: a client cannot make the server hold
// gigabytes of compiled schemas by sending many large ones.
func TestClientSchemaCachesAreBounded(t *testing.T) {
	big := func(tag string) json.RawMessage {
		var b strings.Builder
		b.WriteString(`{"type":"object","properties":{`)
		for i := 0; b.Len() < 60<<10; i++ {
			fmt.Fprintf(&b, `"%s%d":{},`, tag, i)
		}
		b.WriteString(`"end":{}}}`)
		return json.RawMessage(b.String())
	}
	for i := range 3 {
		if _, err := NewTools(context.Background()).Parameters(big(fmt.Sprintf("p%d_", i))); err != nil {
			t.Fatal(err)
		}
	}
	verdicts.mu.Lock()
	for el := verdicts.order.Front(); el != nil; el = el.Next() {
		if el.Value.(*compiled).s != nil {
			t.Fatal("a client tool's compiled schema is kept")
		}
	}
	verdicts.mu.Unlock()
	for i := range 24 {
		if _, err := CompileClient(big(fmt.Sprintf("f%d_", i))); err != nil {
			t.Fatal(err)
		}
	}
	formats.mu.Lock()
	size := formats.size
	formats.mu.Unlock()
	if size > formatBudget {
		t.Fatalf("compiled response formats keep %d bytes of text, over the %d budget", size, formatBudget)
	}
}

func TestNoCompileAfterTheRequestEnded(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	tools := NewTools(ctx)
	if _, err := tools.Parameters(json.RawMessage(`{"type":"object","properties":{"before_cancel":{}}}`)); err != nil {
		t.Fatal(err)
	}
	cancel()
	before := compiles.Load()
	if _, err := tools.Parameters(json.RawMessage(`{"type":"object","properties":{"after_cancel":{}}}`)); !errors.Is(err, context.Canceled) {
		t.Fatalf("after the request ended: %v", err)
	}
	if compiles.Load() != before {
		t.Fatal("a schema was compiled after the request ended")
	}
}
