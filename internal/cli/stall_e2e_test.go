package cli_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/model/modeltest"
	"github.com/stackbone/stackbone/internal/model/script"
)

// TestKillDuringStalledUpstreamRecovers: the process is killed (SIGKILL)
// while a model call is stalled (the upstream sent its headers and nothing
// more) after the turn's tool ran. The restarted process recovers the run
// once its lease lapses and finishes it: the answer is stored, the user
// message once, the tool ran once and its result is stored once. On SQLite
// and on PostgreSQL.
func TestKillDuringStalledUpstreamRecovers(t *testing.T) {
	t.Parallel()
	stores := map[string]func(t *testing.T, dir string) string{
		"sqlite":   func(t *testing.T, dir string) string { return "sqlite:" + filepath.Join(dir, "stall.db") },
		"postgres": func(t *testing.T, _ string) string { return postgresURL(t) },
	}
	for name, dbOf := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var lookups atomic.Int64
			side := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				lookups.Add(1)
				fmt.Fprint(w, `{"ok":true}`)
			}))
			defer side.Close()
			sc := script.MustParse(`[
			 {"when":{"lastTool":"lookup"},"reply":{"text":"Found it."}},
			 {"when":{"lastUser":"find"},"reply":{"toolCalls":[{"name":"lookup","arguments":{"orderId":"o1"}}]}},
			 {"reply":{"text":"echo: {{lastUser}}"}}
			]`)
			mock := modeltest.Handler(modeltest.OpenAI, sc)
			release := mock.Stall(script.When{LastTool: "lookup"})
			defer release()
			up := httptest.NewServer(mock)
			defer up.Close()

			dir := t.TempDir()
			if err := os.MkdirAll(filepath.Join(dir, "agents"), 0o755); err != nil {
				t.Fatal(err)
			}
			agentTS := fmt.Sprintf(`import { defineDeepAgent, tool } from 'stackbone';
export default defineDeepAgent({
  name: 'shop',
  model: 'openai/test-model',
  modelSettings: { timeout: '5m', idleTimeout: 60000 },
  tools: {
    lookup: tool({
      description: 'Look an order up',
      parameters: { type: 'object', properties: { orderId: { type: 'string' } }, required: ['orderId'] },
      async execute(args, ctx) { await ctx.fetch(%q + '/lookup', { method: 'POST' }); return { found: args.orderId }; },
    }),
  },
});
`, side.URL)
			if err := os.WriteFile(filepath.Join(dir, "agents", "shop.ts"), []byte(agentTS), 0o644); err != nil {
				t.Fatal(err)
			}
			env := []string{"OPENAI_BASE_URL=" + up.URL + "/v1", "OPENAI_API_KEY=sk-test", "STACKBONE_LEASE=2s"}
			args := []string{"dev", "--dir", dir, "--addr", "127.0.0.1:0", "--db", dbOf(t, dir)}

			a := startServer(t, env, args...)
			go func() {
				// The turn's request dies with the process.
				body := `{"model":"shop","messages":[{"role":"user","content":"find order o1"}]}`
				req, _ := http.NewRequest("POST", a.url()+"/v1/chat/completions", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("x-stackbone-session", "stalled")
				if resp, err := http.DefaultClient.Do(req); err == nil {
					_ = resp.Body.Close()
				}
			}()
			waitUntil(t, "the tool to run and the model call to stall", 10*time.Second, func() bool {
				return lookups.Load() == 1 && mock.Count() == 2
			})
			a.kill(t)
			release() // the upstream recovers; the restarted process asks again

			b := startServer(t, env, args...)
			var th struct {
				Status   string `json:"status"`
				Messages []struct {
					Role    string `json:"role"`
					Content string `json:"content"`
				} `json:"messages"`
			}
			waitUntil(t, "the recovered run to finish", 30*time.Second, func() bool {
				getJSON(t, b.url()+"/v1/threads/stalled", &th)
				return th.Status == "idle"
			})
			roles := map[string]int{}
			for _, m := range th.Messages {
				roles[m.Role]++
			}
			if last := th.Messages[len(th.Messages)-1]; last.Role != "assistant" || last.Content != "Found it." {
				t.Fatalf("last message %+v", last)
			}
			if roles["user"] != 1 || roles["tool"] != 1 || lookups.Load() != 1 {
				t.Fatalf("%d user messages, %d tool results, the tool ran %d times; want 1, 1, 1", roles["user"], roles["tool"], lookups.Load())
			}
			if n := mock.Count(); n != 3 {
				t.Fatalf("upstream saw %d requests; want 3 (tool step, the stalled call, the recovered one)", n)
			}
		})
	}
}
