package store

import (
	"encoding/json"
	"errors"
	"testing"
	"time"
)

func TestCheckState(t *testing.T) {
	for _, ok := range []string{`{}`, ` {"a":[1,2]}`, "\n{\"b\":null}\n"} {
		if err := CheckState(json.RawMessage(ok)); err != nil {
			t.Errorf("CheckState(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{``, `[]`, `"s"`, `null`, `{"a":`, `{} {}`} {
		if err := CheckState(json.RawMessage(bad)); !errors.Is(err, ErrInvalid) {
			t.Errorf("CheckState(%q): %v, want ErrInvalid", bad, err)
		}
	}
}

func TestLimit(t *testing.T) {
	for _, c := range []struct{ n, want int }{{0, 100}, {-3, 100}, {7, 7}, {MaxLimit + 1, MaxLimit}} {
		if got := Limit(c.n, DefaultLimit); got != c.want {
			t.Errorf("Limit(%d) = %d, want %d", c.n, got, c.want)
		}
	}
}

func TestDecodeRefusesUnknownFormat(t *testing.T) {
	if _, err := DecodeMessage(2, []byte(`{"id":"m","role":"user"}`)); !errors.Is(err, ErrUnknownFormat) {
		t.Errorf("DecodeMessage v2: %v", err)
	}
	if _, err := DecodeEvent(0, []byte(`{"type":"run_started"}`)); !errors.Is(err, ErrUnknownFormat) {
		t.Errorf("DecodeEvent v0: %v", err)
	}
	if d, err := DecodeDecision(FormatVersion, nil); d != nil || err != nil {
		t.Errorf("DecodeDecision of no decision: %v %v", d, err)
	}
	d, err := DecodeDecision(FormatVersion, []byte(`{"approved":true,"decidedVia":"cli","decidedBy":"a/k","decidedAt":"2026-03-01T12:00:00Z"}`))
	if err != nil || !d.Approved || d.Via != "cli" || d.By != "a/k" || !d.At.Equal(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)) {
		t.Errorf("DecodeDecision: %+v %v", d, err)
	}
}

func TestValidate(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	if err := (FinishRun{Tenant: "a", ThreadID: "t", RunID: "r", Status: Waiting}).Validate(); err != nil {
		t.Errorf("FinishRun Waiting: %v", err)
	}
	if err := (FinishRun{Tenant: "a", ThreadID: "t", RunID: "r", Status: Queued}).Validate(); !errors.Is(err, ErrInvalid) {
		t.Errorf("FinishRun Queued: %v", err)
	}
	if err := (Claim{Tenant: "a", ThreadID: "t", RunID: "r", Now: now}).Validate(); !errors.Is(err, ErrInvalid) {
		t.Errorf("Claim without a lease: %v", err)
	}
	if err := (Checkpoint{Tenant: "a", ThreadID: "t", RunID: "r", Interrupts: []Interrupt{{Tool: "x"}}}).Validate(); !errors.Is(err, ErrInvalid) {
		t.Errorf("Checkpoint with an interrupt without id: %v", err)
	}
	if err := (BeginRun{Tenant: "a", ThreadID: "t", Agent: "x", RunID: "r", LeaseUntil: now, State: json.RawMessage{}}).Validate(); err != nil {
		t.Errorf("BeginRun with empty (unset) state: %v", err)
	}
}
