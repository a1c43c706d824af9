package cli_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/model/modeltest"
	"github.com/stackbone/stackbone/internal/model/script"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
)

// postgresURL is a fresh schema of the test database (dropped when the test
// ends) as a URL the binary takes: search_path names the schema.
func postgresURL(t *testing.T) string {
	t.Helper()
	st := stacktest.Postgres(t, "replicas")
	parsed, _ := url.Parse(stacktest.PostgresURL())
	q := parsed.Query()
	q.Set("search_path", st.Schema())
	parsed.RawQuery = q.Encode()
	return parsed.String()
}

func decodeJSON(t *testing.T, resp *http.Response, v any) {
	t.Helper()
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("decode %s: %v", resp.Request.URL, err)
	}
}

// post sends a turn to the `shop` agent on session (with key, unless
// empty) and returns the status and the body.
func post(t *testing.T, base, key, session, text string) (int, string) {
	t.Helper()
	body := fmt.Sprintf(`{"model":"shop","messages":[{"role":"user","content":%q}]}`, text)
	req, _ := http.NewRequest("POST", base+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	req.Header.Set("x-stackbone-session", session)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		b.WriteString(sc.Text())
	}
	return resp.StatusCode, b.String()
}

// TestReplicasOnPostgres starts the built binary three times on one
// PostgreSQL database and checks the replicas behave as one server.
func TestReplicasOnPostgres(t *testing.T) {
	t.Parallel()
	dbURL := postgresURL(t)
	var refunds, weather atomic.Int64
	side := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "refund") {
			refunds.Add(1)
		} else {
			weather.Add(1)
		}
		fmt.Fprint(w, `{"ok":true}`)
	}))
	defer side.Close()
	sc := script.MustParse(`[
	 {"when":{"lastTool":"refund"},"reply":{"text":"Refund finished."}},
	 {"when":{"lastTool":"get_weather"},"reply":{"text":"Sunny, after a long think."}},
	 {"when":{"lastUser":"refund"},"reply":{"toolCalls":[{"name":"refund","arguments":{"orderId":"o1","amount":5}}]}},
	 {"when":{"lastUser":"weather"},"reply":{"toolCalls":[{"name":"get_weather","arguments":{"city":"Oslo"}}]}},
	 {"reply":{"text":"echo: {{lastUser}}"}}
	]`)
	mock := modeltest.Handler(modeltest.OpenAI, sc)
	up := httptest.NewServer(mock)
	defer up.Close()

	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "agents"), 0o755); err != nil {
		t.Fatal(err)
	}
	agentTS := fmt.Sprintf(`import { defineDeepAgent, tool } from 'stackbone';
const side = %q;
export default defineDeepAgent({
  name: 'shop',
  model: 'openai/test-model',
  instructions: 'You help.',
  tools: {
    refund: tool({
      description: 'Refund an order',
      parameters: { type: 'object', properties: { orderId: { type: 'string' }, amount: { type: 'number' } }, required: ['orderId', 'amount'] },
      needsApproval: true,
      async execute(args, ctx) { await ctx.fetch(side + '/refund', { method: 'POST' }); return { refunded: args.amount }; },
    }),
    get_weather: tool({
      description: 'Weather',
      parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
      async execute(args, ctx) { await ctx.fetch(side + '/weather', { method: 'POST' }); return { city: args.city, sky: 'sunny' }; },
    }),
  },
});
`, side.URL)
	if err := os.WriteFile(filepath.Join(dir, "agents", "shop.ts"), []byte(agentTS), 0o644); err != nil {
		t.Fatal(err)
	}
	const key = "acme-secret-key"
	env := []string{"OPENAI_BASE_URL=" + up.URL + "/v1", "OPENAI_API_KEY=sk-test", "STACKBONE_API_KEYS=acme:" + key,
		"STACKBONE_LEASE=1s", "STACKBONE_DB=" + dbURL}
	args := []string{"start", "--dir", dir, "--addr", "127.0.0.1:0"}
	a := startServer(t, env, args...)
	b := startServer(t, env, args...)
	c := startServer(t, env, args...)

	// Paused through A; B refuses a call on the session with the same 409.
	if code, _ := post(t, a.URL(), key, "s1", "refund order o1"); code != 200 {
		t.Fatalf("pause on A: %d", code)
	}
	code, body := post(t, b.URL(), key, "s1", "hello?")
	if code != 409 || !strings.Contains(body, "approval_pending") {
		t.Fatalf("B must refuse with 409 approval_pending: %d %s", code, body)
	}

	// C streams the thread's events before the decision.
	req, _ := http.NewRequest("GET", c.URL()+"/v1/threads/s1/events", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stream, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	lines := make(chan string, 256)
	go func() {
		sc := bufio.NewScanner(stream.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	// Drain the replayed history first.
	waitLine := func(want string) {
		t.Helper()
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("stream on C ended before %q", want)
				}
				if strings.Contains(l, want) {
					return
				}
			case <-ctx.Done():
				t.Fatalf("C never saw %q", want)
			}
		}
	}
	waitLine(`"type":"run_finished"`) // the paused run, replayed

	// The decision on B resumes the run; the tool runs once.
	var page struct {
		Data []store.Interrupt `json:"data"`
	}
	reqH, _ := http.NewRequest("GET", b.URL()+"/v1/hitl?thread=s1", nil)
	reqH.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(reqH)
	if err != nil {
		t.Fatal(err)
	}
	decodeJSON(t, resp, &page)
	if len(page.Data) != 1 {
		t.Fatalf("pending on B: %+v", page.Data)
	}
	r := run(t, []string{"STACKBONE_API_KEY=" + key}, "hitl", "approve", page.Data[0].ID, "--yes", "--url", b.URL())
	if r.code != 0 {
		t.Fatalf("approve on B: %s", r.stderr)
	}
	// Live events of that run reach the stream on C.
	waitLine(`"type":"tool_result"`)
	waitLine(`Refund finished.`)
	waitLine(`"type":"run_finished"`)
	if n := refunds.Load(); n != 1 {
		t.Fatalf("refund ran %d times", n)
	}

	// Killing the replica that runs a turn hands it to another. The model
	// call after the tool is held until its caller (A) dies.
	thinking := script.When{LastTool: "get_weather"}
	mock.HoldOnce(thinking)
	done := make(chan struct{})
	go func() {
		defer close(done)
		// The server dies under this request: its error is expected.
		req, _ := http.NewRequest("POST", a.URL()+"/v1/chat/completions", strings.NewReader(`{"model":"shop","messages":[{"role":"user","content":"weather in Oslo"}]}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("x-stackbone-session", "s2")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	waitUntil(t, "A to run the tool and call the slow model", 10*time.Second, func() bool { return weather.Load() == 1 && mock.Count() >= 4 })
	a.Kill(t)
	<-done
	var th struct {
		Status   string `json:"status"`
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	waitUntil(t, "another replica to finish the turn", 20*time.Second, func() bool {
		reqT, _ := http.NewRequest("GET", c.URL()+"/v1/threads/s2", nil)
		reqT.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(reqT)
		if err != nil {
			return false
		}
		decodeJSON(t, resp, &th)
		return th.Status == "idle"
	})
	if last := th.Messages[len(th.Messages)-1]; last.Content != "Sunny, after a long think." {
		t.Fatalf("last message %+v", last)
	}
	if n := weather.Load(); n != 1 {
		t.Fatalf("the tool ran %d times across replicas", n)
	}
	logs := b.Logs.String() + c.Logs.String()
	if !strings.Contains(logs, "continuing run") {
		t.Fatalf("no replica logged taking over the run")
	}

	// A full restart of every replica: a turn cut off mid-way is found and
	// finished by the first replica that comes back.
	mock.HoldOnce(thinking)
	before := mock.Count()
	done = make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequest("POST", b.URL()+"/v1/chat/completions", strings.NewReader(`{"model":"shop","messages":[{"role":"user","content":"weather again"}]}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("x-stackbone-session", "s3")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	waitUntil(t, "B to run the tool and call the model", 10*time.Second, func() bool { return weather.Load() == 2 && mock.Count() >= before+2 })
	b.Kill(t)
	c.Kill(t)
	<-done
	d := startServer(t, env, args...)
	waitUntil(t, "the restarted replica to finish the turn", 20*time.Second, func() bool {
		reqT, _ := http.NewRequest("GET", d.URL()+"/v1/threads/s3", nil)
		reqT.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(reqT)
		if err != nil {
			return false
		}
		decodeJSON(t, resp, &th)
		return th.Status == "idle"
	})
	if last := th.Messages[len(th.Messages)-1]; last.Content != "Sunny, after a long think." || weather.Load() != 2 {
		t.Fatalf("after a full restart: last %+v, tool ran %d times", last, weather.Load())
	}
}
