package modeltest_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	ant "github.com/anthropics/anthropic-sdk-go/v2"
	antopt "github.com/anthropics/anthropic-sdk-go/v2/option"
	oai "github.com/openai/openai-go/v3"
	oaiopt "github.com/openai/openai-go/v3/option"

	"github.com/stackbone/stackbone/internal/model/modeltest"
	"github.com/stackbone/stackbone/internal/model/script"
	"github.com/stackbone/stackbone/internal/testwait"
)

const toolScript = `[
  {"when": {"lastUser": "weather"}, "reply": {"text": "Checking the weather.", "toolCalls": [
     {"name": "get_weather", "arguments": {"city": "Paris"}},
     {"name": "get_time", "arguments": {"tz": "CET"}}]}},
  {"when": {"lastUser": "deny"}, "reply": {"error": {"status": 403, "message": "no access"}}},
  {"reply": {"text": "plain answer"}}
]`

func openAIClient(srv *modeltest.Server) oai.Client {
	return oai.NewClient(oaiopt.WithBaseURL(srv.URL()), oaiopt.WithAPIKey("k"), oaiopt.WithMaxRetries(0))
}

func anthropicClient(srv *modeltest.Server) ant.Client {
	return ant.NewClient(antopt.WithoutEnvironmentDefaults(), antopt.WithBaseURL(srv.URL()), antopt.WithAPIKey("k"), antopt.WithMaxRetries(0))
}

// The official SDK's strict accumulator accepts the mock's stream.
func TestOpenAIStreamAccumulates(t *testing.T) {
	srv := modeltest.NewOpenAI(t, script.MustParse(toolScript))
	c := openAIClient(srv)
	stream := c.Chat.Completions.NewStreaming(context.Background(), oai.ChatCompletionNewParams{
		Model:         "m",
		Messages:      []oai.ChatCompletionMessageParamUnion{oai.UserMessage("weather?")},
		StreamOptions: oai.ChatCompletionStreamOptionsParam{IncludeUsage: oai.Bool(true)},
	})
	var acc oai.ChatCompletionAccumulator
	for stream.Next() {
		if !acc.AddChunk(stream.Current()) {
			t.Fatalf("accumulator rejected chunk %s", stream.Current().RawJSON())
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	msg := acc.Choices[0].Message
	if msg.Content != "Checking the weather." || acc.Choices[0].FinishReason != "tool_calls" || len(msg.ToolCalls) != 2 {
		t.Fatalf("accumulated %+v finish %q", msg, acc.Choices[0].FinishReason)
	}
	if tc := msg.ToolCalls[0]; tc.Function.Name != "get_weather" || tc.Function.Arguments != `{"city":"Paris"}` || tc.Type != "function" {
		t.Fatalf("tool call %+v", tc)
	}
	if acc.Usage.TotalTokens == 0 {
		t.Fatal("no usage chunk")
	}
}

func TestOpenAINonStream(t *testing.T) {
	srv := modeltest.NewOpenAI(t, script.MustParse(toolScript))
	c := openAIClient(srv)
	res, err := c.Chat.Completions.New(context.Background(), oai.ChatCompletionNewParams{
		Model: "m", Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("weather?")},
	})
	if err != nil {
		t.Fatal(err)
	}
	ch := res.Choices[0]
	if ch.FinishReason != "tool_calls" || ch.Message.Content != "Checking the weather." || len(ch.Message.ToolCalls) != 2 || res.Usage.PromptTokens == 0 {
		t.Fatalf("completion %+v", res)
	}
	if rec, _ := srv.Last(); rec.Stream {
		t.Fatal("recorded as streaming")
	}
}

// Without include_usage there is no usage chunk and no usage key.
func TestOpenAIStreamWithoutUsage(t *testing.T) {
	srv := modeltest.NewOpenAI(t, script.MustParse(toolScript))
	resp, err := http.Post(srv.URL()+"/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	var lines []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if l := sc.Text(); l != "" {
			lines = append(lines, l)
		}
	}
	if lines[len(lines)-1] != "data: [DONE]" {
		t.Fatalf("last line %q", lines[len(lines)-1])
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "data: ") || strings.Contains(l, `"usage"`) || strings.Contains(l, `"error"`) {
			t.Fatalf("unexpected line %q", l)
		}
	}
}

func TestOpenAIErrors(t *testing.T) {
	srv := modeltest.NewOpenAI(t, script.MustParse(toolScript))
	c := openAIClient(srv)
	params := oai.ChatCompletionNewParams{Model: "m", Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("deny")}}
	_, err := c.Chat.Completions.New(context.Background(), params)
	var apiErr *oai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 403 || apiErr.Message != "no access" || apiErr.Type != "permission_error" {
		t.Fatalf("got %v", err)
	}
	srv.FailNext(1, 429)
	params.Messages = []oai.ChatCompletionMessageParamUnion{oai.UserMessage("hi")}
	_, err = c.Chat.Completions.New(context.Background(), params)
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 {
		t.Fatalf("got %v", err)
	}
	if _, err := c.Chat.Completions.New(context.Background(), params); err != nil {
		t.Fatalf("only one request should fail: %v", err)
	}
	reqs := srv.Requests()
	if len(reqs) != 3 || reqs[0].Status != 403 || reqs[1].Status != 429 || reqs[2].Status != 200 || reqs[2].Seq != 3 {
		t.Fatalf("recorded %+v", reqs)
	}
}

// The official SDK's accumulator accepts the mock's event stream.
func TestAnthropicStreamAccumulates(t *testing.T) {
	srv := modeltest.NewAnthropic(t, script.MustParse(toolScript))
	c := anthropicClient(srv)
	stream := c.Messages.NewStreaming(context.Background(), ant.MessageNewParams{
		Model: "claude", MaxTokens: 100,
		Messages: []ant.MessageParam{ant.NewUserMessage(ant.NewTextBlock("weather?"))},
	})
	var msg ant.Message
	for stream.Next() {
		if err := msg.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if msg.StopReason != ant.StopReasonToolUse || len(msg.Content) != 3 || msg.Usage.OutputTokens == 0 {
		t.Fatalf("message %+v", msg)
	}
	if b := msg.Content[0]; b.Type != "text" || b.Text != "Checking the weather." {
		t.Fatalf("text block %+v", b)
	}
	if b := msg.Content[1]; b.Type != "tool_use" || b.Name != "get_weather" || string(b.Input) != `{"city":"Paris"}` {
		t.Fatalf("tool_use block %+v input %s", b, b.Input)
	}
}

func TestAnthropicNonStreamAndErrors(t *testing.T) {
	srv := modeltest.NewAnthropic(t, script.MustParse(toolScript))
	c := anthropicClient(srv)
	params := ant.MessageNewParams{Model: "claude", MaxTokens: 100,
		Messages: []ant.MessageParam{ant.NewUserMessage(ant.NewTextBlock("hello"))}}
	msg, err := c.Messages.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if msg.StopReason != ant.StopReasonEndTurn || msg.Content[0].Text != "plain answer" {
		t.Fatalf("message %+v", msg)
	}
	srv.FailNext(1, 529)
	_, err = c.Messages.New(context.Background(), params)
	var apiErr *ant.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 529 || apiErr.Type() != "overloaded_error" {
		t.Fatalf("got %v", err)
	}
	// max_tokens is required, as upstream.
	resp, err := http.Post(srv.URL()+"/v1/messages", "application/json", strings.NewReader(`{"model":"claude","messages":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Fatalf("missing max_tokens: status %d", resp.StatusCode)
	}
}

func TestRouting(t *testing.T) {
	h := modeltest.Handler(modeltest.Anthropic, script.MustParse(toolScript))
	for _, tc := range []struct {
		method, path string
		status       int
	}{
		{"POST", "/v1/chat/completions", 404},
		{"GET", "/v1/messages", 405},
		{"POST", "/v1/messages?beta=true", 200},
	} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(tc.method, tc.path, strings.NewReader(`{"model":"c","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`))
		h.ServeHTTP(rec, req)
		if rec.Code != tc.status {
			t.Errorf("%s %s: %d, want %d", tc.method, tc.path, rec.Code, tc.status)
		}
		if tc.status != 200 {
			var env struct {
				Type  string
				Error struct{ Type, Message string }
			}
			if json.Unmarshal(rec.Body.Bytes(), &env) != nil || env.Type != "error" || env.Error.Message == "" {
				t.Errorf("%s %s: body %s", tc.method, tc.path, rec.Body)
			}
		}
	}
	if _, err := modeltest.ParseKind("gemini"); err == nil {
		t.Error("ParseKind accepted an unknown kind")
	}
}

// HoldOnce holds the first matching request (recorded at once) until
// released, answers others meanwhile, and lets later matching ones through;
// a held request whose caller goes away ends.
func TestHoldOnce(t *testing.T) {
	srv := modeltest.NewOpenAI(t, script.MustParse(toolScript))
	c := openAIClient(srv)
	ask := func(ctx context.Context, text string) (string, error) {
		res, err := c.Chat.Completions.New(ctx, oai.ChatCompletionNewParams{
			Model: "m", Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage(text)},
		})
		if err != nil {
			return "", err
		}
		return res.Choices[0].Message.Content, nil
	}
	release := srv.HoldOnce(script.When{LastUser: "slow"})
	held := make(chan string, 1)
	go func() {
		got, err := ask(context.Background(), "slow one")
		if err != nil {
			got = err.Error()
		}
		held <- got
	}()
	waitCount(t, srv, 1)
	if got, err := ask(context.Background(), "quick"); err != nil || got != "plain answer" {
		t.Fatalf("a request that does not match: %q %v", got, err)
	}
	select {
	case got := <-held:
		t.Fatalf("answered before release: %q", got)
	default:
	}
	release()
	if got := <-held; got != "plain answer" {
		t.Fatalf("after release: %q", got)
	}
	if got, err := ask(context.Background(), "slow two"); err != nil || got != "plain answer" {
		t.Fatalf("a later matching request: %q %v", got, err)
	}

	srv.HoldOnce(script.When{LastUser: "gone"})
	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan error, 1)
	go func() {
		_, err := ask(ctx, "gone")
		gone <- err
	}()
	waitCount(t, srv, 4)
	cancel()
	if err := <-gone; !errors.Is(err, context.Canceled) {
		t.Fatalf("a held request whose caller left: %v", err)
	}
}

// waitCount polls until the mock recorded n requests.
func waitCount(t *testing.T, srv *modeltest.Server, n int) {
	t.Helper()
	if !testwait.Poll(testwait.Context(t), func() bool { return srv.Count() >= n }) {
		t.Fatalf("the mock recorded %d requests, want %d", srv.Count(), n)
	}
}
