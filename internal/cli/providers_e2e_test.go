package cli_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stackbone/stackbone/internal/model/modeltest"
	"github.com/stackbone/stackbone/internal/model/script"
)

// providerProject writes a project whose agent "proxied" uses modelRef, with
// the given stackbone.json and .env.
func providerProject(t *testing.T, modelRef, stackboneJSON, dotenv string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "agents"), 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"agents/proxied.ts": "import { defineDeepAgent } from 'stackbone';\nexport default defineDeepAgent({ name: 'proxied', model: '" + modelRef + "' });\n",
		"stackbone.json":    stackboneJSON,
		".env":              dotenv,
	}
	for name, content := range files {
		if content == "" {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestStackboneJSONProvider runs `dev` on a project whose stackbone.json
// configures an openai-compatible provider "myproxy" with its key as a
// ${NAME} reference set in .env: an agent on myproxy/some-model reaches that
// upstream, which receives the model "some-model" and the key as a bearer
// token.
func TestStackboneJSONProvider(t *testing.T) {
	t.Parallel()
	mock := modeltest.Handler(modeltest.OpenAI, script.MustParse(`[{"reply":{"text":"Hello through the proxy."}}]`))
	up := httptest.NewServer(mock)
	defer up.Close()
	dir := providerProject(t, "myproxy/vendor/some-model",
		`{"providers": {"myproxy": {"type": "openai-compatible", "baseURL": "`+up.URL+`/v1", "apiKey": "${MYPROXY_TEST_KEY}"}}}`,
		"MYPROXY_TEST_KEY=sk-proxy-from-dotenv\n")

	p := startServer(t, nil, "dev", "--dir", dir, "--addr", "127.0.0.1:0")
	code, body := postModel(t, p.URL(), "proxied", "s1", "hello")
	if code != 200 || !strings.Contains(body, "Hello through the proxy.") {
		t.Fatalf("turn: %d %s", code, body)
	}
	req, ok := mock.Last()
	if !ok {
		t.Fatal("the configured upstream got no request")
	}
	var sent struct {
		Model string `json:"model"`
	}
	if err := json.Unmarshal(req.Body, &sent); err != nil {
		t.Fatal(err)
	}
	if sent.Model != "vendor/some-model" || req.Path != "/v1/chat/completions" || req.Header.Get("Authorization") != "Bearer sk-proxy-from-dotenv" {
		t.Fatalf("the upstream got model %q at %s with Authorization %q", sent.Model, req.Path, req.Header.Get("Authorization"))
	}
}

// TestStackboneJSONErrors: a bad stackbone.json stops `check` with an error
// naming the file and the field; an unset ${NAME} is an error only for an
// agent that uses the provider.
func TestStackboneJSONErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, json, model string
		want              []string
	}{
		{"unknown type", `{"providers": {"p": {"type": "grpc", "baseURL": "http://x/v1"}}}`, "p/m",
			[]string{"providers.p.type", `unknown type "grpc"`, "openai-compatible"}},
		{"missing baseURL", `{"providers": {"p": {"type": "openai-compatible"}}}`, "p/m",
			[]string{"providers.p.baseURL", "missing"}},
		{"built-in name", `{"providers": {"openai": {"type": "openai-compatible", "baseURL": "http://x/v1"}}}`, "openai/m",
			[]string{"providers.openai", "built-in"}},
		{"not JSON", `{"providers": {`, "p/m", []string{"not valid JSON"}},
		{"unknown field", `{"providers": {"p": {"type": "openai-compatible", "baseURL": "http://x/v1", "api_key": "k"}}}`, "p/m",
			[]string{"providers.p", `unknown field "api_key"`}},
		{"unset reference", `{"providers": {"p": {"type": "openai-compatible", "baseURL": "http://x/v1", "apiKey": "${STACKBONE_TEST_UNSET_KEY}"}}}`, "p/m",
			[]string{"providers.p.apiKey", "STACKBONE_TEST_UNSET_KEY", "neither in the environment nor in .env"}},
	}
	for _, c := range cases {
		dir := providerProject(t, c.model, c.json, "")
		r := run(t, nil, "agents", "check", "--dir", dir)
		if r.code == 0 {
			t.Errorf("%s: check passed:\n%s", c.name, r.stdout)
			continue
		}
		for _, w := range append([]string{filepath.Join(dir, "stackbone.json")}, c.want...) {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("%s: stderr lacks %q:\n%s", c.name, w, r.stderr)
			}
		}
	}
	// A provider no agent uses may name an unset key.
	dir := providerProject(t, "scripted/none",
		`{"providers": {"p": {"type": "openai-compatible", "baseURL": "http://x/v1", "apiKey": "${STACKBONE_TEST_UNSET_KEY}"}}}`, "")
	if err := os.WriteFile(filepath.Join(dir, "agents", "none.script.json"), []byte(`[{"reply":{"text":"hi"}}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := run(t, nil, "agents", "check", "--dir", dir); r.code != 0 {
		t.Fatalf("an unused provider's unset key must not fail check: %d %s", r.code, r.stderr)
	}
}

// fallbackProject writes a project whose agent "proxied" lists two models:
// myproxy/first-model (stackbone.json, at firstURL) then openai/second-model.
func fallbackProject(t *testing.T, firstURL string) string {
	t.Helper()
	dir := providerProject(t, "scripted/unused",
		`{"providers": {"myproxy": {"type": "openai-compatible", "baseURL": "`+firstURL+`/v1"}}}`, "")
	src := "import { defineDeepAgent } from 'stackbone';\nexport default defineDeepAgent({ name: 'proxied', model: ['myproxy/first-model', 'openai/second-model'] });\n"
	if err := os.WriteFile(filepath.Join(dir, "agents", "proxied.ts"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

func sentModel(t *testing.T, req modeltest.RecordedRequest) string {
	t.Helper()
	var sent struct {
		Model string `json:"model"`
	}
	if err := json.Unmarshal(req.Body, &sent); err != nil {
		t.Fatal(err)
	}
	return sent.Model
}

// TestModelFallbackOn503: an agent with model: [first, second] whose first
// upstream answers 503 every time gets its answer from the second, after the
// first's own retries; the second receives its own model name.
func TestModelFallbackOn503(t *testing.T) {
	t.Parallel()
	first := modeltest.Handler(modeltest.OpenAI, script.MustParse(`[{"reply":{"text":"from the first"}}]`))
	first.FailNext(1000, 503)
	up1 := httptest.NewServer(first)
	defer up1.Close()
	second := modeltest.Handler(modeltest.OpenAI, script.MustParse(`[{"reply":{"text":"Hello from the second model."}}]`))
	up2 := httptest.NewServer(second)
	defer up2.Close()

	p := startServer(t, []string{"OPENAI_BASE_URL=" + up2.URL + "/v1", "OPENAI_API_KEY=sk-second"},
		"dev", "--dir", fallbackProject(t, up1.URL), "--addr", "127.0.0.1:0")
	code, body := postModel(t, p.URL(), "proxied", "s1", "hello")
	if code != 200 || !strings.Contains(body, "Hello from the second model.") {
		t.Fatalf("turn: %d %s", code, body)
	}
	if n := first.Count(); n != 3 {
		t.Fatalf("the first upstream got %d requests, want its 3 attempts before the fallback", n)
	}
	for _, r := range first.Requests() {
		if m := sentModel(t, r); m != "first-model" || r.Status != 503 {
			t.Fatalf("the first upstream got model %q and answered %d", m, r.Status)
		}
	}
	req, ok := second.Last()
	if !ok || second.Count() != 1 || sentModel(t, req) != "second-model" || req.Header.Get("Authorization") != "Bearer sk-second" {
		t.Fatalf("the second upstream got %d requests (last %+v)", second.Count(), req)
	}
	if !strings.Contains(p.Logs.String(), "falling back") {
		t.Fatalf("a fallback is a logged warning:\n%s", p.Logs.String())
	}
}

// TestModelFallbackNotAfterOutput: when the first model's stream breaks
// after it sent text to the client, the turn ends in an error and the second
// model is never asked (the client must not get two answers spliced).
func TestModelFallbackNotAfterOutput(t *testing.T) {
	t.Parallel()
	first := modeltest.Handler(modeltest.OpenAI, script.MustParse(`[{"reply":{"text":"The first model starts an answer that will never be finished by it.","chunkDelayMs":400}}]`))
	up1 := httptest.NewServer(first)
	defer up1.Close()
	second := modeltest.Handler(modeltest.OpenAI, script.MustParse(`[{"reply":{"text":"Hello from the second model."}}]`))
	up2 := httptest.NewServer(second)
	defer up2.Close()

	p := startServer(t, []string{"OPENAI_BASE_URL=" + up2.URL + "/v1", "OPENAI_API_KEY=sk-second"},
		"dev", "--dir", fallbackProject(t, up1.URL), "--addr", "127.0.0.1:0")
	req, _ := http.NewRequest("POST", p.URL()+"/v1/chat/completions",
		strings.NewReader(`{"model":"proxied","stream":true,"messages":[{"role":"user","content":"hello"}]}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got strings.Builder
	sc := bufio.NewScanner(resp.Body)
	cut := false
	for sc.Scan() {
		line := sc.Text()
		got.WriteString(line + "\n")
		if !cut && strings.Contains(line, `"content":"The`) {
			up1.CloseClientConnections() // the first upstream's stream breaks mid-answer
			cut = true
		}
	}
	if !cut {
		t.Fatalf("the client never saw the first model's text:\n%s", got.String())
	}
	if strings.Contains(got.String(), "second model") || second.Count() != 0 {
		t.Fatalf("a stream that already sent output fell back (second upstream got %d requests):\n%s", second.Count(), got.String())
	}
	if !strings.Contains(got.String(), "error") {
		t.Fatalf("the broken stream must end in an error:\n%s", got.String())
	}
	if first.Count() != 1 {
		t.Fatalf("the first upstream got %d requests; a stream that sent output is not retried", first.Count())
	}
}

// TestStackboneJSONAzureAndGoogle: an azure-openai provider sends the model
// name as the deployment in the path, its api-version query and the key as
// the api-key header; a google provider (Gemini's OpenAI-compatible
// endpoint, here at a mock baseURL) sends the key as a bearer token to
// .../v1beta/openai/chat/completions.
func TestStackboneJSONAzureAndGoogle(t *testing.T) {
	t.Parallel()
	mock := modeltest.Handler(modeltest.OpenAI, script.MustParse(`[{"reply":{"text":"Hello from the cloud."}}]`))
	up := httptest.NewServer(mock)
	defer up.Close()
	dir := providerProject(t, "azure/my-deployment", `{"providers": {
	  "azure": {"type": "azure-openai", "baseURL": "`+up.URL+`/openai", "apiKey": "${AZURE_TEST_KEY}", "apiVersion": "2024-10-21"},
	  "gemini": {"type": "google", "baseURL": "`+up.URL+`/v1beta/openai", "apiKey": "${GEMINI_TEST_KEY}"}
	}}`, "AZURE_TEST_KEY=azure-key-1\nGEMINI_TEST_KEY=gemini-key-2\n")
	src := "import { defineDeepAgent } from 'stackbone';\n" +
		"export default defineDeepAgent({ name: 'gem', model: 'gemini/gemini-2.5-flash' });\n"
	if err := os.WriteFile(filepath.Join(dir, "agents", "gem.ts"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startServer(t, nil, "dev", "--dir", dir, "--addr", "127.0.0.1:0")

	if code, body := postModel(t, p.URL(), "proxied", "s1", "hello"); code != 200 || !strings.Contains(body, "Hello from the cloud.") {
		t.Fatalf("azure turn: %d %s", code, body)
	}
	req, _ := mock.Last()
	if req.Path != "/openai/deployments/my-deployment/chat/completions" || req.Query != "api-version=2024-10-21" ||
		req.Header.Get("Api-Key") != "azure-key-1" || req.Header.Get("Authorization") != "" {
		t.Fatalf("azure request: %s?%s api-key %q authorization %q", req.Path, req.Query, req.Header.Get("Api-Key"), req.Header.Get("Authorization"))
	}

	if code, body := postModel(t, p.URL(), "gem", "s2", "hello"); code != 200 || !strings.Contains(body, "Hello from the cloud.") {
		t.Fatalf("google turn: %d %s", code, body)
	}
	req, _ = mock.Last()
	if req.Path != "/v1beta/openai/chat/completions" || sentModel(t, req) != "gemini-2.5-flash" || req.Header.Get("Authorization") != "Bearer gemini-key-2" {
		t.Fatalf("google request: %s model %q authorization %q", req.Path, sentModel(t, req), req.Header.Get("Authorization"))
	}
}
