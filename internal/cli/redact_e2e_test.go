package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/model/modeltest"
	"github.com/stackbone/stackbone/internal/model/script"
)

// Secrets with the characters JSON escapes, and a PEM key: each is masked
// whole or not at all, so any of their fragments in a haystack is a leak.
const (
	oddSecret = "tokA\"quote\\back\ttab\nline-Zq7Lm3Wp"
	pemSecret = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\n-----END PRIVATE KEY-----\n"
)

// secretFragments are pieces of oddSecret and pemSecret that appear in
// every encoding of them (no escaped character inside).
var secretFragments = []string{"tokA", "Zq7Lm3Wp", "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC", "BKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj"}

// assertNoFragment fails if haystack holds a fragment of a secret.
func assertNoFragment(t *testing.T, what, haystack string, fragments ...string) {
	t.Helper()
	for _, f := range fragments {
		if i := strings.Index(haystack, f); i >= 0 {
			t.Errorf("%s: secret fragment %q leaked: …%s…", what, f, haystack[max(0, i-200):min(len(haystack), i+100)])
		}
	}
}

// TestSecretsWithJSONSpecialCharactersAreMasked runs `dev` with an agent
// whose env values hold a quote, a backslash, a tab and a newline (and a
// PEM key); its tool returns them and logs them as JSON. Neither shows in
// what the model upstream received, in the client's answer (which echoes
// the tool result), in the stored thread, the SQLite files or the log.
func TestSecretsWithJSONSpecialCharactersAreMasked(t *testing.T) {
	t.Parallel()
	mock := modeltest.Handler(modeltest.OpenAI, script.MustParse(`[
	 {"when":{"lastTool":"leak"},"reply":{"text":"The tool said: {{lastTool}}"}},
	 {"when":{"lastUser":"leak"},"reply":{"toolCalls":[{"name":"leak","arguments":{}}]}},
	 {"reply":{"text":"?"}}
	]`))
	up := httptest.NewServer(mock)
	defer up.Close()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "agents"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "agents", "leaky.ts"), []byte(`import { defineDeepAgent, tool } from 'stackbone';
export default defineDeepAgent({
  name: 'leaky', model: 'openai/gpt-test',
  env: ['ODD_TOKEN', 'PEM_KEY'],
  tools: {
    leak: tool({ async execute(_a, ctx) {
      console.log(JSON.stringify({ q: ctx.env.ODD_TOKEN, key: ctx.env.PEM_KEY }));
      return { q: ctx.env.ODD_TOKEN, key: ctx.env.PEM_KEY, nested: JSON.stringify({ q: ctx.env.ODD_TOKEN }) };
    } }),
  },
});
`), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startServer(t, []string{"OPENAI_BASE_URL=" + up.URL + "/v1", "OPENAI_API_KEY=sk-test",
		"ODD_TOKEN=" + oddSecret, "PEM_KEY=" + pemSecret}, "dev", "--dir", dir, "--addr", "127.0.0.1:0", "--log-level", "debug")
	code, answer := postModel(t, p.URL(), "leaky", "s1", "leak")
	if code != 200 || !strings.Contains(answer, "The tool said:") || !strings.Contains(answer, "[REDACTED]") {
		t.Fatalf("turn: %d %s", code, answer)
	}
	assertNoFragment(t, "client answer", answer, secretFragments...)
	var sent strings.Builder
	for _, r := range mock.Requests() {
		sent.Write(r.Body)
	}
	if !strings.Contains(sent.String(), "[REDACTED]") {
		t.Fatalf("the model never got the tool result:\n%s", sent.String())
	}
	assertNoFragment(t, "model requests", sent.String(), secretFragments...)
	thread := getText(t, p.URL()+"/v1/threads/s1")
	assertNoFragment(t, "stored thread", thread, secretFragments...)
	files, _ := filepath.Glob(filepath.Join(dir, ".stackbone", "*"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		assertNoFragment(t, "file "+f, string(b), secretFragments...)
	}
	if !strings.Contains(p.Logs.String(), `[REDACTED]`) {
		t.Fatalf("the tool's console line is logged, redacted:\n%s", p.Logs.String())
	}
	assertNoFragment(t, "log", p.Logs.String(), secretFragments...)
}

// getText GETs url (a stream ends after a second) and returns the body.
func getText(t *testing.T, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	return fmt.Sprint(string(b))
}

// Configured secrets for TestConfiguredSecretsNeverLeave: none has a
// secret's name or shape (no sk-, no *_API_KEY).
const (
	providerSecret = "leaktok-9Hq2Xv7Lp4Rt"
	headerSecret   = "hdrval-3Kd8Wm1Zs6Qy"
	mcpEnvSecret   = "envval-7Tb4Nc9Pj2Lx"
	// stderrPEM is printed on stderr, which is logged line by line.
	stderrPEM = "-----BEGIN PRIVATE KEY-----\nPemLineOne5Hq2Xv7Lp4RtZk\nPemLineTwo8Wm1Zs6QyNc3B\n-----END PRIVATE KEY-----\n"
)

// TestConfiguredSecretsNeverLeave runs `dev` with a stackbone.json provider
// whose key comes from ${LEAK_TOKEN} and whose upstream echoes the key in
// its 401 error, an HTTP MCP server with the header X-Custom: ${MCP_CUSTOM}
// that echoes the header in its 401, and a stdio MCP server given
// ${FX_SECRET} in its env that prints it on stderr and returns it from a
// tool, and another given a PEM key that it prints on stderr (logged one
// line at a time). No value, no line of the key, shows in the log, the
// answers, the model's requests, the stored threads, the SQLite files or
// the agent's MCP status.
func TestConfiguredSecretsNeverLeave(t *testing.T) {
	t.Parallel()
	node, fixture := mcpFixtureScript(t)
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/mcp" { // a JSON-RPC error that quotes the header
			var call struct {
				ID json.RawMessage `json:"id"`
			}
			_ = json.NewDecoder(r.Body).Decode(&call)
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32600,"message":"X-Custom %s is not allowed"}}`, call.ID, r.Header.Get("X-Custom"))
			return
		}
		w.WriteHeader(401)
		fmt.Fprintf(w, `{"error":{"message":"Incorrect API key provided: %s (X-Custom %s)","type":"invalid_request_error","code":"invalid_api_key"}}`,
			strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), r.Header.Get("X-Custom"))
	}))
	defer echo.Close()
	mock := modeltest.Handler(modeltest.OpenAI, script.MustParse(`[
	 {"when":{"afterTool":true},"reply":{"text":"Tool said: {{lastTool}}"}},
	 {"when":{"lastUser":"show"},"reply":{"toolCalls":[{"name":"fx_show_env","arguments":{}}]}},
	 {"reply":{"text":"?"}}
	]`))
	up := httptest.NewServer(mock)
	defer up.Close()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "agents"), 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"stackbone.json": `{"providers": {"leaky": {"type": "openai-compatible", "baseURL": "` + echo.URL + `/v1", "apiKey": "${LEAK_TOKEN}"}}}`,
		"agents/prov.ts": "import { defineDeepAgent } from 'stackbone';\nexport default defineDeepAgent({ name: 'prov', model: 'leaky/m1' });\n",
		"agents/mcpy.ts": `import { defineDeepAgent } from 'stackbone';
export default defineDeepAgent({
  name: 'mcpy', model: 'openai/gpt-test',
  mcpServers: {
    fx: { command: ` + fmt.Sprintf("%q", node) + `, args: [` + fmt.Sprintf("%q", fixture) + `], env: { MCP_ECHO_ENV: 'FX_SECRET', FX_SECRET: '${FX_SECRET}' } },
    fp: { command: ` + fmt.Sprintf("%q", node) + `, args: [` + fmt.Sprintf("%q", fixture) + `], env: { MCP_ECHO_ENV: 'FX_PEM', FX_PEM: '${FX_PEM}' } },
    hx: { url: '` + echo.URL + `/mcp', headers: { 'X-Custom': '${MCP_CUSTOM}' } },
  },
});
`,
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p := startServer(t, []string{"OPENAI_BASE_URL=" + up.URL + "/v1", "OPENAI_API_KEY=sk-test", "LEAK_TOKEN=" + providerSecret,
		"MCP_CUSTOM=" + headerSecret, "FX_SECRET=" + mcpEnvSecret, "FX_PEM=" + stderrPEM}, "dev", "--dir", dir, "--addr", "127.0.0.1:0", "--log-level", "debug")
	var seen strings.Builder
	code, answer := postModel(t, p.URL(), "prov", "p1", "hello")
	if code < 400 {
		t.Fatalf("the provider refused the key, the turn must fail: %d %s", code, answer)
	}
	fmt.Fprintf(&seen, "\n== prov answer\n%s", answer)
	code, answer = postModel(t, p.URL(), "mcpy", "m1", "show")
	if code != 200 || !strings.Contains(answer, "Tool said: env: [REDACTED]") {
		t.Errorf("MCP turn: %d %s", code, answer)
	}
	fmt.Fprintf(&seen, "\n== mcpy answer\n%s", answer)
	for _, r := range mock.Requests() {
		fmt.Fprintf(&seen, "\n== model request\n%s", r.Body)
	}
	for _, u := range []string{"/v1/threads/p1", "/v1/threads/m1", "/v1/threads/p1/events", "/v1/threads/m1/events", "/v1/agents/mcpy"} {
		fmt.Fprintf(&seen, "\n== %s\n%s", u, getText(t, p.URL()+u))
	}
	dbFiles, _ := filepath.Glob(filepath.Join(dir, ".stackbone", "*"))
	for _, f := range dbFiles {
		b, _ := os.ReadFile(f)
		fmt.Fprintf(&seen, "\n== file %s\n%s", f, b)
	}
	logs := p.Logs.String()
	if !strings.Contains(logs, "MCP server stderr") || !strings.Contains(logs, "MCP server not available") {
		t.Fatalf("the stdio server's stderr and the HTTP server's refusal are logged:\n%s", logs)
	}
	fmt.Fprintf(&seen, "\n== log\n%s", logs)
	if !strings.Contains(logs, "starting with FX_PEM=") {
		t.Fatalf("the PEM server's stderr is logged:\n%s", logs)
	}
	assertNoFragment(t, "what the server showed", seen.String(), providerSecret, headerSecret, mcpEnvSecret,
		"PemLineOne5Hq2", "PemLineTwo8Wm1")
}
