package store

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/event"
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

// TestAdmit pins the one admission rule the engine and every driver share.
func TestAdmit(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		th   Thread
		want error
	}{
		{"idle", Thread{Agent: "x", Status: Idle}, nil},
		{"failed", Thread{Agent: "x", Status: Failed}, nil},
		{"waiting", Thread{Agent: "x", Status: Waiting}, ErrApprovalPending},
		{"queued", Thread{Agent: "x", Status: Queued}, ErrRunInProgress},
		{"running under its lease", Thread{Agent: "x", Status: Running, LeaseUntil: now.Add(time.Second)}, ErrRunInProgress},
		{"running at its lease's end", Thread{Agent: "x", Status: Running, LeaseUntil: now}, ErrRunInProgress},
		{"running within the lease's microsecond", Thread{Agent: "x", Status: Running, LeaseUntil: now}, ErrRunInProgress},
		{"running, lease expired", Thread{Agent: "x", Status: Running, LeaseUntil: now.Add(-time.Microsecond)}, nil},
		{"running without a lease", Thread{Agent: "x", Status: Running}, nil},
		{"another agent's", Thread{Agent: "y", Status: Idle}, ErrAgentMismatch},
	} {
		at := now
		if tc.name == "running within the lease's microsecond" {
			at = now.Add(999 * time.Nanosecond)
		}
		err := Admit(&tc.th, "x", at)
		if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: Admit = %v, want %v", tc.name, err, tc.want)
		}
	}
}

// TestDecodeEventToolCallEndArguments: a stored tool_call_end carries the
// call's arguments in its own field, and one stored before that field
// existed (arguments in delta) reads the same.
func TestDecodeEventToolCallEndArguments(t *testing.T) {
	enc, err := EncodeEvents([]event.Event{{Type: event.ToolCallEnd, ToolCallID: "c1", ToolName: "refund", Arguments: `{"a":1}`}}, "t", "r")
	if err != nil {
		t.Fatal(err)
	}
	for name, stored := range map[string]string{
		"today's":         enc[0],
		"written earlier": `{"type":"tool_call_end","threadId":"t","runId":"r","toolCallId":"c1","toolName":"refund","delta":"{\"a\":1}"}`,
	} {
		e, err := DecodeEvent(FormatVersion, []byte(stored))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if e.Arguments != `{"a":1}` || e.Delta != "" || e.ToolCallID != "c1" {
			t.Errorf("%s stored event %s read as arguments %q, delta %q", name, stored, e.Arguments, e.Delta)
		}
	}
}
