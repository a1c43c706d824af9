package server_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/stackbone/stackbone/internal/stacktest"
)

// TestOpenAIStreamUpstreamRateLimit: a run that fails on an upstream 429
// reports rate_limit_error on the OpenAI stream, as it does without
// streaming and on the Anthropic wire (the stream used to say server_error:
// it dropped the run's error kind).
func TestOpenAIStreamUpstreamRateLimit(t *testing.T) {
	env := stacktest.New(t, stacktest.Options{})
	c := client(env, option.WithMaxRetries(0))

	env.Upstream.FailNext(100, 429) // past the provider's own retries
	stream := c.Chat.Completions.NewStreaming(context.Background(), params(user("hello")))
	for stream.Next() {
	}
	err := stream.Err()
	if err == nil || !strings.Contains(err.Error(), `"type":"rate_limit_error"`) || !strings.Contains(err.Error(), `"code":"upstream_rate_limited"`) {
		t.Fatalf("stream error = %v, want rate_limit_error / upstream_rate_limited", err)
	}

	// The same failure without streaming: the SDK sees a 429 of that type.
	env.Upstream.FailNext(100, 429)
	_, err = c.Chat.Completions.New(context.Background(), params(user("hello")))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || apiErr.Type != "rate_limit_error" {
		t.Fatalf("non-stream error = %v, want a 429 rate_limit_error", err)
	}

	// And on the Anthropic stream.
	env.Upstream.FailNext(100, 429)
	resp, b := antPost(t, env.URL+"/v1/messages", antBody("hello", `,"stream":true`), nil)
	if resp.StatusCode != 200 || !strings.Contains(string(b), "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\"") {
		t.Fatalf("anthropic stream: %d %s", resp.StatusCode, b)
	}
}
