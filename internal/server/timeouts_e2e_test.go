package server_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ant "github.com/anthropics/anthropic-sdk-go/v2"
	antopt "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/model"
	"github.com/stackbone/stackbone/internal/model/modeltest"
	"github.com/stackbone/stackbone/internal/model/script"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/store/sqlite"
)

// posts counts the HTTP requests an openai-go client sends (its retries
// included) and keeps the time of each.
type posts struct {
	mu    sync.Mutex
	times []time.Time
	// after, when set, sees every response.
	after func(n int, resp *http.Response)
}

func (p *posts) option() option.RequestOption {
	return option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		p.mu.Lock()
		p.times = append(p.times, time.Now())
		n := len(p.times)
		p.mu.Unlock()
		resp, err := next(r)
		if err == nil && p.after != nil {
			p.after(n, resp)
		}
		return resp, err
	})
}

func (p *posts) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.times)
}

// wantAPIError asserts err is an openai-go API error with status and code.
func wantAPIError(t *testing.T, err error, status int, code string) *openai.Error {
	t.Helper()
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != status || apiErr.Code != code {
		t.Fatalf("want %d %s, got %v", status, code, err)
	}
	return apiErr
}

// TestModelIdleTimeoutFreesThread: an upstream that answers 200 with a
// stream's headers and then sends nothing fails the turn after the idle
// timeout (each of the 3 attempts timed out), with a 504 upstream_timeout
// the client may retry (nothing of the turn ran), in OpenAI's and
// Anthropic's envelopes; the thread is failed, not held, and takes the next
// turn at once.
func TestModelIdleTimeoutFreesThread(t *testing.T) {
	t.Parallel()
	for _, kind := range []modeltest.Kind{modeltest.OpenAI, modeltest.Anthropic} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			env := stacktest.New(t, stacktest.Options{Upstream: kind, Configure: func(c *config.Config) {
				c.ModelIdleTimeout = 150 * time.Millisecond
			}})
			release := env.Upstream.Stall(script.When{LastUser: "stall"})
			defer release()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()

			oc := client(env, session("idle-oa"), option.WithMaxRetries(0))
			_, err := oc.Chat.Completions.New(ctx, params(user("stall please")))
			apiErr := wantAPIError(t, err, http.StatusGatewayTimeout, "upstream_timeout")
			if h := apiErr.Response.Header; h.Get("x-should-retry") != "true" || h.Get("retry-after") != "1" {
				t.Fatalf("a timeout before anything ran: x-should-retry %q retry-after %q", h.Get("x-should-retry"), h.Get("retry-after"))
			}
			if n := env.Upstream.Count(); n != 3 {
				t.Fatalf("%d model requests; want 3 (the timed-out call retried like a 5xx)", n)
			}
			if th := env.Thread(t, "dev", "idle-oa"); th.Status != store.Failed {
				t.Fatalf("thread status %s, want failed", th.Status)
			}
			// (Released first: an Anthropic upstream gets the failed turn's
			// message and the next one merged into one user turn.)
			release()
			res, err := oc.Chat.Completions.New(ctx, params(user("hello again")))
			if err != nil {
				t.Fatalf("the next turn on the thread: %v", err)
			}
			if got := res.Choices[0].Message.Content; !strings.HasSuffix(got, "hello again") {
				t.Fatalf("next turn answered %q", got)
			}

			release = env.Upstream.Stall(script.When{LastUser: "stall"})
			defer release()
			ac := antClient(env, antSession("idle-ant"), antopt.WithMaxRetries(0))
			_, err = ac.Messages.New(ctx, antParams(antUser("stall again")))
			var aErr *ant.Error
			if !errors.As(err, &aErr) || aErr.StatusCode != http.StatusGatewayTimeout || aErr.Type() != "timeout_error" {
				t.Fatalf("anthropic wire: want 504 timeout_error, got %v", err)
			}
			release()
			if _, err := ac.Messages.New(ctx, antParams(antUser("and now?"))); err != nil {
				t.Fatalf("anthropic wire, the next turn: %v", err)
			}
		})
	}
}

// TestModelCallTimeout: an upstream that keeps sending, slowly, is cut at
// the call timeout though no gap reaches the idle timeout; a call whose
// text reached the client (it streams) is not retried, one whose client
// has seen nothing yet is (each attempt cut at the timeout).
func TestModelCallTimeout(t *testing.T) {
	t.Parallel()
	words := strings.TrimSpace(strings.Repeat("word ", 60)) // 20 chunks, 50ms apart
	env := stacktest.New(t, stacktest.Options{
		Script: `[{"when":{"lastUser":"long"},"reply":{"text":"` + words + `","chunkDelayMs":50}},{"reply":{"text":"echo: {{lastUser}}"}}]`,
		Configure: func(c *config.Config) {
			c.ModelTimeout, c.ModelIdleTimeout = 250*time.Millisecond, time.Hour
		}})
	c := client(env, session("total"), option.WithMaxRetries(0))
	start := time.Now()
	stream := c.Chat.Completions.NewStreaming(context.Background(), params(user("a long answer please")))
	text := ""
	for stream.Next() {
		if ch := stream.Current(); len(ch.Choices) > 0 {
			text += ch.Choices[0].Delta.Content
		}
	}
	if err := stream.Err(); err == nil || !strings.Contains(err.Error(), `"code":"upstream_timeout"`) || !strings.HasPrefix(text, "word") {
		t.Fatalf("streamed %q, error %v; want some words, then upstream_timeout", text, err)
	}
	if took := time.Since(start); took >= time.Second {
		t.Fatalf("the turn took %s; the 1s answer must be cut at 250ms", took)
	}
	if n := env.Upstream.Count(); n != 1 {
		t.Fatalf("%d model requests; a call whose text reached the client is not retried", n)
	}

	_, err := c.Chat.Completions.New(context.Background(), params(user("a long answer, not streamed")))
	wantAPIError(t, err, http.StatusGatewayTimeout, "upstream_timeout")
	if n := env.Upstream.Count(); n != 4 {
		t.Fatalf("%d model requests; want 3 more: nothing reached the client, so each timed-out attempt is retried", n-1)
	}
	if _, err := c.Chat.Completions.New(context.Background(), params(user("short"))); err != nil {
		t.Fatalf("the next turn: %v", err)
	}
}

// TestAgentModelSettingsBeatServerDefault: an agent's modelSettings idle
// timeout applies though the server's default would wait an hour.
func TestAgentModelSettingsBeatServerDefault(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{
		Configure: func(c *config.Config) { c.ModelIdleTimeout = time.Hour },
		Agents: func(env *stacktest.Env) []*agent.Spec {
			specs := stacktest.DefaultAgents(env, "openai/test-model")
			for _, s := range specs {
				s.ModelTimeouts = model.Timeouts{Idle: 100 * time.Millisecond}
			}
			return specs
		}})
	release := env.Upstream.Stall(script.When{LastUser: "stall"})
	defer release()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := client(env, option.WithMaxRetries(0)).Chat.Completions.New(ctx, params(user("stall")))
	wantAPIError(t, err, http.StatusGatewayTimeout, "upstream_timeout")
}

// TestUpstreamRetryAfter: an upstream 429's retry-after is waited for when
// short (the turn succeeds on the retry), and passed to the client's 429
// when longer than the server waits (no retry of ours).
func TestUpstreamRetryAfter(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	c := client(env, option.WithMaxRetries(0))
	env.Upstream.FailNextWith(1, http.StatusTooManyRequests, http.Header{"Retry-After-Ms": {"120"}})
	start := time.Now()
	if _, err := c.Chat.Completions.New(context.Background(), params(user("hi"))); err != nil {
		t.Fatalf("a short retry-after: %v", err)
	}
	if took := time.Since(start); took < 120*time.Millisecond || env.Upstream.Count() != 2 {
		t.Fatalf("%d model requests in %s; want the retry after the upstream's 120ms", env.Upstream.Count(), took)
	}

	env.Upstream.FailNextWith(3, http.StatusTooManyRequests, http.Header{"Retry-After": {"120"}})
	_, err := c.Chat.Completions.New(context.Background(), params(user("hi")))
	apiErr := wantAPIError(t, err, http.StatusTooManyRequests, "upstream_rate_limited")
	if h := apiErr.Response.Header; h.Get("retry-after") != "120" || h.Get("x-should-retry") != "true" {
		t.Fatalf("the client's 429: retry-after %q x-should-retry %q; want the upstream's 120", h.Get("retry-after"), h.Get("x-should-retry"))
	}
	if n := env.Upstream.Count(); n != 3 {
		t.Fatalf("%d model requests; a retry-after over the server's limit is not waited for", n)
	}
}

// TestShouldRetryFollowsSideEffects, with openai-go's default retries (2):
// a turn that fails after its tool ran answers x-should-retry: false, so the
// SDK sends it once and the tool runs once; a turn that fails before
// anything ran answers x-should-retry: true with retry-after, so the SDK
// retries after that wait, and the session stores the message once.
func TestShouldRetryFollowsSideEffects(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{Script: `[
 {"when": {"lastTool": "get_weather"}, "reply": {"error": {"status": 500, "message": "upstream broke"}}},
 {"when": {"lastUser": "weather"}, "reply": {"toolCalls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}},
 {"when": {"lastUser": "down"}, "reply": {"error": {"status": 500, "message": "upstream broke"}}},
 {"reply": {"text": "echo: {{lastUser}}"}}]`})

	var after posts
	_, err := client(env, session("side"), after.option()).Chat.Completions.New(context.Background(), params(user("weather in Paris?")))
	apiErr := wantAPIError(t, err, http.StatusBadGateway, "upstream_error")
	if h := apiErr.Response.Header.Get("x-should-retry"); h != "false" {
		t.Fatalf("after the tool ran: x-should-retry %q", h)
	}
	if after.count() != 1 || env.Calls.Get("get_weather") != 1 {
		t.Fatalf("the SDK sent %d requests and the tool ran %d times; want 1 and 1", after.count(), env.Calls.Get("get_weather"))
	}

	var before posts
	_, err = client(env, session("safe"), before.option()).Chat.Completions.New(context.Background(), params(user("down again")))
	wantAPIError(t, err, http.StatusBadGateway, "upstream_error")
	if before.count() != 3 {
		t.Fatalf("the SDK sent %d requests; want 3 (x-should-retry: true)", before.count())
	}
	for i := 1; i < len(before.times); i++ {
		if gap := before.times[i].Sub(before.times[i-1]); gap < 900*time.Millisecond {
			t.Fatalf("retry %d came %s after the last; want the retry-after of 1s", i, gap)
		}
	}
	msgs, err := env.Store.Messages(context.Background(), "dev", "safe")
	if err != nil {
		t.Fatal(err)
	}
	users := 0
	for _, m := range msgs {
		if m.Role == message.User {
			users++
		}
	}
	if users != 1 {
		t.Fatalf("the retried message was stored %d times", users)
	}
}

// TestRunInProgressRetryAfter: a turn refused because a run holds the
// thread carries retry-after with the lease left (whole seconds, at least 1)
// on the OpenAI and Anthropic wires, and openai-go with its default retries
// waits that long and gets the answer once the run is over.
func TestRunInProgressRetryAfter(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{
		Script:    `[{"when":{"lastUser":"slow"},"reply":{"text":"done"}},{"reply":{"text":"echo: {{lastUser}}"}}]`,
		Configure: func(c *config.Config) { c.Lease = 2 * time.Second },
	})
	release := env.Upstream.HoldOnce(script.When{LastUser: "slow"})
	defer release()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = client(env, session("busy"), option.WithMaxRetries(0)).Chat.Completions.New(context.Background(), params(user("slow please")))
	}()
	stacktest.WaitFor(t, "the first run's model call", func() bool { return env.Upstream.Count() == 1 })

	for _, r := range []apiResp{
		call(t, "POST", env.URL+"/v1/chat/completions", `{"model":"assistant","messages":[{"role":"user","content":"again"}]}`, "x-stackbone-session", "busy"),
		call(t, "POST", env.URL+"/v1/messages", `{"model":"assistant","max_tokens":100,"messages":[{"role":"user","content":"again"}]}`,
			"x-stackbone-session", "busy", "anthropic-version", "2023-06-01"),
	} {
		ra := r.header.Get("retry-after")
		if r.status != http.StatusConflict || (ra != "1" && ra != "2") || r.header.Get("x-should-retry") != "true" {
			t.Fatalf("409: %d retry-after %q x-should-retry %q %s", r.status, ra, r.header.Get("x-should-retry"), r.body)
		}
	}

	var p posts
	var waitWas atomic.Value
	p.after = func(n int, resp *http.Response) {
		if n == 1 && resp.StatusCode == http.StatusConflict {
			waitWas.Store(resp.Header.Get("retry-after"))
			release() // the run ends now; the SDK's retry finds the thread free
		}
	}
	res, err := client(env, session("busy"), p.option()).Chat.Completions.New(context.Background(), params(user("again")))
	if err != nil {
		t.Fatalf("the SDK's retry after the 409: %v", err)
	}
	if got := res.Choices[0].Message.Content; got != "echo: again" {
		t.Fatalf("answer %q", got)
	}
	if p.count() != 2 || waitWas.Load() == nil {
		t.Fatalf("the SDK sent %d requests; want a 409 then the answer", p.count())
	}
	if gap := p.times[1].Sub(p.times[0]); gap < 900*time.Millisecond {
		t.Fatalf("the SDK retried %s after the 409; want the retry-after (%ss)", gap, waitWas.Load())
	}
	wg.Wait()
}

// blockingPing is a store whose database stopped answering pings.
type blockingPing struct {
	store.Store
	blocked atomic.Bool
	// stuck ends blocked pings when the test ends.
	stuck chan struct{}
}

func (b *blockingPing) Ping(ctx context.Context) error {
	if !b.blocked.Load() {
		return b.Store.Ping(ctx)
	}
	<-b.stuck // ignores its context too, as a connection stuck in a write can
	return errors.New("stuck")
}

// TestHealthzAnswersWhenTheDatabaseDoesNot: /healthz answers 503 within a
// second when the database ping does not return.
func TestHealthzAnswersWhenTheDatabaseDoesNot(t *testing.T) {
	t.Parallel()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "h.db"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	bp := &blockingPing{Store: st, stuck: make(chan struct{})}
	t.Cleanup(func() { close(bp.stuck) })
	env := stacktest.New(t, stacktest.Options{Store: bp})
	if r := call(t, "GET", env.URL+"/healthz", ""); r.status != http.StatusOK {
		t.Fatalf("healthy: %d %s", r.status, r.body)
	}
	bp.blocked.Store(true)
	start := time.Now()
	r := call(t, "GET", env.URL+"/healthz", "")
	if took := time.Since(start); r.status != http.StatusServiceUnavailable || took > time.Second {
		t.Fatalf("a database that does not answer: %d after %s %s", r.status, took, r.body)
	}
}

// TestUpstreamRetryAfterAfterATool: a long upstream 429 on the model call
// after a tool ran fails the turn at once with 429 upstream_rate_limited
// that says x-should-retry: false (the tool must not run again) and still
// carries the upstream's retry-after, on Chat Completions, Messages and
// Responses; the SDKs send each request once. On a stream, where the 200
// went out before the failure, the error event's message names the wait.
func TestUpstreamRetryAfterAfterATool(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	limited := func() {
		env.Upstream.FailWhen(script.When{LastTool: "get_weather"}, 1, http.StatusTooManyRequests, http.Header{"Retry-After": {"120"}})
	}
	wantHeaders := func(wire string, h http.Header) {
		t.Helper()
		if h.Get("retry-after") != "120" || h.Get("retry-after-ms") != "120000" || h.Get("x-should-retry") != "false" {
			t.Fatalf("%s: retry-after %q retry-after-ms %q x-should-retry %q; want the upstream's 120 s and no retry",
				wire, h.Get("retry-after"), h.Get("retry-after-ms"), h.Get("x-should-retry"))
		}
	}
	const wait = "Try again in 120 seconds."
	ctx := context.Background()
	tools := 0
	wantOneRun := func(wire string, sent int) {
		t.Helper()
		tools++
		if sent != 1 || env.Calls.Get("get_weather") != tools {
			t.Fatalf("%s: the SDK sent %d requests and the tool ran %d times in %d turns; want one each", wire, sent, env.Calls.Get("get_weather"), tools)
		}
	}

	limited()
	var p posts
	_, err := client(env, p.option()).Chat.Completions.New(ctx, params(user("weather in Paris?")))
	apiErr := wantAPIError(t, err, http.StatusTooManyRequests, "upstream_rate_limited")
	wantHeaders("chat", apiErr.Response.Header)
	wantOneRun("chat", p.count())

	limited()
	p = posts{}
	stream := client(env, p.option()).Chat.Completions.NewStreaming(ctx, params(user("weather in Paris, streamed?")))
	for stream.Next() {
	}
	if err := stream.Err(); err == nil || !strings.Contains(err.Error(), `"code":"upstream_rate_limited"`) || !strings.Contains(err.Error(), wait) {
		t.Fatalf("chat stream: error %v; want upstream_rate_limited saying %q", err, wait)
	}
	wantOneRun("chat stream", p.count())

	limited()
	var sent atomic.Int32
	ac := antClient(env, countHTTP(&sent))
	_, err = ac.Messages.New(ctx, antParams(antUser("weather in Paris, Claude?")))
	var aErr *ant.Error
	if !errors.As(err, &aErr) || aErr.StatusCode != http.StatusTooManyRequests || aErr.Type() != "rate_limit_error" {
		t.Fatalf("messages: want a 429 rate_limit_error, got %v", err)
	}
	wantHeaders("messages", aErr.Response.Header)
	wantOneRun("messages", int(sent.Load()))

	limited()
	sent.Store(0)
	as := ac.Messages.NewStreaming(ctx, antParams(antUser("weather in Paris, Claude, streamed?")))
	for as.Next() {
	}
	if err := as.Err(); err == nil || !strings.Contains(err.Error(), "rate_limit_error") || !strings.Contains(err.Error(), wait) {
		t.Fatalf("messages stream: error %v; want rate_limit_error saying %q", err, wait)
	}
	wantOneRun("messages stream", int(sent.Load()))

	limited()
	p = posts{}
	_, err = client(env, p.option()).Responses.New(ctx, ask("weather in Paris, as a response?"))
	apiErr = wantAPIError(t, err, http.StatusTooManyRequests, "upstream_rate_limited")
	wantHeaders("responses", apiErr.Response.Header)
	wantOneRun("responses", p.count())
}
