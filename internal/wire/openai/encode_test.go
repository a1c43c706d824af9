package openai

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/message"
)

var update = flag.Bool("update", false, "rewrite golden files")

// frames records data lines as an SSE writer would send them.
type frames struct{ buf bytes.Buffer }

func (f *frames) Data(b []byte) error {
	f.buf.WriteString("data: ")
	f.buf.Write(b)
	f.buf.WriteString("\n\n")
	return nil
}

func (f *frames) Event(string, []byte) error { panic("the OpenAI stream writes no named events") }

func (f *frames) Comment(string) error { return nil }

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

var usage = &event.Usage{InputTokens: 12, OutputTokens: 9}

// textTurn is a two-step turn: text, a server tool, more text.
var textTurn = []event.Event{
	{Type: event.RunStarted},
	{Type: event.TextStart, MessageID: "m1"},
	{Type: event.TextDelta, MessageID: "m1", Delta: "Checking."},
	{Type: event.TextEnd, MessageID: "m1"},
	{Type: event.ToolCallStart, MessageID: "m1", ToolCallID: "c1", ToolName: "get_weather"},
	{Type: event.ToolCallArgs, MessageID: "m1", ToolCallID: "c1", Delta: `{"city":"Paris"}`},
	{Type: event.ToolCallEnd, MessageID: "m1", ToolCallID: "c1"},
	{Type: event.ToolResult, MessageID: "t1", ToolCallID: "c1", Content: `{"temp_c":21}`},
	{Type: event.TextStart, MessageID: "m2", SubagentRunID: "sub_1"},
	{Type: event.TextDelta, MessageID: "m2", Delta: "hidden subagent text", SubagentRunID: "sub_1"},
	{Type: event.TextStart, MessageID: "m3"},
	{Type: event.TextDelta, MessageID: "m3", Delta: "It is "},
	{Type: event.TextDelta, MessageID: "m3", Delta: "21°C."},
	{Type: event.TextEnd, MessageID: "m3"},
	{Type: event.RunFinished, Outcome: &event.Outcome{Type: event.Success, Stop: event.StopEnd}, Usage: usage},
}

// pauseTurn stops on two calls (an approval and a client tool).
var pauseTurn = []event.Event{
	{Type: event.RunStarted},
	{Type: event.ToolCallStart, MessageID: "m1", ToolCallID: "c1", ToolName: "refund"},
	{Type: event.RunFinished, Outcome: &event.Outcome{Type: event.Interrupt, Stop: event.StopToolCalls,
		PendingCalls: []message.ToolCall{{ID: "c1", Name: "refund", Arguments: `{"orderId":"o1"}`}, {ID: "c2", Name: "open_modal", Arguments: `{}`}},
		Interrupts:   []event.InterruptInfo{{ID: "int_1", ToolCallID: "c1", Tool: "refund"}}}, Usage: usage},
}

func encode(t *testing.T, evs []event.Event, includeUsage bool) []byte {
	t.Helper()
	var f frames
	s := NewStream(&f, "chatcmpl-1", "assistant", 1700000000, includeUsage)
	for _, e := range evs {
		if err := s.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	return f.buf.Bytes()
}

func TestStreamGolden(t *testing.T) {
	golden(t, "stream_text.golden", encode(t, textTurn, false))
	golden(t, "stream_text_usage.golden", encode(t, textTurn, true))
	golden(t, "stream_pause.golden", encode(t, pauseTurn, false))
	var f frames
	s := NewStream(&f, "chatcmpl-1", "assistant", 1700000000, false)
	_ = s.Write(event.Event{Type: event.RunStarted})
	_ = s.Write(event.Event{Type: event.RunError, Code: "upstream_error", Message: "The model provider returned an error."})
	golden(t, "stream_error.golden", f.buf.Bytes())
}

func TestCollectorGolden(t *testing.T) {
	for name, evs := range map[string][]event.Event{"completion_text.golden": textTurn, "completion_pause.golden": pauseTurn} {
		c := NewCollector("chatcmpl-1", "assistant", 1700000000)
		for _, e := range evs {
			c.Add(e)
		}
		comp, err := c.Result()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.MarshalIndent(comp, "", "  ")
		golden(t, name, append(b, '\n'))
	}
}

// TestStreamRules checks the rules real clients enforce, on every golden
// stream: one id, a role first, one finish_reason, no error key, [DONE] last.
func TestStreamRules(t *testing.T) {
	for _, evs := range [][]event.Event{textTurn, pauseTurn} {
		raw := encode(t, evs, true)
		chunks := bytes.Split(bytes.TrimSuffix(raw, []byte("\n\n")), []byte("\n\n"))
		if string(chunks[len(chunks)-1]) != "data: [DONE]" {
			t.Fatalf("last frame %q", chunks[len(chunks)-1])
		}
		finishes := 0
		for i, c := range chunks[:len(chunks)-1] {
			var m map[string]any
			if err := json.Unmarshal(bytes.TrimPrefix(c, []byte("data: ")), &m); err != nil {
				t.Fatal(err)
			}
			if m["id"] != "chatcmpl-1" {
				t.Fatalf("chunk %d id %v", i, m["id"])
			}
			if _, ok := m["error"]; ok {
				t.Fatalf("chunk %d has an error key", i)
			}
			choices := m["choices"].([]any)
			if i == 0 && choices[0].(map[string]any)["delta"].(map[string]any)["role"] != "assistant" {
				t.Fatal("first chunk is not the role chunk")
			}
			for _, ch := range choices {
				if ch.(map[string]any)["finish_reason"] != nil {
					finishes++
				}
			}
		}
		if finishes != 1 {
			t.Fatalf("%d chunks carry a finish_reason", finishes)
		}
	}
}
