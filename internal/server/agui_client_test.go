package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/stacktest"
)

// aguiScript is DefaultScript plus a rule that pauses on two refunds at once
// (for partial resumes).
func aguiScript(t *testing.T) string {
	t.Helper()
	var rules []json.RawMessage
	if err := json.Unmarshal([]byte(stacktest.DefaultScript), &rules); err != nil {
		t.Fatal(err)
	}
	two := json.RawMessage(`{"when":{"lastUser":"two refunds","afterTool":false},"reply":{"toolCalls":[
	 {"name":"refund","arguments":{"orderId":"ord_1","amount":1}},
	 {"name":"refund","arguments":{"orderId":"ord_2","amount":2}}]}}`)
	b, err := json.Marshal(append([]json.RawMessage{two}, rules...))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// repoRoot finds the module root from the test's working directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test directory")
		}
		dir = parent
	}
}

// TestAGUIOfficialClient runs tests/agui/conformance.mjs, which drives this
// server with the official @ag-ui/client@1.0.0 HttpAgent: every case must
// pass the client's schema enforcement, ordering verification and its
// reducer, print no warning beyond the stripped interrupt extensions, and
// agree with the server's stored threads.
func TestAGUIOfficialClient(t *testing.T) {
	node, nerr := exec.LookPath("node")
	npm, perr := exec.LookPath("npm")
	if nerr != nil || perr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("node and npm are required in CI (node: %v, npm: %v)", nerr, perr)
		}
		t.Skip("node/npm not installed; the AG-UI client conformance test needs them")
	}
	dir := filepath.Join(repoRoot(t), "tests", "agui")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@ag-ui", "client", "package.json")); err != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
		}
	}

	env := stacktest.New(t, stacktest.Options{Script: aguiScript(t)})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(dir, "conformance.mjs"), env.URL)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		// This variable would hide the client's deviation warnings.
		if !strings.HasPrefix(kv, "SUPPRESS_TRANSFORMATION_WARNINGS=") && !strings.HasPrefix(kv, "AGUI_CASES=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()

	var out struct {
		Results []struct {
			Name     string   `json:"name"`
			OK       bool     `json:"ok"`
			Error    string   `json:"error"`
			Warnings []string `json:"warnings"`
		} `json:"results"`
		RefundRuns int `json:"refundRuns"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("conformance script output is not JSON (%v, exit %v):\nstdout: %s\nstderr: %s", err, runErr, stdout.String(), stderr.String())
	}
	if len(out.Results) < 15 {
		t.Fatalf("only %d cases ran", len(out.Results))
	}
	allOK := true
	for _, r := range out.Results {
		t.Run(r.Name, func(t *testing.T) {
			if !r.OK {
				allOK = false
				t.Errorf("%s\nconsole: %s", r.Error, strings.Join(r.Warnings, "\n"))
			}
		})
	}
	if runErr != nil && allOK {
		t.Fatalf("conformance script failed: %v\nstderr: %s", runErr, stderr.String())
	}
	if stderr.Len() > 0 {
		t.Errorf("unexpected stderr from the client: %s", stderr.String())
	}
	if got := env.Calls.Get("refund"); got != out.RefundRuns {
		t.Errorf("refund ran %d times; the approved resumes account for %d", got, out.RefundRuns)
	}
}
