package modeltest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/model"
	"github.com/stackbone/stackbone/internal/model/script"
)

// benchScript answers BenchmarkProvider: a tool call for "weather", the
// tool's result summed up after it, text otherwise.
const benchScript = `[
  {"when": {"lastTool": "get_weather"}, "reply": {"text": "It is sunny and 21 degrees in Paris today, a fine day for a walk."}},
  {"when": {"lastUser": "weather"}, "reply": {"text": "Checking.", "toolCalls": [{"name": "get_weather", "arguments": {"city": "Paris", "units": "metric"}}]}},
  {"reply": {"text": "Hello there, you said: {{lastUser}}"}}
]`

// BenchTools returns n tool definitions with schemas of a realistic size
// (about 400 bytes each), as an agent declares them.
func BenchTools(n int) []model.ToolDef {
	defs := make([]model.ToolDef, n)
	for i := range defs {
		name := fmt.Sprintf("tool_%d", i)
		if i == 0 {
			name = "get_weather"
		}
		defs[i] = model.ToolDef{
			Name:        name,
			Description: "Looks something up for the user and returns it as JSON; use it when the user asks for it.",
			Parameters: json.RawMessage(`{
  "type": "object",
  "properties": {
    "city": {"type": "string", "description": "The city, e.g. Paris"},
    "units": {"type": "string", "enum": ["metric", "imperial"], "description": "Units of the answer"},
    "days": {"type": "integer", "minimum": 1, "maximum": 14, "description": "How many days ahead"},
    "detail": {"type": "boolean", "description": "Whether to include hourly detail"}
  },
  "required": ["city"],
  "additionalProperties": false
}`),
		}
	}
	return defs
}

// BenchmarkProvider measures one streamed call of the provider newProvider
// builds against a mock of kind, as an agent step makes it: a system
// prompt, seven tools, a short conversation. "text" streams a text answer;
// "tool_call" a call with its arguments in fragments; "after_tool" the
// answer to a tool result. The mock runs in the same process, so its cost
// is included; compare providers with the same benchmark.
func BenchmarkProvider(b *testing.B, kind Kind, newProvider NewProviderFunc) {
	srv := newServer(b, kind, script.MustParse(benchScript))
	p := newProvider(srv.URL(), FastRetry)
	tools := BenchTools(7)
	system := "You are a helpful assistant. Answer briefly and use the tools when they help."
	cases := []struct {
		name string
		msgs []message.Message
	}{
		{"text", []message.Message{{Role: message.User, Content: "hello, how are you today?"}}},
		{"tool_call", []message.Message{{Role: message.User, Content: "what is the weather in Paris?"}}},
		{"after_tool", []message.Message{
			{Role: message.User, Content: "what is the weather in Paris?"},
			{Role: message.Assistant, Content: "Checking.", ToolCalls: []message.ToolCall{{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Paris","units":"metric"}`}}},
			{Role: message.Tool, ToolCallID: "call_1", ToolName: "get_weather", Content: `{"city":"Paris","temp_c":21,"sky":"sunny"}`},
		}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			req := model.Request{Model: "bench-model", System: system, Messages: c.msgs, Tools: tools, MaxTokens: 1024}
			b.ReportAllocs()
			for b.Loop() {
				st, err := Collect(p.Stream(context.Background(), req))
				if err != nil {
					b.Fatal(err)
				}
				if !st.Finished {
					b.Fatal("stream did not finish")
				}
			}
		})
	}
}
