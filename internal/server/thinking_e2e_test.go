package server_test

import (
	"testing"

	"github.com/stackbone/stackbone/internal/model/modeltest"
)

// A client's thinking settings on the Anthropic wire (thinking enabled with
// a budget, adaptive, output_config.effort, as Claude Code and the SDK send
// them) set the agent's reasoning effort when the agent lets clients
// override it (clientOverrides: ['reasoningEffort']): an Anthropic model
// gets extended thinking with that effort's budget, an OpenAI-compatible
// one reasoning_effort. Without the override the agent's own setting wins
// and the client's is ignored.
func TestClientThinkingReachesTheModel(t *testing.T) {
	t.Parallel()
	cases := []struct {
		extra  string
		effort string // the reasoning effort the model gets ("": none)
	}{
		{`,"thinking":{"type":"enabled","budget_tokens":10000}`, "high"},
		{`,"thinking":{"type":"enabled","budget_tokens":2048}`, "medium"},
		{`,"thinking":{"type":"adaptive"},"output_config":{"effort":"low"}`, "low"},
		{`,"thinking":{"type":"disabled"}`, ""},
		{``, ""},
	}
	budgets := map[string]float64{"low": 1024, "medium": 4096, "high": 16384}
	for _, kind := range []modeltest.Kind{modeltest.Anthropic, modeltest.OpenAI} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			allowed := settingsAgent(t, kind, string(kind)+"/test-model", `{}`, "['reasoningEffort']")
			fixed := settingsAgent(t, kind, string(kind)+"/test-model", `{ reasoningEffort: 'low' }`, "[]")
			for _, tc := range cases {
				for _, env := range []*struct {
					name string
					want string
				}{{"allowed", tc.effort}, {"fixed", "low"}} {
					e := allowed
					if env.name == "fixed" {
						e = fixed
					}
					if resp, b := antPost(t, e.URL+"/v1/messages", antBody("hello", tc.extra), nil); resp.StatusCode != 200 {
						t.Fatalf("%s %s: %d %s", env.name, tc.extra, resp.StatusCode, b)
					}
					bodies := upstreamBodies(t, e)
					body := bodies[len(bodies)-1]
					var got string
					if kind == modeltest.Anthropic {
						if th, ok := body["thinking"].(map[string]any); ok {
							for name, n := range budgets {
								if th["type"] == "enabled" && th["budget_tokens"] == n {
									got = name
								}
							}
						}
					} else {
						got, _ = body["reasoning_effort"].(string)
					}
					if got != env.want {
						t.Errorf("%s agent, client %s: the model got effort %q (body thinking %v, reasoning_effort %v); want %q",
							env.name, tc.extra, got, body["thinking"], body["reasoning_effort"], env.want)
					}
				}
			}
		})
	}
}
