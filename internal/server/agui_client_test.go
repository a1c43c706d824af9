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

	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/wire/agui"
)

// aguiSubagentRules make "research …" hand work to the general-purpose
// subagent, which checks the weather before answering, and "delegate the
// refund" hand it a refund, which pauses inside the subagent.
const aguiSubagentRules = `[
 {"when":{"lastTool":"edit_file","lastUser":"plan and take notes"},"reply":{"text":"Notes are up to date."}},
 {"when":{"lastTool":"write_file","lastUser":"plan and take notes"},"reply":{"toolCalls":[{"name":"edit_file","arguments":{"file_path":"/notes/plan.md","old_string":"step one","new_string":"step one done"}}]}},
 {"when":{"lastUser":"plan and take notes","afterTool":false},"reply":{"toolCalls":[
   {"name":"write_todos","arguments":{"todos":[{"content":"Write the plan","status":"completed"},{"content":"Review it","status":"pending"}]}},
   {"name":"write_file","arguments":{"file_path":"/notes/plan.md","content":"step one\nstep two"}}]}},
 {"when":{"lastTool":"task"},"reply":{"text":"Summary: {{lastTool}}"}},
 {"when":{"lastUser":"delegate the refund","afterTool":false},"reply":{"toolCalls":[{"name":"task","arguments":{"description":"handle a refund for ord_42","subagent_type":"general-purpose"}}]}},
 {"when":{"lastUser":"research","afterTool":false},"reply":{"text":"Delegating.","toolCalls":[{"name":"task","arguments":{"description":"dig up facts about Paris","subagent_type":"general-purpose"}}]}},
 {"when":{"lastUser":"dig up facts","afterTool":false},"reply":{"text":"Looking it up.","toolCalls":[{"name":"get_weather","arguments":{"city":"Paris"}}]}}
]`

// aguiScript is DefaultScript plus rules that pause on two refunds at once
// (for partial resumes) and run a subagent.
func aguiScript(t *testing.T) string {
	t.Helper()
	var rules []json.RawMessage
	if err := json.Unmarshal([]byte(stacktest.DefaultScript), &rules); err != nil {
		t.Fatal(err)
	}
	two := json.RawMessage(`{"when":{"lastUser":"two refunds","afterTool":false},"reply":{"toolCalls":[
	 {"name":"refund","arguments":{"orderId":"ord_1","amount":1}},
	 {"name":"refund","arguments":{"orderId":"ord_2","amount":2}}]}}`)
	var sub []json.RawMessage
	if err := json.Unmarshal([]byte(aguiSubagentRules), &sub); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(append(append([]json.RawMessage{two}, sub...), rules...))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sseBuffer collects the frames an agui.Stream writes.
type sseBuffer struct{ bytes.Buffer }

func (b *sseBuffer) Data(p []byte) error {
	b.WriteString("data: ")
	b.Write(p)
	b.WriteString("\n\n")
	return nil
}

func (b *sseBuffer) Event(string, []byte) error { panic("an agui.Stream writes no named events") }

func (b *sseBuffer) Comment(string) error { return nil }

// writeAGUIFixtures encodes event sequences the engine does not produce
// today (subagents, steps, failures with work still open) with the wire's
// encoder, as it writes them for a client of the given protocolVersion, for
// the official client to check.
func writeAGUIFixtures(t *testing.T, path, protocolVersion string) {
	t.Helper()
	sub := "sub_1"
	seqs := map[string][]event.Event{
		"subagentSteps": {
			{Type: event.RunStarted},
			{Type: event.StepStarted, StepName: "plan"},
			{Type: event.SubagentStarted, SubagentRunID: sub, Subagent: "researcher", ParentToolCallID: "task_1"},
			{Type: event.StepStarted, StepName: "researcher", SubagentRunID: sub},
			{Type: event.TextStart, MessageID: "m1", SubagentRunID: sub},
			{Type: event.TextDelta, MessageID: "m1", Delta: "Looking.", SubagentRunID: sub},
			{Type: event.TextEnd, MessageID: "m1", SubagentRunID: sub},
			{Type: event.ToolCallStart, MessageID: "m1", ToolCallID: "c1", ToolName: "search", SubagentRunID: sub},
			{Type: event.ToolCallArgs, MessageID: "m1", ToolCallID: "c1", Delta: `{"q":"go"}`, SubagentRunID: sub},
			{Type: event.ToolCallEnd, MessageID: "m1", ToolCallID: "c1", SubagentRunID: sub},
			{Type: event.ToolResult, MessageID: "tm1", ToolCallID: "c1", Content: "found", SubagentRunID: sub},
			{Type: event.SubagentFinished, SubagentRunID: sub, Message: "success"},
			{Type: event.StepFinished, StepName: "researcher", SubagentRunID: sub},
			{Type: event.StepFinished, StepName: "plan"},
			{Type: event.StateSnapshot, Snapshot: json.RawMessage(`{"todos":[{"done":false}]}`)},
			{Type: event.StateDelta, Patch: json.RawMessage(`[{"op":"replace","path":"/todos/0/done","value":true}]`)},
			{Type: event.RunFinished, Outcome: &event.Outcome{Type: event.Success}},
		},
		"errorWithWorkOpen": {
			{Type: event.RunStarted},
			{Type: event.StepStarted, StepName: "plan"},
			{Type: event.SubagentStarted, SubagentRunID: sub, Subagent: "researcher"},
			{Type: event.TextStart, MessageID: "m1", SubagentRunID: sub},
			{Type: event.TextDelta, MessageID: "m1", Delta: "Half", SubagentRunID: sub},
			{Type: event.ToolCallStart, MessageID: "m2", ToolCallID: "c2", ToolName: "search"},
			{Type: event.RunError, Code: "upstream_error", Message: "The model provider returned an error."},
		},
		"finishWithWorkOpen": {
			{Type: event.RunStarted},
			{Type: event.TextDelta, MessageID: "m1", Delta: "Calling."},
			{Type: event.ToolCallStart, MessageID: "m1", ToolCallID: "c1", ToolName: "open_modal"},
			{Type: event.ToolCallArgs, MessageID: "m1", ToolCallID: "c1", Delta: "{}"},
			{Type: event.RunFinished, Outcome: &event.Outcome{Type: event.Success, PendingCalls: []message.ToolCall{{ID: "c1", Name: "open_modal"}}}},
		},
	}
	out := map[string]string{}
	for name, seq := range seqs {
		var buf sseBuffer
		st := agui.NewStream(&buf, "t-fixture", "r-fixture", nil).ForClient(&agui.RunAgentInput{ProtocolVersion: protocolVersion})
		for _, e := range seq {
			if err := st.Write(e); err != nil {
				t.Fatal(err)
			}
		}
		out[name] = buf.String()
	}
	b, _ := json.Marshal(out)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func repoRoot(t *testing.T) string { return stacktest.RepoRoot(t) }

// TestAGUIOfficialClient runs tests/agui/conformance.mjs, which drives this
// server with the official @ag-ui/client HttpAgent, once with 1.0.0 and once
// with 0.0.59 (the version CopilotKit 1.x pins, plus a headless
// @copilotkit/core 1.75 case): every case must pass the
// client's schema enforcement, ordering verification and its reducer, print
// no warning (beyond, on 1.0, the stripped top-level interrupt extensions),
// and agree with the server's stored threads.
func TestAGUIOfficialClient(t *testing.T) {
	t.Parallel()
	node, dir := nodeFixture(t, "agui", filepath.Join("@ag-ui", "client", "package.json"),
		filepath.Join("agui-client-0059", "package.json"), filepath.Join("@copilotkit", "core", "package.json"))

	for _, c := range []struct{ client, protocolVersion string }{{"1.0.0", "1.0"}, {"0.0.59", ""}} {
		t.Run(c.client, func(t *testing.T) {
			t.Parallel()
			runAGUIConformance(t, node, dir, c.client, c.protocolVersion)
		})
	}
}

// runAGUIConformance runs the conformance script with one client version
// against a fresh stack.
func runAGUIConformance(t *testing.T, node, dir, client, protocolVersion string) {
	env := stacktest.New(t, stacktest.Options{Script: aguiScript(t)})
	fixtures := filepath.Join(t.TempDir(), "fixtures.json")
	writeAGUIFixtures(t, fixtures, protocolVersion)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(dir, "conformance.mjs"), env.URL, fixtures)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		// This variable would hide the client's deviation warnings.
		if !strings.HasPrefix(kv, "SUPPRESS_TRANSFORMATION_WARNINGS=") && !strings.HasPrefix(kv, "AGUI_CASES=") && !strings.HasPrefix(kv, "AGUI_CLIENT=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "AGUI_CLIENT="+client)
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
