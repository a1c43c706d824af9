package openai_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/model"
	"github.com/stackbone/stackbone/internal/model/modeltest"
	"github.com/stackbone/stackbone/internal/model/openai"
	"github.com/stackbone/stackbone/internal/model/script"
)

func TestProvider(t *testing.T) {
	modeltest.TestProvider(t, modeltest.OpenAI, func(baseURL string, retry model.RetryPolicy) model.Provider {
		return openai.New(openai.Config{BaseURL: baseURL, APIKey: "sk-test", Retry: retry})
	})
}

// The request on the wire has the shape OpenAI documents: streaming with
// usage, bearer auth, system first, image parts, tool_calls with string
// arguments, tool messages with tool_call_id.
func TestWireShape(t *testing.T) {
	srv := modeltest.NewOpenAI(t, script.MustParse(`[{"reply":{"text":"ok"}}]`))
	p := openai.New(openai.Config{BaseURL: srv.URL(), APIKey: "sk-test", Retry: modeltest.FastRetry})
	req := model.Request{
		Model: "gpt-test", System: "sys", MaxTokens: 77, ToolChoice: "get_weather",
		Tools: []model.ToolDef{{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object"}`)}},
		Messages: []message.Message{
			{Role: message.User, Content: "look", Parts: []message.Part{{Type: "image", MediaType: "image/png", Data: "AAAA"}}},
			{Role: message.Assistant, ToolCalls: []message.ToolCall{{ID: "call_1", Name: "get_weather"}}},
			{Role: message.Tool, ToolCallID: "call_1", Content: "sunny"},
		},
	}
	if _, err := modeltest.Collect(p.Stream(context.Background(), req)); err != nil {
		t.Fatal(err)
	}
	rec, _ := srv.Last()
	if got := rec.Header.Get("Authorization"); got != "Bearer sk-test" {
		t.Fatalf("authorization %q", got)
	}
	var body struct {
		Stream        bool `json:"stream"`
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
		MaxCompletionTokens int `json:"max_completion_tokens"`
		ToolChoice          struct {
			Type     string                `json:"type"`
			Function struct{ Name string } `json:"function"`
		} `json:"tool_choice"`
		Messages []struct {
			Role      string          `json:"role"`
			Content   json.RawMessage `json:"content"`
			ToolCalls []struct {
				Type     string `json:"type"`
				Function struct {
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
			ToolCallID string `json:"tool_call_id"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(rec.Body, &body); err != nil {
		t.Fatal(err)
	}
	if !body.Stream || !body.StreamOptions.IncludeUsage || body.MaxCompletionTokens != 77 {
		t.Fatalf("stream %v usage %v max %d", body.Stream, body.StreamOptions.IncludeUsage, body.MaxCompletionTokens)
	}
	if body.ToolChoice.Type != "function" || body.ToolChoice.Function.Name != "get_weather" {
		t.Fatalf("tool_choice %+v", body.ToolChoice)
	}
	m := body.Messages
	if len(m) != 4 || m[0].Role != "system" || m[1].Role != "user" || m[2].Role != "assistant" || m[3].Role != "tool" {
		t.Fatalf("messages %+v", m)
	}
	var parts []map[string]any
	if err := json.Unmarshal(m[1].Content, &parts); err != nil || len(parts) != 2 || parts[1]["type"] != "image_url" {
		t.Fatalf("user content %s", m[1].Content)
	}
	if url := parts[1]["image_url"].(map[string]any)["url"]; url != "data:image/png;base64,AAAA" {
		t.Fatalf("image url %v", url)
	}
	if c := m[2].ToolCalls; len(c) != 1 || c[0].Type != "function" || c[0].Function.Arguments != "{}" {
		t.Fatalf("assistant tool_calls %+v", c)
	}
	if m[3].ToolCallID != "call_1" {
		t.Fatalf("tool message %+v", m[3])
	}
}

// Compatible servers that only know max_tokens get it.
func TestLegacyMaxTokens(t *testing.T) {
	srv := modeltest.NewOpenAI(t, script.MustParse(`[{"reply":{"text":"ok"}}]`))
	p := openai.New(openai.Config{BaseURL: srv.URL(), LegacyMaxTokens: true})
	req := model.Request{Model: "llama3", MaxTokens: 12, Messages: []message.Message{{Role: message.User, Content: "hi"}}}
	if _, err := modeltest.Collect(p.Stream(context.Background(), req)); err != nil {
		t.Fatal(err)
	}
	rec, _ := srv.Last()
	var body map[string]any
	_ = json.Unmarshal(rec.Body, &body)
	if body["max_tokens"] != float64(12) || body["max_completion_tokens"] != nil {
		t.Fatalf("body %s", rec.Body)
	}
	if rec.Header.Get("Authorization") != "" {
		t.Fatalf("no key configured, but sent %q", rec.Header.Get("Authorization"))
	}
}

func BenchmarkStream(b *testing.B) {
	modeltest.BenchmarkProvider(b, modeltest.OpenAI, func(baseURL string, retry model.RetryPolicy) model.Provider {
		return openai.New(openai.Config{BaseURL: baseURL, APIKey: "sk-test", Retry: retry})
	})
}
