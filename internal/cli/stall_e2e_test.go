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
			f := newStalledShop(t, `[
			 {"when":{"lastTool":"lookup"},"reply":{"text":"Found it."}},
			 {"when":{"lastUser":"find"},"reply":{"toolCalls":[{"name":"lookup","arguments":{"orderId":"o1"}}]}},
			 {"reply":{"text":"echo: {{lastUser}}"}}
			]`, "modelSettings: { timeout: '5m', idleTimeout: 60000 },")
			lookups, mock, release, env := f.lookups, f.mock, f.release, f.env
			args := []string{"dev", "--dir", f.dir, "--addr", "127.0.0.1:0", "--db", dbOf(t, f.dir)}

			a := startServer(t, env, args...)
			go func() {
				// The turn's request dies with the process.
				body := `{"model":"shop","messages":[{"role":"user","content":"find order o1"}]}`
				req, _ := http.NewRequest("POST", a.URL()+"/v1/chat/completions", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("x-stackbone-session", "stalled")
				if resp, err := http.DefaultClient.Do(req); err == nil {
					_ = resp.Body.Close()
				}
			}()
			waitUntil(t, "the tool to run and the model call to stall", 10*time.Second, func() bool {
				return lookups.Load() == 1 && mock.Count() == 2
			})
			a.Kill(t)
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
				getJSON(t, b.URL()+"/v1/threads/stalled", &th)
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

// stalledShop is a 'shop' agent whose lookup tool posts to a side server
// (counted in lookups), on a scripted OpenAI upstream whose model call after
// the lookup stalls until release.
type stalledShop struct {
	dir     string
	lookups *atomic.Int64
	mock    *modeltest.Mock
	release func()
	env     []string // the server's environment: upstream, key, a 2 s lease
}

// newStalledShop writes the agent (settings: extra agent fields, such as
// modelSettings) and starts the side server and the upstream for one test.
func newStalledShop(t *testing.T, scriptJSON, settings string) *stalledShop {
	t.Helper()
	f := &stalledShop{lookups: new(atomic.Int64)}
	side := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.lookups.Add(1)
		fmt.Fprint(w, `{"ok":true}`)
	}))
	t.Cleanup(side.Close)
	f.mock = modeltest.Handler(modeltest.OpenAI, script.MustParse(scriptJSON))
	f.release = f.mock.Stall(script.When{LastTool: "lookup"})
	t.Cleanup(f.release)
	up := httptest.NewServer(f.mock)
	t.Cleanup(up.Close)
	t.Cleanup(f.release) // runs first: a stalled call must end before the upstream closes
	f.dir = t.TempDir()
	if err := os.MkdirAll(filepath.Join(f.dir, "agents"), 0o755); err != nil {
		t.Fatal(err)
	}
	agentTS := fmt.Sprintf(`import { defineDeepAgent, tool } from 'stackbone';
export default defineDeepAgent({
  name: 'shop',
  model: 'openai/test-model',
  %s
  tools: {
    lookup: tool({
      description: 'Look an order up',
      parameters: { type: 'object', properties: { orderId: { type: 'string' } }, required: ['orderId'] },
      async execute(args, ctx) { await ctx.fetch(%q + '/lookup', { method: 'POST' }); return { found: args.orderId }; },
    }),
  },
});
`, settings, side.URL)
	if err := os.WriteFile(filepath.Join(f.dir, "agents", "shop.ts"), []byte(agentTS), 0o644); err != nil {
		t.Fatal(err)
	}
	f.env = []string{"OPENAI_BASE_URL=" + up.URL + "/v1", "OPENAI_API_KEY=sk-test", "STACKBONE_LEASE=2s"}
	return f
}
