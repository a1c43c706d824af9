package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/stacktest"
)

// A model that says nothing for longer than the client's request timeout
// does not time the call out: while the turn waits on it, /mcp sends a
// progress notification at each keepalive, and the TypeScript SDK's client
// (resetTimeoutOnProgress, as hosts set for long calls) keeps waiting.
func TestMCPKeepAliveProgressWhileTheModelIsSlow(t *testing.T) {
	node, dir := mcpFixture(t)
	script := strings.Replace(stacktest.DefaultScript, "[", `[
 {"when": {"lastUser": "slow"}, "reply": {"text": "finally", "delayMs": 2500}},`, 1)
	env := stacktest.New(t, stacktest.Options{Script: script, KeepAliveInterval: 200 * time.Millisecond})

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(dir, "keepalive.mjs"), env.URL, "1000")
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var out struct {
		Text     string   `json:"text"`
		Error    string   `json:"error"`
		Progress []string `json:"progress"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil || runErr != nil {
		t.Fatalf("keepalive.mjs: %v / %v\nstdout: %s\nstderr: %s", err, runErr, stdout.String(), stderr.String())
	}
	if out.Error != "" || out.Text != "finally" {
		t.Fatalf("the call over a 1 s client timeout with a 2.5 s model: %+v", out)
	}
	if len(out.Progress) < 3 || out.Progress[0] != "Working" {
		t.Fatalf("progress notifications %q; want keepalives while the model was silent", out.Progress)
	}
}
