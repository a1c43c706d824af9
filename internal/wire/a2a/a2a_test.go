package a2a

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/message"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

var epoch = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

func now() time.Time { return epoch }

// stream is what a tracker yields for events, one JSON line per stream
// event, then the folded task.
func stream(t *testing.T, evs []event.Event) []byte {
	t.Helper()
	tr := NewTracker("run_1", "thr_1", now)
	var b bytes.Buffer
	for _, e := range evs {
		for _, sr := range tr.Apply(e) {
			line, err := json.Marshal(sr)
			if err != nil {
				t.Fatal(err)
			}
			b.Write(line)
			b.WriteByte('\n')
		}
	}
	task, err := json.MarshalIndent(tr.Task(nil, true), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	b.Write(task)
	b.WriteByte('\n')
	return b.Bytes()
}

// TestTrackerTurns: the stream events and final task of a two-step turn, a
// turn that pauses on an approval and its resume, a cancelled turn and a
// budget refusal (golden files).
func TestTrackerTurns(t *testing.T) {
	ms := epoch.UnixMilli()
	for name, evs := range map[string][]event.Event{
		"text.golden": {
			{Type: event.RunStarted, Time: ms},
			{Type: event.TextStart, MessageID: "m1"},
			{Type: event.TextDelta, MessageID: "m1", Delta: "Checking."},
			{Type: event.TextEnd, MessageID: "m1"},
			{Type: event.ToolCallEnd, MessageID: "m1", ToolCallID: "c1", ToolName: "get_weather", Arguments: `{"city":"Paris"}`},
			{Type: event.ToolResult, MessageID: "t1", ToolCallID: "c1", Content: `{"temp_c":21}`},
			{Type: event.TextDelta, MessageID: "m2", Delta: "It is "},
			{Type: event.TextDelta, MessageID: "m2", Delta: "21 C."},
			{Type: event.RunFinished, Time: ms + 1500, Outcome: &event.Outcome{Type: event.Success}},
		},
		"approval.golden": {
			{Type: event.RunStarted, Time: ms},
			{Type: event.ToolCallEnd, MessageID: "m1", ToolCallID: "c1", ToolName: "refund", Arguments: `{"orderId":"o1"}`},
			{Type: event.RunFinished, Time: ms + 10, Outcome: &event.Outcome{Type: event.Interrupt,
				Interrupts: []event.InterruptInfo{{ID: "int_1", ToolCallID: "c1", Tool: "refund", Description: "Refund order o1",
					AllowedDecisions: []string{"approve", "reject"}, ResponseSchema: json.RawMessage(`{"type":"object"}`), Reason: "approval"}},
				PendingCalls: []message.ToolCall{{ID: "c1", Name: "refund", Arguments: `{"orderId":"o1"}`}}}},
			{Type: event.DecisionMade, Status: "approved"},
			{Type: event.RunStarted, Time: ms + 2000},
			{Type: event.TextDelta, MessageID: "m2", Delta: "Refunded."},
			{Type: event.RunFinished, Time: ms + 2100, Outcome: &event.Outcome{Type: event.Success}},
		},
		"cancelled.golden": {
			{Type: event.RunStarted, Time: ms},
			{Type: event.RunError, Time: ms + 5, Code: "cancelled", Message: "The run was cancelled."},
		},
		"rejected.golden": {
			{Type: event.RunError, Time: ms, Code: "budget_exceeded", Message: "The budget is spent."},
		},
	} {
		t.Run(name, func(t *testing.T) { golden(t, name, stream(t, evs)) })
	}
}

// TestTaskHistoryLength: unset gives every agent message, 0 none, n the
// last n.
func TestTaskHistoryLength(t *testing.T) {
	tr := NewTracker("run_1", "thr_1", now)
	for _, e := range []event.Event{{Type: event.TextDelta, MessageID: "a", Delta: "one"}, {Type: event.TextDelta, MessageID: "b", Delta: "two"}} {
		tr.Apply(e)
	}
	zero, one := 0, 1
	if h := tr.Task(nil, false).History; len(h) != 2 {
		t.Fatalf("all history = %+v", h)
	}
	if h := tr.Task(&zero, false).History; h != nil {
		t.Fatalf("historyLength 0 = %+v", h)
	}
	if h := tr.Task(&one, false).History; len(h) != 1 || *h[0].Parts[0].Text != "two" {
		t.Fatalf("historyLength 1 = %+v", h)
	}
	if a := tr.Task(nil, false).Artifacts; a != nil {
		t.Fatalf("artifacts when not asked: %+v", a)
	}
}

// TestDecisionPayload: each decision as the engine's payload, and the
// refusals.
func TestDecisionPayload(t *testing.T) {
	for _, c := range []struct {
		d    Decision
		want string
	}{
		{Decision{Decision: "approve"}, `{"approved":true}`},
		{Decision{Decision: "approve", Arguments: json.RawMessage(`{"amount":5}`), Message: "ok"}, `{"approved":true,"editedArgs":{"amount":5},"message":"ok"}`},
		{Decision{Decision: "reject", Message: "no"}, `{"approved":false,"message":"no"}`},
		{Decision{Decision: "retry"}, `{"decision":"retry"}`},
		{Decision{Decision: "skip", Message: "done by hand"}, `{"decision":"skip","message":"done by hand"}`},
	} {
		got, err := c.d.Payload()
		if err != nil || string(got) != c.want {
			t.Errorf("%+v: %s, %v; want %s", c.d, got, err, c.want)
		}
	}
	for _, d := range []Decision{{Decision: "maybe"}, {Decision: "reject", Arguments: json.RawMessage(`{}`)}} {
		if _, err := d.Payload(); err == nil || err.Code != CodeInvalidParams {
			t.Errorf("%+v: %v; want invalid params", d, err)
		}
	}
	text := "  "
	ds, other := Decisions(&Message{Parts: []Part{{Data: json.RawMessage(`{"decision":"approve","id":"int_1"}`)}, {Text: &text}}})
	if len(ds) != 1 || ds[0].ID != "int_1" || other {
		t.Fatalf("Decisions = %+v, %v", ds, other)
	}
	if _, other := Decisions(&Message{Parts: []Part{TextPart("yes please")}}); !other {
		t.Fatal("a text answer is not a decision")
	}
}

// TestUserMessage: text and data parts become the user text, images image
// parts; other files and empty messages are refused with their codes.
func TestUserMessage(t *testing.T) {
	m, err := UserMessage(&Message{Role: RoleUser, Parts: []Part{TextPart("hi"), {Data: json.RawMessage(`{"n":1}`)},
		{Raw: []byte{1, 2}, MediaType: "image/png"}, {URL: "https://x/y.jpg", MediaType: "image/jpeg"}}})
	if err != nil || m.Role != message.User || m.Content != "hi\n\n{\"n\":1}" || len(m.Parts) != 2 || m.Parts[0].Data != "AQI=" ||
		m.Parts[1].URL != "https://x/y.jpg" {
		t.Fatalf("UserMessage = %+v, %v", m, err)
	}
	for _, c := range []struct {
		m    *Message
		code int
	}{
		{&Message{}, CodeInvalidParams},
		{&Message{Role: RoleAgent, Parts: []Part{TextPart("x")}}, CodeInvalidParams},
		{&Message{Parts: []Part{{URL: "https://x/a.pdf", MediaType: "application/pdf"}}}, CodeContentTypeNotSupported},
		{&Message{Parts: []Part{{}}}, CodeInvalidParams},
	} {
		if _, err := UserMessage(c.m); err == nil || err.Code != c.code {
			t.Errorf("%+v: %v; want %d", c.m, err, c.code)
		}
	}
}

// TestParseRequest: JSON-RPC's parse and request errors, and versions.
func TestParseRequest(t *testing.T) {
	for body, code := range map[string]int{
		`{`: CodeParseError, `[]`: CodeInvalidRequest, `{"jsonrpc":"1.0","id":1,"method":"GetTask"}`: CodeInvalidRequest,
		`{"jsonrpc":"2.0","id":{},"method":"GetTask"}`: CodeInvalidRequest, `{"jsonrpc":"2.0","id":1}`: CodeInvalidRequest,
	} {
		if _, err := ParseRequest([]byte(body)); err == nil || err.Code != code {
			t.Errorf("%s: %v; want %d", body, err, code)
		}
	}
	req, err := ParseRequest([]byte(`{"jsonrpc":"2.0","id":"a","method":"GetTask","params":{"id":"t"}}`))
	if err != nil || string(req.ID) != `"a"` || req.Method != "GetTask" {
		t.Fatalf("ParseRequest = %+v, %v", req, err)
	}
	for v, ok := range map[string]bool{"1.0": true, "1": true, "1.0.1": true, "": false, "0.3": false, "1.1": false, "10": false} {
		if SupportsVersion(v) != ok {
			t.Errorf("SupportsVersion(%q) = %v", v, !ok)
		}
	}
}
