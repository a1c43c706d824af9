package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/model"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
)

// responsesScript drives the tests/clients/responses-*.mjs scripts:
//   - "order …"  → "Looking it up." and a call of lookup_order, a client
//     tool each client declares; its output → "Order said: <output>"
//   - "slow …"   → a twelve-word answer streamed in four chunks 150 ms
//     apart, long enough for a background response to be resumed mid-way
//   - anything else → "echo: <text>"
const responsesScript = `[
 {"when":{"lastTool":"lookup_order"},"reply":{"text":"Order said: {{lastTool}}"}},
 {"when":{"lastUser":"order"},"reply":{"text":"Looking it up.","toolCalls":[{"name":"lookup_order","arguments":{"id":"42"}}]}},
 {"when":{"lastUser":"slow"},"reply":{"text":"one two three four five six seven eight nine ten eleven twelve","chunkDelayMs":150}},
 {"reply":{"text":"echo: {{lastUser}}"}}
]`

// clientResults is what every responses-*.mjs script prints.
type clientResults struct {
	Results []struct {
		Name  string `json:"name"`
		OK    bool   `json:"ok"`
		Error string `json:"error"`
	} `json:"results"`
	// Sent summarizes what the client POSTed to /v1/responses.
	Sent json.RawMessage `json:"sent"`
}

// runResponsesClient starts a stack on responsesScript, checks that it
// serves POST /v1/responses, runs a tests/clients script against it and
// fails the test for every failed case or a case count other than want.
func runResponsesClient(t *testing.T, script string, want int, probe string, args ...string) *stacktest.Env {
	t.Helper()
	node, dir := nodeFixture(t, "clients", probe)
	env := stacktest.New(t, stacktest.Options{Script: responsesScript})
	requireResponsesRoute(t, env)

	out := runClientCases(t, node, dir, script, want, append([]string{env.URL, "assistant"}, args...)...)
	t.Logf("%s sent: %s", script, out.Sent)
	return env
}

// runClientCases runs a fixture's script that prints clientResults, and
// fails the test unless it ran want cases and each passed.
func runClientCases(t *testing.T, node, dir, script string, want int, args ...string) clientResults {
	t.Helper()
	var out clientResults
	runErr := runNodeScript(t, node, dir, script, &out, args...)
	if len(out.Results) != want {
		t.Fatalf("%s: want %d cases, got %+v", script, want, out.Results)
	}
	for _, r := range out.Results {
		if !r.OK {
			t.Errorf("%s: %s", r.Name, r.Error)
		}
	}
	if runErr != nil && !t.Failed() {
		t.Fatal(runErr)
	}
	return out
}

// requireResponsesRoute fails at once, and says why, when the server has
// no Responses wire (every client case would fail with the same 404).
func requireResponsesRoute(t *testing.T, env *stacktest.Env) {
	t.Helper()
	res, err := http.Post(env.URL+"/v1/responses", "application/json", strings.NewReader(`{"model":"assistant","input":"probe"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if res.StatusCode == http.StatusNotFound {
		t.Fatalf("POST /v1/responses: %d %s: the server has no Responses wire", res.StatusCode, body)
	}
	if res.StatusCode != http.StatusOK {
		t.Fatalf("POST /v1/responses probe: %d %s", res.StatusCode, body)
	}
}

// upstreamWith returns the model requests whose last user message contains
// marker, in arrival order.
func upstreamWith(env *stacktest.Env, marker string) []model.Request {
	var out []model.Request
	for _, r := range env.Upstream.Requests() {
		msgs := r.Request.Messages
		for i := len(msgs) - 1; i >= 0; i-- {
			if msgs[i].Role == message.User {
				if strings.Contains(msgs[i].Content, marker) {
					out = append(out, r.Request)
				}
				break
			}
		}
	}
	return out
}

// hasMessage reports whether msgs holds a message of role whose content
// contains text.
func hasMessage(msgs []message.Message, role message.Role, text string) bool {
	for _, m := range msgs {
		if m.Role == role && strings.Contains(m.Content, text) {
			return true
		}
	}
	return false
}

// hasTool reports whether the request offered the model a tool named name.
func hasTool(req model.Request, name string) bool {
	for _, d := range req.Tools {
		if d.Name == name {
			return true
		}
	}
	return false
}

// checkClientTool checks the two model steps of a client tool turn started
// by the user text marker: the first offered lookup_order (the client's
// declaration reached the model), the last ended with the client's output
// as the tool result of the call the model made, after the model's own
// "Looking it up." text.
func checkClientTool(t *testing.T, env *stacktest.Env, marker, output string) {
	t.Helper()
	reqs := upstreamWith(env, marker)
	if len(reqs) != 2 {
		t.Fatalf("%q: want 2 model steps (the call, then the answer), got %d", marker, len(reqs))
	}
	if !hasTool(reqs[0], "lookup_order") {
		t.Errorf("%q: the model was not offered the client's lookup_order tool: %+v", marker, reqs[0].Tools)
	}
	msgs := reqs[1].Messages
	last := msgs[len(msgs)-1]
	if last.Role != message.Tool || last.ToolName != "lookup_order" || last.Content != output {
		t.Errorf("%q: the second step ends with %+v, want the lookup_order result %s", marker, last, output)
	}
	var call *message.Message
	for i := range msgs {
		if msgs[i].Role == message.Assistant && len(msgs[i].ToolCalls) > 0 {
			call = &msgs[i]
		}
	}
	if call == nil || call.ToolCalls[0].Name != "lookup_order" || call.ToolCalls[0].ID != last.ToolCallID {
		t.Errorf("%q: the second step does not carry the model's lookup_order call answered by the result: %+v", marker, msgs)
	}
	if !hasMessage(msgs, message.Assistant, "Looking it up.") {
		t.Errorf("%q: the second step lacks the model's own text of the first: %+v", marker, msgs)
	}
}

// TestResponsesOpenAINodeSDK runs tests/clients/responses-openai.mjs with
// the official openai Node SDK, v6 and v7, against POST /v1/responses:
// create (plain, streamed), the stream helper, retrieve, a
// previous_response_id chain, a background response (replayed, and resumed
// with starting_after after a dropped connection) and a client function
// tool answered with function_call_output. Past what each SDK checks, the
// model must have seen the first turn of the chain with the second, and
// the client's tool output as the result of its call.
func TestResponsesOpenAINodeSDK(t *testing.T) {
	t.Parallel()
	env := runResponsesClient(t, "responses-openai.mjs", 18, filepath.Join("openai6", "package.json"))
	for _, v := range []string{"v6", "v7"} {
		// Continuing the first response again: the model got that
		// response's history and the new input, not the discarded turn;
		// the branch then goes on with its own history.
		seen := func(prompt string) []string {
			t.Helper()
			reqs := upstreamWith(env, prompt)
			if len(reqs) != 1 {
				t.Fatalf("%s: want 1 model request for %q, got %d", v, prompt, len(reqs))
			}
			var out []string
			for _, m := range reqs[0].Messages {
				out = append(out, string(m.Role)+":"+m.Content)
			}
			return out
		}
		root := []string{"user:" + v + " branch root question", "assistant:echo: " + v + " branch root question"}
		other := append(slices.Clone(root), "user:"+v+" branch other turn")
		if got := seen(v + " branch other turn"); !slices.Equal(got, other) {
			t.Errorf("%s: continuing an older response, the model saw %q; want %q", v, got, other)
		}
		on := append(slices.Clone(other), "assistant:echo: "+v+" branch other turn", "user:"+v+" branch goes on")
		if got := seen(v + " branch goes on"); !slices.Equal(got, on) {
			t.Errorf("%s: going on from the branch, the model saw %q; want %q", v, got, on)
		}
		reqs := upstreamWith(env, v+" recall the code word")
		if len(reqs) != 1 {
			t.Fatalf("%s: want 1 model request for the second turn, got %d", v, len(reqs))
		}
		msgs := reqs[0].Messages
		if !hasMessage(msgs, message.User, v+" remember: the code word is kiwi") ||
			!hasMessage(msgs, message.Assistant, "echo: "+v+" remember: the code word is kiwi") {
			t.Errorf("%s: previous_response_id did not give the model the first turn: %+v", v, msgs)
		}
		checkClientTool(t, env, v+" look up order 42", `{"id":"42","status":"shipped-`+v+`"}`)
	}
}

// TestResponsesAgentsSDK runs tests/clients/responses-agents.mjs: the
// OpenAI Agents SDK with its default model settings (Responses) runs an
// Agent named after the Stackbone agent, streaming and not, and a local
// tool it executes itself. The model must get the Agent's instructions
// besides the agent's own, and the tool's output as the result of its call.
func TestResponsesAgentsSDK(t *testing.T) {
	t.Parallel()
	env := runResponsesClient(t, "responses-agents.mjs", 4, filepath.Join("@openai", "agents", "package.json"))
	reqs := upstreamWith(env, "agents hello there")
	if len(reqs) != 1 {
		t.Fatalf("want 1 model request for the plain run, got %d", len(reqs))
	}
	if !strings.Contains(reqs[0].System, "You are a test assistant.") || !strings.Contains(reqs[0].System, "Answer briefly.") {
		t.Errorf("system prompt %q: want the agent's instructions and the Agent's", reqs[0].System)
	}
	checkClientTool(t, env, "agents look up order 42", `{"id":"42","status":"shipped-agents"}`)
	checkClientTool(t, env, "agents stream order 42", `{"id":"42","status":"shipped-agents"}`)
	// The SDK resends the whole conversation on each model call, without
	// previous_response_id: a run is still one thread, holding the call,
	// its output and the answer once each.
	oneThreadPerRun(t, env, "agents look up order 42", "agents stream order 42")
}

// oneThreadPerRun checks that each prompt's run (a client tool step, then
// the answer) made one thread: user, assistant (the call), tool, assistant.
func oneThreadPerRun(t *testing.T, env *stacktest.Env, prompts ...string) {
	t.Helper()
	for _, prompt := range prompts {
		var found []string
		threads, err := env.Store.ListThreads(context.Background(), "dev", store.ThreadFilter{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		for _, th := range threads {
			msgs, err := env.Store.Messages(context.Background(), "dev", th.ID)
			if err != nil {
				t.Fatal(err)
			}
			if len(msgs) > 0 && msgs[0].Content == prompt {
				var roles []string
				for _, m := range msgs {
					roles = append(roles, string(m.Role))
				}
				found = append(found, strings.Join(roles, ","))
			}
		}
		if len(found) != 1 || found[0] != "user,assistant,tool,assistant" {
			t.Errorf("%q: threads %q; want one thread user,assistant,tool,assistant", prompt, found)
		}
	}
}

// TestResponsesVercelAISDK runs tests/clients/responses-aisdk.mjs: the
// Vercel AI SDK's default `openai(agent)` model (Responses) with
// generateText, streamText and a tool it executes between steps. The
// second step must reach the model with the first step's text and call
// (the SDK sends the text as an item_reference to the stored message) and
// the tool's output.
func TestResponsesVercelAISDK(t *testing.T) {
	t.Parallel()
	env := runResponsesClient(t, "responses-aisdk.mjs", 4, filepath.Join("@ai-sdk", "openai", "package.json"))
	checkClientTool(t, env, "aisdk look up order 42", `{"id":"42","status":"shipped-aisdk"}`)
	checkClientTool(t, env, "aisdk stream order 42", `{"id":"42","status":"shipped-aisdk"}`)
	// Its second step replays the first (the text as an item_reference):
	// one thread per run.
	oneThreadPerRun(t, env, "aisdk look up order 42", "aisdk stream order 42")
}

// TestResponsesCodexStyle runs tests/clients/responses-codex.mjs: Codex
// CLI's requests (store: false, stream: true, instructions, the whole
// conversation replayed each turn with its function_call and
// function_call_output items). The third turn must reach the model with
// the whole conversation in order.
func TestResponsesCodexStyle(t *testing.T) {
	t.Parallel()
	env := runResponsesClient(t, "responses-codex.mjs", 3, filepath.Join("zod", "package.json"))
	checkClientTool(t, env, "codex look up order 42", `{"id":"42","status":"shipped-codex"}`)
	reqs := upstreamWith(env, "codex thanks, next")
	if len(reqs) != 1 {
		t.Fatalf("want 1 model request for the third turn, got %d", len(reqs))
	}
	if !strings.Contains(reqs[0].System, "You are a coding agent.") {
		t.Errorf("system prompt %q: want the client's instructions", reqs[0].System)
	}
	// Consecutive assistant messages count as one: a text and a call may
	// reach the model as one message or two.
	var got []string
	for i, m := range reqs[0].Messages {
		s := string(m.Role) + ":" + m.Content
		if i > 0 && m.Role == message.Assistant && reqs[0].Messages[i-1].Role == message.Assistant {
			s = got[len(got)-1] + m.Content
			got = got[:len(got)-1]
		}
		for _, c := range m.ToolCalls {
			s += "+call:" + c.Name
		}
		got = append(got, s)
	}
	want := []string{
		"user:codex look up order 42",
		"assistant:Looking it up.+call:lookup_order",
		`tool:{"id":"42","status":"shipped-codex"}`,
		`assistant:Order said: {"id":"42","status":"shipped-codex"}`,
		"user:codex thanks, next",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("third turn's messages:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
