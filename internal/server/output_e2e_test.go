package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/stacktest"
)

// ticketSchema is the output schema of the "triage.v1" test agent.
const ticketSchema = `{"type":"object","properties":{"label":{"type":"string","enum":["bug","question"]},"priority":{"type":"integer"}},"required":["label","priority"]}`

// outputScript answers "good" with a valid ticket; "fixable" first with a
// ticket missing priority, then (when the validation error comes back) with
// a valid one; "hopeless" never with valid JSON.
const outputScript = `[
 {"when":{"lastUser":"does not follow the required response format"},"reply":{"text":"{\"label\":\"bug\",\"priority\":2}"}},
 {"when":{"lastUser":"fixable"},"reply":{"text":"{\"label\":\"bug\"}"}},
 {"when":{"lastUser":"hopeless"},"reply":{"text":"It is a bug, I think."}},
 {"reply":{"text":"{\"label\":\"question\",\"priority\":1}"}}
]`

// hopelessScript never answers with valid JSON, also when corrected.
const hopelessScript = `[{"reply":{"text":"It is a bug, I think."}}]`

func outputEnv(t *testing.T, script string) *stacktest.Env {
	t.Helper()
	return stacktest.New(t, stacktest.Options{Script: script, Agents: func(env *stacktest.Env) []*agent.Spec {
		return append(stacktest.DefaultAgents(env, "openai/test-model"),
			&agent.Spec{Name: "triage.v1", Model: "openai/test-model", Instructions: "Triage tickets.", Output: json.RawMessage(ticketSchema)})
	}})
}

func triage(msg string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{Model: "triage.v1", Messages: []openai.ChatCompletionMessageParamUnion{user(msg)}}
}

// TestAgentOutputReachesUpstream: an agent declaring output asks every
// upstream call for a json_schema response format named after it (sanitised)
// with its schema, though the openai-go client sent no response_format; the
// client gets the JSON answer as the message content, streamed or not, and
// the thread stores it as the assistant message.
func TestAgentOutputReachesUpstream(t *testing.T) {
	t.Parallel()
	env := outputEnv(t, outputScript)
	c := client(env)
	res, err := c.Chat.Completions.New(context.Background(), triage("good ticket"), option.WithHeader("x-stackbone-session", "out-good"))
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Choices[0].Message.Content; got != `{"label":"question","priority":1}` {
		t.Fatalf("answer %q", got)
	}
	stream := c.Chat.Completions.NewStreaming(context.Background(), triage("good ticket"))
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if got := acc.Choices[0].Message.Content; got != `{"label":"question","priority":1}` {
		t.Fatalf("streamed answer %q", got)
	}
	bodies := upstreamBodies(t, env)
	if len(bodies) != 2 {
		t.Fatalf("want 2 upstream calls, got %d", len(bodies))
	}
	for i, b := range bodies {
		rf, _ := b["response_format"].(map[string]any)
		js, _ := rf["json_schema"].(map[string]any)
		if rf["type"] != "json_schema" || js["name"] != "triage_v1" || !sameJSON(t, js["schema"], ticketSchema) {
			t.Fatalf("upstream request %d: response_format %v", i+1, b["response_format"])
		}
	}
	msgs, err := env.Store.Messages(context.Background(), "dev", "out-good")
	if err != nil || len(msgs) == 0 {
		t.Fatalf("thread: %v %v", msgs, err)
	}
	if last := msgs[len(msgs)-1]; last.Role != "assistant" || last.Content != `{"label":"question","priority":1}` {
		t.Fatalf("stored answer %+v", last)
	}
}

// TestAgentOutputRetriesOnce: a first answer failing the agent's schema is
// sent back once, with the validation error, and the corrected answer is
// what the client gets (streamed: only the corrected one) and the thread
// stores; the rejected answer is never stored.
func TestAgentOutputRetriesOnce(t *testing.T) {
	t.Parallel()
	env := outputEnv(t, outputScript)
	c := client(env)
	res, err := c.Chat.Completions.New(context.Background(), triage("fixable ticket"), option.WithHeader("x-stackbone-session", "out-fix"))
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Choices[0].Message.Content; got != `{"label":"bug","priority":2}` {
		t.Fatalf("answer %q", got)
	}
	reqs := env.Upstream.Requests()
	if len(reqs) != 2 {
		t.Fatalf("want exactly 2 upstream calls (answer, one retry), got %d", len(reqs))
	}
	retry := string(reqs[1].Body)
	for _, want := range []string{`{\"label\":\"bug\"}`, "does not follow the required response format", "priority"} {
		if !strings.Contains(retry, want) {
			t.Fatalf("the retry request lacks %q: %s", want, retry)
		}
	}
	if strings.Contains(string(reqs[0].Body), "does not follow") {
		t.Fatalf("the first request already carries a correction: %s", reqs[0].Body)
	}
	msgs, err := env.Store.Messages(context.Background(), "dev", "out-fix")
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2 || msgs[1].Content != `{"label":"bug","priority":2}` {
		t.Fatalf("thread holds %+v, want the user message and the corrected answer", msgs)
	}

	stream := c.Chat.Completions.NewStreaming(context.Background(), triage("fixable ticket"))
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if got := acc.Choices[0].Message.Content; got != `{"label":"bug","priority":2}` {
		t.Fatalf("streamed answer %q: the rejected answer must not be streamed", got)
	}
}

// TestAgentOutputSecondFailureIsAnError: when the retried answer fails the
// schema too, the turn ends with a 502 response_format_mismatch saying so,
// after exactly two upstream calls (the SDK is told not to retry).
func TestAgentOutputSecondFailureIsAnError(t *testing.T) {
	t.Parallel()
	env := outputEnv(t, hopelessScript)
	_, err := client(env).Chat.Completions.New(context.Background(), triage("hopeless ticket"), option.WithHeader("x-stackbone-session", "out-bad"))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadGateway || apiErr.Code != "response_format_mismatch" ||
		!strings.Contains(apiErr.Message, "also after one retry") {
		t.Fatalf("want a 502 response_format_mismatch after one retry, got %v", err)
	}
	if n := env.Upstream.Count(); n != 2 {
		t.Fatalf("want 2 upstream calls, got %d", n)
	}
	msgs, _ := env.Store.Messages(context.Background(), "dev", "out-bad")
	for _, m := range msgs {
		if m.Role == "assistant" {
			t.Fatalf("a rejected answer was stored: %+v", m)
		}
	}
}

// TestAgentOutputAndClientFormat: a client's response_format works for an
// agent without output; for an agent with output, json_object or the same
// schema get the agent's format, another schema is a 400 on response_format
// (nothing reaches the upstream).
func TestAgentOutputAndClientFormat(t *testing.T) {
	t.Parallel()
	env := outputEnv(t, outputScript)
	c := client(env, option.WithMaxRetries(0))

	p := triage("good ticket")
	p.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &shared.ResponseFormatJSONObjectParam{}}
	if _, err := c.Chat.Completions.New(context.Background(), p); err != nil {
		t.Fatalf("json_object: %v", err)
	}
	var sch map[string]any
	_ = json.Unmarshal([]byte(ticketSchema), &sch)
	p.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
		JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "mine", Schema: sch}}}
	if _, err := c.Chat.Completions.New(context.Background(), p); err != nil {
		t.Fatalf("same schema: %v", err)
	}
	for i, b := range upstreamBodies(t, env) {
		rf, _ := b["response_format"].(map[string]any)
		js, _ := rf["json_schema"].(map[string]any)
		if rf["type"] != "json_schema" || js["name"] != "triage_v1" || !sameJSON(t, js["schema"], ticketSchema) {
			t.Fatalf("upstream request %d: response_format %v", i+1, b["response_format"])
		}
	}

	before := env.Upstream.Count()
	p.ResponseFormat = schemaFormat(t)
	_, err := c.Chat.Completions.New(context.Background(), p)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Param != "response_format" ||
		!strings.Contains(apiErr.Message, "declares its output schema") {
		t.Fatalf("want a 400 on response_format, got %v", err)
	}
	if env.Upstream.Count() != before {
		t.Fatal("a refused request reached the upstream")
	}

	// An agent without output still takes the client's format.
	q := params(user("good ticket"))
	q.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &shared.ResponseFormatJSONObjectParam{}}
	if _, err := c.Chat.Completions.New(context.Background(), q); err != nil {
		t.Fatalf("client format on an agent without output: %v", err)
	}
	last, _ := env.Upstream.Last()
	if !strings.Contains(string(last.Body), `"response_format":{"type":"json_object"}`) {
		t.Fatalf("the client's format did not reach the upstream: %s", last.Body)
	}
}
