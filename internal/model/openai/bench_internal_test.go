package openai

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/model"
	"github.com/stackbone/stackbone/internal/model/modeltest"
)

// BenchmarkEncode measures the request body of an agent step: a system
// prompt, seven tools, a tool round trip.
func BenchmarkEncode(b *testing.B) {
	p := New(Config{})
	req := model.Request{Model: "bench-model", System: "You are a helpful assistant.", Tools: modeltest.BenchTools(7), MaxTokens: 1024,
		Messages: []message.Message{
			{Role: message.User, Content: "what is the weather in Paris?"},
			{Role: message.Assistant, Content: "Checking.", ToolCalls: []message.ToolCall{{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Paris"}`}}},
			{Role: message.Tool, ToolCallID: "call_1", Content: `{"city":"Paris","temp_c":21}`},
		}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.encode(req); err != nil {
			b.Fatal(err)
		}
	}
}

// benchStream is a streamed answer as OpenAI sends it: a role chunk, 20
// text chunks, a tool call in 4 fragments, the finish and usage chunks.
func benchStream() []byte {
	var sb strings.Builder
	ev := func(delta, finish string) {
		fmt.Fprintf(&sb, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","system_fingerprint":"fp_1","choices":[{"index":0,"delta":%s,"logprobs":null,"finish_reason":%s}],"usage":null}`+"\n\n", delta, finish)
	}
	ev(`{"role":"assistant","content":"","refusal":null}`, "null")
	for i := range 20 {
		ev(fmt.Sprintf(`{"content":" word%d"}`, i), "null")
	}
	ev(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]}`, "null")
	for _, f := range []string{`{\"ci`, `ty\":`, ` \"Par`, `is\"}`} {
		ev(`{"tool_calls":[{"index":0,"function":{"arguments":"`+f+`"}}]}`, "null")
	}
	ev(`{}`, `"tool_calls"`)
	sb.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":120,"completion_tokens":30,"total_tokens":150}}` + "\n\n")
	sb.WriteString("data: [DONE]\n\n")
	return []byte(sb.String())
}

// BenchmarkRead measures reading a streamed answer into chunks.
func BenchmarkRead(b *testing.B) {
	p := New(Config{})
	stream := benchStream()
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		p.read(context.Background(), bytes.NewReader(stream), "", func(c model.Chunk, err error) bool {
			if err != nil {
				b.Fatal(err)
			}
			n++
			return true
		})
		if n != 26 {
			b.Fatalf("%d chunks", n)
		}
	}
}
