package anthropic_test

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
	"github.com/stackbone/stackbone/internal/model/anthropic"
	"github.com/stackbone/stackbone/internal/model/modeltest"
)

type sdkCase struct {
	name string
	req  model.Request
}

// sdkCases are requests whose bodies the official anthropic-sdk-go (v2.15.0)
// sent through the provider it replaced: sdkBodies.
func sdkCases() []sdkCase {
	f := false
	tools := []model.ToolDef{
		{Name: "a", Parameters: json.RawMessage(`{"type":"object"}`)},
		{Name: "b", Description: "d", Parameters: json.RawMessage(` { } `)},
		{Name: "c"},
		{Name: "e", Parameters: json.RawMessage(`null`)},
		{Name: "f", Description: "x <&>", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false,"$defs":{"x":{"type":"integer"}}}`)},
		{Name: "g", Parameters: json.RawMessage(`{"type":"object","properties":{},"required":[]}`)},
	}
	msgs := []message.Message{
		{Role: message.System, Content: "again"},
		{Role: message.User, Content: "look <b> & see", Parts: []message.Part{{Type: "image", MediaType: "image/png", Data: "AAAA"}, {Type: "file"}, {Type: "image", URL: "https://x/y.png"}, {Type: "image", URL: "data:image/jpeg;base64,BBBB"}, {Type: "image", URL: "data:text/plain,hi"}}},
		{Role: message.User, Parts: []message.Part{{Type: "image", URL: "https://x/z.png"}}},
		{Role: message.User, Parts: []message.Part{{Type: "file"}}},
		{Role: message.User},
		{Role: message.Assistant, ToolCalls: []message.ToolCall{{ID: "toolu_1", Name: "a"}, {ID: "toolu_2", Name: "f", Arguments: `{"city":"Paris"}`}}},
		{Role: message.Tool, ToolCallID: "toolu_1", Content: "sunny"},
		{Role: message.Tool, ToolCallID: "toolu_2", Content: "bad", IsError: true, Parts: []message.Part{{Type: "image", MediaType: "image/png", Data: "CCCC"}}},
		{Role: message.Tool, ToolCallID: "toolu_3"},
		{Role: message.User, Content: "thanks"},
		{Role: message.Assistant, Content: "text", ToolCalls: []message.ToolCall{{ID: "toolu_4", Name: "g", Arguments: `{"b":"c"}`}}},
		{Role: message.Assistant},
		{Role: message.Assistant, Content: "more"},
	}
	short := []message.Message{{Role: message.User, Content: "hi"}}
	return []sdkCase{
		{"rich", model.Request{Model: "claude", System: "sys", MaxTokens: 77, ToolChoice: "f", StopSequences: []string{"END", "x"}, Tools: tools, Messages: msgs}},
		{"auto-serial", model.Request{Model: "claude", ToolChoice: "auto", ParallelToolCalls: &f, Tools: tools[:1], Messages: short}},
		{"default-serial", model.Request{Model: "claude", ParallelToolCalls: &f, Tools: tools[:1], Messages: short}},
		{"serial-no-tools", model.Request{Model: "claude", ParallelToolCalls: &f, Messages: short}},
		{"required-serial", model.Request{Model: "claude", ToolChoice: "required", ParallelToolCalls: &f, Tools: tools[:1], Messages: short}},
		{"none", model.Request{Model: "claude", ToolChoice: "none", Tools: tools[:1], Messages: short}},
		{"thinking", model.Request{Model: "claude", ReasoningEffort: "high", Messages: short}},
		{"thinking-max", model.Request{Model: "claude", ReasoningEffort: "low", MaxTokens: 5000, Messages: short}},
		{"schema", model.Request{Model: "claude", System: "s", Messages: short, ResponseFormat: &model.ResponseFormat{Type: model.FormatJSONSchema, Name: "n", Strict: true, Schema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"}}}`)}}},
		{"json-object", model.Request{Model: "claude", System: "s", Messages: short, ResponseFormat: &model.ResponseFormat{Type: model.FormatJSONObject}}},
		{"options", model.Request{Model: "claude", MaxTokens: 10, Messages: short, ProviderOptions: map[string]json.RawMessage{"anthropic": json.RawMessage(`{"metadata":{"user_id":"u1"},"max_tokens":99,"top_k":3}`)}}},
	}
}

// sdkBodies are the bodies anthropic-sdk-go v2.15.0 sent for sdkCases (key
// order aside), with one fix: the SDK left out input_schema for a tool whose
// schema has no properties (tools a, b, c, e), which the Messages API
// requires; the provider sends {"type":"object"}.
var sdkBodies = map[string]string{
	"rich":            `{"max_tokens":77,"messages":[{"content":[{"text":"look <b> & see","type":"text"},{"source":{"data":"AAAA","media_type":"image/png","type":"base64"},"type":"image"},{"source":{"type":"url","url":"https://x/y.png"},"type":"image"},{"source":{"data":"BBBB","media_type":"image/jpeg","type":"base64"},"type":"image"},{"source":{"type":"url","url":"https://x/z.png"},"type":"image"}],"role":"user"},{"content":[{"id":"toolu_1","input":{},"name":"a","type":"tool_use"},{"id":"toolu_2","input":{"city":"Paris"},"name":"f","type":"tool_use"}],"role":"assistant"},{"content":[{"content":[{"text":"sunny","type":"text"}],"tool_use_id":"toolu_1","type":"tool_result"},{"content":[{"text":"bad","type":"text"},{"source":{"data":"CCCC","media_type":"image/png","type":"base64"},"type":"image"}],"is_error":true,"tool_use_id":"toolu_2","type":"tool_result"},{"tool_use_id":"toolu_3","type":"tool_result"},{"text":"thanks","type":"text"}],"role":"user"},{"content":[{"text":"text","type":"text"},{"id":"toolu_4","input":{"b":"c"},"name":"g","type":"tool_use"},{"text":"more","type":"text"}],"role":"assistant"}],"model":"claude","stop_sequences":["END","x"],"stream":true,"system":[{"text":"sys","type":"text"},{"text":"again","type":"text"}],"tool_choice":{"name":"f","type":"tool"},"tools":[{"input_schema":{"type":"object"},"name":"a"},{"description":"d","input_schema":{"type":"object"},"name":"b"},{"input_schema":{"type":"object"},"name":"c"},{"input_schema":{"type":"object"},"name":"e"},{"description":"x <&>","input_schema":{"$defs":{"x":{"type":"integer"}},"additionalProperties":false,"properties":{"city":{"type":"string"}},"required":["city"],"type":"object"},"name":"f"},{"input_schema":{"properties":{},"type":"object"},"name":"g"}]}`,
	"auto-serial":     `{"max_tokens":4096,"messages":[{"content":[{"text":"hi","type":"text"}],"role":"user"}],"model":"claude","stream":true,"tool_choice":{"disable_parallel_tool_use":true,"type":"auto"},"tools":[{"input_schema":{"type":"object"},"name":"a"}]}`,
	"default-serial":  `{"max_tokens":4096,"messages":[{"content":[{"text":"hi","type":"text"}],"role":"user"}],"model":"claude","stream":true,"tool_choice":{"disable_parallel_tool_use":true,"type":"auto"},"tools":[{"input_schema":{"type":"object"},"name":"a"}]}`,
	"serial-no-tools": `{"max_tokens":4096,"messages":[{"content":[{"text":"hi","type":"text"}],"role":"user"}],"model":"claude","stream":true}`,
	"required-serial": `{"max_tokens":4096,"messages":[{"content":[{"text":"hi","type":"text"}],"role":"user"}],"model":"claude","stream":true,"tool_choice":{"disable_parallel_tool_use":true,"type":"any"},"tools":[{"input_schema":{"type":"object"},"name":"a"}]}`,
	"none":            `{"max_tokens":4096,"messages":[{"content":[{"text":"hi","type":"text"}],"role":"user"}],"model":"claude","stream":true,"tool_choice":{"type":"none"},"tools":[{"input_schema":{"type":"object"},"name":"a"}]}`,
	"thinking":        `{"max_tokens":20480,"messages":[{"content":[{"text":"hi","type":"text"}],"role":"user"}],"model":"claude","stream":true,"thinking":{"budget_tokens":16384,"type":"enabled"}}`,
	"thinking-max":    `{"max_tokens":5000,"messages":[{"content":[{"text":"hi","type":"text"}],"role":"user"}],"model":"claude","stream":true,"thinking":{"budget_tokens":1024,"type":"enabled"}}`,
	"schema":          `{"max_tokens":4096,"messages":[{"content":[{"text":"hi","type":"text"}],"role":"user"}],"model":"claude","output_config":{"format":{"schema":{"properties":{"a":{"type":"string"}},"type":"object"},"type":"json_schema"}},"stream":true,"system":[{"text":"s","type":"text"}]}`,
	"json-object":     `{"max_tokens":4096,"messages":[{"content":[{"text":"hi","type":"text"}],"role":"user"}],"model":"claude","stream":true,"system":[{"text":"s","type":"text"},{"text":"Answer with a single JSON object and nothing else: no prose before or after it, no Markdown code fences.","type":"text"}]}`,
	"options":         `{"max_tokens":99,"messages":[{"content":[{"text":"hi","type":"text"}],"role":"user"}],"metadata":{"user_id":"u1"},"model":"claude","stream":true,"top_k":3}`,
}

// roundTrip is an http.RoundTripper from a function.
type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// sent returns the body and headers the provider sends for req; the answer
// is a one-word text stream.
func sent(t *testing.T, req model.Request) ([]byte, http.Header) {
	t.Helper()
	var body []byte
	var header http.Header
	hc := &http.Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
		body, _ = io.ReadAll(r.Body)
		header = r.Header
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}, Request: r,
			Body: io.NopCloser(strings.NewReader("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":1}}}\n\n" +
				"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"))}, nil
	})}
	p := anthropic.New(anthropic.Config{APIKey: "sk-ant-x", HTTPClient: hc, Retry: modeltest.FastRetry})
	if _, err := modeltest.Collect(p.Stream(context.Background(), req)); err != nil {
		t.Fatal(err)
	}
	return body, header
}

// The request body is what the official SDK sent (key order aside, and the
// input_schema fix above); the headers are the SDK's: anthropic-version
// 2026-10-21 and the key as a bearer token, to https://api.anthropic.com/v1/messages.
func TestRequestMatchesSDK(t *testing.T) {
	for _, c := range sdkCases() {
		t.Run(c.name, func(t *testing.T) {
			body, header := sent(t, c.req)
			var got, want any
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatalf("body %s: %v", body, err)
			}
			if err := json.Unmarshal([]byte(sdkBodies[c.name]), &want); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("body\n%s\nwant (as the SDK sent it)\n%s", body, sdkBodies[c.name])
			}
			if header.Get("Authorization") != "Bearer sk-ant-x" || header.Get("Anthropic-Version") != "2026-10-21" ||
				header.Get("Content-Type") != "application/json" {
				t.Fatalf("headers %v", header)
			}
		})
	}
}

// Text is sent as written, without HTML escaping of <, > and &.
func TestRequestKeepsText(t *testing.T) {
	body, _ := sent(t, sdkCases()[0].req)
	if !strings.Contains(string(body), `"look <b> & see"`) || !strings.Contains(string(body), `"x <&>"`) {
		t.Fatalf("body %s", body)
	}
}

// Requests go to the base URL plus "/v1/messages", as the SDK sends them: the
// API by default, a gateway's path kept; a base URL that is not http(s) is an
// error before anything is sent.
func TestEndpoint(t *testing.T) {
	for base, want := range map[string]string{
		"":                              "https://api.anthropic.com/v1/messages",
		"https://gw.example/anthropic":  "https://gw.example/anthropic/v1/messages",
		"https://gw.example/anthropic/": "https://gw.example/anthropic/v1/messages",
		"http://127.0.0.1:9000":         "http://127.0.0.1:9000/v1/messages",
	} {
		var got string
		hc := &http.Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
			got = r.URL.String()
			return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}, Request: r,
				Body: io.NopCloser(strings.NewReader("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"))}, nil
		})}
		p := anthropic.New(anthropic.Config{BaseURL: base, HTTPClient: hc, Retry: modeltest.FastRetry})
		if _, err := modeltest.Collect(p.Stream(context.Background(), sdkCases()[1].req)); err != nil || got != want {
			t.Errorf("base %q: sent to %q (%v); want %q", base, got, err, want)
		}
	}
	p := anthropic.New(anthropic.Config{BaseURL: "ftp://x"})
	if _, err := modeltest.Collect(p.Stream(context.Background(), sdkCases()[1].req)); err == nil {
		t.Fatal("an ftp base URL was accepted")
	}
}
