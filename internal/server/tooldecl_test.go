package server_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	ant "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/stackbone/stackbone/internal/agent"
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
	t.Parallel()
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

// toolNameScript calls write_todos for "todo", open_modal for "open", and
// echoes otherwise.
const toolNameScript = `[
 {"when":{"lastTool":"write_todos"},"reply":{"text":"todos: {{lastTool}}"}},
 {"when":{"lastUser":"todo"},"reply":{"toolCalls":[{"name":"write_todos","arguments":{"todos":[]}}]}},
 {"when":{"lastUser":"open"},"reply":{"toolCalls":[{"name":"open_modal","arguments":{"title":"Hello"}}]}},
 {"reply":{"text":"echo: {{lastUser}}"}}
]`

// toolNameEnv serves the default agents plus "plain", a deep agent with the
// todo and file built-ins turned off.
func toolNameEnv(t *testing.T) *stacktest.Env {
	return stacktest.New(t, stacktest.Options{Script: toolNameScript, Agents: func(env *stacktest.Env) []*agent.Spec {
		return append(stacktest.DefaultAgents(env, "openai/test-model"),
			&agent.Spec{Name: "plain", Model: "openai/test-model", NoTodos: true, NoFiles: true})
	}})
}

func fnTool(name string) openai.ChatCompletionToolUnionParam {
	return openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name: name, Parameters: shared.FunctionParameters{"type": "object"}})
}

// A client tool named like one of the agent's own tools (a built-in that is
// on, or a server tool) would be hidden by it and never reach the client:
// the turn is a 400 naming the tool, with nothing stored and no model call.
// With the built-in turned off, the client's tool of that name works.
func TestClientToolNamedLikeAgentToolOpenAI(t *testing.T) {
	t.Parallel()
	env := toolNameEnv(t)
	for _, name := range []string{"write_todos", "read_file", "write_file", "edit_file", "ls", "task", "get_weather"} {
		thread := "clash-openai-" + name
		p := params(user("todo please"))
		p.Tools = []openai.ChatCompletionToolUnionParam{openModalTool(), fnTool(name)}
		_, err := client(env, session(thread)).Chat.Completions.New(context.Background(), p)
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 {
			t.Fatalf("%s: want a 400, got %v", name, err)
		}
		if apiErr.Code != "tool_name_taken" || apiErr.Param != "tools[1].function.name" || apiErr.Type != "invalid_request_error" ||
			!strings.Contains(apiErr.Message, fmt.Sprintf("%q", name)) {
			t.Fatalf("%s: %s", name, apiErr.RawJSON())
		}
		if threadMessages(t, env, thread) != -1 {
			t.Fatalf("%s: the refused turn created its thread", name)
		}
	}
	if env.Upstream.Count() != 0 {
		t.Fatal("a refused turn reached the model")
	}

	// The built-in is off for "plain": the model's write_todos call is the
	// client's, so the turn stops on it.
	p := params(user("todo please"))
	p.Model = "plain"
	p.Tools = []openai.ChatCompletionToolUnionParam{fnTool("write_todos"), fnTool("read_file")}
	res, err := client(env, session("clash-openai-plain")).Chat.Completions.New(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if c := res.Choices[0]; c.FinishReason != "tool_calls" || len(c.Message.ToolCalls) != 1 || c.Message.ToolCalls[0].Function.Name != "write_todos" {
		t.Fatalf("want the client's write_todos call, got %s", res.RawJSON())
	}
	// "task" exists for every agent: it still clashes.
	p.Tools = []openai.ChatCompletionToolUnionParam{fnTool("task")}
	_, err = client(env).Chat.Completions.New(context.Background(), p)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "tools[0].function.name" {
		t.Fatalf("task on plain: want a 400, got %v", err)
	}
}

func TestClientToolNamedLikeAgentToolAnthropic(t *testing.T) {
	t.Parallel()
	env := toolNameEnv(t)
	c := antClient(env, antSession("clash-ant"))
	p := antParams(antUser("todo please"))
	p.Tools = []ant.ToolUnionParam{
		{OfWebSearchTool20250305: &ant.WebSearchTool20250305Param{}}, // Anthropic's own: not a client tool
		openModalParam(),
		{OfTool: &ant.ToolParam{Name: "write_todos", InputSchema: ant.ToolInputSchemaParam{}}},
	}
	_, err := c.Messages.New(context.Background(), p)
	var apiErr *ant.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 {
		t.Fatalf("want a 400, got %v", err)
	}
	if apiErr.Type() != "invalid_request_error" || apiErr.ErrorCode() != "tool_name_taken" ||
		!strings.HasPrefix(apiErr.Message, "tools.2.name: ") || !strings.Contains(apiErr.Message, `"write_todos"`) {
		t.Fatalf("error: %s", apiErr.RawJSON())
	}
	if threadMessages(t, env, "clash-ant") != -1 || env.Upstream.Count() != 0 {
		t.Fatal("the refused turn was stored or reached the model")
	}
	// A server tool's name clashes too.
	p.Tools = []ant.ToolUnionParam{{OfTool: &ant.ToolParam{Name: "refund", InputSchema: ant.ToolInputSchemaParam{}}}}
	if _, err = c.Messages.New(context.Background(), p); !errors.As(err, &apiErr) || apiErr.StatusCode != 400 ||
		!strings.HasPrefix(apiErr.Message, "tools.0.name: ") {
		t.Fatalf("want a 400 for refund, got %v", err)
	}
	// With the built-in off, the client's write_todos reaches the client.
	p = antParams(antUser("todo please"))
	p.Model = "plain"
	p.Tools = []ant.ToolUnionParam{{OfTool: &ant.ToolParam{Name: "write_todos", InputSchema: ant.ToolInputSchemaParam{}}}}
	msg := antStream(t, c, p)
	if calls := toolUses(&msg); msg.StopReason != ant.StopReasonToolUse || len(calls) != 1 || calls[0].Name != "write_todos" {
		t.Fatalf("want the client's write_todos call, got %s", blocksOf(&msg))
	}
}

func TestClientToolNamedLikeAgentToolAGUI(t *testing.T) {
	t.Parallel()
	env := toolNameEnv(t)
	body := aguiInput("clash-agui", "run-1", "todo please",
		`"tools":[{"name":"open_modal","parameters":{"type":"object"}},{"name":"edit_file","parameters":{"type":"object"}}]`)
	body = strings.Replace(body, `"tools":[],`, "", 1)
	e := checkRunError(t, aguiPost(t, env, "assistant", body), "tool_name_taken")
	if msg := e["message"].(string); !strings.HasPrefix(msg, "tools[1].name: ") || !strings.Contains(msg, `"edit_file"`) {
		t.Fatalf("message %q", msg)
	}
	if threadMessages(t, env, "clash-agui") != -1 || env.Upstream.Count() != 0 {
		t.Fatal("the refused run was stored or reached the model")
	}
	body = strings.Replace(aguiInput("clash-agui-plain", "run-1", "todo please", `"tools":[{"name":"write_todos","parameters":{"type":"object"}}]`),
		`"tools":[],`, "", 1)
	s := aguiPost(t, env, "plain", body)
	checkTerminal(t, s)
	if start := s.first("TOOL_CALL_START"); start == nil || start["toolCallName"] != "write_todos" {
		t.Fatalf("want the client's write_todos call: %s", s.body)
	}
}
