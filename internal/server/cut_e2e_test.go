package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/model/modeltest"
	"github.com/stackbone/stackbone/internal/model/script"
	"github.com/stackbone/stackbone/internal/stacktest"
)

// TestCutStreamIsRetriedWhileNothingReachedTheClient: an upstream stream
// cut, or stalled past the idle timeout, in the middle of the answer is
// retried for a client that does not stream (it has seen nothing): the
// client gets the whole answer once, the upstream saw two requests, a tool
// call cut half way runs once, and a session stores one answer. A streaming
// client gets the same retry when the cut comes before the first piece of
// the answer, and the error when it comes after (that piece reached it).
// For an OpenAI and an Anthropic upstream, on the Chat Completions,
// Messages and Responses wires.
func TestCutStreamIsRetriedWhileNothingReachedTheClient(t *testing.T) {
	t.Parallel()
	for _, kind := range []modeltest.Kind{modeltest.OpenAI, modeltest.Anthropic} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			env := stacktest.New(t, stacktest.Options{Upstream: kind, Configure: func(c *config.Config) {
				c.ModelIdleTimeout = 150 * time.Millisecond
			}})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			c := client(env, option.WithMaxRetries(0))
			// attempts runs turn with the next answer to a request whose
			// last user message says what broken with fault after the
			// answer's first pieces, and returns the upstream requests it
			// took.
			attempts := func(what string, after int, fault modeltest.Fault, turn func()) int {
				t.Helper()
				before := env.Upstream.Count()
				env.Upstream.BreakOnce(script.When{LastUser: what}, after, fault)
				turn()
				return env.Upstream.Count() - before
			}
			wantAnswer := func(got, want string, n, wantN int) {
				t.Helper()
				if got != want || n != wantN {
					t.Fatalf("answer %q after %d upstream requests; want %q after %d", got, n, want, wantN)
				}
			}

			var got string
			n := attempts("cut", 1, modeltest.Cut, func() {
				res, err := client(env, session("cut-"+string(kind)), option.WithMaxRetries(0)).Chat.Completions.New(ctx, params(user("cut me off")))
				if err != nil {
					t.Fatalf("chat, cut after the first piece: %v", err)
				}
				got = res.Choices[0].Message.Content
			})
			wantAnswer(got, "echo: cut me off", n, 2)
			msgs, err := env.Store.Messages(ctx, "dev", "cut-"+string(kind))
			if err != nil || len(msgs) != 2 || msgs[1].Role != message.Assistant || msgs[1].Content != "echo: cut me off" {
				t.Fatalf("the session stored %d messages (%v): %+v; want the question and the one answer", len(msgs), err, msgs)
			}

			n = attempts("stall", 1, modeltest.Stall, func() {
				res, err := c.Chat.Completions.New(ctx, params(user("stall midway")))
				if err != nil {
					t.Fatalf("chat, stalled after the first piece: %v", err)
				}
				got = res.Choices[0].Message.Content
			})
			wantAnswer(got, "echo: stall midway", n, 2)

			// The call is cut after its text and the tool call's start: the
			// retry's call is the one that runs, once.
			n = attempts("weather", 2, modeltest.Cut, func() {
				res, err := c.Chat.Completions.New(ctx, params(user("weather in Paris?")))
				if err != nil {
					t.Fatalf("chat, cut in a tool call: %v", err)
				}
				got = res.Choices[0].Message.Content
			})
			if runs := env.Calls.Get("get_weather"); runs != 1 || n != 3 || !strings.Contains(got, `Tool said: {"city":"Paris","temp_c":21}`) {
				t.Fatalf("tool ran %d times, %d upstream requests, answer %q; want once, 3 (a retried step and the answer)", runs, n, got)
			}

			n = attempts("claude", 1, modeltest.Cut, func() {
				ac := antClient(env)
				m, err := ac.Messages.New(ctx, antParams(antUser("cut claude off")))
				if err != nil {
					t.Fatalf("messages, cut after the first piece: %v", err)
				}
				got = strings.Join(texts(m), "")
			})
			wantAnswer(got, "echo: cut claude off", n, 2)

			n = attempts("respond", 1, modeltest.Cut, func() {
				res, err := c.Responses.New(ctx, ask("respond despite the cut"))
				if err != nil {
					t.Fatalf("responses, cut after the first piece: %v", err)
				}
				got = res.OutputText()
			})
			wantAnswer(got, "echo: respond despite the cut", n, 2)

			stream := func(text string) (string, error) {
				s := c.Chat.Completions.NewStreaming(ctx, params(user(text)))
				var acc openai.ChatCompletionAccumulator
				for s.Next() {
					acc.AddChunk(s.Current())
				}
				if len(acc.Choices) == 0 {
					return "", s.Err()
				}
				return acc.Choices[0].Message.Content, s.Err()
			}
			n = attempts("early", 0, modeltest.Cut, func() {
				if got, err = stream("early cut, streamed"); err != nil {
					t.Fatalf("chat stream, cut before the answer: %v", err)
				}
			})
			wantAnswer(got, "echo: early cut, streamed", n, 2)

			var serr error
			n = attempts("late", 1, modeltest.Cut, func() { got, serr = stream("late cut, streamed") })
			if serr == nil || n != 1 || got == "" || strings.HasSuffix(got, "streamed") {
				t.Fatalf("chat stream cut after a piece reached the client: %q, err %v, %d upstream requests; want that piece, the error, no retry", got, serr, n)
			}
		})
	}
}
