package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	ant "github.com/anthropics/anthropic-sdk-go/v2"
	antopt "github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/model/modeltest"
	"github.com/stackbone/stackbone/internal/stacktest"
)

// antClient is the official Go SDK (v2: Authorization: Bearer and
// anthropic-version 2026-10-21) pointed at the stack.
func antClient(env *stacktest.Env, opts ...antopt.RequestOption) ant.Client {
	base := []antopt.RequestOption{antopt.WithoutEnvironmentDefaults(), antopt.WithBaseURL(env.URL), antopt.WithAPIKey("sk-local")}
	return ant.NewClient(append(base, opts...)...)
}

func antSession(key string) antopt.RequestOption {
	return antopt.WithHeader("x-stackbone-session", key)
}

func antUser(s string) ant.MessageParam { return ant.NewUserMessage(ant.NewTextBlock(s)) }

func antParams(msgs ...ant.MessageParam) ant.MessageNewParams {
	return ant.MessageNewParams{Model: "assistant", MaxTokens: 512, Messages: msgs}
}

// antStream runs a streamed call and accumulates it as the SDK does.
func antStream(t *testing.T, c ant.Client, p ant.MessageNewParams, opts ...antopt.RequestOption) ant.Message {
	t.Helper()
	stream := c.Messages.NewStreaming(context.Background(), p, opts...)
	var msg ant.Message
	events := 0
	for stream.Next() {
		if err := msg.Accumulate(stream.Current()); err != nil {
			t.Fatalf("accumulate event %d: %v", events, err)
		}
		events++
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if events < 4 {
		t.Fatalf("only %d events", events)
	}
	return msg
}

// texts lists a message's text blocks.
func texts(m *ant.Message) []string {
	var out []string
	for _, b := range m.Content {
		if b.Type == "text" {
			out = append(out, b.Text)
		}
	}
	return out
}

func toolUses(m *ant.Message) []ant.ContentBlockUnion {
	var out []ant.ContentBlockUnion
	for _, b := range m.Content {
		if b.Type == "tool_use" {
			out = append(out, b)
		}
	}
	return out
}

// blocksOf is a comparable summary of a message's content.
func blocksOf(m *ant.Message) string {
	var parts []string
	for _, b := range m.Content {
		switch b.Type {
		case "text":
			parts = append(parts, "text:"+b.Text)
		case "tool_use":
			parts = append(parts, "tool_use:"+b.Name+":"+string(b.Input))
		default:
			parts = append(parts, b.Type)
		}
	}
	return strings.Join(parts, " | ")
}

func TestAnthropicNonStreamText(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	c := antClient(env)
	msg, err := c.Messages.New(context.Background(), antParams(antUser("hello there")))
	if err != nil {
		t.Fatal(err)
	}
	if got := blocksOf(msg); got != "text:echo: hello there" {
		t.Fatalf("content = %q", got)
	}
	if msg.StopReason != ant.StopReasonEndTurn || msg.Model != "assistant" || msg.Role != "assistant" || !strings.HasPrefix(msg.ID, "msg_") {
		t.Fatalf("unexpected message: %s", msg.RawJSON())
	}
	if msg.Usage.InputTokens == 0 || msg.Usage.OutputTokens == 0 {
		t.Fatalf("usage missing: %s", msg.Usage.RawJSON())
	}
}

func TestAnthropicStreamAccumulatesToNonStream(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	c := antClient(env)
	for _, prompt := range []string{"stream me please", "what is the weather in Paris?"} {
		streamed := antStream(t, c, antParams(antUser(prompt)))
		plain, err := c.Messages.New(context.Background(), antParams(antUser(prompt)))
		if err != nil {
			t.Fatal(err)
		}
		if blocksOf(&streamed) != blocksOf(plain) || streamed.StopReason != plain.StopReason {
			t.Fatalf("%q:\nstreamed  %s (%s)\nnon-stream %s (%s)", prompt, blocksOf(&streamed), streamed.StopReason, blocksOf(plain), plain.StopReason)
		}
		if streamed.Usage.OutputTokens == 0 || streamed.Usage.InputTokens == 0 {
			t.Fatalf("streamed usage %s", streamed.Usage.RawJSON())
		}
	}
}

func TestAnthropicServerToolShowsOnlyText(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	msg := antStream(t, antClient(env), antParams(antUser("what is the weather in Paris?")))
	if len(toolUses(&msg)) != 0 || msg.StopReason != ant.StopReasonEndTurn {
		t.Fatalf("server tool leaked: %s", blocksOf(&msg))
	}
	got := texts(&msg)
	if len(got) != 2 || got[0] != "Checking." || got[1] != `Tool said: {"city":"Paris","temp_c":21}` {
		t.Fatalf("text blocks %q", got)
	}
	if env.Calls.Get("get_weather") != 1 {
		t.Fatalf("tool ran %d times", env.Calls.Get("get_weather"))
	}
}

func openModalParam() ant.ToolUnionParam {
	u := ant.ToolUnionParamOfTool(ant.ToolInputSchemaParam{Properties: map[string]any{"title": map[string]any{"type": "string"}}}, "open_modal")
	u.OfTool.Description = ant.String("Open a modal in the app")
	return u
}

func TestAnthropicClientToolRoundTripWithSession(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	c := antClient(env, antSession("ant-client-tools"))
	history := []ant.MessageParam{antUser("open the modal")}
	p := antParams(history...)
	p.Tools = []ant.ToolUnionParam{openModalParam()}
	msg := antStream(t, c, p)
	calls := toolUses(&msg)
	if msg.StopReason != ant.StopReasonToolUse || len(calls) != 1 {
		t.Fatalf("want one tool_use, got %s (%s)", blocksOf(&msg), msg.StopReason)
	}
	call := calls[0]
	if call.Name != "open_modal" || string(call.Input) != `{"title":"Hello"}` || call.ID == "" {
		t.Fatalf("bad call %s", call.RawJSON())
	}
	// The client runs the tool and resends the whole conversation.
	history = append(history, msg.ToParam(), ant.NewUserMessage(ant.NewToolResultBlock(call.ID, `{"opened":true}`, false)))
	p.Messages = history
	res, err := c.Messages.New(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if got := blocksOf(res); got != `text:Modal said: {"opened":true}` {
		t.Fatalf("content = %q", got)
	}
	// The model saw the tool result once, answering the call.
	last, _ := env.Upstream.Last()
	msgs := last.Request.Messages
	if len(msgs) != 3 || msgs[2].Role != message.Tool || msgs[2].ToolCallID != call.ID || msgs[2].Content != `{"opened":true}` {
		t.Fatalf("upstream history %+v", msgs)
	}
}

// Without a session the client keeps the history: tool_use in the
// assistant message, tool_result in the next user message.
func TestAnthropicClientToolStateless(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	c := antClient(env)
	p := antParams(antUser("open the modal"))
	p.Tools = []ant.ToolUnionParam{openModalParam()}
	msg, err := c.Messages.New(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	calls := toolUses(msg)
	if msg.StopReason != ant.StopReasonToolUse || len(calls) != 1 {
		t.Fatalf("want a tool_use, got %s", blocksOf(msg))
	}
	p.Messages = append(p.Messages, msg.ToParam(), ant.NewUserMessage(ant.NewToolResultBlock(calls[0].ID, `{"opened":"yes"}`, false)))
	res, err := c.Messages.New(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if got := blocksOf(res); got != `text:Modal said: {"opened":"yes"}` {
		t.Fatalf("content = %q", got)
	}
}

func TestAnthropicSessionClientResendsEverything(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	c := antClient(env, antSession("ant-resend"))
	var history []ant.MessageParam
	for i, text := range []string{"first", "second", "third"} {
		history = append(history, antUser(text))
		p := antParams(history...)
		p.System = []ant.TextBlockParam{{Text: "Be brief."}}
		res, err := c.Messages.New(context.Background(), p)
		if err != nil {
			t.Fatalf("turn %d: %v", i, err)
		}
		if got := blocksOf(res); got != "text:echo: "+text {
			t.Fatalf("turn %d: %q", i, got)
		}
		history = append(history, res.ToParam())
	}
	last, _ := env.Upstream.Last()
	seen := map[string]int{}
	for _, m := range last.Request.Messages {
		seen[string(m.Role)+":"+m.Content]++
	}
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("upstream saw %q %d times", k, n)
		}
	}
	if len(last.Request.Messages) != 5 {
		t.Fatalf("upstream got %d messages, want 5: %+v", len(last.Request.Messages), last.Request.Messages)
	}
	if !strings.Contains(last.Request.System, "Be brief.") || !strings.Contains(last.Request.System, "test assistant") {
		t.Fatalf("system = %q", last.Request.System)
	}
	msgs, err := env.Store.Messages(context.Background(), "dev", "ant-resend")
	if err != nil || len(msgs) != 6 {
		t.Fatalf("stored %d messages (%v), want 6", len(msgs), err)
	}
}

// countHTTP counts the HTTP requests the SDK sends (retries included).
func countHTTP(n *atomic.Int32) antopt.RequestOption {
	return antopt.WithMiddleware(func(r *http.Request, next antopt.MiddlewareNext) (*http.Response, error) {
		n.Add(1)
		return next(r)
	})
}

func TestAnthropicApprovalPauseThen409(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	c := antClient(env, antSession("ant-refund"))
	msg, err := c.Messages.New(context.Background(), antParams(antUser("refund my order please")))
	if err != nil {
		t.Fatal(err)
	}
	calls := toolUses(msg)
	if msg.StopReason != ant.StopReasonToolUse || len(calls) != 1 || calls[0].Name != "refund" {
		t.Fatalf("want a refund tool_use, got %s (%s)", blocksOf(msg), msg.StopReason)
	}
	var args struct {
		OrderID string  `json:"orderId"`
		Amount  float64 `json:"amount"`
	}
	if err := json.Unmarshal(calls[0].Input, &args); err != nil || args.OrderID != "ord_42" || args.Amount != 19.99 {
		t.Fatalf("input %s", calls[0].Input)
	}
	if env.Calls.Get("refund") != 0 {
		t.Fatal("refund ran before approval")
	}

	before := env.Upstream.Count()
	var hits atomic.Int32
	// Default retries (2): only x-should-retry: false keeps this to one request.
	_, err = c.Messages.New(context.Background(), antParams(antUser("hello?")), countHTTP(&hits))
	var apiErr *ant.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusConflict {
		t.Fatalf("want 409, got %v", err)
	}
	if apiErr.ErrorCode() != "approval_pending" || apiErr.Type() != "invalid_request_error" {
		t.Fatalf("error_code %q type %q: %s", apiErr.ErrorCode(), apiErr.Type(), apiErr.RawJSON())
	}
	if apiErr.Message != "This conversation is waiting on a human decision. Resolve it before sending a new message." {
		t.Fatalf("message %q", apiErr.Message)
	}
	if h := apiErr.Response.Header.Get("x-should-retry"); h != "false" {
		t.Fatalf("x-should-retry = %q", h)
	}
	if n := hits.Load(); n != 1 {
		t.Fatalf("the SDK sent %d requests, want 1", n)
	}
	if env.Upstream.Count() != before {
		t.Fatal("the refused call reached the model")
	}
}

func TestAnthropicBehindBothProviders(t *testing.T) {
	t.Parallel()
	for _, kind := range []modeltest.Kind{modeltest.OpenAI, modeltest.Anthropic} {
		t.Run(string(kind), func(t *testing.T) {
			env := stacktest.New(t, stacktest.Options{Upstream: kind})
			c := antClient(env)
			res, err := c.Messages.New(context.Background(), antParams(antUser("hello there")))
			if err != nil {
				t.Fatal(err)
			}
			if got := blocksOf(res); got != "text:echo: hello there" {
				t.Fatalf("content %q", got)
			}
			msg := antStream(t, c, antParams(antUser("weather in Paris?")))
			if got := texts(&msg); len(got) != 2 || !strings.HasPrefix(got[1], "Tool said:") {
				t.Fatalf("streamed %s", blocksOf(&msg))
			}
			if last, _ := env.Upstream.Last(); !strings.HasSuffix(last.Path, map[modeltest.Kind]string{
				modeltest.OpenAI: "/chat/completions", modeltest.Anthropic: "/messages"}[kind]) {
				t.Fatalf("upstream path %q", last.Path)
			}
		})
	}
}

func TestAnthropicInStreamError(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{Script: `[{"reply":{"error":{"status":400,"message":"context too long"}}}]`})
	c := antClient(env)
	stream := c.Messages.NewStreaming(context.Background(), antParams(antUser("hi")))
	for stream.Next() {
	}
	var apiErr *ant.Error
	if err := stream.Err(); !errors.As(err, &apiErr) || apiErr.Type() != "api_error" || strings.Contains(apiErr.Message, "context too long") || !strings.Contains(apiErr.Message, "status 400") {
		t.Fatalf("want an api_error event, got %v", err)
	}
}

func TestAnthropicModelsList(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	c := antClient(env)
	page, err := c.Models.List(context.Background(), ant.ModelListParams{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range page.Data {
		if m.DisplayName == "" || m.CreatedAt.IsZero() {
			t.Fatalf("model %s", m.RawJSON())
		}
		names = append(names, m.ID)
	}
	if strings.Join(names, ",") != "assistant,other" || page.HasMore {
		t.Fatalf("models = %v (has_more %v)", names, page.HasMore)
	}
}

func TestAnthropicCountTokensSDK(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	c := antClient(env)
	res, err := c.Messages.CountTokens(context.Background(), ant.MessageCountTokensParams{
		Model: "assistant", Messages: []ant.MessageParam{antUser(strings.Repeat("count these words ", 50))},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.InputTokens < 200 {
		t.Fatalf("input_tokens = %d for ~900 characters", res.InputTokens)
	}
	if env.Upstream.Count() != 0 {
		t.Fatal("count_tokens called the model")
	}
}
