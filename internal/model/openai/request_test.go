package openai_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/model"
	"github.com/stackbone/stackbone/internal/model/modeltest"
	"github.com/stackbone/stackbone/internal/model/openai"
	"github.com/stackbone/stackbone/internal/model/script"
)

// sdkBody is the body the official openai-go SDK (v3.98.0) sent for
// richRequest through the provider it replaced; the hand-written encoder
// must send the same JSON (key order aside).
const sdkBody = `{"max_completion_tokens":77,"messages":[{"content":"sys","role":"system"},{"content":"again","role":"system"},{"content":[{"text":"look","type":"text"},{"image_url":{"url":"data:image/png;base64,AAAA"},"type":"image_url"},{"image_url":{"url":"https://x/y.png"},"type":"image_url"}],"role":"user"},{"content":[{"image_url":{"url":"https://x/y.png"},"type":"image_url"}],"role":"user"},{"role":"user"},{"content":"","role":"user"},{"role":"assistant","tool_calls":[{"function":{"arguments":"{}","name":"get_weather"},"id":"call_1","type":"function"},{"function":{"arguments":"{\"a\":1}","name":"x"},"id":"call_2","type":"function"}]},{"content":"text","role":"assistant","tool_calls":[{"function":{"arguments":"{\"b\":\"c\"}","name":"y"},"id":"call_3","type":"function"}]},{"content":"","role":"assistant"},{"content":"sunny","role":"tool","tool_call_id":"call_1"},{"content":"","role":"tool","tool_call_id":""}],"model":"gpt","stop":["END","x"],"stream":true,"stream_options":{"include_usage":true},"temperature":0,"tool_choice":{"function":{"name":"get_weather"},"type":"function"},"tools":[{"function":{"name":"a","parameters":{"type":"object"}},"type":"function"},{"function":{"description":"d","name":"b","parameters":{"properties":{},"type":"object"}},"type":"function"},{"function":{"name":"c","parameters":{"properties":{},"type":"object"}},"type":"function"},{"function":{"name":"e","parameters":{"properties":{},"type":"object"}},"type":"function"},{"function":{"description":"x","name":"f","parameters":{"properties":{"city":{"type":"string"}},"required":["city"],"type":"object"}},"type":"function"}]}`

func richRequest() model.Request {
	zero := 0.0
	return model.Request{
		Model: "gpt", System: "sys", MaxTokens: 77, ToolChoice: "get_weather", Temperature: &zero, StopSequences: []string{"END", "x"},
		Tools: []model.ToolDef{
			{Name: "a", Parameters: json.RawMessage(`{"type":"object"}`)},
			{Name: "b", Description: "d", Parameters: json.RawMessage(` { } `)},
			{Name: "c"},
			{Name: "e", Parameters: json.RawMessage(`null`)},
			{Name: "f", Description: "x", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)},
		},
		Messages: []message.Message{
			{Role: message.System, Content: "again"},
			{Role: message.User, Content: "look", Parts: []message.Part{{Type: "image", MediaType: "image/png", Data: "AAAA"}, {Type: "file"}, {Type: "image", URL: "https://x/y.png"}}},
			{Role: message.User, Parts: []message.Part{{Type: "image", URL: "https://x/y.png"}}},
			{Role: message.User, Parts: []message.Part{{Type: "file"}}},
			{Role: message.User},
			{Role: message.Assistant, ToolCalls: []message.ToolCall{{ID: "call_1", Name: "get_weather"}, {ID: "call_2", Name: "x", Arguments: `{"a":1}`}}},
			{Role: message.Assistant, Content: "text", ToolCalls: []message.ToolCall{{ID: "call_3", Name: "y", Arguments: `{"b":"c"}`}}},
			{Role: message.Assistant},
			{Role: message.Tool, ToolCallID: "call_1", Content: "sunny"},
			{Role: message.Tool},
		},
	}
}

// The request body and headers are what the official SDK sent.
func TestRequestMatchesSDK(t *testing.T) {
	var body []byte
	var header http.Header
	hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		body, _ = io.ReadAll(r.Body)
		header = r.Header
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}},
			Body: io.NopCloser(strings.NewReader(data(`{}`, `"stop"`) + doneEvent)), Request: r}, nil
	})}
	p := openai.New(openai.Config{APIKey: "sk-x", HTTPClient: hc, Retry: modeltest.FastRetry})
	if _, err := modeltest.Collect(p.Stream(context.Background(), richRequest())); err != nil {
		t.Fatal(err)
	}
	var got, want any
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("body %s: %v", body, err)
	}
	_ = json.Unmarshal([]byte(sdkBody), &want)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("body\n%s\nwant (as the SDK sent it)\n%s", body, sdkBody)
	}
	if header.Get("Authorization") != "Bearer sk-x" || header.Get("Content-Type") != "application/json" {
		t.Fatalf("headers %v", header)
	}
}

// Text is sent as written: no HTML escaping of <, > and &.
func TestRequestKeepsText(t *testing.T) {
	var body []byte
	hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		body, _ = io.ReadAll(r.Body)
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}},
			Body: io.NopCloser(strings.NewReader(data(`{}`, `"stop"`) + doneEvent)), Request: r}, nil
	})}
	p := openai.New(openai.Config{HTTPClient: hc})
	req := model.Request{Model: "m", Messages: []message.Message{{Role: message.User, Content: "a <b> & c — ü"}}}
	if _, err := modeltest.Collect(p.Stream(context.Background(), req)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(body), `"a <b> & c — ü"`) {
		t.Fatalf("body %s", body)
	}
}

// TestRequestSettings: the sampling settings go out in Chat Completions'
// names, parallel_tool_calls only with tools (OpenAI refuses it without),
// and the provider's own providerOptions entry is laid over the body last.
func TestRequestSettings(t *testing.T) {
	var body []byte
	hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		body, _ = io.ReadAll(r.Body)
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}},
			Body: io.NopCloser(strings.NewReader(data(`{}`, `"stop"`) + doneEvent)), Request: r}, nil
	})}
	temp, topP, seed, par := 0.3, 0.8, int64(7), false
	req := model.Request{Model: "m", Messages: []message.Message{{Role: message.User, Content: "hi"}}}
	model.Settings{Temperature: &temp, TopP: &topP, MaxTokens: 99, Stop: []string{"END"}, Seed: &seed, ReasoningEffort: "low",
		ParallelToolCalls: &par, ProviderOptions: map[string]json.RawMessage{
			"openai": json.RawMessage(`{"user":"u1","temperature":0.5}`), "ollama": json.RawMessage(`{"keep_alive":"5m"}`)}}.Apply(&req)
	send := func(p *openai.Provider, req model.Request) map[string]any {
		t.Helper()
		if _, err := modeltest.Collect(p.Stream(context.Background(), req)); err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	m := send(openai.New(openai.Config{HTTPClient: hc}), req)
	if m["temperature"] != 0.5 || m["top_p"] != 0.8 || m["max_completion_tokens"] != float64(99) || m["seed"] != float64(7) ||
		m["reasoning_effort"] != "low" || m["user"] != "u1" || m["keep_alive"] != nil || m["stop"].([]any)[0] != "END" {
		t.Fatalf("openai body %s", body)
	}
	if _, ok := m["parallel_tool_calls"]; ok {
		t.Fatalf("parallel_tool_calls without tools: %s", body)
	}
	req.Tools = []model.ToolDef{{Name: "t"}}
	m = send(openai.New(openai.Config{HTTPClient: hc, Name: "ollama", LegacyMaxTokens: true}), req)
	if m["parallel_tool_calls"] != false || m["max_tokens"] != float64(99) || m["keep_alive"] != "5m" || m["user"] != nil || m["temperature"] != 0.3 {
		t.Fatalf("ollama body %s", body)
	}
}

// An agent's tools are sent as they are defined at each call: the same
// definitions again, a reloaded agent's changed schema, and a client's
// tools next to them, HTML characters unescaped.
func TestRequestToolsFollowDefinitions(t *testing.T) {
	var body []byte
	hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		body, _ = io.ReadAll(r.Body)
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}},
			Body: io.NopCloser(strings.NewReader(data(`{}`, `"stop"`) + doneEvent)), Request: r}, nil
	})}
	p := openai.New(openai.Config{HTTPClient: hc})
	tools := func(req model.Request) string {
		t.Helper()
		if _, err := modeltest.Collect(p.Stream(context.Background(), req)); err != nil {
			t.Fatal(err)
		}
		var m struct {
			Tools json.RawMessage `json:"tools"`
		}
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatalf("body %s: %v", body, err)
		}
		return string(m.Tools)
	}
	agent := []model.ToolDef{{Name: "find", Description: "a <b> & c",
		Parameters: json.RawMessage(`{ "type": "object", "properties": { "q": { "type": "string" } } }`)}}
	req := model.Request{Model: "m", Messages: []message.Message{{Role: message.User, Content: "hi"}}, Tools: agent}
	want := `[{"type":"function","function":{"name":"find","description":"a <b> & c","parameters":{"type":"object","properties":{"q":{"type":"string"}}}}}]`
	for range 2 {
		if got := tools(req); got != want {
			t.Fatalf("tools %s, want %s", got, want)
		}
	}
	// The agent reloaded: its tool has another schema, the same name.
	req.Tools = []model.ToolDef{{Name: "find", Description: "a <b> & c", Parameters: json.RawMessage(`{"type":"object","properties":{"id":{"type":"integer"}}}`)}}
	if got := tools(req); !strings.Contains(got, `"id":{"type":"integer"}`) || strings.Contains(got, `"q"`) {
		t.Fatalf("tools after reload %s", got)
	}
	// A client's tool for this request only, after the agent's.
	req.Tools = append(agent[:1:1], model.ToolDef{Name: "open_modal", Parameters: json.RawMessage(`{"type":"object","properties":{"title":{"type":"string"}}}`)})
	got := tools(req)
	if !strings.HasPrefix(got, want[:len(want)-1]+`,`) || !strings.Contains(got, `"name":"open_modal"`) {
		t.Fatalf("tools with a client tool %s", got)
	}
}

// TestRequestReasoningBack: the plain-text reasoning an assistant message
// came with goes back as reasoning_content only when the message calls
// tools (DeepSeek's thinking mode answers 400 without it there, and its
// older reasoner refuses it elsewhere); Anthropic's thinking blocks never
// go to a Chat Completions server.
func TestRequestReasoningBack(t *testing.T) {
	up := modeltest.NewOpenAI(t, script.MustParse(`[{"reply":{"text":"ok"}}]`))
	req := model.Request{Model: "m", Messages: []message.Message{
		{Role: message.User, Content: "hi"},
		{Role: message.Assistant, Content: "hello", Reasoning: []message.Reasoning{{Type: message.ReasoningText, Text: "greet back"}}},
		{Role: message.User, Content: "weather?"},
		{Role: message.Assistant, ToolCalls: []message.ToolCall{{ID: "call_1", Name: "get_weather", Arguments: `{}`}},
			Reasoning: []message.Reasoning{{Type: message.ReasoningText, Text: "I need "}, {Type: message.ReasoningThinking, Text: "signed", Signature: "sig"},
				{Type: message.ReasoningText, Text: "the tool.", Source: "openai"}}},
		{Role: message.Tool, ToolCallID: "call_1", Content: "sunny"},
		// Reasoning another upstream wrote (a fallback turned here) stays there.
		{Role: message.Assistant, ToolCalls: []message.ToolCall{{ID: "call_2", Name: "get_weather", Arguments: `{}`}},
			Reasoning: []message.Reasoning{{Type: message.ReasoningText, Text: "deepseek's own", Source: "deepseek"}}},
		{Role: message.Tool, ToolCallID: "call_2", Content: "rainy"},
	}}
	if _, err := modeltest.Collect(provider(up.URL()).Stream(context.Background(), req)); err != nil {
		t.Fatal(err)
	}
	var body struct {
		Messages []map[string]any `json:"messages"`
	}
	if err := json.Unmarshal(up.Requests()[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	var got []any
	for _, m := range body.Messages {
		got = append(got, m["reasoning_content"])
	}
	want := []any{nil, nil, nil, "I need the tool.", nil, nil, nil}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("reasoning_content by message %v, want %v", got, want)
	}
}
