package server_test

import (
	"context"
	"net/http"
	"testing"

	ant "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/stackbone/stackbone/internal/model/modeltest"
	"github.com/stackbone/stackbone/internal/model/script"
	"github.com/stackbone/stackbone/internal/stacktest"
)

// reportedInput is the input count the mock upstream reported for its
// request number i (from 0).
func reportedInput(t *testing.T, env *stacktest.Env, i int) int64 {
	t.Helper()
	reqs := env.Upstream.Requests()
	if len(reqs) <= i {
		t.Fatalf("the upstream got %d requests", len(reqs))
	}
	rep, err := script.MustParse(stacktest.DefaultScript).Reply(reqs[i].Request)
	if err != nil {
		t.Fatal(err)
	}
	return int64(rep.Usage.InputTokens)
}

// message_start carries the upstream's real input count, the same figure the
// SDK accumulates from message_delta (LangChain's ChatAnthropic reports the
// message_start figure), when the upstream reports it at the start of the
// step (Anthropic). An upstream that reports it only at the end of a step
// (OpenAI) does not hold back streamed text: message_start carries the
// estimate and message_delta the real figure.
func TestAnthropicStreamUsageIsTheUpstreams(t *testing.T) {
	t.Parallel()
	for _, kind := range []modeltest.Kind{modeltest.Anthropic, modeltest.OpenAI} {
		t.Run(string(kind), func(t *testing.T) {
			env := stacktest.New(t, stacktest.Options{Upstream: kind})
			c := antClient(env)
			msg, start := antStreamStart(t, c, antParams(antUser("hello there, how are you today?")))
			want := reportedInput(t, env, 0)
			startWant := want
			if kind == modeltest.OpenAI {
				if start <= 0 {
					t.Fatalf("message_start input_tokens %d, want the server's estimate", start)
				}
				startWant = start // the estimate: text came before the count
			}
			if start != startWant || msg.Usage.InputTokens != want {
				t.Fatalf("message_start input_tokens %d, accumulated %d; the upstream reported %d", start, msg.Usage.InputTokens, want)
			}
			if got := blocksOf(&msg); got != "text:echo: hello there, how are you today?" {
				t.Fatalf("content %q", got)
			}

			// The raw stream: message_start first, with the figure
			// message_delta carries.
			resp, b := antPost(t, env.URL+"/v1/messages", antBody("hello there, how are you today?", `,"stream":true`), nil)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%d %s", resp.StatusCode, b)
			}
			fs := readFrames(t, b)
			checkBlocks(t, fs)
			startUsage := fs[0].data["message"].(map[string]any)["usage"].(map[string]any)
			var deltaUsage map[string]any
			for _, f := range fs {
				if f.event == "message_delta" {
					deltaUsage = f.data["usage"].(map[string]any)
				}
			}
			if startUsage["input_tokens"] != float64(startWant) || deltaUsage["input_tokens"] != float64(want) {
				t.Fatalf("message_start usage %v, message_delta usage %v; want input_tokens %d", startUsage, deltaUsage, want)
			}

			// A turn of two model steps (a server tool in between):
			// message_start has the first step's input, message_delta the
			// turn's total.
			n := env.Upstream.Count()
			msg, start = antStreamStart(t, c, antParams(antUser("weather in Paris?")))
			first, second := reportedInput(t, env, n), reportedInput(t, env, n+1)
			startFirst := first
			if kind == modeltest.OpenAI {
				startFirst = start // the first step's text came before its count
			}
			if start != startFirst || msg.Usage.InputTokens != first+second {
				t.Fatalf("message_start input %d, turn input %d; want %d and %d+%d", start, msg.Usage.InputTokens, startFirst, first, second)
			}
		})
	}
}

// antStreamStart streams a call as antStream does and also returns the
// input count of its message_start, checking that nothing came before it.
func antStreamStart(t *testing.T, c ant.Client, p ant.MessageNewParams) (ant.Message, int64) {
	t.Helper()
	stream := c.Messages.NewStreaming(context.Background(), p)
	var msg ant.Message
	var start int64 = -1
	for stream.Next() {
		ev := stream.Current()
		if ev.Type == "message_start" {
			start = ev.Message.Usage.InputTokens
		} else if start < 0 {
			t.Fatalf("%s before message_start", ev.Type)
		}
		if err := msg.Accumulate(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	return msg, start
}
