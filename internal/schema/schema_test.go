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
