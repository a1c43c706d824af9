package server_test

import (
	"bufio"
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

// codexScript: "run it" has the model call Codex's exec_command (a plain
// function tool), "close" its close_agent (a function inside Codex's
// multi_agent_v1 namespace tool); each answer quotes the tool's output.
const codexScript = `[
 {"when": {"lastTool": "exec_command"}, "reply": {"text": "Codex said: {{lastTool}}"}},
 {"when": {"lastTool": "close_agent"}, "reply": {"text": "Closed: {{lastTool}}"}},
 {"when": {"lastUser": "run it"}, "reply": {"toolCalls": [{"name": "exec_command", "arguments": {"cmd": "echo stackbone-codex"}}]}},
 {"when": {"lastUser": "close"}, "reply": {"toolCalls": [{"name": "close_agent", "arguments": {"target": "nope"}}]}},
 {"reply": {"text": "echo: {{lastUser}}"}}
]`

// codexExec runs the real Codex CLI (`codex exec --json`) from
// tests/clients with the README's config.toml in a fresh CODEX_HOME, and
// returns the agent messages it printed; it fails the test unless the turn
// completed.
func codexExec(t *testing.T, node, dir string, env *stacktest.Env, prompt string) []string {
	t.Helper()
	home := t.TempDir()
	config := `model = "assistant"
model_provider = "stackbone"

[model_providers.stackbone]
name = "Stackbone"
base_url = "` + env.URL + `/v1"
env_key = "STACKBONE_API_KEY"
wire_api = "responses"

[analytics]
enabled = false
`
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(dir, "node_modules", "@openai", "codex", "bin", "codex.js"),
		"exec", "--strict-config", "--skip-git-repo-check", "--sandbox", "read-only", "--json", prompt)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "CODEX_HOME="+home, "STACKBONE_API_KEY=sk-local")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var msgs []string
	completed := false
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev struct {
			Type string `json:"type"`
			Item struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"item"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		completed = completed || ev.Type == "turn.completed"
		if ev.Type == "item.completed" && ev.Item.Type == "agent_message" {
			msgs = append(msgs, ev.Item.Text)
		}
	}
	if runErr != nil || !completed {
		t.Fatalf("codex exec %q: %v, turn completed %v\nstdout:\n%s\nstderr:\n%s", prompt, runErr, completed, stdout.String(), stderr.String())
	}
	return msgs
}

// TestResponsesCodexCLI runs the real Codex CLI (@openai/codex, `codex exec`)
// with the README's config against a stack. Codex sends a namespace tool
// (multi_agent_v1, its functions inside) and a hosted web_search tool next
// to its function tools: the hosted tool is ignored, the namespace's
// functions become client tools, and a call of one of them carries its
// namespace back so Codex runs it (without it Codex answers "unsupported
// call"). Each turn is a full Codex loop: the model's call, Codex running
// it, the replayed input with its output, the answer.
func TestResponsesCodexCLI(t *testing.T) {
	t.Parallel()
	node, dir := nodeFixture(t, "clients", filepath.Join("@openai", "codex", "package.json"))
	env := stacktest.New(t, stacktest.Options{Script: codexScript})

	msgs := codexExec(t, node, dir, env, "please run it")
	if len(msgs) != 1 || !strings.HasPrefix(msgs[0], "Codex said: ") || !strings.Contains(msgs[0], "stackbone-codex") {
		t.Fatalf("codex printed %q; want the answer quoting the command's output", msgs)
	}
	msgs = codexExec(t, node, dir, env, "please close")
	if len(msgs) != 1 || !strings.HasPrefix(msgs[0], "Closed: ") || strings.Contains(msgs[0], "unsupported call") {
		t.Fatalf("codex printed %q; want its own answer to close_agent", msgs)
	}

	first := env.Upstream.Requests()[0].Request
	var names []string
	for _, tl := range first.Tools {
		names = append(names, tl.Name)
	}
	got := " " + strings.Join(names, " ") + " "
	for _, want := range []string{"exec_command", "close_agent", "spawn_agent"} {
		if !strings.Contains(got, " "+want+" ") {
			t.Errorf("the model was not offered Codex's %s: %s", want, got)
		}
	}
	if strings.Contains(got, "web_search") || strings.Contains(got, "multi_agent_v1") {
		t.Errorf("the model was offered a hosted tool or a namespace itself: %s", got)
	}
}
