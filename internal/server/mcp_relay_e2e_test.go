package server_test

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

// A question an agent's MCP server asks during a tool call (elicitation),
// in a turn an MCP client with elicitation started on /mcp, reaches that
// client as a form with the server's message and schema; its answer goes
// back to the server and the call completes, with a session or without one,
// and no pending decision is left. A declined form declines.
func TestMCPQuestionRelayedToTheMCPClient(t *testing.T) {
	t.Parallel()
	fx := newMCPFixture(t)
	env := stacktest.New(t, stacktest.Options{Script: mcpScript, Agents: mcpAgent(fx.stdio())})

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, fx.node, filepath.Join(fx.dir, "relay.mjs"), env.URL)
	cmd.Dir = fx.dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	type result struct {
		Forms []struct {
			Message         string         `json:"message"`
			RequestedSchema map[string]any `json:"requestedSchema"`
		} `json:"forms"`
		Text  string `json:"text"`
		Error string `json:"error"`
	}
	var out map[string]result
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil || runErr != nil {
		t.Fatalf("relay.mjs: %v / %v\nstdout: %s\nstderr: %s", err, runErr, stdout.String(), stderr.String())
	}
	for name, want := range map[string]string{
		"session":   `Tool said: elicitation: accept {"confirm":true}`,
		"stateless": `Tool said: elicitation: accept {"confirm":true}`,
		"declined":  `Tool said: elicitation: decline null`,
	} {
		got := out[name]
		if got.Error != "" || got.Text != want {
			t.Errorf("%s: answer %q (error %q), want %q", name, got.Text, got.Error, want)
		}
		if len(got.Forms) != 1 || !strings.Contains(got.Forms[0].Message, "Confirm x?") ||
			got.Forms[0].RequestedSchema["properties"].(map[string]any)["confirm"] == nil {
			t.Errorf("%s: forms %+v; want the server's question", name, got.Forms)
		}
	}
	for _, sess := range []string{"relay-1", "relay-2"} {
		if p := call(t, "GET", env.URL+"/v1/hitl?thread="+sess, ""); p.status != 200 || strings.Contains(string(p.body), `"id"`) {
			t.Errorf("%s: pending decisions %d %s; want none", sess, p.status, p.body)
		}
	}
}
