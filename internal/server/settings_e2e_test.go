package server_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/agent/tsload"
	"github.com/stackbone/stackbone/internal/model/modeltest"
	"github.com/stackbone/stackbone/internal/stacktest"
)

// settingsScript: "save X" has the agent store X as the draft (a tool that
// changes state), "delegate" hands work to the helper subagent, whose
// system prompt says "Help.".
const settingsScript = `[
 {"when": {"system": "Help."}, "reply": {"text": "helped"}},
 {"when": {"afterTool": true}, "reply": {"text": "done: {{lastTool}}"}},
 {"when": {"lastUser": "save boom"}, "reply": {"toolCalls": [{"name": "set_draft", "arguments": {"text": "boom"}}]}},
 {"when": {"lastUser": "save"}, "reply": {"toolCalls": [{"name": "set_draft", "arguments": {"text": "v2"}}]}},
 {"when": {"lastUser": "delegate"}, "reply": {"toolCalls": [{"name": "task", "arguments": {"subagent_type": "helper", "description": "help me"}}]}},
 {"reply": {"text": "echo: {{lastUser}}"}}
]`

// settingsAgent writes an agent file on modelRef with the given
// modelSettings and clientOverrides (TypeScript literals) and a dynamic
// instructions function reading state.draft, and starts a stack on it.
func settingsAgent(t *testing.T, kind modeltest.Kind, modelRef, settings, overrides string) *stacktest.Env {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "agents"), 0o755); err != nil {
		t.Fatal(err)
	}
	src := `import { defineDeepAgent, tool } from 'stackbone';
export default defineDeepAgent({
  name: 'assistant',
  model: '` + modelRef + `',
  instructions: async ({ state, threadId, agent }) => {
    if (state.draft === 'boom') throw new Error('the draft is unusable');
    return 'Draft: ' + (state.draft ?? 'none') + ' (agent ' + agent + ', thread ' + (threadId ? 'set' : 'unset') + ')';
  },
  modelSettings: ` + settings + `,
  clientOverrides: ` + overrides + `,
  tools: {
    set_draft: tool({
      description: 'Save the draft',
      jsonSchema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
      execute: async ({ text }, ctx) => { ctx.state.draft = text; return 'saved ' + text; },
    }),
  },
  subagents: [{ name: 'helper', description: 'Helps', instructions: 'Help.', modelSettings: { temperature: 0 } }],
});
`
	file := filepath.Join(dir, "agents", "assistant.ts")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return stacktest.New(t, stacktest.Options{Script: settingsScript, Upstream: kind, Agents: func(*stacktest.Env) []*agent.Spec {
		spec, err := tsload.LoadFile(context.Background(), dir, file, tsload.Options{})
		if err != nil {
			t.Fatalf("load the agent file: %v", err)
		}
		return []*agent.Spec{spec}
	}})
}

// openAISystem is the system message of a Chat Completions body.
func openAISystem(m map[string]any) string {
	msgs, _ := m["messages"].([]any)
	if len(msgs) == 0 {
		return ""
	}
	first, _ := msgs[0].(map[string]any)
	if first["role"] != "system" {
		return ""
	}
	s, _ := first["content"].(string)
	return s
}

const openAISettings = `{ temperature: 0.3, topP: 0.9, maxTokens: 256, stop: 'END', seed: 7, reasoningEffort: 'low',
    parallelToolCalls: false, providerOptions: { openai: { user: 'u1' }, anthropic: { metadata: { user_id: 'u1' } } } }`

// TestModelSettingsReachOpenAIUpstream: an agent file's modelSettings reach
// an OpenAI-compatible upstream in its field names on every step; the
// client's temperature and max_tokens (openai-go) are ignored when the agent
// lists no clientOverrides; the dynamic instructions see the draft a tool
// stored between the two steps of the turn; the subagent's own temperature
// replaces the parent's while the rest is inherited.
func TestModelSettingsReachOpenAIUpstream(t *testing.T) {
	t.Parallel()
	env := settingsAgent(t, modeltest.OpenAI, "openai/test-model", openAISettings, "[]")
	p := params(user("save it"))
	p.Temperature = openai.Float(1.7)
	p.MaxCompletionTokens = openai.Int(50)
	res, err := client(env, session("s-openai")).Chat.Completions.New(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Choices[0].Message.Content; got != "done: saved v2" {
		t.Fatalf("answer %q", got)
	}
	bodies := upstreamBodies(t, env)
	if len(bodies) != 2 {
		t.Fatalf("want 2 model calls, got %d", len(bodies))
	}
	for i, b := range bodies {
		if b["temperature"] != 0.3 || b["top_p"] != 0.9 || b["max_completion_tokens"] != float64(256) || b["seed"] != float64(7) ||
			b["reasoning_effort"] != "low" || b["parallel_tool_calls"] != false || b["user"] != "u1" || b["metadata"] != nil {
			t.Fatalf("step %d body: %v", i+1, b)
		}
		if stop, _ := b["stop"].([]any); len(stop) != 1 || stop[0] != "END" {
			t.Fatalf("step %d stop: %v", i+1, b["stop"])
		}
	}
	if s := openAISystem(bodies[0]); s != "Draft: none (agent assistant, thread set)" {
		t.Fatalf("first step's system prompt %q", s)
	}
	if s := openAISystem(bodies[1]); s != "Draft: v2 (agent assistant, thread set)" {
		t.Fatalf("the system prompt after the tool changed the draft %q", s)
	}

	if _, err := client(env, session("s-openai-sub")).Chat.Completions.New(context.Background(), params(user("delegate"))); err != nil {
		t.Fatal(err)
	}
	var sub map[string]any
	for _, b := range upstreamBodies(t, env)[2:] {
		if openAISystem(b) == "Help." {
			sub = b
		}
	}
	if sub == nil || sub["temperature"] != 0.0 || sub["top_p"] != 0.9 || sub["max_completion_tokens"] != float64(256) {
		t.Fatalf("subagent's call: %v", sub)
	}
}

// TestClientOverrides: with clientOverrides: ['temperature'] the client's
// temperature replaces the agent's, while its max tokens (not listed) are
// still ignored for the agent's.
func TestClientOverrides(t *testing.T) {
	t.Parallel()
	env := settingsAgent(t, modeltest.OpenAI, "openai/test-model", `{ temperature: 0.3, maxTokens: 256 }`, "['temperature']")
	p := params(user("hello"))
	p.Temperature = openai.Float(1.7)
	p.MaxCompletionTokens = openai.Int(50)
	if _, err := client(env, session("s-over")).Chat.Completions.New(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	if _, err := client(env, session("s-over2")).Chat.Completions.New(context.Background(), params(user("hello"))); err != nil {
		t.Fatal(err)
	}
	b := upstreamBodies(t, env)
	if b[0]["temperature"] != 1.7 || b[0]["max_completion_tokens"] != float64(256) {
		t.Fatalf("with a client temperature: %v", b[0])
	}
	if b[1]["temperature"] != 0.3 {
		t.Fatalf("without one the agent's applies: %v", b[1])
	}
}

// TestModelSettingsReachAnthropicUpstream: the same settings reach an
// Anthropic upstream as max_tokens, stop_sequences, a thinking budget (whose
// thinking block goes back with the tool call, as the API requires),
// disable_parallel_tool_use and providerOptions.anthropic (temperature and
// top_p are not sent: the API version in use dropped them), and the dynamic
// instructions follow the state there too.
func TestModelSettingsReachAnthropicUpstream(t *testing.T) {
	t.Parallel()
	env := settingsAgent(t, modeltest.Anthropic, "anthropic/test-model",
		`{ temperature: 0.3, topP: 0.9, maxTokens: 2048, stop: ['END'], reasoningEffort: 'low', parallelToolCalls: false,
    providerOptions: { openai: { user: 'u1' }, anthropic: { metadata: { user_id: 'u1' } } } }`, "[]")
	p := params(user("save it"))
	p.Temperature = openai.Float(1.7)
	res, err := client(env, session("s-ant")).Chat.Completions.New(context.Background(), p)
	if err != nil || res.Choices[0].Message.Content != "done: saved v2" {
		t.Fatalf("turn: %v %v", res, err)
	}
	bodies := upstreamBodies(t, env)
	if len(bodies) != 2 {
		t.Fatalf("want 2 model calls, got %d", len(bodies))
	}
	for i, b := range bodies {
		th, _ := b["thinking"].(map[string]any)
		tc, _ := b["tool_choice"].(map[string]any)
		md, _ := b["metadata"].(map[string]any)
		stop, _ := b["stop_sequences"].([]any)
		if b["max_tokens"] != float64(2048) || th["type"] != "enabled" || th["budget_tokens"] != float64(1024) ||
			tc["disable_parallel_tool_use"] != true || md["user_id"] != "u1" || len(stop) != 1 || stop[0] != "END" ||
			b["temperature"] != nil || b["top_p"] != nil || b["user"] != nil {
			t.Fatalf("step %d body: %v", i+1, b)
		}
	}
	// Extended thinking in a tool-use cycle: the second call sends the
	// first answer's thinking block back, verbatim and first, as the API
	// requires (the mock refuses it otherwise); the thinking never reaches
	// the client's answer.
	msgs, _ := bodies[1]["messages"].([]any)
	first := map[string]any{}
	if len(msgs) >= 2 {
		if content, _ := msgs[1].(map[string]any)["content"].([]any); len(content) > 0 {
			first, _ = content[0].(map[string]any)
		}
	}
	if first["type"] != "thinking" || first["thinking"] != modeltest.ThinkingText || first["signature"] != modeltest.ThinkingSignature(modeltest.ThinkingText) {
		t.Fatalf("the tool call's assistant turn as sent back: %v", msgs)
	}
	// The durable thread holds it with its message, as the README says.
	view := call(t, "GET", env.URL+"/v1/threads/s-ant", "")
	if !strings.Contains(string(view.body), `"reasoning":[{"type":"thinking","text":"`+modeltest.ThinkingText+`","signature":"`+modeltest.ThinkingSignature(modeltest.ThinkingText)+`"}]`) {
		t.Fatalf("thread s-ant: %s", view.body)
	}
	system := func(b map[string]any) string {
		blocks, _ := b["system"].([]any)
		var parts []string
		for _, x := range blocks {
			parts = append(parts, x.(map[string]any)["text"].(string))
		}
		return strings.Join(parts, "\n")
	}
	if system(bodies[0]) != "Draft: none (agent assistant, thread set)" || system(bodies[1]) != "Draft: v2 (agent assistant, thread set)" {
		t.Fatalf("system prompts %q then %q", system(bodies[0]), system(bodies[1]))
	}
}

// TestInstructionsFunctionError: an instructions function that throws fails
// the turn with a clear error (instructions_failed, naming the agent and the
// thrown message) and no further model call; the server keeps serving.
func TestInstructionsFunctionError(t *testing.T) {
	t.Parallel()
	env := settingsAgent(t, modeltest.OpenAI, "openai/test-model", "{}", "[]")
	_, err := client(env, session("s-boom")).Chat.Completions.New(context.Background(), params(user("save boom")))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 500 || apiErr.Code != "instructions_failed" ||
		!strings.Contains(apiErr.Message, `The instructions function of agent "assistant" failed: the draft is unusable`) {
		t.Fatalf("want 500 instructions_failed, got %v", err)
	}
	if n := env.Upstream.Count(); n != 1 {
		t.Fatalf("model calls after the failing instructions: %d", n)
	}
	res, err := client(env, session("s-fine")).Chat.Completions.New(context.Background(), params(user("hello")))
	if err != nil || res.Choices[0].Message.Content != "echo: hello" {
		t.Fatalf("next turn: %v %v", res, err)
	}
}
