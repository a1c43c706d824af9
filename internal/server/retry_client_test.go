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

// nodeFixture returns node and a Node fixture folder under tests/, running
// `npm ci` there when the package probe (a path under node_modules) is
// missing. Without node or npm the test is skipped, except under CI=true,
// where it fails.
func nodeFixture(t *testing.T, folder, probe string) (node, dir string) {
	t.Helper()
	node, nerr := exec.LookPath("node")
	npm, perr := exec.LookPath("npm")
	if nerr != nil || perr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("node and npm are required in CI (node: %v, npm: %v)", nerr, perr)
		}
		t.Skipf("node/npm not installed; tests/%s needs them", folder)
	}
	dir = filepath.Join(repoRoot(t), "tests", folder)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", probe)); err != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
		}
	}
	return node, dir
}

// TestVercelAISDKRetryRunsToolOnce runs tests/retry/retry.mjs: the Vercel
// AI SDK's generateText with its default retries (it retries every 5xx,
// x-should-retry notwithstanding) on a stateless turn whose upstream
// answers 400 after the server tool ran. The SDK tries three times; the
// tool must run once, and each retry asks the model only for the failed step.
func TestVercelAISDKRetryRunsToolOnce(t *testing.T) {
	node, dir := nodeFixture(t, "retry", filepath.Join("ai", "package.json"))
	env := stacktest.New(t, stacktest.Options{Script: failAfterToolScript})

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(dir, "retry.mjs"), env.URL)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var out struct {
		OK       bool   `json:"ok"`
		Error    string `json:"error"`
		Reason   string `json:"reason"`
		Attempts int    `json:"attempts"`
		Statuses []int  `json:"statuses"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("retry.mjs output is not JSON (%v, exit %v):\nstdout: %s\nstderr: %s", err, runErr, stdout.String(), stderr.String())
	}
	if out.OK || out.Attempts != 3 {
		t.Fatalf("want the SDK to give up after 3 attempts on the failing upstream, got %+v", out)
	}
	for _, s := range out.Statuses {
		if s != 502 {
			t.Fatalf("every attempt must be a 502, got %v", out.Statuses)
		}
	}
	if n := env.Calls.Get("get_weather"); n != 1 {
		t.Fatalf("the SDK's retries ran the tool %d times, want once", n)
	}
	// One request for the tool step, then one per attempt for the step
	// after it, each continuing from the recorded tool result.
	reqs := env.Upstream.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d model requests, want 4 (the tool step once, the failing step per attempt)", len(reqs))
	}
	for _, r := range reqs[1:] {
		msgs := r.Request.Messages
		if len(msgs) != 3 || len(msgs[1].ToolCalls) != 1 || msgs[2].ToolName != "get_weather" {
			t.Fatalf("a retry asked the model for the completed step again: %+v", msgs)
		}
	}
}
