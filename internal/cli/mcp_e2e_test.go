package cli_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// mcpFixtureScript returns node and tests/mcp/server.mjs; without node the
// test is skipped, except under CI=true.
func mcpFixtureScript(t *testing.T) (node, script string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("node is required in CI: %v", err)
		}
		t.Skip("node not installed; tests/mcp needs it")
	}
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test")
		}
		dir = parent
	}
	script = filepath.Join(dir, "tests", "mcp", "server.mjs")
	if _, err := os.Stat(filepath.Join(dir, "tests", "mcp", "node_modules", "@modelcontextprotocol", "sdk", "package.json")); err != nil {
		t.Fatalf("tests/mcp has no node_modules (run scripts/test.sh or npm ci there): %v", err)
	}
	return node, script
}

func alive(pid int) bool { return pid > 0 && syscall.Kill(pid, 0) == nil }

// TestDevMCPServerLifecycle runs `stackbone dev` with a .ts agent whose stdio
// MCP server takes its pid file from '${FX_PID}': the server's tools work
// through the scripted model, a reload starts a new child and stops the old
// one, and SIGTERM stops the child with the server.
func TestDevMCPServerLifecycle(t *testing.T) {
	t.Parallel()
	node, script := mcpFixtureScript(t)
	dir := t.TempDir()
	agents := filepath.Join(dir, "agents")
	if err := os.MkdirAll(agents, 0o755); err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(dir, "fx.pid")
	agentSrc := func(instructions string) string {
		return `import { defineDeepAgent } from 'stackbone';
export default defineDeepAgent({
  name: 'mcpagent',
  model: 'scripted/demo',
  instructions: '` + instructions + `',
  mcpServers: { fx: { command: ` + strconv.Quote(node) + `, args: [` + strconv.Quote(script) + `], env: { MCP_PID_FILE: '${FX_PID}' } } },
});
`
	}
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(agents, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("demo.script.json", `[
 {"when": {"afterTool": true}, "reply": {"text": "Tool said: {{lastTool}}"}},
 {"when": {"lastUser": "call lookup"}, "reply": {"toolCalls": [{"name": "fx_lookup", "arguments": {"query": "abc"}}]}},
 {"reply": {"text": "echo: {{lastUser}}"}}
]`)
	write("mcpagent.ts", agentSrc("v1"))
	readPid := func() int {
		b, _ := os.ReadFile(pidFile)
		n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return n
	}

	p := startServer(t, []string{"FX_PID=" + pidFile}, "dev", "--dir", dir, "--addr", "127.0.0.1:0")
	var info struct {
		MCPServers []struct {
			Name, Status string
			Tools        []string
		} `json:"mcpServers"`
	}
	if code := getJSON(t, p.URL()+"/v1/agents/mcpagent", &info); code != 200 || len(info.MCPServers) != 1 ||
		info.MCPServers[0].Status != "connected" || len(info.MCPServers[0].Tools) == 0 {
		t.Fatalf("GET /v1/agents/mcpagent: %d %+v", code, info)
	}
	resp, err := http.Post(p.URL()+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"mcpagent","messages":[{"role":"user","content":"call lookup"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var cc struct {
		Choices []struct {
			Message struct{ Content string }
		}
	}
	if err := json.Unmarshal(body, &cc); err != nil || len(cc.Choices) != 1 || cc.Choices[0].Message.Content != "Tool said: found: abc" {
		t.Fatalf("chat: %d %s", resp.StatusCode, body)
	}
	first := readPid()
	if !alive(first) {
		t.Fatalf("the MCP server process %d is not running", first)
	}

	// A reload starts the new agent's server and stops the old one.
	rewrite := every(500 * time.Millisecond)
	waitUntil(t, "the reloaded agent's MCP server", 15*time.Second, func() bool {
		if rewrite() {
			write("mcpagent.ts", agentSrc("v2"))
		}
		return readPid() != first && alive(readPid())
	})
	waitUntil(t, "the old MCP server to stop", 15*time.Second, func() bool { return !alive(first) })
	second := readPid()

	// SIGTERM stops the server and its MCP child.
	if code, _ := p.stop(t, 20*time.Second); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	waitUntil(t, "the MCP server to stop with stackbone", 10*time.Second, func() bool { return !alive(second) })
}

// running reports whether pid is a live process (not gone, not a zombie
// waiting for a reaper).
func running(pid int) bool {
	if !alive(pid) {
		return false
	}
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return !os.IsNotExist(err)
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(rest, "Z")
}

// A stdio MCP server that keeps running after its stdin closes does not
// outlive a Stackbone killed with SIGKILL (no time to stop it): on Linux the
// kernel kills it (parent-death signal).
func TestMCPStdioServerDiesWithKilledStackbone(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("the parent-death signal is Linux's")
	}
	node, script := mcpFixtureScript(t)
	dir := t.TempDir()
	agents := filepath.Join(dir, "agents")
	if err := os.MkdirAll(agents, 0o755); err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(dir, "fx.pid")
	src := `import { defineDeepAgent } from 'stackbone';
export default defineDeepAgent({
  name: 'mcpagent',
  model: 'scripted/demo',
  instructions: 'x',
  mcpServers: { fx: { command: ` + strconv.Quote(node) + `, args: [` + strconv.Quote(script) + `], env: { MCP_PID_FILE: '${FX_PID}', MCP_LINGER: '1' } } },
});
`
	if err := os.WriteFile(filepath.Join(agents, "mcpagent.ts"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(agents, "demo.script.json"), []byte(`[{"reply": {"text": "hi"}}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startServer(t, []string{"FX_PID=" + pidFile}, "dev", "--dir", dir, "--addr", "127.0.0.1:0")
	pid := 0
	waitUntil(t, "the MCP server to start", 15*time.Second, func() bool {
		b, _ := os.ReadFile(pidFile)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return running(pid)
	})
	p.Kill(t)
	waitUntil(t, "the MCP server to die with stackbone", 10*time.Second, func() bool { return !running(pid) })
}
