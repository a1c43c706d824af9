package cli_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/stackbone/stackbone/internal/model/modeltest"
	"github.com/stackbone/stackbone/internal/model/script"
	"github.com/stackbone/stackbone/internal/stacktest"
)

// scaffoldFiles are the files `stackbone init` writes.
var scaffoldFiles = []string{".env.example", ".gitignore", "agents/assistant.script.json", "agents/assistant.ts",
	"stackbone.json", "tsconfig.json", "types/stackbone/globals.d.ts", "types/stackbone/index.d.ts"}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// initProject runs `stackbone init` into a folder that does not exist yet
// and checks what it wrote and printed.
func initProject(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "shop")
	r := run(t, nil, "init", dir)
	if r.code != 0 {
		t.Fatalf("init: %d %s", r.code, r.stderr)
	}
	for _, f := range scaffoldFiles {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatalf("init did not write %s: %v", f, err)
		}
		if !strings.Contains(r.stdout, f) {
			t.Errorf("init output does not list %s:\n%s", f, r.stdout)
		}
	}
	for _, want := range []string{"stackbone dev --dir " + dir, "stackbone agents check --dir " + dir, "openai/gpt-4o-mini"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("init output lacks the next command %q:\n%s", want, r.stdout)
		}
	}
	return dir
}

// TestInitScaffoldsAProject: the files a new project needs, the editor
// types identical to the repository's, a .gitignore that keeps the data
// folder and secrets out, and a second init that refuses to overwrite
// anything unless --force is given.
func TestInitScaffoldsAProject(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	root := stacktest.RepoRoot(t)
	for _, f := range []string{"index.d.ts", "globals.d.ts"} {
		if readFile(t, filepath.Join(dir, "types", "stackbone", f)) != readFile(t, filepath.Join(root, "types", "stackbone", f)) {
			t.Errorf("types/stackbone/%s differs from the repository's", f)
		}
	}
	gitignore := strings.Fields(readFile(t, filepath.Join(dir, ".gitignore")))
	for _, want := range []string{".stackbone/", ".env"} {
		found := false
		for _, l := range gitignore {
			found = found || l == want
		}
		if !found {
			t.Errorf(".gitignore lacks %s: %q", want, gitignore)
		}
	}
	var cfg struct {
		Providers map[string]any `json:"providers"`
	}
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(dir, "stackbone.json"))), &cfg); err != nil || cfg.Providers == nil {
		t.Fatalf("stackbone.json: %v %+v", err, cfg)
	}
	var ts struct {
		CompilerOptions struct {
			Paths map[string][]string `json:"paths"`
		} `json:"compilerOptions"`
	}
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(dir, "tsconfig.json"))), &ts); err != nil ||
		len(ts.CompilerOptions.Paths["stackbone"]) != 1 || ts.CompilerOptions.Paths["stackbone"][0] != "./types/stackbone/index.d.ts" {
		t.Fatalf("tsconfig.json paths: %v %+v", err, ts)
	}
	if env := readFile(t, filepath.Join(dir, ".env.example")); !strings.Contains(env, "OPENAI_API_KEY=") {
		t.Fatalf(".env.example: %q", env)
	}

	// A second init touches nothing and names every file in the way.
	agentFile := filepath.Join(dir, "agents", "assistant.ts")
	const mine = "// my own agent\n"
	if err := os.WriteFile(agentFile, []byte(mine), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "stackbone.json")); err != nil {
		t.Fatal(err)
	}
	r := run(t, nil, "init", dir)
	if r.code == 0 || !strings.Contains(r.stderr, "--force") {
		t.Fatalf("init over a project must refuse: %d %q", r.code, r.stderr)
	}
	for _, f := range scaffoldFiles {
		if f != "stackbone.json" && !strings.Contains(r.stderr, filepath.Join(dir, f)) {
			t.Errorf("the refusal does not name %s:\n%s", f, r.stderr)
		}
	}
	if strings.Contains(r.stderr, "stackbone.json") {
		t.Errorf("the refusal names a file that does not exist:\n%s", r.stderr)
	}
	if readFile(t, agentFile) != mine {
		t.Fatal("a refused init changed agents/assistant.ts")
	}
	if _, err := os.Stat(filepath.Join(dir, "stackbone.json")); err == nil {
		t.Fatal("a refused init wrote stackbone.json")
	}
	if r := run(t, nil, "init", dir, "--force"); r.code != 0 {
		t.Fatalf("init --force: %d %s", r.code, r.stderr)
	}
	if got := readFile(t, agentFile); got == mine || !strings.Contains(got, "defineDeepAgent") {
		t.Fatalf("init --force did not rewrite agents/assistant.ts: %q", got)
	}
}

// TestInitProjectChecksAndServes: `agents check` accepts the new project,
// and `dev` serves it offline: the scripted model answers through the tool
// over openai-go, the approval-gated tool pauses a session (409 on the
// next turn), and a client writes the editable state over AG-UI.
func TestInitProjectChecksAndServes(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	r := run(t, nil, "agents", "check", "--dir", dir)
	if r.code != 0 || !strings.Contains(r.stdout, "ok  assistant  agents/assistant.ts") {
		t.Fatalf("agents check: %d %q %q", r.code, r.stdout, r.stderr)
	}

	p := startServer(t, []string{"OPENAI_API_KEY=", "ANTHROPIC_API_KEY="}, "dev", "--dir", dir, "--addr", "127.0.0.1:0")
	ctx := context.Background()
	c := openai.NewClient(option.WithBaseURL(p.URL()+"/v1"), option.WithAPIKey("sk-local"), option.WithMaxRetries(0))
	res, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "assistant",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is the weather in Paris?")}})
	if err != nil {
		t.Fatal(err)
	}
	// The script's reply after the tool quotes the tool's result ({{lastTool}}).
	if got := res.Choices[0].Message.Content; got != "Let me check the weather.\n\nIt is {\"city\":\"Paris\",\"temp_c\":21,\"sky\":\"sunny\"} right now." {
		t.Fatalf("the scripted answer after the tool: %q", got)
	}

	sess := option.WithHeader("x-stackbone-session", "init-refund")
	refund := openai.ChatCompletionNewParams{Model: "assistant",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("please refund order ord_42")}}
	res, err = c.Chat.Completions.New(ctx, refund, sess)
	if err != nil {
		t.Fatal(err)
	}
	if ch := res.Choices[0]; ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 1 ||
		ch.Message.ToolCalls[0].Function.Name != "refund" || !strings.Contains(ch.Message.Content, "Refund order ord_42 for 19.99") {
		t.Fatalf("the refund must wait for approval: %+v", ch)
	}
	// The next turn (a new message: the same request again would be a retry
	// of the first) finds the session waiting.
	refund.Messages = append(refund.Messages, res.Choices[0].Message.ToParam(), openai.UserMessage("any news?"))
	_, err = c.Chat.Completions.New(ctx, refund, sess)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusConflict || apiErr.Code != "approval_pending" {
		t.Fatalf("a turn on the paused session: want 409, got %v", err)
	}
	if r := run(t, nil, "hitl", "list", "--url", p.URL()); r.code != 0 || !strings.Contains(r.stdout, "init-refund") {
		t.Fatalf("hitl list: %d %s %s", r.code, r.stdout, r.stderr)
	}

	agui := func(body string) string {
		t.Helper()
		resp, err := http.Post(p.URL()+"/v1/agents/assistant/agui", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	out := agui(`{"threadId":"init-state","runId":"r1","state":{"draft":"Dear customer"},"messages":[{"id":"m1","role":"user","content":"hi"}],"tools":[],"context":[]}`)
	if !strings.Contains(out, "RUN_FINISHED") {
		t.Fatalf("AG-UI run: %s", out)
	}
	var th struct {
		State map[string]any `json:"state"`
	}
	if code := getJSON(t, p.URL()+"/v1/threads/init-state", &th); code != 200 || th.State["draft"] != "Dear customer" {
		t.Fatalf("the thread's state after the AG-UI run: %d %+v", code, th.State)
	}
	// The scaffold's schema is enforced: draft is a string.
	out = agui(`{"threadId":"init-state","runId":"r2","state":{"draft":42},"messages":[{"id":"m2","role":"user","content":"hi"}],"tools":[],"context":[]}`)
	if !strings.Contains(out, "invalid_state") {
		t.Fatalf("a draft that is not a string: %s", out)
	}
}

// TestInitProjectTypeChecks runs tsc (the zod fixture's) over the new
// project with its own tsconfig.json: the agent type-checks against the
// embedded declarations, and a typo in it is caught.
func TestInitProjectTypeChecks(t *testing.T) {
	t.Parallel()
	tsc := tscBinary(t)
	dir := initProject(t)
	if out, err := exec.Command(tsc, "-p", dir).CombinedOutput(); err != nil {
		t.Fatalf("tsc on the new project: %v\n%s", err, out)
	}
	agentFile := filepath.Join(dir, "agents", "assistant.ts")
	src := strings.Replace(readFile(t, agentFile), "  model: 'scripted/assistant',", "  modle: 'scripted/assistant',", 1)
	if err := os.WriteFile(agentFile, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(tsc, "-p", dir).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "'modle' does not exist") {
		t.Fatalf("tsc must catch a typo through the project's tsconfig: %v\n%s", err, out)
	}
	// And agents check reports it with file:line:col and a non-zero exit.
	r := run(t, nil, "agents", "check", "--dir", dir)
	if r.code == 0 || !strings.Contains(r.stderr, "agents/assistant.ts:7:") || !strings.Contains(r.stderr, `unknown field "modle"`) {
		t.Fatalf("agents check on a typo: %d %q", r.code, r.stderr)
	}
}

// tscBinary is TypeScript's tsc from the tsload zod fixture, installed with
// npm ci when missing; without npm the test is skipped, except under
// CI=true.
func tscBinary(t *testing.T) string {
	t.Helper()
	fixture := filepath.Join(stacktest.RepoRoot(t), "internal", "agent", "tsload", "testdata", "zodagent")
	tsc := filepath.Join(fixture, "node_modules", ".bin", "tsc")
	if _, err := os.Stat(tsc); err == nil {
		return tsc
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("npm is needed to install TypeScript (internal/agent/tsload/testdata/zodagent): %v", err)
		}
		t.Skipf("npm not found, cannot install TypeScript: %v", err)
	}
	cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts")
	cmd.Dir = fixture
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in %s: %v\n%s", fixture, err, out)
	}
	return tsc
}

// TestInitProjectSwitchesToARealModel: the one-line switch the agent file's
// comment shows (model: 'openai/gpt-4o-mini') sends the agent's turns, with
// its tools, to an OpenAI-compatible upstream (the scripted mock here).
func TestInitProjectSwitchesToARealModel(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	agentFile := filepath.Join(dir, "agents", "assistant.ts")
	src := readFile(t, agentFile)
	if !strings.Contains(src, "// model: 'openai/gpt-4o-mini',") {
		t.Fatalf("the agent file does not show the switch:\n%s", src)
	}
	src = strings.Replace(src, "  model: 'scripted/assistant',\n", "  model: 'openai/gpt-4o-mini',\n", 1)
	if err := os.WriteFile(agentFile, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	mock := modeltest.Handler(modeltest.OpenAI, script.MustParse(`[{"reply":{"text":"Hello from the real model."}}]`))
	up := httptest.NewServer(mock)
	defer up.Close()

	p := startServer(t, []string{"OPENAI_BASE_URL=" + up.URL + "/v1", "OPENAI_API_KEY=sk-test-init"}, "dev", "--dir", dir, "--addr", "127.0.0.1:0")
	c := openai.NewClient(option.WithBaseURL(p.URL()+"/v1"), option.WithAPIKey("sk-local"), option.WithMaxRetries(0))
	res, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "assistant",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")}})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Choices[0].Message.Content; got != "Hello from the real model." {
		t.Fatalf("answer: %q", got)
	}
	req, ok := mock.Last()
	if !ok {
		t.Fatal("the upstream got no request")
	}
	var body struct {
		Model string `json:"model"`
		Tools []struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(req.Body, &body); err != nil {
		t.Fatal(err)
	}
	var tools []string
	for _, tl := range body.Tools {
		tools = append(tools, tl.Function.Name)
	}
	if body.Model != "gpt-4o-mini" || !strings.Contains(","+strings.Join(tools, ",")+",", ",get_weather,") ||
		!strings.Contains(","+strings.Join(tools, ",")+",", ",refund,") || req.Header.Get("Authorization") != "Bearer sk-test-init" {
		t.Fatalf("the upstream got model %q, tools %v, auth %q", body.Model, tools, req.Header.Get("Authorization"))
	}
}
