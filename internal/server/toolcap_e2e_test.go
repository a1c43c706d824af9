package server_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/tool"
)

// capScript calls the fixture's 4 MB tool, or the agent's own one.
const capScript = `[
 {"when": {"afterTool": true}, "reply": {"text": "done"}},
 {"when": {"lastUser": "call big"}, "reply": {"toolCalls": [{"name": "fx_big", "arguments": {}}]}},
 {"when": {"lastUser": "call dump"}, "reply": {"toolCalls": [{"name": "dump", "arguments": {}}]}},
 {"reply": {"text": "echo: {{lastUser}}"}}
]`

// lastToolResult is the content of the tool message in the upstream's
// latest request.
func lastToolResult(t *testing.T, env *stacktest.Env) string {
	t.Helper()
	last, ok := env.Upstream.Last()
	if !ok {
		t.Fatal("the upstream got no request")
	}
	for _, m := range last.Request.Messages {
		if m.Role == message.Tool {
			return m.Content
		}
	}
	t.Fatalf("no tool message in the model's request: %s", last.Body)
	return ""
}

// A 4 MB tool result (an MCP server's, an agent's own tool's) reaches the
// model cut to the cap, 100,000 bytes by default, with a note saying so; an
// MCP server's maxResultBytes and an agent's maxToolResultBytes set it.
func TestToolResultsAreCapped(t *testing.T) {
	t.Parallel()
	fx := newMCPFixture(t)
	dump := &tool.Tool{Name: "dump", Description: "Dumps a log", Parameters: []byte(`{"type":"object"}`),
		Execute: func(context.Context, tool.Call) (tool.Result, error) {
			return tool.Result{Content: strings.Repeat("é", 2<<20)}, nil // 4 MB, two bytes a rune
		}}
	for _, tc := range []struct {
		name      string
		agentCap  int
		serverCap int
		prompt    string
		want      int
	}{
		{"mcp default", 0, 0, "call big", agent.DefaultMaxToolResultBytes},
		{"mcp server cap", 5000, 2000, "call big", 2000},
		{"own tool default", 0, 0, "call dump", agent.DefaultMaxToolResultBytes},
		{"own tool agent cap", 3001, 0, "call dump", 3000}, // cut at a rune boundary
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := fx.stdio()
			srv.MaxResultBytes = tc.serverCap
			env := stacktest.New(t, stacktest.Options{Script: capScript, Agents: func(*stacktest.Env) []*agent.Spec {
				return []*agent.Spec{{Name: "assistant", Model: "openai/test-model", Instructions: "Use the tools.",
					Tools: []*tool.Tool{dump}, MCPServers: []agent.MCPServer{srv}, MaxToolResultBytes: tc.agentCap}}
			}})
			if got := askMCP(t, env, "cap-"+strings.ReplaceAll(tc.name, " ", "-"), tc.prompt).Choices[0].Message.Content; got != "done" {
				t.Fatalf("turn answered %q", got)
			}
			got := lastToolResult(t, env)
			body, note, ok := strings.Cut(got, "\n\n[Stackbone: this tool result was cut to its first ")
			if !ok || len(body) != tc.want || !strings.Contains(note, "of 4194304 bytes") {
				t.Fatalf("the model got %d bytes (note %q); want the first %d and a note", len(body), note, tc.want)
			}
		})
	}
}
