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
	"sync"
	"testing"
	"time"
)

// payRecorder is the payments API the agent's tool calls: it keeps what it
// received.
type payRecorder struct {
	mu   sync.Mutex
	auth []string
	body []map[string]any
}

func (p *payRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	_ = json.NewDecoder(r.Body).Decode(&body)
	p.mu.Lock()
	p.auth = append(p.auth, r.Header.Get("Authorization"))
	p.body = append(p.body, body)
	p.mu.Unlock()
	fmt.Fprint(w, `{"ok":true}`)
}

func (p *payRecorder) last() (string, map[string]any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.auth) == 0 {
		return "", nil
	}
	return p.auth[len(p.auth)-1], p.body[len(p.body)-1]
}

const (
	processToken = "tok_process_wins_7f3a9c"
	dotenvToken  = "tok_dotenv_loses_51be2d"
	region1      = "region-from-dotenv-one"
	region2      = "region-from-dotenv-two"
)

// TestAgentEnvFromProcessAndDotEnv runs `dev` on a project whose agent lists
// env names: the tool sees the process environment's value before .env's, a
// .env-only value, undefined for unlisted and unset names; an edit of .env
// reaches the next turn; and no value shows in the server's log, the SQLite
// files, the thread and its events, or Studio's API.
func TestAgentEnvFromProcessAndDotEnv(t *testing.T) {
	t.Parallel()
	pay := &payRecorder{}
	side := httptest.NewServer(pay)
	defer side.Close()

	dir := t.TempDir()
	agents := filepath.Join(dir, "agents")
	if err := os.MkdirAll(agents, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("agents/demo.script.json", `[
	 {"when":{"lastTool":"check"},"reply":{"text":"checked"}},
	 {"when":{"lastTool":"leaky"},"reply":{"text":"both failed"}},
	 {"when":{"lastUser":"check"},"reply":{"toolCalls":[{"name":"check","arguments":{}}]}},
	 {"when":{"lastUser":"boom"},"reply":{"toolCalls":[{"name":"boom","arguments":{}},{"name":"leaky","arguments":{}}]}},
	 {"reply":{"text":"?"}}
	]`)
	write("agents/pay.ts", fmt.Sprintf(`import { defineDeepAgent, tool } from 'stackbone';
export default defineDeepAgent({
  name: 'pay', model: 'scripted/demo',
  env: ['PAYMENTS_TOKEN', 'REGION_CODE', 'SET_NOWHERE'],
  tools: {
    check: tool({ async execute(_a, ctx) {
      console.log('calling the payments API for', ctx.env.REGION_CODE);
      const res = await ctx.fetch(%q + '/pay', { method: 'POST', headers: { Authorization: 'Bearer ' + ctx.env.PAYMENTS_TOKEN },
        body: JSON.stringify({ region: ctx.env.REGION_CODE, unlistedPath: ctx.env.PATH === undefined, unlistedOther: ctx.env.OTHER_TOKEN === undefined,
          unset: ctx.env.SET_NOWHERE === undefined }) });
      return { paid: res.status === 200 };
    } }),
    boom: tool({ async execute() { throw new Error('payments API is down'); } }),
    leaky: tool({ async execute(_a, ctx) { throw new Error('payments API refused ' + ctx.env.PAYMENTS_TOKEN); } }),
  },
});
`, side.URL))
	write(".env", "# payments\nexport PAYMENTS_TOKEN="+dotenvToken+"\nREGION_CODE='"+region1+"'\nOTHER_TOKEN=other_dotenv_value_1\n")

	p := startServer(t, []string{"PAYMENTS_TOKEN=" + processToken, "OTHER_TOKEN=other_process_value_1"},
		"dev", "--dir", dir, "--addr", "127.0.0.1:0", "--log-level", "debug")
	turn := func(session, text string) string {
		code, body := postModel(t, p.URL(), "pay", session, text)
		if code != 200 {
			t.Fatalf("%s: %d %s", text, code, body)
		}
		return body
	}
	if body := turn("s1", "check"); !strings.Contains(body, "checked") {
		t.Fatalf("check turn: %s", body)
	}
	auth, body := pay.last()
	if auth != "Bearer "+processToken {
		t.Fatalf("the process environment must win over .env: got %q", auth)
	}
	if body["region"] != region1 || body["unlistedPath"] != true || body["unlistedOther"] != true || body["unset"] != true {
		t.Fatalf("payments API received %v", body)
	}
	if !strings.Contains(p.Logs.String(), "SET_NOWHERE") {
		t.Fatalf("a listed name set nowhere is a load warning:\n%s", p.Logs.String())
	}
	if body := turn("s2", "boom"); !strings.Contains(body, "both failed") {
		t.Fatalf("boom turn: %s", body)
	}

	// dev reloads .env: the next turn sees the new value.
	rewrite, check, attempts, s3 := every(time.Second), every(200*time.Millisecond), 0, ""
	waitUntil(t, "the edited .env to reach a turn", 15*time.Second, func() bool {
		if rewrite() {
			write(".env", "PAYMENTS_TOKEN="+dotenvToken+"\nREGION_CODE="+region2+"\n")
		}
		if !check() {
			return false
		}
		// A session each time: the same message again on one session
		// is a retry of its turn, answered from the store.
		attempts++
		s3 = fmt.Sprintf("s3-%d", attempts)
		turn(s3, "check")
		_, b := pay.last()
		return b["region"] == region2
	})

	// Nothing anywhere shows a value.
	var seen strings.Builder
	grab := func(what, url string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", p.URL()+url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body) // a stream ends at the timeout
		if resp.StatusCode != 200 || len(b) == 0 {
			t.Fatalf("%s: %d %s", what, resp.StatusCode, b)
		}
		fmt.Fprintf(&seen, "\n== %s\n%s", what, b)
	}
	for _, s := range []string{"s1", "s2", s3} {
		grab("thread "+s, "/v1/threads/"+s)
		grab("events "+s, "/v1/threads/"+s+"/events")
	}
	grab("threads", "/v1/threads")
	grab("studio agents", "/studio/api/agents")
	grab("studio live", "/studio/api/live")
	if !strings.Contains(seen.String(), "payments API is down") || !strings.Contains(seen.String(), "payments API refused [REDACTED]") {
		t.Fatalf("the tool errors are stored (the secret one redacted):%s", seen.String())
	}
	files, _ := filepath.Glob(filepath.Join(dir, ".stackbone", "*"))
	if len(files) == 0 {
		t.Fatal("no SQLite files")
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&seen, "\n== file %s\n%s", f, b)
	}
	fmt.Fprintf(&seen, "\n== log\n%s", p.Logs.String())
	if !strings.Contains(p.Logs.String(), "calling the payments API for [REDACTED]") {
		t.Fatalf("the tool's console line is logged, redacted:\n%s", p.Logs.String())
	}
	for _, secret := range []string{processToken, dotenvToken, region1, region2} {
		if i := strings.Index(seen.String(), secret); i >= 0 {
			s := seen.String()
			t.Fatalf("%q leaked: …%s…", secret, s[max(0, i-300):min(len(s), i+100)])
		}
	}
}

// postModel sends one chat turn to agent on session.
func postModel(t *testing.T, base, agent, session, text string) (int, string) {
	t.Helper()
	body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":%q}]}`, agent, text)
	req, _ := http.NewRequest("POST", base+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-stackbone-session", session)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestServerSettingsFromDotEnv: server settings fall back to DIR/.env (a bad
// value there is reported like one from the environment), and a .env syntax
// error stops the server with its line, not its value.
func TestServerSettingsFromDotEnv(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "agents"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := filepath.Join(dir, ".env")
	if err := os.WriteFile(env, []byte("STACKBONE_STATELESS_APPROVAL=ask\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := run(t, nil, "dev", "--dir", dir, "--addr", "127.0.0.1:0")
	if r.code == 0 || !strings.Contains(r.stderr, `stateless approval "ask" must be run or refuse`) {
		t.Fatalf("a setting from .env: %d %q", r.code, r.stderr)
	}
	if err := os.WriteFile(env, []byte("# ok\nOPENAI_API_KEY 'sk-dotenv-secret-1'\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = run(t, nil, "dev", "--dir", dir, "--addr", "127.0.0.1:0")
	if r.code == 0 || !strings.Contains(r.stderr, ".env:2: expected KEY=VALUE") || strings.Contains(r.stderr, "dotenv-secret") {
		t.Fatalf("a .env syntax error: %d %q", r.code, r.stderr)
	}
}
