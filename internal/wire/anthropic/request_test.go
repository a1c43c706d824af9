package anthropic

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/stackbone/stackbone/internal/apierror"
	"github.com/stackbone/stackbone/internal/message"
)

func TestInputMapsEveryBlock(t *testing.T) {
	body := `{
	  "model": "assistant", "max_tokens": 1024, "temperature": 0.2, "top_p": 0.9, "top_k": 5,
	  "metadata": {"user_id": "u-1"}, "thinking": {"type": "disabled"}, "service_tier": "auto",
	  "system": [{"type": "text", "text": "Be terse.", "cache_control": {"type": "ephemeral"}}],
	  "messages": [
	    {"role": "system", "content": "Answer in French."},
	    {"role": "user", "content": [
	      {"type": "text", "text": "What is in the image?"},
	      {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR"}},
	      {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}]},
	    {"role": "assistant", "content": [
	      {"type": "thinking", "thinking": "hmm", "signature": "sig"},
	      {"type": "text", "text": "Checking."},
	      {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {"city": "Paris"}},
	      {"type": "tool_use", "id": "toolu_02", "name": "get_time"}]},
	    {"role": "user", "content": [
	      {"type": "tool_result", "tool_use_id": "toolu_01", "content": "21°C"},
	      {"type": "tool_result", "tool_use_id": "toolu_02", "is_error": true, "content": [{"type": "text", "text": "no clock"}]},
	      {"type": "text", "text": "Thanks."}]}
	  ],
	  "tools": [
	    {"name": "get_weather", "description": "Weather", "input_schema": {"type": "object"}},
	    {"type": "web_search_20250305", "name": "web_search"}],
	  "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
	  "stop_sequences": ["END"]
	}`
	req, err := Decode([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	in, err := req.Input()
	if err != nil {
		t.Fatal(err)
	}
	if in.Agent != "assistant" || in.MaxTokens != 1024 || in.ToolChoice != "required" || *in.Temperature != 0.2 ||
		!reflect.DeepEqual(in.StopSequences, []string{"END"}) {
		t.Fatalf("input %+v", in)
	}
	if len(in.ClientTools) != 1 || in.ClientTools[0].Name != "get_weather" || string(in.ClientTools[0].Parameters) != `{"type": "object"}` {
		t.Fatalf("client tools %+v", in.ClientTools)
	}
	want := []message.Message{
		{Role: message.System, Content: "Be terse."},
		{Role: message.System, Content: "Answer in French."},
		{Role: message.User, Content: "What is in the image?", Parts: []message.Part{
			{Type: "image", MediaType: "image/png", Data: "iVBOR"}, {Type: "image", URL: "https://example.com/a.png"}}},
		{Role: message.Assistant, Content: "Checking.", ToolCalls: []message.ToolCall{
			{ID: "toolu_01", Name: "get_weather", Arguments: `{"city":"Paris"}`}, {ID: "toolu_02", Name: "get_time", Arguments: `{}`}}},
		{Role: message.Tool, ToolCallID: "toolu_01", ToolName: "get_weather", Content: "21°C"},
		{Role: message.Tool, ToolCallID: "toolu_02", ToolName: "get_time", Content: "no clock", IsError: true},
		{Role: message.User, Content: "Thanks."},
	}
	if !reflect.DeepEqual(in.Messages, want) {
		t.Fatalf("messages:\n got %+v\nwant %+v", in.Messages, want)
	}
}

func TestToolChoices(t *testing.T) {
	for choice, want := range map[string]string{
		`{"type":"auto"}`: "auto", `{"type":"any"}`: "required", `{"type":"none"}`: "none",
		`{"type":"tool","name":"get_weather"}`: "get_weather",
	} {
		req, err := Decode([]byte(`{"model":"a","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"tool_choice":` + choice + `}`))
		if err != nil {
			t.Fatal(err)
		}
		in, _ := req.Input()
		if in.ToolChoice != want {
			t.Fatalf("%s → %q, want %q", choice, in.ToolChoice, want)
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	for body, want := range map[string]string{
		`{"model":"a","messages":[{"role":"user","content":"hi"}]}`:                                             "max_tokens: Field required",
		`{"max_tokens":1,"messages":[{"role":"user","content":"hi"}]}`:                                          "model: Field required",
		`{"model":"a","max_tokens":1,"messages":[]}`:                                                            "messages: Field required",
		`{"model":"a","max_tokens":1,"messages":[`:                                                              "not valid JSON",
		`{"model":"a","max_tokens":1,"messages":[{"role":"bot","content":"hi"}]}`:                               "must be user, assistant or system",
		`{"model":"a","max_tokens":1,"messages":[{"role":"user","content":7}]}`:                                 "must be a string or an array",
		`{"model":"a","max_tokens":1,"messages":[{"role":"user","content":"x"}],"tool_choice":{"type":"tool"}}`: "tool_choice.name",
	} {
		req, err := Decode([]byte(body))
		if err == nil {
			_, err = req.Input()
		}
		var ae *apierror.Error
		if !errors.As(err, &ae) || ae.Status != 400 || !strings.Contains(ae.Message, want) {
			t.Fatalf("%s: got %v, want 400 containing %q", body, err, want)
		}
	}
}

func TestEstimateTokens(t *testing.T) {
	req, err := DecodeCount([]byte(`{"messages":[{"role":"user","content":"` + strings.Repeat("word ", 100) + `"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	n := EstimateTokens(req)
	if n < 100 || n > 200 {
		t.Fatalf("estimate %d for 500 characters", n)
	}
	if more := EstimateTokens(req, strings.Repeat("x", 400)); more != n+100 {
		t.Fatalf("agent text adds %d, want 100", more-n)
	}
	tiny, _ := DecodeCount([]byte(`{"messages":[{"role":"user","content":""}]}`))
	if EstimateTokens(tiny) < 1 {
		t.Fatal("estimate below 1")
	}
}
