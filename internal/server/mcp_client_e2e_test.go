package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/agent/tsload"
	"github.com/stackbone/stackbone/internal/model/modeltest"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/tool"
	"github.com/stackbone/stackbone/internal/tool/mcp"
)

// mcpScript drives an agent whose MCP server is named fx (tests/mcp/server.mjs).
const mcpScript = `[
 {"when": {"afterTool": true}, "reply": {"text": "Tool said: {{lastTool}}"}},
 {"when": {"lastUser": "call lookup"}, "reply": {"toolCalls": [{"name": "fx_lookup", "arguments": {"query": "abc"}}]}},
 {"when": {"lastUser": "call delete"}, "reply": {"toolCalls": [{"name": "fx_delete_record", "arguments": {"id": "r1"}}]}},
 {"when": {"lastUser": "call touch"}, "reply": {"toolCalls": [{"name": "fx_touch", "arguments": {"id": "r2"}}]}},
 {"when": {"lastUser": "call fail"}, "reply": {"toolCalls": [{"name": "fx_fail", "arguments": {"reason": "no"}}]}},
 {"when": {"lastUser": "call stats"}, "reply": {"toolCalls": [{"name": "fx_stats", "arguments": {}}]}},
 {"when": {"lastUser": "call enable"}, "reply": {"toolCalls": [{"name": "fx_enable_extra", "arguments": {}}]}},
 {"when": {"lastUser": "call elicit"}, "reply": {"toolCalls": [{"name": "fx_elicit_confirm", "arguments": {"what": "x"}}]}},
 {"when": {"lastUser": "call extra"}, "reply": {"toolCalls": [{"name": "fx_extra", "arguments": {}}]}},
 {"when": {"lastUser": "call snapshot"}, "reply": {"toolCalls": [{"name": "fx_snapshot", "arguments": {}}]}},
 {"reply": {"text": "echo: {{lastUser}}"}}
]`

// mcpFixture is tests/mcp/server.mjs: where it writes its calls and pid.
type mcpFixture struct {
	node, dir, script string
	calls, pid        string
}

func newMCPFixture(t *testing.T) *mcpFixture {
	t.Helper()
	node, dir := nodeFixture(t, "mcp", "@modelcontextprotocol/sdk/package.json", "zod/package.json")
	tmp := t.TempDir()
	return &mcpFixture{node: node, dir: dir, script: filepath.Join(dir, "server.mjs"),
		calls: filepath.Join(tmp, "calls.jsonl"), pid: filepath.Join(tmp, "pid")}
}

func (f *mcpFixture) env() map[string]string {
	return map[string]string{"MCP_CALLS_FILE": f.calls, "MCP_PID_FILE": f.pid}
}

// stdio is the fixture as a stdio server named fx.
func (f *mcpFixture) stdio() agent.MCPServer {
	return agent.MCPServer{Name: "fx", Command: f.node, Args: []string{f.script}, Env: f.env()}
}

// serveHTTP runs the fixture over streamable HTTP on port (0: any) until
// the test ends and returns its /mcp URL.
func (f *mcpFixture) serveHTTP(t *testing.T, port int, extraEnv ...string) string {
	url, _ := f.startHTTP(t, port, extraEnv...)
	return url
}

// startHTTP is serveHTTP that also returns the process.
func (f *mcpFixture) startHTTP(t *testing.T, port int, extraEnv ...string) (string, *exec.Cmd) {
	t.Helper()
	cmd := exec.Command(f.node, f.script, "--http", strconv.Itoa(port))
	cmd.Dir = f.dir
	cmd.Env = os.Environ()
	for k, v := range f.env() {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Env = append(cmd.Env, extraEnv...)
	listening := startNodeServer(t, cmd, "MCP HTTP fixture")
	return "http://127.0.0.1:" + strconv.Itoa(listening) + "/mcp", cmd
}

// ran returns the fixture's tools called so far, in order.
func (f *mcpFixture) ran(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(f.calls)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var c struct{ Tool string }
		if err := json.Unmarshal([]byte(l), &c); err != nil {
			t.Fatalf("calls file line %q: %v", l, err)
		}
		out = append(out, c.Tool)
	}
	return out
}

func (f *mcpFixture) count(t *testing.T, name string) int {
	n := 0
	for _, c := range f.ran(t) {
		if c == name {
			n++
		}
	}
	return n
}

func mcpAgent(servers ...agent.MCPServer) func(*stacktest.Env) []*agent.Spec {
	return func(*stacktest.Env) []*agent.Spec {
		return []*agent.Spec{{Name: "assistant", Model: "openai/test-model", Instructions: "Use the tools.", MCPServers: servers}}
	}
}

type agentView struct {
	Name  string `json:"name"`
	Model string `json:"model"`
	Tools []struct {
		Name          string `json:"name"`
		Source        string `json:"source"`
		MCPServer     string `json:"mcpServer"`
		NeedsApproval bool   `json:"needsApproval"`
	} `json:"tools"`
	MCPServers []agent.MCPServerStatus `json:"mcpServers"`
}

func getAgent(t *testing.T, env *stacktest.Env, name string) agentView {
	t.Helper()
	r := call(t, "GET", env.URL+"/v1/agents/"+name, "")
	if r.status != 200 {
		t.Fatalf("GET /v1/agents/%s: %d %s", name, r.status, r.body)
	}
	var v agentView
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// approvalOf returns whether the agent's tool needs approval, and whether
// the agent has it at all.
func (v agentView) approvalOf(name string) (needs, found bool) {
	for _, tl := range v.Tools {
		if tl.Name == name {
			return tl.NeedsApproval, true
		}
	}
	return false, false
}

func askMCP(t *testing.T, env *stacktest.Env, sess, prompt string) *openai.ChatCompletion {
	t.Helper()
	res, err := client(env, session(sess)).Chat.Completions.New(context.Background(), params(user(prompt)))
	if err != nil {
		t.Fatalf("%q: %v", prompt, err)
	}
	return res
}

// approveAndFinish checks a paused MCP call: nothing ran on the server, the
// next turn is a 409, and after approval over HTTP the call runs once and
// the turn ends with its result.
func approveAndFinish(t *testing.T, env *stacktest.Env, fx *mcpFixture, sess, prompt, remote, want string) {
	t.Helper()
	res := askMCP(t, env, sess, prompt)
	if ch := res.Choices[0]; ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 1 ||
		ch.Message.ToolCalls[0].Function.Name != "fx_"+remote {
		t.Fatalf("%q: want a paused fx_%s call, got %+v", prompt, remote, ch)
	}
	it := pendingOf(t, env, sess)
	if fx.count(t, remote) != 0 {
		t.Fatalf("%s ran on the MCP server before approval", remote)
	}
	raw := call(t, "POST", env.URL+"/v1/chat/completions", `{"model":"assistant","messages":[{"role":"user","content":"hello?"}]}`, "x-stackbone-session", sess)
	if raw.status != 409 || !strings.Contains(string(raw.body), `"code":"approval_pending"`) {
		t.Fatalf("next turn while paused: %d %s", raw.status, raw.body)
	}
	if r := call(t, "POST", env.URL+"/v1/hitl/"+it.ID+"/approve", ""); r.status != 200 {
		t.Fatalf("approve: %d %s", r.status, r.body)
	}
	waitIdle(t, env, sess)
	if n := fx.count(t, remote); n != 1 {
		t.Fatalf("%s ran %d times on the MCP server after approval; want 1", remote, n)
	}
	view := call(t, "GET", env.URL+"/v1/threads/"+sess, "")
	if !strings.Contains(string(view.body), "Tool said: "+want) {
		t.Fatalf("thread %s lacks %q: %s", sess, "Tool said: "+want, view.body)
	}
}

// TestMCPServerTools drives an agent's MCP server tools over both
// transports: the read-only call runs at once, the destructive and the
// unannotated ones pause for approval and run once after it, an isError
// result is a tool error, structured content reaches the model as JSON, and
// a tool added at run time (tools/list_changed) becomes callable.
func TestMCPServerTools(t *testing.T) {
	t.Parallel()
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			fx := newMCPFixture(t)
			srv := fx.stdio()
			if transport == "http" {
				srv = agent.MCPServer{Name: "fx", URL: fx.serveHTTP(t, 0, "MCP_REQUIRE_HEADER=X-Fixture-Key: k1"),
					Headers: map[string]string{"X-Fixture-Key": "k1"}}
			}
			env := stacktest.New(t, stacktest.Options{Script: mcpScript, Agents: mcpAgent(srv)})

			v := getAgent(t, env, "assistant")
			if len(v.MCPServers) != 1 || v.MCPServers[0].Status != mcp.StatusConnected || v.MCPServers[0].Transport != transport {
				t.Fatalf("MCP server status %+v", v.MCPServers)
			}
			for name, want := range map[string]bool{"fx_lookup": false, "fx_delete_record": true, "fx_touch": true, "fx_stats": false} {
				if needs, ok := v.approvalOf(name); !ok || needs != want {
					t.Fatalf("%s: listed %v, needs approval %v; want %v (%+v)", name, ok, needs, want, v.Tools)
				}
			}
			if _, ok := v.approvalOf("fx_extra"); ok {
				t.Fatal("fx_extra listed before the server added it")
			}

			// Read-only: runs at once, the model sees the text.
			if got := askMCP(t, env, "mcp-ro", "call lookup").Choices[0].Message.Content; got != "Tool said: found: abc" {
				t.Fatalf("lookup turn %q", got)
			}
			if fx.count(t, "lookup") != 1 {
				t.Fatalf("lookup calls %v", fx.ran(t))
			}
			// Destructive and unannotated: approval first.
			approveAndFinish(t, env, fx, "mcp-del", "call delete", "delete_record", "deleted r1")
			approveAndFinish(t, env, fx, "mcp-touch", "call touch", "touch", "touched r2")

			// isError: a tool error the model sees.
			if got := askMCP(t, env, "mcp-fail", "call fail").Choices[0].Message.Content; got != "Tool said: Error: cannot do it: no" {
				t.Fatalf("fail turn %q", got)
			}
			// Structured content as JSON.
			if got := askMCP(t, env, "mcp-stats", "call stats").Choices[0].Message.Content; got != `Tool said: {"ok":true,"records":42}` {
				t.Fatalf("stats turn %q", got)
			}

			// Elicitation: the server's question is a pending decision of the
			// waiting call (reason elicitation, the requested schema); an
			// answer that does not match it is refused; the answer goes back.
			answered := make(chan string, 1)
			go func() {
				res, err := client(env, session("mcp-elicit")).Chat.Completions.New(context.Background(), params(user("call elicit")))
				if err != nil {
					answered <- err.Error()
					return
				}
				answered <- res.Choices[0].Message.Content
			}()
			q := waitPending(t, env, "mcp-elicit")
			if q.Reason != store.ReasonElicitation || q.Description != "Confirm x?" || q.Tool != "fx_elicit_confirm" || !strings.Contains(string(q.ResponseSchema), `"confirm"`) {
				t.Fatalf("question %+v", q)
			}
			if r := call(t, "POST", env.URL+"/v1/hitl/"+q.ID+"/approve", `{"editedArgs":{"confirm":"yes"}}`); r.status != 400 {
				t.Fatalf("an answer off the schema: %d %s", r.status, r.body)
			}
			if r := call(t, "POST", env.URL+"/v1/hitl/"+q.ID+"/approve", `{"editedArgs":{"confirm":true}}`); r.status != 200 {
				t.Fatalf("answer: %d %s", r.status, r.body)
			}
			if got := <-answered; got != `Tool said: elicitation: accept {"confirm":true}` {
				t.Fatalf("elicit turn %q", got)
			}

			// tools/list_changed: the new tool joins the toolset.
			if got := askMCP(t, env, "mcp-enable", "call enable").Choices[0].Message.Content; got != "Tool said: extra enabled" {
				t.Fatalf("enable turn %q", got)
			}
			stacktest.WaitFor(t, "fx_extra to be listed", func() bool {
				_, ok := getAgent(t, env, "assistant").approvalOf("fx_extra")
				return ok
			})
			if got := askMCP(t, env, "mcp-extra", "call extra").Choices[0].Message.Content; got != "Tool said: extra ran" {
				t.Fatalf("extra turn %q", got)
			}
			last, _ := env.Upstream.Last()
			found := false
			for _, tl := range last.Request.Tools {
				found = found || tl.Name == "fx_extra"
			}
			if !found {
				t.Fatalf("the model was not offered fx_extra: %+v", last.Request.Tools)
			}
		})
	}
}

// TestMCPApprovalOverrides: approval 'never' runs a destructive tool at
// once; 'always' pauses a read-only one.
func TestMCPApprovalOverrides(t *testing.T) {
	t.Parallel()
	fx := newMCPFixture(t)
	never := fx.stdio()
	never.Approval.Mode = agent.MCPApprovalNever
	env := stacktest.New(t, stacktest.Options{Script: mcpScript, Agents: mcpAgent(never)})
	if got := askMCP(t, env, "ov-never", "call delete").Choices[0].Message.Content; got != "Tool said: deleted r1" {
		t.Fatalf("approval never: delete turn %q", got)
	}

	fx2 := newMCPFixture(t)
	always := fx2.stdio()
	always.Approval.Mode = agent.MCPApprovalAlways
	env2 := stacktest.New(t, stacktest.Options{Script: mcpScript, Agents: mcpAgent(always)})
	approveAndFinish(t, env2, fx2, "ov-always", "call lookup", "lookup", "found: abc")
}

// TestMCPServerDownAtStart: the agent loads without its server, says so,
// and gets the tools once the server comes up.
func TestMCPServerDownAtStart(t *testing.T) {
	t.Parallel()
	fx := newMCPFixture(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	url := "http://127.0.0.1:" + strconv.Itoa(port) + "/mcp"
	env := stacktest.New(t, stacktest.Options{Script: mcpScript, Agents: mcpAgent(agent.MCPServer{Name: "fx", URL: url})})

	if r := call(t, "GET", env.URL+"/v1/agents/nope", ""); r.status != 404 || !strings.Contains(string(r.body), "agent_not_found") {
		t.Fatalf("unknown agent: %d %s", r.status, r.body)
	}
	v := getAgent(t, env, "assistant")
	if len(v.MCPServers) != 1 || v.MCPServers[0].Status != mcp.StatusDown || v.MCPServers[0].Error == "" || len(v.MCPServers[0].Tools) != 0 {
		t.Fatalf("want fx down with an error and no tools, got %+v", v.MCPServers)
	}
	if _, ok := v.approvalOf("fx_lookup"); ok {
		t.Fatal("fx_lookup listed while its server is down")
	}
	if got := askMCP(t, env, "down-1", "hello").Choices[0].Message.Content; got != "echo: hello" {
		t.Fatalf("turn while the server is down %q", got)
	}
	last, _ := env.Upstream.Last()
	for _, tl := range last.Request.Tools {
		if strings.HasPrefix(tl.Name, "fx_") {
			t.Fatalf("the model was offered %s while its server is down", tl.Name)
		}
	}

	_, proc := fx.startHTTP(t, port)
	stacktest.WaitFor(t, "fx to connect", func() bool {
		s := getAgent(t, env, "assistant").MCPServers[0]
		return s.Status == mcp.StatusConnected && len(s.Tools) > 0
	})
	if got := askMCP(t, env, "down-2", "call lookup").Choices[0].Message.Content; got != "Tool said: found: abc" {
		t.Fatalf("lookup after the server came up %q", got)
	}

	// The server goes away: it is reported down and its tools leave; when
	// it is back, a new session brings them back.
	_ = proc.Process.Kill()
	_ = proc.Wait()
	stacktest.WaitFor(t, "fx to be reported down", func() bool {
		s := getAgent(t, env, "assistant").MCPServers[0]
		return s.Status == mcp.StatusDown && len(s.Tools) == 0
	})
	fx.serveHTTP(t, port)
	stacktest.WaitFor(t, "fx to reconnect", func() bool {
		return getAgent(t, env, "assistant").MCPServers[0].Status == mcp.StatusConnected
	})
	if got := askMCP(t, env, "down-3", "call lookup").Choices[0].Message.Content; got != "Tool said: found: abc" {
		t.Fatalf("lookup after the server came back %q", got)
	}
}

// TestMCPStdioServerRestarted: a stdio server that dies is started again
// and its tools work.
func TestMCPStdioServerRestarted(t *testing.T) {
	t.Parallel()
	fx := newMCPFixture(t)
	env := stacktest.New(t, stacktest.Options{Script: mcpScript, Agents: mcpAgent(fx.stdio())})
	readPid := func() int {
		b, _ := os.ReadFile(fx.pid)
		n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return n
	}
	first := readPid()
	if first == 0 {
		t.Fatal("the stdio server did not start")
	}
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	stacktest.WaitFor(t, "a new server process", func() bool {
		p := readPid()
		return p != 0 && p != first && getAgent(t, env, "assistant").MCPServers[0].Status == mcp.StatusConnected
	})
	if got := askMCP(t, env, "restart-1", "call lookup").Choices[0].Message.Content; got != "Tool said: found: abc" {
		t.Fatalf("lookup after the restart %q", got)
	}
	if !strings.Contains(env.Logs.String(), "MCP server connection lost") {
		t.Fatal("the lost connection was not logged")
	}
}

// TestMCPToolNameCollision: an MCP tool whose name is taken by the agent's
// own tool fails the load with a clear error.
func TestMCPToolNameCollision(t *testing.T) {
	t.Parallel()
	fx := newMCPFixture(t)
	spec := &agent.Spec{Name: "clash", Model: "openai/test-model", MCPServers: []agent.MCPServer{fx.stdio()},
		Tools: []*tool.Tool{{Name: "fx_lookup", Execute: func(context.Context, tool.Call) (tool.Result, error) { return tool.Result{}, nil }}}}
	err := mcp.Start(context.Background(), []*agent.Spec{spec}, mcp.Options{})
	var ce *mcp.CollisionError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), `fx_lookup (tool "lookup" of MCP server "fx") clashes with the agent's own tool`) {
		t.Fatalf("want a collision error, got %v", err)
	}
	if spec.Dynamic != nil {
		t.Fatal("a refused spec got MCP tools")
	}
}

// TestMCPServersFromAgentFile loads a .ts agent declaring a stdio MCP
// server with ${VAR} env references and an approval object: the overridden
// read-only tool pauses with the file's description, the destructive one
// set to false runs at once; a missing variable fails the load naming it.
func TestMCPServersFromAgentFile(t *testing.T) {
	t.Parallel()
	fx := newMCPFixture(t)
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "agents"), 0o755); err != nil {
		t.Fatal(err)
	}
	src := `import { defineDeepAgent } from 'stackbone';
export default defineDeepAgent({
  name: 'assistant',
  model: 'openai/test-model',
  mcpServers: {
    fx: {
      command: ` + strconv.Quote(fx.node) + `,
      args: [` + strconv.Quote(fx.script) + `],
      env: { MCP_CALLS_FILE: '${FX_CALLS}' },
      approval: {
        lookup: { description: (a) => 'Look up ' + a.query, allowedDecisions: ['approve', 'reject'] },
        delete_record: false,
      },
    },
  },
});
`
	file := filepath.Join(dir, "agents", "assistant.ts")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	// A missing variable is a load error naming it.
	_, err := tsload.LoadFile(context.Background(), dir, file, tsload.Options{LookupEnv: func(string) (string, bool) { return "", false }})
	if err == nil || !strings.Contains(err.Error(), "mcpServers.fx.env.MCP_CALLS_FILE: environment variable FX_CALLS is not set") {
		t.Fatalf("want a load error naming FX_CALLS, got %v", err)
	}
	lookup := func(k string) (string, bool) {
		if k == "FX_CALLS" {
			return fx.calls, true
		}
		return "", false
	}
	env := stacktest.New(t, stacktest.Options{Script: mcpScript, Agents: func(*stacktest.Env) []*agent.Spec {
		spec, err := tsload.LoadFile(context.Background(), dir, file, tsload.Options{LookupEnv: lookup})
		if err != nil {
			t.Fatalf("load the agent file: %v", err)
		}
		return []*agent.Spec{spec}
	}})

	if got := askMCP(t, env, "ts-del", "call delete").Choices[0].Message.Content; got != "Tool said: deleted r1" {
		t.Fatalf("delete_record: false should run at once, got %q", got)
	}
	res := askMCP(t, env, "ts-lookup", "call lookup")
	if res.Choices[0].FinishReason != "tool_calls" {
		t.Fatalf("lookup should pause, got %+v", res.Choices[0])
	}
	it := pendingOf(t, env, "ts-lookup")
	if it.Description != "Look up abc" || strings.Join(it.AllowedDecisions, ",") != "approve,reject" {
		t.Fatalf("pending decision %+v", it)
	}
	if r := call(t, "POST", env.URL+"/v1/hitl/"+it.ID+"/approve", ""); r.status != 200 {
		t.Fatalf("approve: %d %s", r.status, r.body)
	}
	waitIdle(t, env, "ts-lookup")
	if fx.count(t, "lookup") != 1 {
		t.Fatalf("calls on the server %v", fx.ran(t))
	}
}

// TestMCPImageResult: an MCP tool's image reaches an Anthropic model as an
// image block of the tool result; an OpenAI-compatible model, whose tool
// messages take text only, gets it described in the text.
func TestMCPImageResult(t *testing.T) {
	t.Parallel()
	const pixel = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
	for _, kind := range []modeltest.Kind{modeltest.Anthropic, modeltest.OpenAI} {
		fx := newMCPFixture(t)
		model := "openai/test-model"
		if kind == modeltest.Anthropic {
			model = "anthropic/test-model"
		}
		env := stacktest.New(t, stacktest.Options{Script: mcpScript, Upstream: kind, Agents: func(*stacktest.Env) []*agent.Spec {
			return []*agent.Spec{{Name: "assistant", Model: model, Instructions: "Use the tools.", MCPServers: []agent.MCPServer{fx.stdio()}}}
		}})
		if got := askMCP(t, env, "img-"+string(kind), "call snapshot").Choices[0].Message.Content; !strings.HasPrefix(got, "Tool said: the record:\n[image image/png") {
			t.Fatalf("%s: turn %q", kind, got)
		}
		last, _ := env.Upstream.Last()
		raw := string(last.Body)
		if kind == modeltest.Anthropic {
			if !strings.Contains(raw, `"type":"tool_result"`) || !strings.Contains(raw, `"type":"image"`) || !strings.Contains(raw, pixel) {
				t.Fatalf("anthropic: the tool result has no image block: %s", raw)
			}
		} else if strings.Contains(raw, pixel) || !strings.Contains(raw, "[image image/png") {
			t.Fatalf("openai: the tool message should describe the image in text: %s", raw)
		}
	}
}

// An HTTP MCP server that hangs (stopped: its connections stay open, nothing
// answers) is reported down, with the reason, once it misses a ping, and its
// tools leave; when it answers again it is reconnected.
func TestMCPHungHTTPServerReportedDown(t *testing.T) {
	t.Parallel()
	fx := newMCPFixture(t)
	url, proc := fx.startHTTP(t, 0)
	env := stacktest.New(t, stacktest.Options{Script: mcpScript, Agents: mcpAgent(agent.MCPServer{Name: "fx", URL: url})})
	stacktest.WaitFor(t, "fx to connect", func() bool {
		s := getAgent(t, env, "assistant").MCPServers[0]
		return s.Status == mcp.StatusConnected && len(s.Tools) > 0
	})
	if err := proc.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := true
	t.Cleanup(func() {
		if stopped {
			_ = proc.Process.Signal(syscall.SIGCONT)
		}
	})
	stacktest.WaitFor(t, "the hung fx to be reported down", func() bool {
		s := getAgent(t, env, "assistant").MCPServers[0]
		return s.Status == mcp.StatusDown && len(s.Tools) == 0 && s.Error != ""
	})
	if err := proc.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	stopped = false
	stacktest.WaitFor(t, "fx to reconnect", func() bool {
		return getAgent(t, env, "assistant").MCPServers[0].Status == mcp.StatusConnected
	})
	if got := askMCP(t, env, "hung-1", "call lookup").Choices[0].Message.Content; got != "Tool said: found: abc" {
		t.Fatalf("lookup after the server answered again %q", got)
	}
}

// A server's tools setting settles a name collision instead of stopping the
// load: rename gives a tool another agent-side name, exclude and include
// pick the tools; the agent file's mcpServers.*.tools reads the same.
func TestMCPServerToolsFilter(t *testing.T) {
	t.Parallel()
	fx := newMCPFixture(t)
	own := &tool.Tool{Name: "fx_lookup", Description: "The agent's own lookup", Parameters: []byte(`{"type":"object"}`),
		Execute: func(context.Context, tool.Call) (tool.Result, error) { return tool.Result{Content: "own"}, nil }}
	srv := fx.stdio()
	srv.Tools = agent.MCPToolFilter{Exclude: []string{"delete_record"}, Rename: map[string]string{"lookup": "fx_find"}}
	script := strings.Replace(mcpScript, `{"when": {"lastUser": "call lookup"}`,
		`{"when": {"lastUser": "call find"}, "reply": {"toolCalls": [{"name": "fx_find", "arguments": {"query": "q1"}}]}},
 {"when": {"lastUser": "call lookup"}`, 1)
	env := stacktest.New(t, stacktest.Options{Script: script, Agents: func(*stacktest.Env) []*agent.Spec {
		return []*agent.Spec{{Name: "assistant", Model: "openai/test-model", Tools: []*tool.Tool{own}, MCPServers: []agent.MCPServer{srv}}}
	}})
	v := getAgent(t, env, "assistant")
	if _, ok := v.approvalOf("fx_find"); !ok {
		t.Fatalf("the renamed tool is missing: %+v", v.Tools)
	}
	if _, ok := v.approvalOf("fx_delete_record"); ok {
		t.Fatalf("an excluded tool is listed: %+v", v.Tools)
	}
	if got := askMCP(t, env, "filter-1", "call find").Choices[0].Message.Content; got != "Tool said: found: q1" {
		t.Fatalf("the renamed tool: %q", got)
	}

	only := fx.stdio()
	only.Tools = agent.MCPToolFilter{Include: []string{"stats"}}
	spec := &agent.Spec{Name: "only", Model: "openai/test-model", MCPServers: []agent.MCPServer{only}}
	if err := mcp.Start(context.Background(), []*agent.Spec{spec}, mcp.Options{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(spec.Close)
	tools, _ := spec.Dynamic.Tools()
	if len(tools) != 1 || tools[0].Name != "fx_stats" {
		t.Fatalf("include: %d tools, want fx_stats only", len(tools))
	}

	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "agents"), 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "agents", "a.ts")
	src := `import { defineDeepAgent } from 'stackbone';
export default defineDeepAgent({ name: 'a', model: 'openai/test-model', instructions: 'x',
  mcpServers: { fx: { command: 'node', tools: { include: ['lookup', 'stats'], exclude: ['stats'], rename: { lookup: 'find' } } } } });
`
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	loaded, err := tsload.LoadFile(context.Background(), dir, file, tsload.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer loaded.Close()
	f := loaded.MCPServers[0].Tools
	if !f.Takes("lookup") || f.Takes("stats") || f.Takes("touch") || f.Rename["lookup"] != "find" {
		t.Fatalf("the agent file's tools: %+v", f)
	}
}

// TestMCPURLTokenStaysHidden: a token in an MCP server's URL (a query
// value, a path segment, the user info) is a secret: the connect errors
// that quote the URL show in neither the agent's status nor the log.
func TestMCPURLTokenStaysHidden(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	host := "127.0.0.1:" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	_ = ln.Close()
	const qTok, pathTok, userTok = "qtok-8Fh3Kd9Wz2", "ptok-5Lm7Rq1Xv4", "utok-2Bn6Yc8Ts3"
	env := stacktest.New(t, stacktest.Options{Script: mcpScript, Agents: mcpAgent(
		agent.MCPServer{Name: "q", URL: "http://" + host + "/mcp?api_key=" + qTok},
		agent.MCPServer{Name: "p", URL: "http://" + host + "/s/" + pathTok + "/mcp"},
		agent.MCPServer{Name: "u", URL: "http://bot:" + userTok + "@" + host + "/mcp"},
	)})
	stacktest.WaitFor(t, "the servers to be down with errors", func() bool {
		v := getAgent(t, env, "assistant")
		for _, s := range v.MCPServers {
			if s.Status != mcp.StatusDown || s.Error == "" {
				return false
			}
		}
		return len(v.MCPServers) == 3 && strings.Count(env.Logs.String(), "MCP server not available") >= 3
	})
	status := string(call(t, "GET", env.URL+"/v1/agents/assistant", "").body)
	if !strings.Contains(status, "127.0.0.1") {
		t.Fatalf("the errors say what failed: %s", status)
	}
	for _, tok := range []string{qTok, pathTok, userTok} {
		if strings.Contains(status, tok) {
			t.Errorf("status shows %s: %s", tok, status)
		}
		if logs := env.Logs.String(); strings.Contains(logs, tok) {
			t.Errorf("log shows %s:\n%s", tok, logs)
		}
	}
}
