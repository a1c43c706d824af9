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

	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/stacktest"
)

// mcpFixture is tests/mcp, with the TypeScript SDK installed.
func mcpFixture(t *testing.T) (node, dir string) {
	t.Helper()
	return stacktest.NodeFixture(t, "mcp", "@modelcontextprotocol/sdk/package.json")
}

// TestMCPTypeScriptClient drives /mcp with the official TypeScript SDK's
// Client and StreamableHTTPClientTransport (tests/mcp/client.mjs), the
// client most MCP hosts are built on.
func TestMCPTypeScriptClient(t *testing.T) {
	node, dir := mcpFixture(t)
	env := stacktest.New(t, stacktest.Options{Mode: config.Start, Keys: []config.Key{{Tenant: "acme", Secret: "sk-acme"}}})

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(dir, "client.mjs"), env.URL, "sk-acme")
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var out struct {
		List struct {
			Names     []string `json:"names"`
			Assistant struct {
				Description string          `json:"description"`
				InputSchema json.RawMessage `json:"inputSchema"`
			} `json:"assistant"`
		} `json:"list"`
		Text struct {
			Text    string `json:"text"`
			IsError bool   `json:"isError"`
		} `json:"text"`
		ElicitAccepted struct {
			Text  string `json:"text"`
			Forms []struct {
				Message         string          `json:"message"`
				RequestedSchema json.RawMessage `json:"requestedSchema"`
			} `json:"forms"`
		} `json:"elicitAccepted"`
		NoElicitation struct {
			First         string `json:"first"`
			ID            string `json:"id"`
			ApproveStatus int    `json:"approveStatus"`
			Next          string `json:"next"`
			NextContent   int    `json:"nextContent"`
		} `json:"noElicitation"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil || runErr != nil {
		t.Fatalf("client.mjs: %v / %v\nstdout: %s\nstderr: %s", err, runErr, stdout.String(), stderr.String())
	}

	if strings.Join(out.List.Names, ",") != "assistant,other" || !strings.HasPrefix(out.List.Assistant.Description, "You are a test assistant.") ||
		!strings.Contains(string(out.List.Assistant.InputSchema), `"session"`) {
		t.Errorf("list = %+v", out.List)
	}
	if out.Text.Text != "echo: hello from ts" || out.Text.IsError {
		t.Errorf("text = %+v", out.Text)
	}

	ea := out.ElicitAccepted
	if !strings.HasPrefix(ea.Text, `Refund result: {"refunded":19.99`) || len(ea.Forms) != 1 ||
		!strings.Contains(ea.Forms[0].Message, "Refund order ord_42 for 19.99") || !strings.Contains(string(ea.Forms[0].RequestedSchema), `"approve"`) {
		t.Errorf("elicitation accepted = %+v", ea)
	}
	if its := decisions(t, env, "acme", "ts-accept"); len(its) != 1 || its[0].Decision == nil || its[0].Decision.Via != "mcp" ||
		its[0].Decision.ClaimedVia != "ts-test" {
		t.Errorf("ts-accept decisions = %+v", its)
	}

	ne := out.NoElicitation
	if ne.ID == "" || !strings.Contains(ne.First, "stackbone hitl approve "+ne.ID+" --yes") || ne.ApproveStatus != 200 {
		t.Errorf("no elicitation, first call = %+v", ne)
	}
	if ne.NextContent != 2 || !strings.Contains(ne.Next, `Refund result: {"refunded":19.99`) || !strings.HasSuffix(ne.Next, "echo: thanks") {
		t.Errorf("no elicitation, next call = %q", ne.Next)
	}
	if n := env.Calls.Get("refund"); n != 2 {
		t.Errorf("refund ran %d times, want 2 (once per approved turn)", n)
	}
}
