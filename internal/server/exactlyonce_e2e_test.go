package server_test

import (
	"context"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3/option"

	antopt "github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/stackbone/stackbone/internal/model/modeltest"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
)

// bothStores opens, per driver, the store a stack runs on (nil: the
// stack's own SQLite file).
var bothStores = []struct {
	name string
	open func(t *testing.T) store.Store
}{
	{"sqlite", func(t *testing.T) store.Store { return nil }},
	{"postgres", func(t *testing.T) store.Store { return stacktest.Postgres(t, "exactlyonce") }},
}

// TestSessionRetryAfterToolRunsItOnce: a session turn fails after its
// server tool ran (the model call after it gets an upstream error, a 502
// for the client). The client sends the same request again, as an SDK's
// or an app's retry does, with or without an Idempotency-Key, on the chat
// wire (plain and streamed) and the Anthropic Messages wire (streamed). The
// retry continues the turn: the tool does not run again, the user's message
// is stored once, the model is asked only for the failed step, and the
// answer holds the whole turn (the text before the call too).
func TestSessionRetryAfterToolRunsItOnce(t *testing.T) {
	t.Parallel()
	type attempt func(t *testing.T, env *stacktest.Env, sess, key string) (string, error)
	withKey := func(key string) []option.RequestOption {
		if key == "" {
			return nil
		}
		return []option.RequestOption{option.WithHeader("Idempotency-Key", key)}
	}
	wires := []struct {
		name     string
		upstream modeltest.Kind
		send     attempt
	}{
		{"chat", modeltest.OpenAI, func(t *testing.T, env *stacktest.Env, sess, key string) (string, error) {
			opts := append([]option.RequestOption{session(sess), option.WithMaxRetries(0)}, withKey(key)...)
			res, err := client(env).Chat.Completions.New(context.Background(), params(user("weather in Paris?")), opts...)
			if err != nil {
				return "", err
			}
			return res.Choices[0].Message.Content, nil
		}},
		{"chat stream", modeltest.OpenAI, func(t *testing.T, env *stacktest.Env, sess, key string) (string, error) {
			opts := append([]option.RequestOption{session(sess), option.WithMaxRetries(0)}, withKey(key)...)
			st := client(env).Chat.Completions.NewStreaming(context.Background(), params(user("weather in Paris?")), opts...)
			var b strings.Builder
			for st.Next() {
				for _, ch := range st.Current().Choices {
					b.WriteString(ch.Delta.Content)
				}
			}
			return b.String(), st.Err()
		}},
		{"messages stream", modeltest.Anthropic, func(t *testing.T, env *stacktest.Env, sess, key string) (string, error) {
			opts := []antopt.RequestOption{antSession(sess), antopt.WithMaxRetries(0)}
			if key != "" {
				opts = append(opts, antopt.WithHeader("Idempotency-Key", key))
			}
			ac := antClient(env)
			st := ac.Messages.NewStreaming(context.Background(), antParams(antUser("weather in Paris?")), opts...)
			var b strings.Builder
			for st.Next() {
				if ev := st.Current(); ev.Type == "content_block_delta" && ev.Delta.Type == "text_delta" {
					b.WriteString(ev.Delta.Text)
				}
			}
			return b.String(), st.Err()
		}},
	}
	for _, st := range bothStores {
		for _, w := range wires {
			for _, key := range []string{"", "key-0001"} {
				name := st.name + "/" + w.name
				if key != "" {
					name += "/with key"
				}
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					env := stacktest.New(t, stacktest.Options{Script: failAfterToolScript, Upstream: w.upstream, Store: st.open(t)})
					const sess = "retry-after-tool"
					if _, err := w.send(t, env, sess, key); err == nil {
						t.Fatal("first attempt: want the upstream's failure")
					}
					if n := env.Calls.Get("get_weather"); n != 1 || env.Upstream.Count() != 2 {
						t.Fatalf("first attempt: tool ran %d times, %d model requests", n, env.Upstream.Count())
					}
					healUpstream(t, env)
					text, err := w.send(t, env, sess, key)
					if err != nil {
						t.Fatalf("retry: %v", err)
					}
					if !strings.Contains(text, "Checking.") || !strings.Contains(text, `Tool said: {"city":"Paris","temp_c":21}`) {
						t.Fatalf("the retry must answer the whole turn, got %q", text)
					}
					if n := env.Calls.Get("get_weather"); n != 1 {
						t.Fatalf("the retry ran the tool again: %d executions", n)
					}
					if n := users(t, env, sess); n != 1 {
						t.Fatalf("%d user messages stored, want 1", n)
					}
					checkContinued(t, env, 2)
				})
			}
		}
	}
}
