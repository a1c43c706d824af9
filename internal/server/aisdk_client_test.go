package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/stacktest"
)

// TestVercelAISDKOutputObject runs tests/clients/aisdk.mjs: the Vercel AI
// SDK (ai@7, @ai-sdk/openai `.chat()`) asks an agent for Output.object /
// Output.json with generateText and streamText. Each case must parse the
// answer, and every upstream step must carry the response_format the SDK
// sent (it was dropped, and the SDK failed with NoObjectGeneratedError).
func TestVercelAISDKOutputObject(t *testing.T) {
	node, nerr := exec.LookPath("node")
	npm, perr := exec.LookPath("npm")
	if nerr != nil || perr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("node and npm are required in CI (node: %v, npm: %v)", nerr, perr)
		}
		t.Skip("node/npm not installed; the AI SDK client test needs them")
	}
	dir := filepath.Join(repoRoot(t), "tests", "clients")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "ai", "package.json")); err != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
		}
	}

	env := stacktest.New(t, stacktest.Options{Script: formatScript})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(dir, "aisdk.mjs"), env.URL, "assistant")
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var out struct {
		Results []struct {
			Name  string `json:"name"`
			OK    bool   `json:"ok"`
			Error string `json:"error"`
		} `json:"results"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("aisdk.mjs output is not JSON (%v, exit %v):\nstdout: %s\nstderr: %s", err, runErr, stdout.String(), stderr.String())
	}
	if len(out.Results) != 3 {
		t.Fatalf("want 3 cases, got %+v", out.Results)
	}
	for _, r := range out.Results {
		if !r.OK {
			t.Errorf("%s: %s", r.Name, r.Error)
		}
	}
	if runErr != nil && !t.Failed() {
		t.Fatalf("aisdk.mjs: %v\n%s", runErr, stderr.String())
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
