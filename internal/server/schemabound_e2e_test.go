package server_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stackbone/stackbone/internal/stacktest"
)

// deepSchema is an object schema nested n objects deep.
func deepSchema(n int) string {
	return `{"type":"object","properties":{"a":` + strings.Repeat(`{"type":"object","properties":{"a":`, n) +
		`{"type":"string"}` + strings.Repeat(`}}`, n) + `}}`
}

// TestDeepClientToolSchemaIsRefusedOnEveryWire: a client tool whose schema
// nests 1,000 deep (seconds of CPU to compile) is a 400 (AG-UI: a
// RUN_ERROR invalid_request) naming the tool and the bound, on each wire,
// on a stateless turn, and the model is not called.
func TestDeepClientToolSchemaIsRefusedOnEveryWire(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	deep := deepSchema(1000)
	for _, c := range []struct{ name, path, body string }{
		{"chat", "/v1/chat/completions", `{"model":"assistant","messages":[{"role":"user","content":"hi"}],
		  "tools":[{"type":"function","function":{"name":"ok_tool","parameters":{"type":"object"}}},{"type":"function","function":{"name":"deep_tool","parameters":` + deep + `}}]}`},
		{"responses", "/v1/responses", `{"model":"assistant","input":"hi","store":false,
		  "tools":[{"type":"function","name":"deep_tool","parameters":` + deep + `}]}`},
		{"anthropic", "/v1/messages", `{"model":"assistant","max_tokens":100,"messages":[{"role":"user","content":"hi"}],
		  "tools":[{"name":"deep_tool","input_schema":` + deep + `}]}`},
		{"agui", "/v1/agents/assistant/agui", `{"threadId":"","runId":"r1","messages":[{"id":"m1","role":"user","content":"hi"}],
		  "tools":[{"name":"deep_tool","description":"d","parameters":` + deep + `}],"state":{},"context":[],"forwardedProps":{}}`},
	} {
		r := call(t, "POST", env.URL+c.path, c.body)
		refused := r.status == 400
		if c.name == "agui" { // AG-UI answers errors in its event stream
			refused = r.status == 200 && strings.Contains(string(r.body), `"type":"RUN_ERROR"`) && strings.Contains(string(r.body), `"code":"invalid_request"`)
		}
		if !refused || !strings.Contains(string(r.body), `deep_tool`) || !strings.Contains(string(r.body), "nests deeper than 64 levels") {
			t.Errorf("%s: %d %s", c.name, r.status, r.body)
		}
	}
	if n := env.Upstream.Count(); n != 0 {
		t.Fatalf("the model was called %d times", n)
	}
}

// fanOutSchema is 2.6 KB of definitions that each refer twice to the next:
// followed through its references it stands for 2^40 subschemas, and
// validating the model's answer against it would never end.
func fanOutSchema() string {
	var b strings.Builder
	b.WriteString(`{"type":"object","$defs":{`)
	for i := 0; i < 40; i++ {
		b.WriteString(`"d` + strconv.Itoa(i) + `":{"allOf":[{"$ref":"#/$defs/d` + strconv.Itoa(i+1) + `"},{"$ref":"#/$defs/d` + strconv.Itoa(i+1) + `"}]},`)
	}
	b.WriteString(`"d40":{}},"properties":{"x":{"$ref":"#/$defs/d0"}}}`)
	return b.String()
}

// TestFanOutResponseFormatIsRefused: a response format whose references
// fan out is a 400 on the chat and Responses wires, before the model is
// called (before, the turn ran and checking the answer pinned a CPU).
func TestFanOutResponseFormatIsRefused(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	bomb := fanOutSchema()
	for _, c := range []struct{ name, path, body string }{
		{"chat", "/v1/chat/completions", `{"model":"assistant","messages":[{"role":"user","content":"hi"}],
		  "response_format":{"type":"json_schema","json_schema":{"name":"bomb","schema":` + bomb + `}}}`},
		{"responses", "/v1/responses", `{"model":"assistant","input":"hi","store":false,
		  "text":{"format":{"type":"json_schema","name":"bomb","schema":` + bomb + `}}}`},
	} {
		r := call(t, "POST", env.URL+c.path, c.body)
		if r.status != 400 || !strings.Contains(string(r.body), "$ref references") {
			t.Errorf("%s: %d %s", c.name, r.status, r.body)
		}
	}
	if n := env.Upstream.Count(); n != 0 {
		t.Fatalf("the model was called %d times", n)
	}
}
