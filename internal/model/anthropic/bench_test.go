package anthropic_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/model"
	"github.com/stackbone/stackbone/internal/model/anthropic"
	"github.com/stackbone/stackbone/internal/model/modeltest"
)

// benchStream is a streamed answer as the Messages API sends it: message_start,
// a text block in 20 deltas, a tool_use block in 4 fragments, a ping, the stop
// reason with usage and message_stop.
func benchStream() string {
	var sb strings.Builder
	ev := func(name, data string) { fmt.Fprintf(&sb, "event: %s\ndata: %s\n\n", name, data) }
	ev("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-bench","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":120,"output_tokens":1}}}`)
	ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
	ev("ping", `{"type":"ping"}`)
	for i := range 20 {
		ev("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" word%d"}}`, i))
	}
	ev("content_block_stop", `{"type":"content_block_stop","index":0}`)
	ev("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}}`)
	for _, f := range []string{`{\"ci`, `ty\":`, ` \"Par`, `is\"}`} {
		ev("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"`+f+`"}}`)
	}
	ev("content_block_stop", `{"type":"content_block_stop","index":1}`)
	ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":30}}`)
	ev("message_stop", `{"type":"message_stop"}`)
	return sb.String()
}

// BenchmarkStreamCall measures one streamed call end to end over loopback
// HTTP: encoding an agent step (system prompt, seven tools, a tool round
// trip), sending it, and reading its 27 chunks (the input tokens, 20 text deltas, a tool call in 5, the finish). The server's side is a
// fixed body written at once.
func BenchmarkStreamCall(b *testing.B) {
	body := benchStream()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte(body))
	}))
	defer srv.Close()
	p := anthropic.New(anthropic.Config{BaseURL: srv.URL, APIKey: "sk-ant-bench"})
	req := model.Request{Model: "claude-bench", System: "You are a helpful assistant.", Tools: modeltest.BenchTools(7), MaxTokens: 1024,
		Messages: []message.Message{
			{Role: message.User, Content: "what is the weather in Paris?"},
			{Role: message.Assistant, Content: "Checking.", ToolCalls: []message.ToolCall{{ID: "toolu_0", Name: "get_weather", Arguments: `{"city":"Paris"}`}}},
			{Role: message.Tool, ToolCallID: "toolu_0", Content: `{"city":"Paris","temp_c":21}`},
		}}
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		for _, err := range p.Stream(context.Background(), req) {
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != 27 {
			b.Fatalf("%d chunks", n)
		}
	}
}
