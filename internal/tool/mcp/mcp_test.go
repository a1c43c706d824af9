package mcp

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/redact"
	"github.com/stackbone/stackbone/internal/tool"
)

func TestToolName(t *testing.T) {
	for _, c := range []struct{ server, tool, want string }{
		{"github", "search_issues", "github_search_issues"},
		{"fs", "read.file", "fs_read_file"},
		{"x", "héllo wörld/1", "x_h_llo_w_rld_1"},
		{"s", strings.Repeat("a", 80), "s_" + strings.Repeat("a", 62)},
	} {
		if got := ToolName(c.server, c.tool); got != c.want {
			t.Errorf("ToolName(%q, %q) = %q, want %q", c.server, c.tool, got, c.want)
		}
	}
}

func TestNeedsApproval(t *testing.T) {
	f, tr := false, true
	ro := &sdk.Tool{Name: "ro", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}}
	safe := &sdk.Tool{Name: "safe", Annotations: &sdk.ToolAnnotations{DestructiveHint: &f}}
	destr := &sdk.Tool{Name: "destr", Annotations: &sdk.ToolAnnotations{DestructiveHint: &tr}}
	bare := &sdk.Tool{Name: "bare"}
	empty := &sdk.Tool{Name: "empty", Annotations: &sdk.ToolAnnotations{}}
	custom := &tool.Approval{AllowedDecisions: []tool.Decision{tool.Approve}}
	cases := []struct {
		policy agent.MCPApproval
		tool   *sdk.Tool
		want   bool
	}{
		{agent.MCPApproval{}, ro, false},
		{agent.MCPApproval{}, safe, false},
		{agent.MCPApproval{}, destr, true},
		{agent.MCPApproval{}, bare, true},
		{agent.MCPApproval{}, empty, true},
		{agent.MCPApproval{Mode: agent.MCPApprovalNever}, destr, false},
		{agent.MCPApproval{Mode: agent.MCPApprovalAlways}, ro, true},
		{agent.MCPApproval{Tools: map[string]*tool.Approval{"destr": nil}}, destr, false},
		{agent.MCPApproval{Tools: map[string]*tool.Approval{"ro": custom}}, ro, true},
		{agent.MCPApproval{Tools: map[string]*tool.Approval{"other": nil}}, bare, true},
	}
	for i, c := range cases {
		if got := needsApproval(c.policy, c.tool) != nil; got != c.want {
			t.Errorf("case %d (%s, %+v): needs approval %v, want %v", i, c.tool.Name, c.policy, got, c.want)
		}
	}
	if needsApproval(agent.MCPApproval{Tools: map[string]*tool.Approval{"ro": custom}}, ro) != custom {
		t.Error("the object form's approval is not used as given")
	}
}

func TestStartRefusesBadServers(t *testing.T) {
	spec := &agent.Spec{Name: "a", MCPServers: []agent.MCPServer{{Name: "bad name", Command: "x"}, {Name: "both", Command: "x", URL: "http://x"}}}
	err := Start(context.Background(), []*agent.Spec{spec}, Options{})
	if err == nil || !strings.Contains(err.Error(), `MCP server name "bad name"`) || !strings.Contains(err.Error(), `"both" needs either a URL or a command`) {
		t.Fatalf("error %v", err)
	}
}

// TestElicitationRoutesOnlyToItsCall: an elicitation request linked to a
// call goes to that call; an unlinked one goes to the one call in flight,
// but not while a call that ended without its result (tenant A's, timed
// out, its server still working) is recent: its question must not reach
// tenant B's call.
func TestElicitationRoutesOnlyToItsCall(t *testing.T) {
	s := &server{}
	a, b := &tool.Call{ThreadID: "tenant-a"}, &tool.Call{ThreadID: "tenant-b"}
	unlinked := context.Background()

	doneA := s.inFlight(context.Background(), a)
	if c, _ := s.callOf(unlinked); c != a {
		t.Fatalf("the one call in flight: got %v", c)
	}
	doneB := s.inFlight(context.Background(), b)
	if c, _ := s.callOf(unlinked); c != nil {
		t.Fatalf("two calls in flight: ambiguous, got %v", c)
	}
	doneA(true) // A timed out; its server goes on
	if c, _ := s.callOf(unlinked); c != nil {
		t.Fatalf("an unlinked request after A was abandoned went to %v", c.ThreadID)
	}
	if c, _ := s.callOf(context.WithValue(unlinked, callKey{}, b)); c != b {
		t.Fatalf("a request linked to B: got %v", c)
	}
	doneB(false)
	s.askMu.Lock()
	s.abandoned[0] = time.Now().Add(-abandonedFor - time.Second)
	s.askMu.Unlock()
	doneC := s.inFlight(context.Background(), b)
	defer doneC(false)
	if c, _ := s.callOf(unlinked); c != b {
		t.Fatalf("long after the abandoned call, the one call in flight: got %v", c)
	}
}

// TestElicitationQuestionIsRedacted: the message and the requested schema
// of an elicitation go through the agent's secrets before they are put to
// a human (decision rows, Studio, the relayed client).
func TestElicitationQuestionIsRedacted(t *testing.T) {
	const secret = "elicit-sec-4Fq9Zt2Wm"
	s := &server{src: &source{red: redact.New(secret)}, log: slog.New(slog.DiscardHandler)}
	var asked tool.Question
	c := &tool.Call{Ask: func(_ context.Context, q tool.Question) (tool.Answer, error) {
		asked = q
		return tool.Answer{Accepted: false}, nil
	}}
	ctx := context.WithValue(context.Background(), callKey{}, c)
	_, err := s.elicit(ctx, &sdk.ElicitRequest{Params: &sdk.ElicitParams{Message: "Your key is " + secret + ", confirm?",
		RequestedSchema: map[string]any{"type": "object", "description": "key " + secret,
			"properties": map[string]any{"ok": map[string]any{"type": "boolean", "default": secret}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(asked.Message, secret) || !strings.Contains(asked.Message, redact.Placeholder) {
		t.Errorf("message %q", asked.Message)
	}
	if strings.Contains(string(asked.Schema), secret) || !json.Valid(asked.Schema) || !strings.Contains(string(asked.Schema), `"ok"`) {
		t.Errorf("schema %s", asked.Schema)
	}
}
