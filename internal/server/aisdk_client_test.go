package server_test

import (
	"path/filepath"
	"testing"

	"github.com/stackbone/stackbone/internal/stacktest"
)

// TestVercelAISDKOutputObject runs tests/clients/aisdk.mjs: the Vercel AI
// SDK (ai@7, @ai-sdk/openai `.chat()`) asks an agent for Output.object /
// Output.json with generateText and streamText. Each case must parse the
// answer, and every upstream step must carry the response_format the SDK
// sent (it was dropped, and the SDK failed with NoObjectGeneratedError).
func TestVercelAISDKOutputObject(t *testing.T) {
	t.Parallel()
	node, dir := nodeFixture(t, "clients", filepath.Join("ai", "package.json"))

	env := stacktest.New(t, stacktest.Options{Script: formatScript})
	var out struct {
		Results []struct {
			Name  string `json:"name"`
			OK    bool   `json:"ok"`
			Error string `json:"error"`
		} `json:"results"`
	}
	runErr := runNodeScript(t, node, dir, "aisdk.mjs", &out, env.URL, "assistant")
	if len(out.Results) != 3 {
		t.Fatalf("want 3 cases, got %+v", out.Results)
	}
	for _, r := range out.Results {
		if !r.OK {
			t.Errorf("%s: %s", r.Name, r.Error)
		}
	}
	if runErr != nil && !t.Failed() {
		t.Fatal(runErr)
	}

	// Two model steps per case (the tool step, then the answer).
	bodies := upstreamBodies(t, env)
	if len(bodies) != 6 {
		t.Fatalf("want 6 upstream steps, got %d", len(bodies))
	}
	for i, b := range bodies {
		rf, _ := b["response_format"].(map[string]any)
		want := "json_schema"
		if i >= 4 { // Output.json()
			want = "json_object"
		}
		if rf["type"] != want {
			t.Fatalf("upstream step %d: response_format %v, want type %s", i+1, b["response_format"], want)
		}
		if want == "json_schema" {
			js, _ := rf["json_schema"].(map[string]any)
			sch, _ := js["schema"].(map[string]any)
			if props, _ := sch["properties"].(map[string]any); props["city"] == nil || props["temp_c"] == nil {
				t.Fatalf("upstream step %d: schema %v", i+1, js["schema"])
			}
		}
	}
}
