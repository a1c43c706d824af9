package cli_test

import (
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

	"github.com/stackbone/stackbone/internal/engine"
	"github.com/stackbone/stackbone/internal/model/modeltest"
	"github.com/stackbone/stackbone/internal/model/script"
	"github.com/stackbone/stackbone/internal/store"
)

// ledger is the test's payment service: a tool's side effect is a POST to
// it, which it counts with the idempotency key the tool sends. Its first
// call is answered only when the test releases it: the server is killed
// in between, so the side effect happened and its result was never stored.
type ledger struct {
	*httptest.Server
	mu      sync.Mutex
	keys    []string
	release chan struct{}
	once    sync.Once
}

func newLedger(t *testing.T) *ledger {
	l := &ledger{release: make(chan struct{})}
	l.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		l.keys = append(l.keys, r.URL.Query().Get("key"))
		first := len(l.keys) == 1
		l.mu.Unlock()
		if first {
			select {
			case <-l.release:
			case <-r.Context().Done():
			}
		}
		fmt.Fprint(w, `{"ok":true}`)
	}))
	t.Cleanup(func() { l.free(); l.Close() })
	return l
}

func (l *ledger) free() { l.once.Do(func() { close(l.release) }) }

func (l *ledger) calls() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.keys...)
}

// ledgerDir is a project whose agent has three tools that post to the
// ledger: refund (needs approval), charge (runs at once) and reserve
// (idempotent: true). Each sends ctx.idempotencyKey.
func ledgerDir(t *testing.T, ledgerURL string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "agents"), 0o755); err != nil {
		t.Fatal(err)
	}
	agentTS := fmt.Sprintf(`import { defineDeepAgent, tool } from 'stackbone';
const ledger = %q;
const params = { type: 'object', properties: { orderId: { type: 'string' } }, required: ['orderId'] } as const;
async function post(what: string, args: any, ctx: any) {
  const res = await ctx.fetch(ledger + '/' + what + '?key=' + encodeURIComponent(ctx.idempotencyKey), { method: 'POST', body: JSON.stringify(args) });
  return { done: what, orderId: args.orderId, status: res.status };
}
export default defineDeepAgent({
  name: 'shop',
  model: 'openai/test-model',
  instructions: 'You handle orders.',
  todos: false,
  files: false,
  tools: {
    refund: tool({ description: 'Refund an order', parameters: params, needsApproval: true,
      execute: (args, ctx) => post('refund', args, ctx) }),
    charge: tool({ description: 'Charge an order', parameters: params,
      execute: (args, ctx) => post('charge', args, ctx) }),
    reserve: tool({ description: 'Reserve stock', parameters: params, idempotent: true,
      execute: (args, ctx) => post('reserve', args, ctx) }),
  },
});
`, ledgerURL)
	if err := os.WriteFile(filepath.Join(dir, "agents", "shop.ts"), []byte(agentTS), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// sendAndForget posts body with the API key and the given header pairs in
// the background and drops the answer: a request that dies with the server
// it is sent to.
func sendAndForget(url, key, body string, headers ...string) {
	go func() {
		req, _ := http.NewRequest("POST", url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
}

// authed sends a request with the API key and decodes a JSON answer.
func authed(t *testing.T, method, url, key string, body io.Reader, out any) int {
	t.Helper()
	req, _ := http.NewRequest(method, url, body)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil {
		_ = json.Unmarshal(b, out)
	}
	return resp.StatusCode
}

// TestCrashMidToolIsInDoubt kills the server (SIGKILL) while a tool's side
// effect is under way, after it reached the ledger and before its result
// was stored, and starts it again on the same database (SQLite: the same
// folder; PostgreSQL: the same schema). A call that is not idempotent is
// not run a second time: it waits as a pending in_doubt decision (the
// HTTP API and `stackbone hitl list` show it) until a human skips it; an
// approved refund is not refunded twice; an idempotent call is run again
// at once with the same idempotency key.
func TestCrashMidToolIsInDoubt(t *testing.T) {
	t.Parallel()
	stores := []struct {
		name string
		env  func(t *testing.T) []string
	}{
		{"sqlite", func(t *testing.T) []string { return nil }},
		{"postgres", func(t *testing.T) []string { return []string{"STACKBONE_DB=" + postgresURL(t)} }},
	}
	cases := []struct {
		name, tool, say string
		approve         bool
		idempotent      bool
	}{
		{name: "charge", tool: "charge", say: "charge order o1"},
		{name: "approved refund", tool: "refund", say: "refund order o1", approve: true},
		{name: "idempotent reserve", tool: "reserve", say: "reserve order o1", idempotent: true},
	}
	for _, st := range stores {
		for _, tc := range cases {
			t.Run(st.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				testCrashMidTool(t, st.env(t), tc.tool, tc.say, tc.approve, tc.idempotent)
			})
		}
	}
}

func testCrashMidTool(t *testing.T, dbEnv []string, toolName, say string, approve, idempotent bool) {
	led := newLedger(t)
	sc := script.MustParse(fmt.Sprintf(`[
	 {"when":{"lastTool":%[1]q},"reply":{"text":"Finished: {{lastTool}}"}},
	 {"when":{"lastUser":%[2]q},"reply":{"toolCalls":[{"name":%[1]q,"arguments":{"orderId":"o1"}}]}},
	 {"reply":{"text":"echo: {{lastUser}}"}}
	]`, toolName, say))
	mock := modeltest.Handler(modeltest.OpenAI, sc)
	up := httptest.NewServer(mock)
	defer up.Close()

	const key = "acme-secret-key"
	dir := ledgerDir(t, led.URL)
	env := append([]string{"OPENAI_BASE_URL=" + up.URL + "/v1", "OPENAI_API_KEY=sk-test",
		"STACKBONE_API_KEYS=acme:" + key, "STACKBONE_LEASE=1s"}, dbEnv...)
	args := []string{"start", "--dir", dir, "--addr", "127.0.0.1:0"}
	cliEnv := []string{"STACKBONE_API_KEY=" + key}
	const session = "crash-mid-tool"

	a := startServer(t, env, args...)
	if approve {
		if code, body := post(t, a.URL(), key, session, say); code != 200 {
			t.Fatalf("turn: %d %s", code, body)
		}
		var page struct {
			Data []store.Interrupt `json:"data"`
		}
		authed(t, "GET", a.URL()+"/v1/hitl", key, nil, &page)
		if len(page.Data) != 1 || page.Data[0].Reason != store.ReasonApproval {
			t.Fatalf("want one approval, got %+v", page.Data)
		}
		if r := run(t, cliEnv, "hitl", "approve", page.Data[0].ID, "--yes", "--url", a.URL()); r.code != 0 {
			t.Fatalf("approve: %s", r.stderr)
		}
	} else {
		// The turn's request dies with the server; nothing waits for it.
		sendAndForget(a.URL()+"/v1/chat/completions", key,
			fmt.Sprintf(`{"model":"shop","messages":[{"role":"user","content":%q}]}`, say), "x-stackbone-session", session)
	}
	waitUntil(t, "the tool's side effect to reach the ledger", 20*time.Second, func() bool { return len(led.calls()) == 1 })
	a.Kill(t)
	led.free()

	b := startServer(t, env, args...)
	var th struct {
		Status   string `json:"status"`
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	thread := func() string {
		authed(t, "GET", b.URL()+"/v1/threads/"+session, key, nil, &th)
		return th.Status
	}
	if idempotent {
		waitUntil(t, "the recovered turn to finish", 20*time.Second, func() bool { return thread() == "idle" })
		calls := led.calls()
		if len(calls) != 2 || calls[0] == "" || calls[0] != calls[1] {
			t.Fatalf("the ledger saw %q; want the idempotent call twice with one key", calls)
		}
		if last := th.Messages[len(th.Messages)-1]; last.Role != "assistant" || !strings.HasPrefix(last.Content, `Finished: {"done":"reserve"`) {
			t.Fatalf("last message %+v", last)
		}
		return
	}

	waitUntil(t, "the restarted server to find the call in doubt", 20*time.Second, func() bool { return thread() == "waiting" })
	var page struct {
		Data []store.Interrupt `json:"data"`
	}
	authed(t, "GET", b.URL()+"/v1/hitl", key, nil, &page)
	if len(page.Data) != 1 {
		t.Fatalf("pending after restart: %+v", page.Data)
	}
	it := page.Data[0]
	if it.Reason != store.ReasonInDoubt || it.Tool != toolName || strings.Join(it.AllowedDecisions, ",") != "retry,skip" ||
		!strings.HasPrefix(it.Description, "This call may already have run: "+toolName+`({"orderId":"o1"})`) {
		t.Fatalf("in-doubt decision: %+v", it)
	}
	r := run(t, cliEnv, "hitl", "list", "--url", b.URL())
	if r.code != 0 || !strings.Contains(r.stdout, it.ID) || !strings.Contains(r.stdout, "in_doubt") {
		t.Fatalf("hitl list: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// A new turn is refused as while an approval is pending.
	if code, body := post(t, b.URL(), key, session, "hello"); code != http.StatusConflict || !strings.Contains(body, "approval_pending") {
		t.Fatalf("a new turn on the waiting thread: %d %s", code, body)
	}
	// Approving is not an answer to an in-doubt call: 400, nothing changes.
	var apiErr struct {
		Error struct {
			Code  string `json:"code"`
			Param string `json:"param"`
		} `json:"error"`
	}
	if code := authed(t, "POST", b.URL()+"/v1/hitl/"+it.ID+"/approve", key, nil, &apiErr); code != http.StatusBadRequest || apiErr.Error.Param != "decision" {
		t.Fatalf("approve on an in-doubt call: %d %+v", code, apiErr)
	}
	if n := len(led.calls()); n != 1 {
		t.Fatalf("the ledger saw %d calls before the decision; want 1", n)
	}

	if r := run(t, cliEnv, "hitl", "skip", it.ID, "--yes", "--url", b.URL()); r.code != 0 || !strings.Contains(r.stdout, "Skipped") {
		t.Fatalf("hitl skip: %d %s%s", r.code, r.stdout, r.stderr)
	}
	waitUntil(t, "the skipped turn to finish", 20*time.Second, func() bool { return thread() == "idle" })
	if n := len(led.calls()); n != 1 {
		t.Fatalf("the ledger saw %d calls after skip; want 1 (no second %s)", n, toolName)
	}
	last := th.Messages[len(th.Messages)-1]
	// The model was told the outcome is unknown.
	if last.Role != "assistant" || last.Content != "Finished: "+engine.SkippedResult {
		t.Fatalf("last message %+v", last)
	}
	tools := 0
	for _, m := range th.Messages {
		if m.Role == "tool" {
			tools++
			if !strings.Contains(m.Content, "outcome of this call is unknown") {
				t.Fatalf("the tool result after skip: %q", m.Content)
			}
		}
	}
	if tools != 1 {
		t.Fatalf("stored %d tool results", tools)
	}
}
