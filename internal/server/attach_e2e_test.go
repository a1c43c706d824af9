package server_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/model/script"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/store/sqlite"
)

// dropFirst is a proxy in front of the server that loses the answer of the
// first request: it hands the request to the server, waits for ready (the
// server stored the turn, or is in the middle of it), then closes the
// client's connection without a byte of the answer, as a load balancer or
// a network failure does. Later requests pass through.
func dropFirst(t *testing.T, backend string, ready func(done <-chan struct{})) (proxyURL string, attempts *atomic.Int32) {
	t.Helper()
	target, err := url.Parse(backend)
	if err != nil {
		t.Fatal(err)
	}
	pass := httputil.NewSingleHostReverseProxy(target)
	attempts = &atomic.Int32{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if attempts.Add(1) > 1 {
			pass.ServeHTTP(w, r)
			return
		}
		loseAnswer(w, r, backend, ready)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, attempts
}

// loseAnswer hands r to backend, waits for ready (given the channel closed
// once the backend answered), then closes the client's connection without a
// byte of the answer.
func loseAnswer(w http.ResponseWriter, r *http.Request, backend string, ready func(done <-chan struct{})) {
	body, _ := io.ReadAll(r.Body)
	req, _ := http.NewRequestWithContext(context.WithoutCancel(r.Context()), r.Method, backend+r.URL.RequestURI(), bytes.NewReader(body))
	req.Header = r.Header.Clone()
	done := make(chan struct{})
	go func() {
		defer close(done)
		if res, err := http.DefaultClient.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			_ = res.Body.Close()
		}
	}()
	ready(done)
	if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
		_ = conn.Close()
	}
}

// users counts a thread's stored user messages.
func users(t *testing.T, env *stacktest.Env, thread string) int {
	t.Helper()
	msgs, err := env.Store.Messages(context.Background(), "dev", thread)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range msgs {
		if m.Role == message.User {
			n++
		}
	}
	return n
}

// TestOpenAISDKRetryAfterLostAnswerAttaches: the official OpenAI SDK, with
// its default retries, sends a session turn that runs a tool; the turn
// completes and is stored, but the connection drops before the answer
// reaches the client. The SDK retries by itself, and the retry gets the
// stored answer: the user message is stored once, the tool ran once and the
// model was asked twice (the tool step and the answer), not four times.
// Non-streaming and streaming alike.
func TestOpenAISDKRetryAfterLostAnswerAttaches(t *testing.T) {
	t.Parallel()
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "json", true: "stream"}[stream], func(t *testing.T) {
			t.Parallel()
			env := stacktest.New(t, stacktest.Options{})
			proxy, attempts := dropFirst(t, env.URL, func(done <-chan struct{}) { <-done })
			c := openai.NewClient(option.WithBaseURL(proxy+"/v1"), option.WithAPIKey("sk-local"), session("lost"))
			p := params(user("weather in Paris?"))
			var got string
			if stream {
				s := c.Chat.Completions.NewStreaming(context.Background(), p)
				for s.Next() {
					if ch := s.Current(); len(ch.Choices) > 0 {
						got += ch.Choices[0].Delta.Content
					}
				}
				if err := s.Err(); err != nil {
					t.Fatalf("stream: %v", err)
				}
			} else {
				res, err := c.Chat.Completions.New(context.Background(), p)
				if err != nil {
					t.Fatalf("the SDK's call: %v", err)
				}
				got = res.Choices[0].Message.Content
			}
			if !strings.Contains(got, "Tool said:") {
				t.Fatalf("answer %q", got)
			}
			if n := attempts.Load(); n != 2 {
				t.Fatalf("the SDK sent %d requests, want 2 (the lost one and its retry)", n)
			}
			if n := env.Calls.Get("get_weather"); n != 1 {
				t.Fatalf("the tool ran %d times", n)
			}
			if n := env.Upstream.Count(); n != 2 {
				t.Fatalf("%d model calls, want 2", n)
			}
			if n := users(t, env, "lost"); n != 1 {
				t.Fatalf("the user message was stored %d times", n)
			}
		})
	}
}

// TestOpenAISDKRetryWhileTurnRunsWaits: the connection drops while the
// turn's model call is still under way; the SDK's retry arrives while the
// first attempt runs and, instead of a 409 run_in_progress, waits for it and
// gets its answer. One model call, one user message.
func TestOpenAISDKRetryWhileTurnRunsWaits(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	release := env.Upstream.HoldOnce(script.When{LastUser: "slow"})
	defer release()
	proxy, attempts := dropFirst(t, env.URL, func(<-chan struct{}) {
		stacktest.WaitFor(t, "the first attempt's model call", func() bool { return env.Upstream.Count() == 1 })
	})
	go func() {
		stacktest.WaitFor(t, "the retry to attach", func() bool {
			return strings.Contains(env.Logs.String(), "retried turn attaches to its first attempt")
		})
		release()
	}()
	c := openai.NewClient(option.WithBaseURL(proxy+"/v1"), option.WithAPIKey("sk-local"), session("running"))
	res, err := c.Chat.Completions.New(context.Background(), params(user("slow please")))
	if err != nil {
		t.Fatalf("the SDK's call: %v", err)
	}
	if got := res.Choices[0].Message.Content; got != "echo: slow please" {
		t.Fatalf("answer %q", got)
	}
	if n := attempts.Load(); n != 2 {
		t.Fatalf("%d requests", n)
	}
	if n := env.Upstream.Count(); n != 1 {
		t.Fatalf("%d model calls, want 1", n)
	}
	if n := users(t, env, "running"); n != 1 {
		t.Fatalf("the user message was stored %d times", n)
	}
}

// TestSessionIdempotencyKey: on a session, a request with the
// Idempotency-Key of the thread's last turn is answered from that turn; the
// key with another request is refused with a 4xx naming the header; a new
// key makes the same text a new turn (how a user repeats a message on
// purpose within the retry window).
func TestSessionIdempotencyKey(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	body := `{"model":"assistant","messages":[{"role":"user","content":"yes"}]}`
	for range 2 {
		r := call(t, "POST", env.URL+"/v1/chat/completions", body, "x-stackbone-session", "keyed", "Idempotency-Key", "k1")
		if r.status != 200 || !strings.Contains(string(r.body), "echo: yes") {
			t.Fatalf("%d %s", r.status, r.body)
		}
	}
	if n := users(t, env, "keyed"); n != 1 || env.Upstream.Count() != 1 {
		t.Fatalf("a retry with the same key: %d user messages, %d model calls", n, env.Upstream.Count())
	}
	r := call(t, "POST", env.URL+"/v1/chat/completions", `{"model":"assistant","messages":[{"role":"user","content":"no"}]}`,
		"x-stackbone-session", "keyed", "Idempotency-Key", "k1")
	if r.status < 400 || r.status >= 500 || !strings.Contains(string(r.body), "idempotency_key_reused") {
		t.Fatalf("the key with another request: %d %s", r.status, r.body)
	}
	r = call(t, "POST", env.URL+"/v1/chat/completions", body, "x-stackbone-session", "keyed", "Idempotency-Key", "k2")
	if r.status != 200 || users(t, env, "keyed") != 2 || env.Upstream.Count() != 2 {
		t.Fatalf("the same text with a new key: %d, %d user messages", r.status, users(t, env, "keyed"))
	}
}

// endFails is a store whose first n FinishRun calls fail: a run's answer is
// stored but its end is not (a full disk, or a process killed between the
// two), and neither is its failure.
type endFails struct {
	store.Store
	n atomic.Int32
}

func (s *endFails) FinishRun(ctx context.Context, f store.FinishRun) error {
	if s.n.Add(-1) >= 0 {
		return errors.New("disk full")
	}
	return s.Store.FinishRun(ctx, f)
}

// TestAGUIRetryAfterCrashGetsStoredAnswer: the official @ag-ui/client sends
// a message; the run stores its answer but cannot store its end, so the
// client gets RUN_ERROR and the thread stays held by a run no one drives.
// The app retries the run (same threadId, same messages, nothing new): the
// retry waits for the lapsed run to be taken over, which only ends it, and
// gets the stored answer as events, instead of RUN_ERROR "no new message".
// The model is asked once; the message is stored once.
func TestAGUIRetryAfterCrashGetsStoredAnswer(t *testing.T) {
	t.Parallel()
	node, dir := nodeFixture(t, "agui", filepath.Join("@ag-ui", "client", "package.json"))
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "stackbone.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	broken := &endFails{Store: st}
	broken.n.Store(2) // the run's end, then its failure
	env := stacktest.New(t, stacktest.Options{Store: broken, Configure: func(cfg *config.Config) { cfg.Lease = time.Second }})
	var out struct {
		FirstError  string   `json:"firstError"`
		FirstEvents []string `json:"firstEvents"`
		RetryError  string   `json:"retryError"`
		Events      []string `json:"events"`
		Messages    []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	if err := runNodeScript(t, node, dir, "retry.mjs", &out, env.URL, "agui-crash"); err != nil {
		t.Fatal(err)
	}
	if (out.FirstError == "" && !slices.Contains(out.FirstEvents, "RUN_ERROR")) || out.RetryError != "" {
		t.Fatalf("first run must fail, the retry succeed: %+v", out)
	}
	last := out.Messages[len(out.Messages)-1]
	if last.Role != "assistant" || last.Content != "echo: hello" || !slices.Contains(out.Events, "TEXT_MESSAGE_CONTENT") ||
		out.Events[len(out.Events)-1] != "RUN_FINISHED" {
		t.Fatalf("the retry's answer: %+v", out)
	}
	if n := env.Upstream.Count(); n != 1 {
		t.Fatalf("%d model calls, want 1", n)
	}
	if n := users(t, env, "agui-crash"); n != 1 {
		t.Fatalf("the user message was stored %d times", n)
	}
	if th := env.Thread(t, "dev", "agui-crash"); th.Status != store.Idle {
		t.Fatalf("thread after the retry: %+v", th)
	}
}

// TestAnthropicRetryAttaches: on the Anthropic wire too a retried session
// turn (the same body again, streamed or not) is answered from the first
// attempt, in the wire's format, with one model call per tool step and the
// tool run once.
func TestAnthropicRetryAttaches(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	h := map[string]string{"x-stackbone-session": "ant-retry"}
	resp, first := antPost(t, env.URL+"/v1/messages", antBody("weather in Paris?", ""), h)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, first)
	}
	resp, again := antPost(t, env.URL+"/v1/messages", antBody("weather in Paris?", ""), h)
	if resp.StatusCode != 200 || !strings.Contains(string(again), "Tool said:") || !strings.Contains(string(again), `"type":"message"`) {
		t.Fatalf("retry: %d %s", resp.StatusCode, again)
	}
	resp, streamed := antPost(t, env.URL+"/v1/messages", antBody("weather in Paris?", `,"stream":true`), h)
	if resp.StatusCode != 200 || !strings.Contains(string(streamed), "event: message_stop") || !strings.Contains(string(streamed), "Tool said:") {
		t.Fatalf("streamed retry: %d %s", resp.StatusCode, streamed)
	}
	if env.Calls.Get("get_weather") != 1 || env.Upstream.Count() != 2 || users(t, env, "ant-retry") != 1 {
		t.Fatalf("tool runs %d, model calls %d, user messages %d", env.Calls.Get("get_weather"), env.Upstream.Count(), users(t, env, "ant-retry"))
	}
}
