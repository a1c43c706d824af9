package server_test

import (
	"io"
	"net/http"
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
