package server_test

import (
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/model/modeltest"
	"github.com/stackbone/stackbone/internal/stacktest"
)

// TestAGUIReasoning: an agent whose Anthropic model thinks (extended
// thinking on, from the mock upstream's real thinking_delta stream) shows
// that thinking to a 1.0 AG-UI client as a REASONING_* message before the
// answer; a client that declares no 1.0 protocolVersion gets the answer
// without it.
func TestAGUIReasoning(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{Upstream: modeltest.Anthropic,
		Agents: func(env *stacktest.Env) []*agent.Spec {
			specs := stacktest.DefaultAgents(env, "anthropic/test-model")
			specs[0].ModelSettings.ReasoningEffort = "low"
			return specs
		}})
	run := func(thread, version string) string {
		t.Helper()
		body := `{"threadId":"` + thread + `","runId":"r1",` + version + `"messages":[{"id":"u1","role":"user","content":"hello"}]}`
		res, err := http.Post(env.URL+"/v1/agents/assistant/agui", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != 200 || !strings.Contains(string(b), "echo: hello") {
			t.Fatalf("%d %s", res.StatusCode, b)
		}
		return string(b)
	}
	v1 := run("rsn-1", `"protocolVersion":"1.0",`)
	i := strings.Index(v1, `"REASONING_MESSAGE_CONTENT"`)
	if i < 0 || !strings.Contains(v1, `"delta":"`+modeltest.ThinkingText+`"`) || !strings.Contains(v1, `"REASONING_END"`) {
		t.Fatalf("a 1.0 client got no reasoning:\n%s", v1)
	}
	if j := strings.Index(v1, `"TEXT_MESSAGE_START"`); j < i {
		t.Fatalf("the reasoning comes after the answer:\n%s", v1)
	}
	if old := run("rsn-2", ""); strings.Contains(old, "REASONING") {
		t.Fatalf("a pre-1.0 client got reasoning events:\n%s", old)
	}
}

// reasoningScript answers "think" after reasoning (the mock OpenAI
// upstream streams it as reasoning_content deltas).
const reasoningScript = `[
 {"when": {"lastUser": "think"}, "reply": {"reasoning": "First I weigh the question, then I answer.", "text": "Thought it through."}},
 {"reply": {"text": "echo: {{lastUser}}"}}
]`

// TestAGUIStoredReasoning runs tests/agui/reasoning.mjs: an OpenAI-compatible
// model's reasoning_content reaches @ag-ui/client 1.0 as a reasoning message
// before the answer, is stored with the answer, and comes back in the
// MESSAGES_SNAPSHOT of a reloaded page's next run (once: with the live
// message's id). @ag-ui/client 0.0.59, whose schema rejects a "reasoning"
// role, gets none in either, and its runs succeed.
func TestAGUIStoredReasoning(t *testing.T) {
	t.Parallel()
	node, dir := nodeFixture(t, "agui", filepath.Join("@ag-ui", "client", "package.json"), filepath.Join("agui-client-0059", "package.json"))
	env := stacktest.New(t, stacktest.Options{Script: reasoningScript})
	const thought = "First I weigh the question, then I answer."
	cases := map[string]struct{ first, reloaded [][]string }{
		"v1": {
			first: [][]string{{"user", "think it over"}, {"reasoning", thought}, {"assistant", "Thought it through."}},
			reloaded: [][]string{{"user", "think it over"}, {"reasoning", thought}, {"assistant", "Thought it through."},
				{"user", "thanks"}, {"assistant", "echo: thanks"}},
		},
		"v0059": {
			first:    [][]string{{"user", "think it over"}, {"assistant", "Thought it through."}},
			reloaded: [][]string{{"user", "think it over"}, {"assistant", "Thought it through."}, {"user", "thanks"}, {"assistant", "echo: thanks"}},
		},
	}
	for which, want := range cases {
		t.Run(which, func(t *testing.T) {
			t.Parallel()
			var out struct {
				First    [][]string `json:"first"`
				Reloaded [][]string `json:"reloaded"`
				Warnings []string   `json:"warnings"`
				Error    string     `json:"error"`
			}
			if err := runNodeScript(t, node, dir, "reasoning.mjs", &out, env.URL, "reasoning-"+which, which); err != nil {
				t.Fatal(err)
			}
			if out.Error != "" || len(out.Warnings) > 0 {
				t.Fatalf("error %q, warnings %v", out.Error, out.Warnings)
			}
			if !slices.EqualFunc(out.First, want.first, slices.Equal) {
				t.Fatalf("the page holds\n %v\nwant %v", out.First, want.first)
			}
			if !slices.EqualFunc(out.Reloaded, want.reloaded, slices.Equal) {
				t.Fatalf("the reloaded page holds\n %v\nwant %v", out.Reloaded, want.reloaded)
			}
		})
	}
}
