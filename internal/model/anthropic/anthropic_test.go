package anthropic_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/model"
	"github.com/stackbone/stackbone/internal/model/anthropic"
	"github.com/stackbone/stackbone/internal/model/modeltest"
	"github.com/stackbone/stackbone/internal/model/script"
)

func TestProvider(t *testing.T) {
	modeltest.TestProvider(t, modeltest.Anthropic, func(baseURL string, retry model.RetryPolicy) model.Provider {
		return anthropic.New(anthropic.Config{BaseURL: baseURL, APIKey: "sk-ant-test", Retry: retry})
	})
}

// The request on the wire has the Messages shape: max_tokens defaulted,
// system on top, tool_use input as an object, tool results (and a user
// message after them) merged into one user turn, images as blocks.
func TestWireShape(t *testing.T) {
	srv := modeltest.NewAnthropic(t, script.MustParse(`[{"reply":{"text":"ok"}}]`))
	p := anthropic.New(anthropic.Config{BaseURL: srv.URL(), APIKey: "sk-ant-test", Retry: modeltest.FastRetry})
	req := model.Request{
		Model: "claude-test", System: "sys", ToolChoice: "required",
		Tools: []model.ToolDef{{Name: "get_weather", Description: "w",
			Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}`)}},
		Messages: []message.Message{
			{Role: message.User, Content: "look", Parts: []message.Part{{Type: "image", URL: "data:image/png;base64,AAAA"}}},
			{Role: message.Assistant, Content: "Checking.", ToolCalls: []message.ToolCall{{ID: "toolu_1", Name: "get_weather", Arguments: `{"city":"Paris"}`}}},
			{Role: message.Tool, ToolCallID: "toolu_1", Content: "sunny", IsError: true},
			{Role: message.User, Content: "thanks"},
		},
	}
	if _, err := modeltest.Collect(p.Stream(context.Background(), req)); err != nil {
		t.Fatal(err)
	}
	rec, _ := srv.Last()
	if rec.Header.Get("Authorization") != "Bearer sk-ant-test" && rec.Header.Get("X-Api-Key") != "sk-ant-test" {
		t.Fatalf("no key sent: %v", rec.Header)
	}
	if rec.Header.Get("Anthropic-Version") == "" {
		t.Fatal("no anthropic-version header")
	}
	var body struct {
		MaxTokens  int `json:"max_tokens"`
		Stream     bool
		System     []struct{ Text string } `json:"system"`
		ToolChoice struct{ Type string }   `json:"tool_choice"`
		Tools      []struct {
			Name        string         `json:"name"`
			InputSchema map[string]any `json:"input_schema"`
		} `json:"tools"`
		Messages []struct {
			Role    string `json:"role"`
			Content []struct {
				Type      string          `json:"type"`
				Input     json.RawMessage `json:"input"`
				ToolUseID string          `json:"tool_use_id"`
				IsError   bool            `json:"is_error"`
				Source    struct {
					Type, MediaType, Data string
				} `json:"source"`
			} `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(rec.Body, &body); err != nil {
		t.Fatal(err)
	}
	if body.MaxTokens != anthropic.DefaultMaxTokens || !body.Stream || len(body.System) != 1 || body.System[0].Text != "sys" {
		t.Fatalf("max_tokens %d stream %v system %+v", body.MaxTokens, body.Stream, body.System)
	}
	if body.ToolChoice.Type != "any" {
		t.Fatalf("tool_choice %+v", body.ToolChoice)
	}
	if s := body.Tools[0].InputSchema; s["type"] != "object" || s["additionalProperties"] != false || s["properties"] == nil {
		t.Fatalf("input_schema %v", s)
	}
	m := body.Messages
	if len(m) != 3 || m[0].Role != "user" || m[1].Role != "assistant" || m[2].Role != "user" {
		t.Fatalf("turns %+v", m)
	}
	if img := m[0].Content[1]; img.Type != "image" || img.Source.Type != "base64" || img.Source.Data != "AAAA" {
		t.Fatalf("image block %+v", img)
	}
	if tu := m[1].Content[1]; tu.Type != "tool_use" || string(tu.Input) != `{"city":"Paris"}` {
		t.Fatalf("tool_use block %+v (input %s)", tu, tu.Input)
	}
	if tr := m[2].Content[0]; tr.Type != "tool_result" || tr.ToolUseID != "toolu_1" || !tr.IsError || m[2].Content[1].Type != "text" {
		t.Fatalf("user turn after the tool %+v", m[2].Content)
	}
}

// The input tokens of message_start reach the caller before the step's
// output (a client can show them at once), and agree with Finish.
func TestInputTokensBeforeOutput(t *testing.T) {
	srv := modeltest.NewAnthropic(t, script.MustParse(`[{"reply":{"text":"a streamed answer in pieces"}}]`))
	p := anthropic.New(anthropic.Config{BaseURL: srv.URL(), APIKey: "sk-ant-test", Retry: modeltest.FastRetry})
	var types []model.ChunkType
	var early int
	for c, err := range p.Stream(context.Background(), model.Request{Model: "claude-test", Messages: []message.Message{{Role: message.User, Content: "hello there"}}}) {
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, c.Type)
		if c.Type == model.InputTokens {
			early = c.Usage.InputTokens
		}
		if c.Type == model.Finish && (early == 0 || c.Usage.InputTokens != early) {
			t.Fatalf("early input tokens %d, Finish %d", early, c.Usage.InputTokens)
		}
	}
	if len(types) < 3 || types[0] != model.InputTokens || types[1] != model.Text {
		t.Fatalf("chunk types %v: want InputTokens first, then the text", types)
	}
}

// TestRequestSettings: reasoning effort becomes a thinking budget (max_tokens
// raised past it when unset, an error when set below it), parallelToolCalls
// false disables parallel tool use, providerOptions.anthropic fields are
// set on the body; temperature and top_p are not sent.
func TestRequestSettings(t *testing.T) {
	temp, par := 0.2, false
	req := model.Request{Model: "c", Messages: []message.Message{{Role: message.User, Content: "hi"}},
		Tools: []model.ToolDef{{Name: "t"}}}
	model.Settings{Temperature: &temp, TopP: &temp, Stop: []string{"END"}, ReasoningEffort: "medium", ParallelToolCalls: &par,
		ProviderOptions: map[string]json.RawMessage{"anthropic": json.RawMessage(`{"metadata":{"user_id":"u1"}}`),
			"openai": json.RawMessage(`{"user":"x"}`)}}.Apply(&req)
	raw, _ := sent(t, req)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	th, _ := m["thinking"].(map[string]any)
	tc, _ := m["tool_choice"].(map[string]any)
	if th["type"] != "enabled" || th["budget_tokens"] != float64(4096) || m["max_tokens"] != float64(4096+anthropic.DefaultMaxTokens) ||
		tc["type"] != "auto" || tc["disable_parallel_tool_use"] != true || m["metadata"].(map[string]any)["user_id"] != "u1" ||
		m["stop_sequences"].([]any)[0] != "END" || m["temperature"] != nil || m["top_p"] != nil || m["user"] != nil {
		t.Fatalf("params %s", raw)
	}
	req.MaxTokens = 2000
	p := anthropic.New(anthropic.Config{APIKey: "k", Retry: modeltest.FastRetry})
	if _, err := modeltest.Collect(p.Stream(context.Background(), req)); err == nil || err.Error() != `max tokens 2000 must exceed the 4096-token thinking budget of reasoning effort "medium"` {
		t.Fatalf("max tokens under the budget: %v", err)
	}
}

func BenchmarkStream(b *testing.B) {
	modeltest.BenchmarkProvider(b, modeltest.Anthropic, func(baseURL string, retry model.RetryPolicy) model.Provider {
		return anthropic.New(anthropic.Config{BaseURL: baseURL, APIKey: "sk-ant-test", Retry: retry})
	})
}

// An error event inside a 200 stream fails the step as a 502 with the
// upstream's message (its request id kept for the logs); ping events and
// comments are skipped.
func TestStreamErrorEvent(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("request-id", "req_stream_1")
		_, _ = io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"c\",\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n"+
			": a comment\n\nevent: ping\ndata: {\"type\":\"ping\"}\n\n"+
			"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n")
	}))
	defer srv.Close()
	p := anthropic.New(anthropic.Config{BaseURL: srv.URL, APIKey: "k", Retry: model.RetryPolicy{Attempts: 1}})
	_, err := modeltest.Collect(p.Stream(context.Background(), model.Request{Model: "c", Messages: []message.Message{{Role: message.User, Content: "hi"}}}))
	var me *model.Error
	if !errors.As(err, &me) || me.Status != http.StatusBadGateway || !strings.Contains(me.Message, "Overloaded") {
		t.Fatalf("got %#v", err)
	}
	// The upstream's request id is kept for the logs (not the public message).
	if me.Err == nil || !strings.Contains(me.Err.Error(), "req_stream_1") || strings.Contains(me.Message, "req_stream_1") {
		t.Fatalf("request id: message %q, cause %v", me.Message, me.Err)
	}
}

// A tool without parameters is sent with the input_schema the API requires
// ({"type":"object"}); the mock, like the API, refuses a tool without one.
func TestToolWithoutParameters(t *testing.T) {
	srv := modeltest.NewAnthropic(t, script.MustParse(`[{"reply":{"text":"ok"}}]`))
	p := anthropic.New(anthropic.Config{BaseURL: srv.URL(), APIKey: "sk-ant-test", Retry: modeltest.FastRetry})
	req := model.Request{Model: "claude-test", Messages: []message.Message{{Role: message.User, Content: "what time is it?"}},
		Tools: []model.ToolDef{{Name: "now", Description: "the time"}, {Name: "ping", Parameters: json.RawMessage(`{}`)}}}
	st, err := modeltest.Collect(p.Stream(context.Background(), req))
	if err != nil || st.Text != "ok" {
		t.Fatalf("%q, %v", st.Text, err)
	}
	rec, _ := srv.Last()
	if len(rec.Request.Tools) != 2 || string(rec.Request.Tools[0].Parameters) != `{"type":"object"}` {
		t.Fatalf("tools as the upstream saw them: %+v", rec.Request.Tools)
	}
}

// A stream cut before message_stop, or an event that is not JSON, fails the
// step as a 502 (nothing is taken as a finished answer).
func TestBrokenStreams(t *testing.T) {
	start := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":5}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
	for name, c := range map[string]struct{ body, msg string }{
		"cut":       {start + "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hel\"}}\n\n", "without message_stop"},
		"malformed": {start + "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\n\n", "unreadable answer"},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, c.body)
		}))
		p := anthropic.New(anthropic.Config{BaseURL: srv.URL, APIKey: "k", Retry: model.RetryPolicy{Attempts: 1}})
		_, err := modeltest.Collect(p.Stream(context.Background(), model.Request{Model: "c", Messages: []message.Message{{Role: message.User, Content: "hi"}}}))
		srv.Close()
		var me *model.Error
		if !errors.As(err, &me) || me.Status != http.StatusBadGateway || !strings.Contains(me.Message, c.msg) {
			t.Errorf("%s: got %#v", name, err)
		}
	}
}

// Extended thinking: thinking and redacted_thinking blocks become Reasoning
// chunks (text, signature and data verbatim), yielded after the input tokens
// and before the first text; they are sent back first in their assistant
// turn when thinking is on (by reasoning effort or by providerOptions'
// "thinking", which wins), and not at all when it is off.
func TestThinkingBlocks(t *testing.T) {
	body := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":9}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\",\"signature\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"Hmm, \"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"weather.\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"EqQBCgIYAh\"}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"redacted_thinking\",\"data\":\"EmwKAhgB\"}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"text_delta\",\"text\":\"Sunny.\"}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":2}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":20}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	p, sent := fixedUpstream(t, body)
	req := model.Request{Model: "c", ReasoningEffort: "low", Messages: []message.Message{{Role: message.User, Content: "weather?"}}}
	var types []model.ChunkType
	var got []message.Reasoning
	text := ""
	for c, err := range p.Stream(context.Background(), req) {
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, c.Type)
		switch c.Type {
		case model.Reasoning:
			got = append(got, *c.Reasoning)
		case model.Text:
			text += c.Text
		}
	}
	want := []message.Reasoning{{Type: "thinking", Text: "Hmm, weather.", Signature: "EqQBCgIYAh"}, {Type: "redacted_thinking", Data: "EmwKAhgB"}}
	if text != "Sunny." || len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("text %q, reasoning %+v", text, got)
	}
	if len(types) < 4 || types[0] != model.InputTokens || types[1] != model.Reasoning || types[2] != model.Reasoning || types[3] != model.Text {
		t.Fatalf("chunk order %v", types)
	}

	// Sent back: first in the assistant turn with thinking on, absent with it off.
	history := []message.Message{{Role: message.User, Content: "weather?"},
		{Role: message.Assistant, Reasoning: got, ToolCalls: []message.ToolCall{{ID: "toolu_1", Name: "w", Arguments: `{}`}}},
		{Role: message.Tool, ToolCallID: "toolu_1", Content: "sun"}}
	for _, c := range []struct {
		effort, options string
		on              bool
	}{
		{"low", "", true},
		{"", "", false},
		{"", `{"thinking":{"type":"enabled","budget_tokens":2048}}`, true}, // thinking set through providerOptions
		{"low", `{"thinking":{"type":"disabled"}}`, false},                 // providerOptions replace the effort's
	} {
		req := model.Request{Model: "c", ReasoningEffort: c.effort, Messages: history}
		if c.options != "" {
			req.ProviderOptions = map[string]json.RawMessage{"anthropic": json.RawMessage(c.options)}
		}
		if _, err := modeltest.Collect(p.Stream(context.Background(), req)); err != nil {
			t.Fatal(err)
		}
		var b struct {
			Messages []struct {
				Content []map[string]any `json:"content"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(*sent, &b); err != nil || len(b.Messages) != 3 {
			t.Fatalf("body %s: %v", *sent, err)
		}
		turn := b.Messages[1].Content
		if !c.on {
			if len(turn) != 1 || turn[0]["type"] != "tool_use" {
				t.Fatalf("%+v: thinking off, assistant turn %v", c, turn)
			}
			continue
		}
		if len(turn) != 3 || turn[0]["type"] != "thinking" || turn[0]["thinking"] != "Hmm, weather." || turn[0]["signature"] != "EqQBCgIYAh" ||
			turn[1]["type"] != "redacted_thinking" || turn[1]["data"] != "EmwKAhgB" || turn[2]["type"] != "tool_use" {
			t.Fatalf("%+v: thinking on, assistant turn %v", c, turn)
		}
	}
}

// A model that thinks for longer than the idle timeout, sending thinking
// deltas, is not cut off: only silence is.
func TestLongThinkingIsNotIdle(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		write := func(s string) { _, _ = io.WriteString(w, s); _ = rc.Flush() }
		write("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3}}}\n\n" +
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"}}\n\n")
		for range 6 { // 6 × 40 ms of thinking; the idle timeout is 100 ms
			time.Sleep(40 * time.Millisecond)
			write("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"hmm \"}}\n\n")
		}
		write("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"s1\"}}\n\n" +
			"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"42\"}}\n\n" +
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":9}}\n\n" +
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	}))
	defer srv.Close()
	p := anthropic.New(anthropic.Config{BaseURL: srv.URL, APIKey: "k", Retry: model.RetryPolicy{Attempts: 1}})
	st, err := modeltest.Collect(p.Stream(context.Background(), model.Request{Model: "c", ReasoningEffort: "high",
		Messages: []message.Message{{Role: message.User, Content: "think hard"}}, Timeouts: model.Timeouts{Idle: 100 * time.Millisecond}}))
	if err != nil || st.Text != "42" || len(st.Reasoning) != 1 || st.Reasoning[0].Text != "hmm hmm hmm hmm hmm hmm " {
		t.Fatalf("%+v, %v", st, err)
	}
}

// Interleaved thinking (a thinking block between two tool calls) goes back
// in its place, not moved to the front.
func TestInterleavedThinkingKeepsItsPlace(t *testing.T) {
	ev := func(name, data string) string { return "event: " + name + "\ndata: " + data + "\n\n" }
	body := ev("message_start", `{"type":"message_start","message":{"usage":{"input_tokens":3}}}`) +
		ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"first"}}`) +
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"s0"}}`) +
		ev("content_block_stop", `{"type":"content_block_stop","index":0}`) +
		ev("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_a","name":"a","input":{}}}`) +
		ev("content_block_stop", `{"type":"content_block_stop","index":1}`) +
		ev("content_block_start", `{"type":"content_block_start","index":2,"content_block":{"type":"thinking","thinking":"between"}}`) +
		ev("content_block_delta", `{"type":"content_block_delta","index":2,"delta":{"type":"signature_delta","signature":"s2"}}`) +
		ev("content_block_stop", `{"type":"content_block_stop","index":2}`) +
		ev("content_block_start", `{"type":"content_block_start","index":3,"content_block":{"type":"tool_use","id":"toolu_b","name":"b","input":{}}}`) +
		ev("content_block_stop", `{"type":"content_block_stop","index":3}`) +
		ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":9}}`) +
		ev("message_stop", `{"type":"message_stop"}`)
	p, sent := fixedUpstream(t, body)
	opts := map[string]json.RawMessage{"anthropic": json.RawMessage(`{"thinking":{"type":"adaptive"}}`)}
	st, err := modeltest.Collect(p.Stream(context.Background(), model.Request{Model: "c", ProviderOptions: opts,
		Messages: []message.Message{{Role: message.User, Content: "go"}}}))
	if err != nil || len(st.Reasoning) != 2 || st.Reasoning[0].AfterCalls != 0 || st.Reasoning[1].AfterCalls != 1 {
		t.Fatalf("%+v, %v", st.Reasoning, err)
	}
	calls := st.ToolCalls
	for i := range calls {
		calls[i].Arguments = "{}"
	}
	history := []message.Message{{Role: message.User, Content: "go"},
		{Role: message.Assistant, Reasoning: st.Reasoning, ToolCalls: calls},
		{Role: message.Tool, ToolCallID: "toolu_a", Content: "A"}, {Role: message.Tool, ToolCallID: "toolu_b", Content: "B"}}
	if _, err := modeltest.Collect(p.Stream(context.Background(), model.Request{Model: "c", ProviderOptions: opts, Messages: history})); err != nil {
		t.Fatal(err)
	}
	var b struct {
		Messages []struct {
			Content []map[string]any `json:"content"`
		} `json:"messages"`
	}
	_ = json.Unmarshal(*sent, &b)
	var order []string
	if len(b.Messages) > 1 {
		for _, c := range b.Messages[1].Content {
			order = append(order, fmt.Sprint(c["type"], ":", c["thinking"], c["id"]))
		}
	}
	if strings.Join(order, " ") != "thinking:first<nil> tool_use:<nil>toolu_a thinking:between<nil> tool_use:<nil>toolu_b" {
		t.Fatalf("assistant turn sent back as %v", order)
	}
}

// fixedUpstream starts an Anthropic upstream answering every request with
// body (an event stream), and returns a provider on it and the last request
// body it received.
func fixedUpstream(t *testing.T, body string) (*anthropic.Provider, *[]byte) {
	t.Helper()
	sent := new([]byte)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*sent, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return anthropic.New(anthropic.Config{BaseURL: srv.URL, APIKey: "k", Retry: modeltest.FastRetry}), sent
}
