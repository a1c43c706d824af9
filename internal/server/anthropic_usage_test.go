package server_test

import (
	"context"
	"net/http"
	"strings"
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

// usageScript adds a turn of a silent server tool step and then the answer
// ("lookup …") to the default script.
var usageScript = strings.Replace(stacktest.DefaultScript, "[", `[
 {"when": {"lastUser": "lookup"}, "reply": {"toolCalls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}},`, 1)

// message_start carries the turn's real input count, the figure a
// non-stream call reports and the SDK accumulates from message_delta
// (LangChain's ChatAnthropic adds message_start's input to message_delta's
// output), whether the upstream reports the count at the start of a step
// (Anthropic) or only at its end (OpenAI, whose first step's text waits for
// it), and for a turn of a silent tool step and then the answer. A turn
// that writes text before calling a tool starts with the steps up to that
// text; message_delta has the total.
func TestAnthropicStreamUsageIsTheUpstreams(t *testing.T) {
	t.Parallel()
	for _, kind := range []modeltest.Kind{modeltest.Anthropic, modeltest.OpenAI} {
		t.Run(string(kind), func(t *testing.T) {
			env := stacktest.New(t, stacktest.Options{Upstream: kind, Script: usageScript})
			c := antClient(env)
			for _, prompt := range []string{"hello there, how are you today?", "lookup the weather in Paris"} {
				n := env.Upstream.Count()
				msg, start := antStreamStart(t, c, antParams(antUser(prompt)))
				want := int64(0)
				for i := n; i < env.Upstream.Count(); i++ {
					want += reportedInput(t, env, i)
				}
				whole, err := c.Messages.New(context.Background(), antParams(antUser(prompt)))
				if err != nil {
					t.Fatal(err)
				}
				if start != want || msg.Usage.InputTokens != want || whole.Usage.InputTokens != want {
					t.Fatalf("%q: message_start input_tokens %d, accumulated %d, non-stream %d; the upstream reported %d",
						prompt, start, msg.Usage.InputTokens, whole.Usage.InputTokens, want)
				}
				if start+msg.Usage.OutputTokens != whole.Usage.InputTokens+whole.Usage.OutputTokens {
					t.Fatalf("%q: stream %d+%d tokens, non-stream %d+%d", prompt, start, msg.Usage.OutputTokens,
						whole.Usage.InputTokens, whole.Usage.OutputTokens)
				}
			}

			// The raw stream: message_start first, with the figure
			// message_delta carries, and the text after it.
			resp, b := antPost(t, env.URL+"/v1/messages", antBody("hello there, how are you today?", `,"stream":true`), nil)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%d %s", resp.StatusCode, b)
			}
			fs := readFrames(t, b)
			if got := checkBlocks(t, fs); len(got) != 1 || got[0] != "text" {
				t.Fatalf("blocks %v", got)
			}
			startUsage := fs[0].data["message"].(map[string]any)["usage"].(map[string]any)
			var deltaUsage map[string]any
			for _, f := range fs {
				if f.event == "message_delta" {
					deltaUsage = f.data["usage"].(map[string]any)
				}
			}
			if startUsage["input_tokens"] != deltaUsage["input_tokens"] {
				t.Fatalf("message_start usage %v, message_delta usage %v", startUsage, deltaUsage)
			}

			// Text, then a tool, then more text: message_start has the
			// first step's input, message_delta the turn's total.
			n := env.Upstream.Count()
			msg, start := antStreamStart(t, c, antParams(antUser("weather in Paris?")))
			first, second := reportedInput(t, env, n), reportedInput(t, env, n+1)
			if start != first || msg.Usage.InputTokens != first+second {
				t.Fatalf("message_start input %d, turn input %d; want %d and %d+%d", start, msg.Usage.InputTokens, first, first, second)
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
