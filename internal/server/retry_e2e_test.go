package server_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	ant "github.com/anthropics/anthropic-sdk-go/v2"
	antopt "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/model/modeltest"
	"github.com/stackbone/stackbone/internal/model/script"
	"github.com/stackbone/stackbone/internal/stacktest"
)

// failAfterToolScript runs get_weather, then the upstream refuses the next
// step with a 400 (the turn fails with a 502 after its tool ran).
const failAfterToolScript = `[
 {"when": {"lastTool": "get_weather"}, "reply": {"error": {"status": 400, "message": "bad request"}}},
 {"when": {"lastUser": "weather"}, "reply": {"text": "Checking.", "toolCalls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}},
 {"reply": {"text": "echo: {{lastUser}}"}}
]`

// healUpstream makes the upstream answer every later request from the
// default script (the transient upstream failure is over).
func healUpstream(t *testing.T, env *stacktest.Env) {
	t.Helper()
	sc, err := script.Parse([]byte(stacktest.DefaultScript))
	if err != nil {
		t.Fatal(err)
	}
	env.Upstream.SetScript(sc)
}

// checkContinued asserts that the upstream got exactly one request after
// the failed attempt's from, and that it continued after the recorded tool
// result instead of asking for the tool step again.
func checkContinued(t *testing.T, env *stacktest.Env, from int) {
	t.Helper()
	reqs := env.Upstream.Requests()[from:]
	if len(reqs) != 1 {
		t.Fatalf("the retry made %d model requests, want 1 (the failed step only)", len(reqs))
	}
	msgs := reqs[0].Request.Messages
	if len(msgs) != 3 || msgs[0].Role != message.User || len(msgs[1].ToolCalls) != 1 || msgs[2].Role != message.Tool ||
		!strings.Contains(msgs[2].Content, `"temp_c":21`) {
		t.Fatalf("the retry must send the recorded step (user, tool call, tool result) to the model: %+v", msgs)
	}
}

// TestStatelessRetryDoesNotRerunTools: a turn without a session fails
// (upstream 400 → 502) after its server tool ran; a client sending the same
// request again (the Vercel AI SDK and LangChain retry every 5xx) gets the
// answer without the tool running twice and without the model being asked
// for the completed step again. Another tenant sending the same request is
// a turn of its own.
func TestStatelessRetryDoesNotRerunTools(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{Script: failAfterToolScript, Mode: config.Start,
		Keys: []config.Key{{Tenant: "acme", Secret: "acme-secret-1"}, {Tenant: "beta", Secret: "beta-secret-1"}}})
	acme := client(env, option.WithAPIKey("acme-secret-1"), option.WithMaxRetries(0))
	p := params(user("weather in Paris?"))

	_, err := acme.Chat.Completions.New(context.Background(), p)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 502 {
		t.Fatalf("first attempt: want a 502, got %v", err)
	}
	if n := env.Calls.Get("get_weather"); n != 1 || env.Upstream.Count() != 2 {
		t.Fatalf("first attempt: tool ran %d times, %d model requests", n, env.Upstream.Count())
	}

	healUpstream(t, env)
	res, err := acme.Chat.Completions.New(context.Background(), p)
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	if got := res.Choices[0].Message.Content; !strings.Contains(got, "Checking.") || !strings.Contains(got, `Tool said: {"city":"Paris","temp_c":21}`) {
		t.Fatalf("the retry must answer the whole turn (the recorded step's text too), got %q", got)
	}
	if n := env.Calls.Get("get_weather"); n != 1 {
		t.Fatalf("the retry ran the tool again: %d executions", n)
	}
	checkContinued(t, env, 2)

	// Once the turn succeeded, the same request is a new question (another
	// user of the key may ask it): its tool runs afresh.
	if _, err := acme.Chat.Completions.New(context.Background(), p); err != nil {
		t.Fatalf("the same request after a success: %v", err)
	}
	if n := env.Calls.Get("get_weather"); n != 2 {
		t.Fatalf("the same request after a success reused the finished turn's tool results: %d executions", n)
	}

	// The journal is the tenant's own: beta's identical request runs.
	beta := client(env, option.WithAPIKey("beta-secret-1"), option.WithMaxRetries(0))
	if _, err := beta.Chat.Completions.New(context.Background(), p); err != nil {
		t.Fatalf("beta: %v", err)
	}
	if n := env.Calls.Get("get_weather"); n != 3 {
		t.Fatalf("beta's turn reused acme's journal: %d executions", n)
	}

	// Entries expire: once swept, nothing is left.
	n, err := env.Runner.SweepJournal(context.Background(), time.Now().Add(env.Runner.JournalTTL+time.Second))
	if err != nil || n != 2 {
		t.Fatalf("sweep: %d entries, %v; want 2", n, err)
	}
}

// TestStatelessRetryIdempotencyKey: with an Idempotency-Key the key, not the
// body, names the turn: a retry with the key continues the turn, a new key is
// a new turn, and the key reused for another request is a 400 that runs
// nothing.
func TestStatelessRetryIdempotencyKey(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{Script: failAfterToolScript})
	c := client(env, option.WithMaxRetries(0))
	p := params(user("weather in Paris?"))
	key := option.WithHeader("Idempotency-Key", "turn-0001")

	if _, err := c.Chat.Completions.New(context.Background(), p, key); err == nil {
		t.Fatal("first attempt: want a 502")
	}
	healUpstream(t, env)
	res, err := c.Chat.Completions.New(context.Background(), p, key)
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	if got := res.Choices[0].Message.Content; !strings.Contains(got, "Tool said:") {
		t.Fatalf("retry answered %q", got)
	}
	if n := env.Calls.Get("get_weather"); n != 1 {
		t.Fatalf("the retry with the same key ran the tool again: %d executions", n)
	}
	checkContinued(t, env, 2)
	// The key holds after the success too: a lost answer's retry does not
	// run the tool again.
	if _, err := c.Chat.Completions.New(context.Background(), p, key); err != nil {
		t.Fatalf("the same key after a success: %v", err)
	}
	if n := env.Calls.Get("get_weather"); n != 1 {
		t.Fatalf("the same key after a success ran the tool again: %d executions", n)
	}

	before := env.Upstream.Count()
	_, err = c.Chat.Completions.New(context.Background(), params(user("weather in Rome?")), key)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Code != "idempotency_key_reused" {
		t.Fatalf("the key reused for another request: want a 400, got %v", err)
	}
	if env.Upstream.Count() != before || env.Calls.Get("get_weather") != 1 {
		t.Fatal("a refused request reached the model or ran a tool")
	}

	_, err = c.Chat.Completions.New(context.Background(), p, option.WithHeader("Idempotency-Key", strings.Repeat("k", 257)))
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "Idempotency-Key" {
		t.Fatalf("an over-long key: want a 400 naming the header, got %v", err)
	}
	if env.Upstream.Count() != before || env.Calls.Get("get_weather") != 1 {
		t.Fatal("a refused request reached the model or ran a tool")
	}

	if _, err := c.Chat.Completions.New(context.Background(), p, option.WithHeader("Idempotency-Key", "turn-0002")); err != nil {
		t.Fatalf("new key: %v", err)
	}
	if n := env.Calls.Get("get_weather"); n != 2 {
		t.Fatalf("a new key is a new turn and runs the tool: %d executions", n)
	}
}

// TestAnthropicStatelessRetryDoesNotRerunTools is the retry on the
// Anthropic wire (the official SDK with retries off).
func TestAnthropicStatelessRetryDoesNotRerunTools(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{Script: failAfterToolScript, Upstream: modeltest.Anthropic})
	c := antClient(env, antopt.WithMaxRetries(0))
	p := antParams(antUser("weather in Paris?"))

	_, err := c.Messages.New(context.Background(), p)
	var apiErr *ant.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 502 {
		t.Fatalf("first attempt: want a 502, got %v", err)
	}
	healUpstream(t, env)
	msg, err := c.Messages.New(context.Background(), p)
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	if got := strings.Join(texts(msg), ""); !strings.Contains(got, "Tool said:") {
		t.Fatalf("retry answered %q", got)
	}
	if n := env.Calls.Get("get_weather"); n != 1 {
		t.Fatalf("the retry ran the tool again: %d executions", n)
	}
	checkContinued(t, env, 2)
}

// TestStatelessRetryOnAnotherReplica: two replicas on one PostgreSQL
// database. The first attempt fails on replica A after its tool ran; the
// client's retry lands on replica B, which continues from A's journal: the
// tool does not run on B.
func TestStatelessRetryOnAnotherReplica(t *testing.T) {
	t.Parallel()
	stA := stacktest.Postgres(t, "journal")
	a := stacktest.New(t, stacktest.Options{Store: stA, Script: failAfterToolScript})
	b := stacktest.New(t, stacktest.Options{Store: stacktest.PostgresReplica(t, stA)})
	p := params(user("weather in Paris?"))

	if _, err := client(a, option.WithMaxRetries(0)).Chat.Completions.New(context.Background(), p); err == nil {
		t.Fatal("first attempt on replica A: want a 502")
	}
	res, err := client(b, option.WithMaxRetries(0)).Chat.Completions.New(context.Background(), p)
	if err != nil {
		t.Fatalf("retry on replica B: %v", err)
	}
	if got := res.Choices[0].Message.Content; !strings.Contains(got, "Tool said:") {
		t.Fatalf("retry answered %q", got)
	}
	if na, nb := a.Calls.Get("get_weather"), b.Calls.Get("get_weather"); na != 1 || nb != 0 {
		t.Fatalf("tool ran %d times on A and %d on B, want 1 and 0", na, nb)
	}
	checkContinued(t, b, 0)
}
