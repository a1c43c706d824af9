package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/model/anthropic"
	"github.com/stackbone/stackbone/internal/model/modeltest"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
)

// weatherSchema is the answer shape the client asks for.
const weatherSchema = `{"type":"object","properties":{"city":{"type":"string"},"temp_c":{"type":"number"}},"required":["city","temp_c"],"additionalProperties":false}`

// formatScript calls get_weather first (intermediate steps are free), then
// answers with the tool's JSON as the final answer.
const formatScript = `[
 {"when":{"lastTool":"get_weather"},"reply":{"text":"{{lastTool}}"}},
 {"when":{"lastUser":"prose"},"reply":{"text":"It is sunny in Paris."}},
 {"reply":{"toolCalls":[{"name":"get_weather","arguments":{"city":"Paris"}}]}}
]`

func schemaFormat(t *testing.T) openai.ChatCompletionNewParamsResponseFormatUnion {
	t.Helper()
	var sch map[string]any
	if err := json.Unmarshal([]byte(weatherSchema), &sch); err != nil {
		t.Fatal(err)
	}
	return openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
		JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "weather", Schema: sch, Strict: openai.Bool(true)}}}
}

// upstreamBodies decodes every request the mock upstream received.
func upstreamBodies(t *testing.T, env *stacktest.Env) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, r := range env.Upstream.Requests() {
		var m map[string]any
		if err := json.Unmarshal(r.Body, &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	if len(out) == 0 {
		t.Fatal("the upstream received no request")
	}
	return out
}

func sameJSON(t *testing.T, got any, want string) bool {
	t.Helper()
	var w any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(got)
	b, _ := json.Marshal(w)
	return string(a) == string(b)
}

// TestResponseFormatJSONSchemaReachesUpstream: openai-go asks an agent for a
// json_schema answer. For an openai/ agent every upstream step carries
// response_format as sent; for an anthropic/ agent every step carries the
// structured-output equivalent (output_config.format). Both stream and
// non-stream answers parse into the schema's shape.
func TestResponseFormatJSONSchemaReachesUpstream(t *testing.T) {
	t.Parallel()
	for _, kind := range []modeltest.Kind{modeltest.OpenAI, modeltest.Anthropic} {
		t.Run(string(kind), func(t *testing.T) {
			env := stacktest.New(t, stacktest.Options{Upstream: kind, Script: formatScript})
			c := client(env)
			p := params(user("weather in Paris as JSON"))
			p.ResponseFormat = schemaFormat(t)

			res, err := c.Chat.Completions.New(context.Background(), p)
			if err != nil {
				t.Fatal(err)
			}
			var w struct {
				City  string  `json:"city"`
				TempC float64 `json:"temp_c"`
			}
			if err := json.Unmarshal([]byte(res.Choices[0].Message.Content), &w); err != nil || w.City != "Paris" || w.TempC != 21 {
				t.Fatalf("answer %q does not parse into the schema: %v", res.Choices[0].Message.Content, err)
			}

			stream := c.Chat.Completions.NewStreaming(context.Background(), p)
			var acc openai.ChatCompletionAccumulator
			for stream.Next() {
				acc.AddChunk(stream.Current())
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(acc.Choices[0].Message.Content), &w); err != nil || w.City != "Paris" {
				t.Fatalf("streamed answer %q does not parse: %v", acc.Choices[0].Message.Content, err)
			}

			bodies := upstreamBodies(t, env)
			if len(bodies) != 4 {
				t.Fatalf("want 4 upstream steps (tool step + answer, twice), got %d", len(bodies))
			}
			for i, b := range bodies {
				switch kind {
				case modeltest.OpenAI:
					rf, _ := b["response_format"].(map[string]any)
					js, _ := rf["json_schema"].(map[string]any)
					if rf["type"] != "json_schema" || js["name"] != "weather" || js["strict"] != true || !sameJSON(t, js["schema"], weatherSchema) {
						t.Fatalf("upstream request %d: response_format %v", i+1, b["response_format"])
					}
				case modeltest.Anthropic:
					oc, _ := b["output_config"].(map[string]any)
					f, _ := oc["format"].(map[string]any)
					if f["type"] != "json_schema" || !sameJSON(t, f["schema"], weatherSchema) {
						t.Fatalf("upstream request %d: output_config %v", i+1, b["output_config"])
					}
				}
			}
		})
	}
}

// TestResponseFormatJSONObject: json_object passes through to an OpenAI
// upstream; an Anthropic upstream has no such mode, so the model is told in
// the system prompt (and the answer is checked).
func TestResponseFormatJSONObject(t *testing.T) {
	t.Parallel()
	for _, kind := range []modeltest.Kind{modeltest.OpenAI, modeltest.Anthropic} {
		t.Run(string(kind), func(t *testing.T) {
			env := stacktest.New(t, stacktest.Options{Upstream: kind, Script: formatScript})
			p := params(user("weather in Paris as JSON"))
			p.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &shared.ResponseFormatJSONObjectParam{}}
			res, err := client(env).Chat.Completions.New(context.Background(), p)
			if err != nil {
				t.Fatal(err)
			}
			if !json.Valid([]byte(res.Choices[0].Message.Content)) {
				t.Fatalf("answer %q", res.Choices[0].Message.Content)
			}
			last, _ := env.Upstream.Last()
			switch kind {
			case modeltest.OpenAI:
				if !strings.Contains(string(last.Body), `"response_format":{"type":"json_object"}`) {
					t.Fatalf("upstream body %s", last.Body)
				}
			case modeltest.Anthropic:
				if !strings.Contains(last.Request.System, anthropic.JSONObjectInstruction) {
					t.Fatalf("upstream system %q", last.Request.System)
				}
			}
		})
	}
}

// TestResponseFormatTextIsNoFormat: {"type":"text"} is the default and
// sends nothing upstream.
func TestResponseFormatTextIsNoFormat(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	r := call(t, "POST", env.URL+"/v1/chat/completions",
		`{"model":"assistant","response_format":{"type":"text"},"messages":[{"role":"user","content":"hi"}]}`)
	if r.status != http.StatusOK {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if last, _ := env.Upstream.Last(); strings.Contains(string(last.Body), "response_format") {
		t.Fatalf("upstream body %s", last.Body)
	}
}

// TestResponseFormatInvalid400: a malformed response_format is a 400 in the
// OpenAI error format naming the parameter; nothing is stored and the model
// is not called.
func TestResponseFormatInvalid400(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	cases := []struct{ format, param string }{
		{`{"type":"xml"}`, "response_format.type"},
		{`{}`, "response_format.type"},
		{`"json"`, "response_format"},
		{`{"type":"json_schema"}`, "response_format.json_schema"},
		{`{"type":"json_schema","json_schema":{"name":"x"}}`, "response_format.json_schema.schema"},
		{`{"type":"json_schema","json_schema":{"name":"x","schema":"object"}}`, "response_format.json_schema.schema"},
		{`{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"nope"}}}`, "response_format.json_schema.schema"},
		{`{"type":"json_schema","json_schema":{"name":"a b","schema":{"type":"object"}}}`, "response_format.json_schema.name"},
	}
	for _, tc := range cases {
		body := `{"model":"assistant","response_format":` + tc.format + `,"messages":[{"role":"user","content":"hi"}]}`
		r := call(t, "POST", env.URL+"/v1/chat/completions", body, "x-stackbone-session", "fmt-bad")
		if r.status != http.StatusBadRequest {
			t.Fatalf("%s: %d %s", tc.format, r.status, r.body)
		}
		e := errorOf(t, r.body)
		if e["param"] != tc.param || e["type"] != "invalid_request_error" {
			t.Fatalf("%s: error %v", tc.format, e)
		}
	}
	if _, err := env.Store.GetThread(context.Background(), "dev", "fmt-bad"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused request stored a thread: %v", err)
	}
	if n := env.Upstream.Count(); n != 0 {
		t.Fatalf("the model was called %d times", n)
	}
}

// TestResponseFormatMismatchIsAnError: a final answer that does not follow
// the format (here a scripted model answering prose, also when given the
// validation error once) is not passed off as the asked JSON: the turn ends
// with a 502 response_format_mismatch that SDKs are told not to retry.
func TestResponseFormatMismatchIsAnError(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{Script: `[{"reply":{"text":"It is sunny in Paris."}}]`})
	p := params(user("prose please"))
	p.ResponseFormat = schemaFormat(t)
	_, err := client(env).Chat.Completions.New(context.Background(), p)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadGateway || apiErr.Code != "response_format_mismatch" {
		t.Fatalf("want a 502 response_format_mismatch, got %v", err)
	}
	if h := apiErr.Response.Header.Get("x-should-retry"); h != "false" {
		t.Fatalf("x-should-retry %q", h)
	}
	if n := env.Upstream.Count(); n != 2 {
		t.Fatalf("want 2 upstream calls (the answer, one correction), the SDK must not retry: %d", n)
	}
}

// TestResponseFormatSurvivesApprovalResume: a durable turn that pauses on
// an approval resumes, after the decision, still asking for the format.
func TestResponseFormatSurvivesApprovalResume(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{Script: `[
	 {"when":{"lastTool":"refund"},"reply":{"text":"{\"refunded\":true}"}},
	 {"reply":{"toolCalls":[{"name":"refund","arguments":{"orderId":"o","amount":1}}]}}]`})
	body := `{"model":"assistant","response_format":{"type":"json_schema","json_schema":{"name":"r","schema":{"type":"object","properties":{"refunded":{"type":"boolean"}},"required":["refunded"]}}},
	 "messages":[{"role":"user","content":"refund"}]}`
	if r := call(t, "POST", env.URL+"/v1/chat/completions", body, "x-stackbone-session", "fmt-resume"); r.status != http.StatusOK {
		t.Fatalf("%d %s", r.status, r.body)
	}
	it := pendingOf(t, env, "fmt-resume")
	call(t, "POST", env.URL+"/v1/hitl/"+it.ID+"/approve", "")
	waitIdle(t, env, "fmt-resume")
	last, _ := env.Upstream.Last()
	if !strings.Contains(string(last.Body), `"response_format":{"type":"json_schema"`) {
		t.Fatalf("the resumed step lost response_format: %s", last.Body)
	}
	msgs, _ := env.Store.Messages(context.Background(), "dev", "fmt-resume")
	if got := msgs[len(msgs)-1].Content; got != `{"refunded":true}` {
		t.Fatalf("resumed answer %q", got)
	}
}

// TestResponseFormatScriptedModel: a scripted/ agent returns its reply text
// as written; the server checks it against the format, so a JSON reply
// passes and a prose reply (also when corrected once) is a 502
// response_format_mismatch.
func TestResponseFormatScriptedModel(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sc := `[{"when":{"lastUser":"prose"},"reply":{"text":"Sunny."}},{"when":{"lastUser":"required response format"},"reply":{"text":"Still sunny."}},{"reply":{"text":"{\"city\":\"Paris\",\"temp_c\":21}"}}]`
	if err := os.WriteFile(filepath.Join(dir, "fmt.script.json"), []byte(sc), 0o644); err != nil {
		t.Fatal(err)
	}
	env := stacktest.New(t, stacktest.Options{Agents: func(*stacktest.Env) []*agent.Spec {
		return []*agent.Spec{{Name: "assistant", Model: "scripted/fmt", Dir: dir}}
	}})
	p := params(user("weather as JSON"))
	p.ResponseFormat = schemaFormat(t)
	res, err := client(env).Chat.Completions.New(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Choices[0].Message.Content; got != `{"city":"Paris","temp_c":21}` {
		t.Fatalf("answer %q", got)
	}
	p = params(user("prose please"))
	p.ResponseFormat = schemaFormat(t)
	_, err = client(env, option.WithMaxRetries(0)).Chat.Completions.New(context.Background(), p)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadGateway || apiErr.Code != "response_format_mismatch" {
		t.Fatalf("want a 502 response_format_mismatch, got %v", err)
	}
}
