package schema

import (
	"encoding/json"
	"errors"
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
