package server_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
)

// toolWire sends one turn with one client tool on a wire and reports how it
// was refused: the status (AG-UI: 200 with a RUN_ERROR), the error code,
// param (AG-UI has none) and message.
type toolWire struct {
	name string
	send func(t *testing.T, env *stacktest.Env, thread, text, tool string) (status int, code, param, msg string)
}

var toolWires = []toolWire{
	{"openai", func(t *testing.T, env *stacktest.Env, thread, text, tool string) (int, string, string, string) {
		body := fmt.Sprintf(`{"model":"assistant","messages":[{"role":"user","content":%q}],"tools":[%s]}`, text, tool)
		resp, b := rawPost(t, env.URL+"/v1/chat/completions", []byte(body), map[string]string{"x-stackbone-session": thread})
		if resp.StatusCode == 200 {
			return 200, "", "", ""
		}
		e := errorOf(t, b)
		if e["type"] != "invalid_request_error" {
			t.Fatalf("error type %v: %s", e["type"], b)
		}
		param, _ := e["param"].(string)
		code, _ := e["code"].(string)
		return resp.StatusCode, code, param, e["message"].(string)
	}},
	{"anthropic", func(t *testing.T, env *stacktest.Env, thread, text, tool string) (int, string, string, string) {
		resp, b := antPost(t, env.URL+"/v1/messages", antBody(text, `,"tools":[`+tool+`]`), map[string]string{"x-stackbone-session": thread})
		if resp.StatusCode == 200 {
			return 200, "", "", ""
		}
		e := antErr(t, resp, b, resp.StatusCode, "invalid_request_error")
		code, _ := errorCode(e).(string)
		return resp.StatusCode, code, "", e["message"].(string)
	}},
	{"agui", func(t *testing.T, env *stacktest.Env, thread, text, tool string) (int, string, string, string) {
		s := aguiPost(t, env, "assistant", strings.Replace(aguiInput(thread, "run-"+thread, text), `"tools":[]`, `"tools":[`+tool+`]`, 1))
		if s.status != 200 {
			t.Fatalf("AG-UI answered %d: %s", s.status, s.body)
		}
		if len(s.events) == 0 || s.events[0]["type"] != "RUN_ERROR" {
			return 200, "", "", ""
		}
		checkRunError(t, s, s.events[0]["code"].(string))
		return 400, s.events[0]["code"].(string), "", s.events[0]["message"].(string)
	}},
}

// toolJSON declares a tool in a wire's own shape.
func toolJSON(wire, name, params string) string {
	switch wire {
	case "openai":
		return fmt.Sprintf(`{"type":"function","function":{"name":%q,"description":"d","parameters":%s}}`, name, params)
	case "anthropic":
		return fmt.Sprintf(`{"name":%q,"description":"d","input_schema":%s}`, name, params)
	}
	return fmt.Sprintf(`{"name":%q,"description":"d","parameters":%s}`, name, params)
}

// threadMessages returns how many messages a thread holds (-1: no thread).
func threadMessages(t *testing.T, env *stacktest.Env, thread string) int {
	t.Helper()
	if _, err := env.Store.GetThread(t.Context(), "dev", thread); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return -1
		}
		t.Fatal(err)
	}
	msgs, err := env.Store.Messages(t.Context(), "dev", thread)
	if err != nil {
		t.Fatal(err)
	}
	return len(msgs)
}

// A client tool whose schema is not a JSON Schema object is a 400 in the
// wire's format (AG-UI: its RUN_ERROR before anything runs), naming the
// field; nothing is stored, a new durable thread is not created, an
// existing one gets no message, and the model is not called.
func TestClientToolSchemaMustBeAnObject(t *testing.T) {
	env := stacktest.New(t, stacktest.Options{})
	bad := map[string]string{"string": `"object"`, "number": `5`, "array": `[{"type":"object"}]`, "bool": `true`,
		"bad schema": `{"type":"object","properties":{"title":{"type":"text"}}}`, "not object type": `{"type":"string"}`}
	params := map[string]string{"openai": "tools[0].function.parameters", "anthropic": "tools.0.input_schema", "agui": "tools[0].parameters"}
	for _, w := range toolWires {
		t.Run(w.name, func(t *testing.T) {
			existing := "schema-existing-" + w.name
			if st, _, _, _ := w.send(t, env, existing, "hello", toolJSON(w.name, "open_modal", `{"type":"object"}`)); st != 200 {
				t.Fatalf("a valid tool was refused: %d", st)
			}
			stored := threadMessages(t, env, existing)
			calls := env.Upstream.Count()
			for kind, schema := range bad {
				fresh := fmt.Sprintf("schema-new-%s-%s", w.name, strings.ReplaceAll(kind, " ", "-"))
				for _, thread := range []string{fresh, existing} {
					st, code, param, msg := w.send(t, env, thread, "open the modal", toolJSON(w.name, "open_modal", schema))
					if st != 400 || code != "invalid_request" || !strings.Contains(msg, params[w.name]) {
						t.Fatalf("%s schema: got %d %q %q", kind, st, code, msg)
					}
					if w.name == "openai" && param != params[w.name] {
						t.Fatalf("%s schema: param %q", kind, param)
					}
				}
				if n := threadMessages(t, env, fresh); n != -1 {
					t.Fatalf("%s schema: the refused turn created thread %s", kind, fresh)
				}
			}
			if n := threadMessages(t, env, existing); n != stored {
				t.Fatalf("the refused turns stored messages: %d, was %d", n, stored)
			}
			th, err := env.Store.GetThread(t.Context(), "dev", existing)
			if err != nil || th.Status == store.Failed {
				t.Fatalf("thread after refused turns: %+v %v", th, err)
			}
			if env.Upstream.Count() != calls {
				t.Fatal("a refused turn reached the model")
			}
		})
	}
	// Absent and null schemas stay accepted: the tool takes no parameters.
	for _, w := range toolWires {
		for i, schema := range []string{`null`, `{}`} {
			thread := fmt.Sprintf("schema-none-%s-%d", w.name, i)
			if st, code, _, msg := w.send(t, env, thread, "hello", toolJSON(w.name, "open_modal", schema)); st != 200 {
				t.Fatalf("%s: schema %s refused: %s %s", w.name, schema, code, msg)
			}
		}
	}
}
