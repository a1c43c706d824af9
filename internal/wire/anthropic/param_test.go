package anthropic

import (
	"net/http/httptest"
	"testing"

	"github.com/stackbone/stackbone/internal/engine"
)

// TestInputErrorParam: an engine input error about a message is placed on
// the Anthropic request's own path, although the engine's Input starts with
// the system text and splits a user message's tool results into messages
// of their own (the engine used to name an OpenAI path from its own index,
// messages[3].tool_call_id here).
func TestInputErrorParam(t *testing.T) {
	w := NewWire(nil, nil)
	tr, err := w.DecodeTurn(httptest.NewRequest("POST", "/v1/messages", nil), []byte(`{"model":"a","max_tokens":10,
		"system":"be brief",
		"messages":[
			{"role":"user","content":"hi"},
			{"role":"assistant","content":"hello"},
			{"role":"user","content":[{"type":"text","text":"and"},{"type":"tool_result","tool_use_id":"nope","content":"x"}]}
		],
		"tools":[{"type":"web_search_20250305","name":"web_search"},{"name":"mine","input_schema":{"type":"object"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	in := tr.Input()
	idx := -1
	for i, m := range in.Messages {
		if m.ToolCallID == "nope" {
			idx = i
		}
	}
	if idx < 0 {
		t.Fatalf("no tool message in %+v", in.Messages)
	}
	if got := tr.Param(engine.FieldToolCallID, idx); got != "messages.2.content" {
		t.Fatalf("tool_call_id param = %q, want messages.2.content", got)
	}
	if got := tr.Param(engine.FieldTools, 0); got != "tools.1.name" {
		t.Fatalf("tools param = %q, want tools.1.name", got)
	}
}
